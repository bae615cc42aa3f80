"""Correct Triton softmax: 2-D tiles, two passes over column blocks (works for any N).

``data = (x,)`` with ``x``: ``[M, N]`` float32 or bfloat16; returns ``[M, N]`` of ``x.dtype``.

Each program owns ``BLOCK_M`` rows and walks their columns in blocks of ``BLOCK_N``:

1. pass 1 keeps a running row max ``m`` and a running sum ``s`` of ``exp(x - m)``; when the max
   grows, the sum is rescaled by ``exp(m_old - m_new)`` (online softmax, Milakov & Gimelshein,
   arXiv:1805.02867), so rows longer than one block (N > 16384) are handled;
2. pass 2 reloads each block and writes ``exp(x - m) / s``.

Arithmetic is in float32 (bfloat16 is loaded, widened, and the result narrowed on store), which
also keeps the kernel runnable under Triton's CPU interpreter (``TRITON_INTERPRET=1``).
Out-of-range rows of the last tile re-read row ``M - 1`` (never stored), so every row seen by the
kernel has at least one finite value and no ``-inf - -inf`` appears.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, M, N, stride_x, stride_out,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    rows_ld = tl.minimum(rows, M - 1).to(tl.int64)
    x_rows = x_ptr + rows_ld[:, None] * stride_x
    o_rows = out_ptr + rows.to(tl.int64)[:, None] * stride_out
    offs = tl.arange(0, BLOCK_N)

    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_M], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols[None, :] < N
        x = tl.load(x_rows + cols[None, :], mask=mask, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=1))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new[:, None]), axis=1)
        m = m_new

    inv = 1.0 / s
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols[None, :] < N
        x = tl.load(x_rows + cols[None, :], mask=mask, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - m[:, None]) * inv[:, None]
        tl.store(o_rows + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & mask)


def custom_kernel(data):
    (x,) = data
    x = x.contiguous()
    M, N = x.shape
    out = torch.empty_like(x)
    # Up to 2048 columns and 16384 elements per tile: short rows share a program.
    BLOCK_N = min(triton.next_power_of_2(N), 2048)
    BLOCK_M = max(1, min(triton.next_power_of_2(M), 16384 // BLOCK_N))
    grid = (triton.cdiv(M, BLOCK_M),)
    _softmax_kernel[grid](x, out, M, N, x.stride(0), out.stride(0),
                          BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=8)
    return out
