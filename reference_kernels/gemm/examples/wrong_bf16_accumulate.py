"""WRONG on purpose: accumulates the K reduction in bfloat16 instead of float32.

The bug: a tiled GEMM whose running accumulator is a bfloat16 tensor. Each 16-wide K slice
``a[:, k:k+16] @ b[k:k+16]`` is summed in float32 but returned in bfloat16, and adding it to the
bfloat16 accumulator rounds the running sum to 8 significant bits at every step, so the error
grows with the K/16 roundings (same as a Triton kernel with ``acc = tl.zeros(...,
dtype=tl.bfloat16)``). Small-K cases pass; the long-reduction test cases ``M=16, N=256,
K=4096`` and ``M=4, N=256, K=14336`` fail (max errors ~0.14 and ~0.19 on outputs of size ~1,
70-170 elements out of tolerance), and so does ``M=2, N=512, K=1024`` (narrowly).
"""

import torch

BLOCK_K = 16


def custom_kernel(data):
    a, b = data
    M, K = a.shape
    N = b.shape[1]
    acc = torch.zeros((M, N), dtype=torch.bfloat16, device=a.device)  # BUG: should be float32
    for k0 in range(0, K, BLOCK_K):
        acc += a[:, k0:k0 + BLOCK_K] @ b[k0:k0 + BLOCK_K]
    return acc
