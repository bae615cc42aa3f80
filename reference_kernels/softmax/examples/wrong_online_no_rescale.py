"""WRONG on purpose: online softmax that forgets to rescale the running sum.

Bug: the kernel loops over column blocks keeping a running max ``m`` and sum ``s``, but when a
later block raises the max it adds ``sum(exp(x - m_new))`` to ``s`` without first multiplying
``s`` by ``exp(m_old - m_new)``. Rows that fit in one block (N <= 4096 here) are exact; the
N = 16385 and N = 20000 test cases (five blocks, the max usually grows after the first) get a
sum that is too large, so every output of those rows is too small.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, N, stride_x, stride_out, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    o_row = out_ptr + row * stride_out
    offs = tl.arange(0, BLOCK_N)
    m = float("-inf")
    s = 0.0
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s + tl.sum(tl.exp(x - m_new), axis=0)  # missing: s * exp(m - m_new)
        m = m_new
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - m) / s
        tl.store(o_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def custom_kernel(data):
    (x,) = data
    x = x.contiguous()
    M, N = x.shape
    out = torch.empty_like(x)
    BLOCK_N = min(triton.next_power_of_2(N), 4096)
    _softmax_kernel[(M,)](x, out, N, x.stride(0), out.stride(0), BLOCK_N=BLOCK_N)
    return out
