"""Correct Triton softmax: 2-D tiles of rows, online softmax over column blocks (any N).

``data = (x,)`` with ``x``: ``[M, N]`` float32 or bfloat16; returns ``[M, N]`` of ``x.dtype``.

Each program owns ``BLOCK_M`` rows and handles them ``BLOCK_N`` columns at a time:

- if a row fits in one block (``N <= BLOCK_N``) it is read once, normalised and written;
- otherwise pass 1 keeps a running row max ``m`` and a running sum ``s`` of ``exp(x - m)``,
  rescaling ``s`` by ``exp(m_old - m_new)`` whenever the max grows (online softmax, Milakov &
  Gimelshein, arXiv:1805.02867), and pass 2 re-reads each block and writes ``exp(x - m) / s``.
  This handles rows far longer than one block (N > 16384).

Arithmetic is float32 (bfloat16 is loaded, widened, and the result narrowed on store), which also
keeps the kernel runnable under Triton's CPU interpreter (``TRITON_INTERPRET=1``). Out-of-range
rows of the last tile re-read row ``M - 1`` and are never stored, so every row seen by the kernel
holds a finite value and no ``-inf - (-inf)`` appears.

Tile sizes: on a GPU a tile holds at most 16384 elements (registers); under the CPU interpreter
each program costs milliseconds of Python overhead, so tiles are much larger there.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, M, N, stride_x, stride_out,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ONE_BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    rows_ld = tl.minimum(rows, M - 1).to(tl.int64)
    x_rows = x_ptr + rows_ld[:, None] * stride_x
    o_rows = out_ptr + rows.to(tl.int64)[:, None] * stride_out
    offs = tl.arange(0, BLOCK_N)

    if ONE_BLOCK:
        mask = offs[None, :] < N
        x = tl.load(x_rows + offs[None, :], mask=mask, other=float("-inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=1)[:, None])
        y = e * (1.0 / tl.sum(e, axis=1))[:, None]
        tl.store(o_rows + offs[None, :], y.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & mask)
    else:
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
            tl.store(o_rows + cols[None, :], y.to(out_ptr.dtype.element_ty),
                     mask=row_ok[:, None] & mask)


def custom_kernel(data):
    (x,) = data
    x = x.contiguous()
    M, N = x.shape
    out = torch.empty_like(x)
    if x.is_cuda:
        max_block_n, max_tile = 2048, 16384
    else:  # Triton CPU interpreter: few, large programs
        max_block_n, max_tile = 8192, 1 << 18
    BLOCK_N = min(triton.next_power_of_2(N), max_block_n)
    BLOCK_M = max(1, min(triton.next_power_of_2(M), max_tile // BLOCK_N))
    grid = (triton.cdiv(M, BLOCK_M),)
    _softmax_kernel[grid](x, out, M, N, x.stride(0), out.stride(0),
                          BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, ONE_BLOCK=N <= BLOCK_N, num_warps=8)
    return out
