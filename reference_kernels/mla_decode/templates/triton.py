"""MLA decode template (Triton): a working, simple submission to start from.

Contract:
    custom_kernel(data) -> out
    data = (q, kv_cache, block_table, cache_seqlens, softmax_scale)
      q             [b, s_q, h_q, 576]        bfloat16  512 latent dims + 64 RoPE dims
      kv_cache      [num_blocks, 64, 1, 576]  bfloat16  paged cache (page size 64, one latent KV head);
                                                        K = all 576 dims, V = the first 512
      block_table   [b, max_blocks]           int32     page j of sequence i is kv_cache[block_table[i, j]]
      cache_seqlens [b]                       int32     tokens in each sequence's cache, L_i >= s_q
      softmax_scale float                               576 ** -0.5
    out             [b, s_q, h_q, 512]        bfloat16

    Query token t (0-based) of the s_q new tokens sees the first L_i - s_q + 1 + t keys (causal).

One program per (sequence, block of 16 query rows); the s_q * h_q rows of a sequence (row
t * h_q + h) all use the same single KV head. The program walks the sequence's pages in order,
reading each page's physical index from block_table, loads the page (slots past L_i masked: they
hold NaN in the cache), and keeps an online softmax (running max m, running sum l, accumulator
rescaled by exp(m_old - m_new)). The 576-dim dot product is split as 512 + 64 because block
sizes must be powers of two. Arithmetic is float32: Triton's CPU interpreter (TRITON_INTERPRET=1,
used when the run's device is the CPU) has no bfloat16 arithmetic, so bf16 values are loaded,
widened with .to(tl.float32), and narrowed on store.
"""

import torch
import triton
import triton.language as tl

PAGE_SIZE = 64
D_V = 512
D_ROPE = 64
BLOCK_H = 16


@triton.jit
def mla_decode_kernel(
    q_ptr, kv_ptr, bt_ptr, lens_ptr, out_ptr, scale, s_q, h_q, max_blocks,
    BLOCK_H: tl.constexpr, PAGE: tl.constexpr, D_LAT: tl.constexpr, D_ROPE: tl.constexpr,
):
    bid = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    n_rows = s_q * h_q
    row_ok = rows < n_rows
    L = tl.load(lens_ptr + bid)
    visible = L - s_q + 1 + rows // h_q  # keys [0, visible) are seen by each row's token
    d_lat = tl.arange(0, D_LAT)
    d_rope = tl.arange(0, D_ROPE)
    slots = tl.arange(0, PAGE)

    q_row = q_ptr + (bid * n_rows + rows)[:, None] * (D_LAT + D_ROPE)
    q_lat = tl.load(q_row + d_lat[None, :], mask=row_ok[:, None], other=0.0).to(tl.float32)
    q_rope = tl.load(q_row + D_LAT + d_rope[None, :], mask=row_ok[:, None], other=0.0).to(tl.float32)

    m = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, D_LAT], tl.float32)
    for page in range(0, (L + PAGE - 1) // PAGE):
        phys = tl.load(bt_ptr + bid * max_blocks + page).to(tl.int64)
        keys = page * PAGE + slots
        kv_row = kv_ptr + (phys * PAGE + slots)[:, None] * (D_LAT + D_ROPE)
        k_lat = tl.load(kv_row + d_lat[None, :], mask=(keys < L)[:, None], other=0.0).to(tl.float32)
        k_rope = tl.load(kv_row + D_LAT + d_rope[None, :], mask=(keys < L)[:, None], other=0.0).to(tl.float32)
        s = (tl.dot(q_lat, tl.trans(k_lat)) + tl.dot(q_rope, tl.trans(k_rope))) * scale
        s = tl.where(keys[None, :] < visible[:, None], s, float("-inf"))
        # page 0 holds key 0, which every row sees: m is finite after the first page
        m_new = tl.maximum(m, tl.max(s, axis=1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new[:, None])
        l = l * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, k_lat)  # V = the first 512 dims
        m = m_new

    out = acc / l[:, None]
    out_row = out_ptr + (bid * n_rows + rows)[:, None] * D_LAT
    tl.store(out_row + d_lat[None, :], out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])


def custom_kernel(data):
    q, kv_cache, block_table, cache_seqlens, softmax_scale = data
    b, s_q, h_q, _ = q.shape
    q = q.contiguous()
    out = torch.empty(b, s_q, h_q, D_V, dtype=q.dtype, device=q.device)
    grid = (b, triton.cdiv(s_q * h_q, BLOCK_H))
    mla_decode_kernel[grid](
        q, kv_cache.contiguous(), block_table.contiguous(), cache_seqlens.contiguous(), out,
        softmax_scale, s_q, h_q, block_table.shape[1],
        BLOCK_H=BLOCK_H, PAGE=PAGE_SIZE, D_LAT=D_V, D_ROPE=D_ROPE,
    )
    return out
