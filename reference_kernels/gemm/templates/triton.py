"""Triton starting point for ``gemm``: ``c = a @ b`` in bfloat16 with float32 accumulation.

Contract: ``custom_kernel(data)`` receives ``data = (a, b)`` with ``a`` ``[M, K]`` and ``b``
``[K, N]``, both bfloat16, contiguous (row-major), on the run's device, and returns ``c``
``[M, N]`` bfloat16: ``c[i, j] = sum_k a[i, k] * b[k, j]`` accumulated in float32, rounded once.
M, N and K are arbitrary positive integers (not necessarily multiples of the block sizes;
K may be 1), so every load and store below is masked. Do not modify ``a`` or ``b``.

One program computes one BLOCK_M x BLOCK_N tile of ``c``, looping over K in BLOCK_K steps.
On the CPU device the harness runs Triton in its interpreter (``TRITON_INTERPRET=1``), which has
no bfloat16 arithmetic: tiles are converted to float32 right after loading (exact, and still
exact on a GPU since bfloat16 fits in TF32), and the result is converted back when storing.
The interpreter is slow per program and per loop step, hence the larger tiles there (with
BLOCK_M shrunk for small M, since padded rows cost as much as real ones).
"""

import os

import torch
import triton
import triton.language as tl


@triton.jit
def gemm_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # float32 accumulator
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a.to(tl.float32), b.to(tl.float32))
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def custom_kernel(data):
    a, b = data
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    if os.environ.get("TRITON_INTERPRET") == "1":  # CPU interpreter: few, large tiles
        BLOCK_M, BLOCK_N, BLOCK_K = min(128, max(16, triton.next_power_of_2(M))), 256, 256
    else:
        BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    gemm_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
    )
    return c
