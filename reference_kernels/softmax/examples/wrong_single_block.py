"""WRONG on purpose: Triton softmax that only handles the first block of each row.

Bug: the block size is ``next_power_of_2(N)`` capped at 16384 (to bound register use) but the
kernel has no loop over column blocks, so for N > 16384 the max and sum cover only the first
16384 columns (those outputs are too large by about N / 16384) and the remaining columns are
never written (left at zero: with ``torch.empty_like`` they would hold whatever the allocator
last put there, and which cases fail would vary from run to run). Every case with N <= 16384
passes; the N = 16385 and N = 20000 test cases fail.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_row_kernel(x_ptr, out_ptr, N, stride_x, stride_out, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def custom_kernel(data):
    (x,) = data
    x = x.contiguous()
    M, N = x.shape
    out = torch.zeros_like(x)
    BLOCK_N = min(triton.next_power_of_2(N), 16384)
    _softmax_row_kernel[(M,)](x, out, N, x.stride(0), out.stride(0), BLOCK_N=BLOCK_N)
    return out
