"""Softmax template (Triton): a working, simple submission to start from.

Contract:
    custom_kernel(data) -> out
    data = (x,) with x: [M, N], torch.float32 or torch.bfloat16, contiguous, on the run's device
    out: [M, N], same dtype and device as x, out[i, :] = softmax(x[i, :])

Each program handles BLOCK_M rows. N can exceed any sensible block size (tests use N = 20000),
so the kernel walks the rows in blocks of BLOCK_N columns, three times:
  pass 1: row max m;   pass 2: row sum s of exp(x - m);   pass 3: write exp(x - m) / s.
Subtracting m first keeps exp() <= 1: some test rows hold values around +-1e4.
(Faster versions read x fewer times: one read when a row fits in a block, or an "online" running
max and sum that merges passes 1 and 2.)

Arithmetic is float32: bfloat16 values are loaded, widened with .to(tl.float32), and the result is
narrowed on store. That is also what Triton's CPU interpreter (TRITON_INTERPRET=1, used when the
run's device is the CPU) needs: it has no bfloat16 arithmetic. The interpreter spends milliseconds
of Python per program, so on the CPU this file uses fewer, larger tiles than on a GPU.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, M, N, stride_x, stride_out,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    rows64 = rows.to(tl.int64)
    offs = tl.arange(0, BLOCK_N)

    # Pass 1: row max. Masked lanes read -inf so they never win.
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = row_ok[:, None] & (cols[None, :] < N)
        x = tl.load(x_ptr + rows64[:, None] * stride_x + cols[None, :], mask=mask, other=float("-inf"))
        m = tl.maximum(m, tl.max(x.to(tl.float32), axis=1))
    # Rows past M saw only -inf: give them 0 so exp() below stays finite (they are never stored).
    m = tl.where(row_ok, m, 0.0)

    # Pass 2: row sum of exp(x - m). Masked lanes: exp(-inf) = 0.
    s = tl.zeros([BLOCK_M], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = row_ok[:, None] & (cols[None, :] < N)
        x = tl.load(x_ptr + rows64[:, None] * stride_x + cols[None, :], mask=mask, other=float("-inf"))
        s += tl.sum(tl.exp(x.to(tl.float32) - m[:, None]), axis=1)
    s = tl.where(row_ok, s, 1.0)

    # Pass 3: normalised output, narrowed to the output dtype.
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = row_ok[:, None] & (cols[None, :] < N)
        x = tl.load(x_ptr + rows64[:, None] * stride_x + cols[None, :], mask=mask, other=float("-inf"))
        y = tl.exp(x.to(tl.float32) - m[:, None]) / s[:, None]
        tl.store(out_ptr + rows64[:, None] * stride_out + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


def custom_kernel(data):
    (x,) = data
    x = x.contiguous()
    M, N = x.shape
    out = torch.empty_like(x)
    # Elements per tile: bounded by registers on a GPU; large on the CPU interpreter.
    tile = 8192 if x.is_cuda else 1 << 18
    BLOCK_N = min(triton.next_power_of_2(N), 2048 if x.is_cuda else 8192)
    BLOCK_M = max(1, min(triton.next_power_of_2(M), tile // BLOCK_N))
    softmax_kernel[(triton.cdiv(M, BLOCK_M),)](x, out, M, N, x.stride(0), out.stride(0),
                                               BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return out
