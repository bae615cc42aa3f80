"""WRONG on purpose: a Triton GEMM that drops the K remainder (K not a multiple of BLOCK_K).

The bug: the K loop runs ``K // BLOCK_K`` full steps and the K dimension is not masked, so the
last ``K % BLOCK_K`` terms of every dot product are never added (and for ``K < BLOCK_K`` the
output is all zeros). Rows and columns are masked correctly, so cases whose K is a multiple of
BLOCK_K (32 on a GPU, 128 under the CPU interpreter) pass; test cases such as ``M=17, N=33,
K=100``, ``M=33, N=100, K=1``, ``M=257, N=17, K=257`` and ``M=7, N=256, K=1000`` fail.
"""

import os

import torch
import triton
import triton.language as tl


@triton.jit
def _gemm_kernel(
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
    mask_m = offs_m < M
    mask_n = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, K // BLOCK_K):  # BUG: floor division drops the K tail
        ks = kb * BLOCK_K + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=mask_m[:, None], other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=mask_n[None, :], other=0.0)
        acc += tl.dot(a.to(tl.float32), b.to(tl.float32))
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


def custom_kernel(data):
    a, b = data
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    if os.environ.get("TRITON_INTERPRET") == "1":
        BM, BN, BK = 64, 256, 128  # fewer, larger tiles: the CPU interpreter is slow per step
    else:
        BM, BN, BK = 64, 64, 32
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    _gemm_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK,
    )
    return c
