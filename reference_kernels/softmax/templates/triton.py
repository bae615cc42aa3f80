"""Softmax template (Triton): a working, simple submission to start from.

Contract:
    custom_kernel(data) -> out
    data = (x,) with x: [M, N], torch.float32 or torch.bfloat16, contiguous, on the run's device
    out: [M, N], same dtype and device as x, out[i, :] = softmax(x[i, :])

One program per row. N can exceed any sensible block size (tests use N = 20000), so the kernel
loops over the row in blocks of BLOCK_N columns:
  pass 1: running max m and running sum s of exp(x - m); when m grows, the old sum is rescaled
          by exp(m_old - m_new) ("online softmax");
  pass 2: write exp(x - m) / s.
Arithmetic is float32: bfloat16 values are loaded, widened with .to(tl.float32), and the result is
narrowed on store. That is also what Triton's CPU interpreter (TRITON_INTERPRET=1, used when the
run's device is the CPU) needs: it has no bfloat16 arithmetic.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, N, stride_x, stride_out, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    out_row = out_ptr + row * stride_out
    offs = tl.arange(0, BLOCK_N)

    # Pass 1: running max m and running sum s of exp(x - m) over the row.
    # The first block always holds a real value (N >= 1), so m is finite from then on and
    # exp(m_old - m_new) is exp(-inf) = 0 on the first step.
    m = tl.full([], float("-inf"), tl.float32)
    s = tl.zeros([], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    row_max = m
    row_sum = s

    # Pass 2: normalised output.
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - row_max) / row_sum
        tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def custom_kernel(data):
    (x,) = data
    x = x.contiguous()
    M, N = x.shape
    out = torch.empty_like(x)
    BLOCK_N = min(triton.next_power_of_2(N), 4096)
    softmax_kernel[(M,)](x, out, N, x.stride(0), out.stride(0), BLOCK_N=BLOCK_N)
    return out
