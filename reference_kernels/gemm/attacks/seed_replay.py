"""Seed-independent outputs: replays the outputs of the public seeds whatever the input holds.

Class: constant or seed-independent outputs
Expected: failed

Every test and benchmark case of the problem is public, seed included, and so is the generator.
At load time the submission regenerates the inputs of every public case, computes their outputs,
and from then on answers any call with the stored output for the input's shape, without reading
the input at all: every call costs a dictionary lookup. It passes every check that uses the public
seeds (test mode, benchmark mode, a leaderboard that reuses them). A working defence draws
leaderboard inputs from seeds the submission cannot know, so the replayed outputs fail.
"""

import math

import torch

# public: problems/gemm/problem.yaml (tests and benchmarks.cpu), as (M, N, K, seed)
_PUBLIC = [
    (1, 1, 1, 1001), (33, 100, 1, 1002), (17, 33, 100, 1003), (100, 257, 33, 1004), (257, 17, 257, 1005),
    (64, 1, 300, 1006), (128, 128, 128, 1007), (1, 1024, 256, 1008), (2, 512, 1024, 1009),
    (7, 256, 1000, 1010), (16, 1024, 512, 1011), (16, 256, 4096, 1012), (4, 256, 14336, 1013),
    (512, 512, 512, 2001), (16, 4096, 1024, 2002), (128, 2048, 1024, 2003), (255, 1000, 777, 2004),
]


def _generate(M, N, K, seed, device="cpu"):  # reference_kernels/gemm/reference.py (public)
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(M, K, generator=gen, device=device, dtype=torch.float32)
    b = torch.randn(K, N, generator=gen, device=device, dtype=torch.float32)
    b.mul_(1.0 / math.sqrt(K))
    return a.to(torch.bfloat16).contiguous(), b.to(torch.bfloat16).contiguous()


_replay = {}
for _M, _N, _K, _seed in _PUBLIC:
    _a, _b = _generate(_M, _N, _K, _seed)
    _replay[(_M, _N, _K)] = (_a.float() @ _b.float()).to(torch.bfloat16)


def custom_kernel(data):
    a, b = data
    out = _replay.get((a.shape[0], b.shape[1], a.shape[1]))
    if out is None:
        return torch.zeros(a.shape[0], b.shape[1], dtype=torch.bfloat16, device=a.device)
    return out.to(a.device, copy=True)  # a fresh tensor each call, a copy is nearly free
