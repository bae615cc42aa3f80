"""WRONG on purpose: accumulates the K reduction in bfloat16 instead of float32.

The bug: a tiled GEMM whose running accumulator is a bfloat16 tensor. Each 16-wide K slice is
multiplied exactly (``a[:, k:k+16] @ b[k:k+16]``), but adding it to the bfloat16 accumulator
rounds the running sum to 8 significant bits every step, so the error grows with K/16 roundings
(same as a Triton kernel with ``acc = tl.zeros(..., dtype=tl.bfloat16)``). Small-K cases pass;
the large-K test cases (``M=16, N=256, K=4096`` and ``M=4, N=256, K=14336``) fail the tolerance
(errors of ~0.1 on outputs of size ~1).
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
