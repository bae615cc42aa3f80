"""Correct Triton MLA decode: paged flash-decoding with a split over the sequence.

Stage 1 (``_mla_partial_kernel``), one program per (sequence, block of 16 query rows, split): the
``s_q * h_q`` query rows of a sequence (row ``t * h_q + h``) share the single latent KV head, so a
program loads a 16-row block of q once and walks its share of the sequence's pages, reading each
page's physical index from ``block_table`` (a scalar load: pages are scattered through the cache).
It loads the page's 64 x 576 K tile with the slots at or past the sequence's length masked to 0
(the cache holds NaN there). Scores are ``q_latent @ K_latent^T + q_rope @ K_rope^T`` (576 = 512 +
64: block sizes must be powers of two), masked so the row of token ``t`` sees keys
``< L - s_q + 1 + t``; an online softmax in float32 (base-2 exponentials, running max ``m``,
running sum ``l``) accumulates ``P @ V`` with V = the first 512 dims of the same K tile.

With one split the program normalises and writes the bf16 output directly. Otherwise each split
writes its normalised partial output and log-sum-exp, and stage 2 (``_mla_combine_kernel``) merges
the splits: ``out = sum_s 2^(lse_s - max) * o_s / sum_s 2^(lse_s - max)``. The split count aims
for enough programs to fill the device (few under the CPU interpreter).

Under ``TRITON_INTERPRET=1`` (CPU) bf16 values are only loaded, converted to float32 and stored:
all arithmetic, the dots included, is float32 (on a GPU float32 dots run in tf32, exact for the
bf16-valued q and K; a faster GPU kernel would keep q, K and P in bf16 for the tensor cores).
"""

import math

import torch
import triton
import triton.language as tl

PAGE_SIZE = 64
D_QK = 576
D_V = 512
D_ROPE = D_QK - D_V
BLOCK_H = 16
LOG2E = 1.4426950408889634


@triton.jit
def _mla_partial_kernel(
    q_ptr, kv_ptr, bt_ptr, lens_ptr, out_ptr, o_part_ptr, lse_part_ptr,
    qk_scale_log2, s_q, h_q, max_blocks,
    NUM_SPLITS: tl.constexpr, BLOCK_H: tl.constexpr, PAGE: tl.constexpr,
    D_LAT: tl.constexpr, D_ROPE: tl.constexpr,
):
    bid = tl.program_id(0)
    hblk = tl.program_id(1)
    split = tl.program_id(2)
    D_QK: tl.constexpr = D_LAT + D_ROPE
    n_rows = s_q * h_q

    L = tl.load(lens_ptr + bid)
    rows = hblk * BLOCK_H + tl.arange(0, BLOCK_H)
    row_ok = rows < n_rows
    visible = L - s_q + 1 + rows // h_q  # keys [0, visible) are seen by the row's token
    offs_lat = tl.arange(0, D_LAT)
    offs_rope = tl.arange(0, D_ROPE)
    offs_n = tl.arange(0, PAGE)

    q_row = q_ptr + (bid * n_rows + rows)[:, None] * D_QK
    q_lat = tl.load(q_row + offs_lat[None, :], mask=row_ok[:, None], other=0.0).to(tl.float32)
    q_rope = tl.load(q_row + D_LAT + offs_rope[None, :], mask=row_ok[:, None], other=0.0).to(tl.float32)

    n_pages = (L + PAGE - 1) // PAGE
    per_split = (n_pages + NUM_SPLITS - 1) // NUM_SPLITS
    page_lo = split * per_split
    page_hi = tl.minimum(page_lo + per_split, n_pages)  # empty for the last splits of short sequences

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, D_LAT], tl.float32)
    for page in range(page_lo, page_hi):
        phys = tl.load(bt_ptr + bid * max_blocks + page).to(tl.int64)
        keys = page * PAGE + offs_n
        key_ok = keys < L
        kv_row = kv_ptr + (phys * PAGE + offs_n)[:, None] * D_QK
        k_lat = tl.load(kv_row + offs_lat[None, :], mask=key_ok[:, None], other=0.0).to(tl.float32)
        k_rope = tl.load(kv_row + D_LAT + offs_rope[None, :], mask=key_ok[:, None], other=0.0).to(tl.float32)

        s = tl.dot(q_lat, tl.trans(k_lat)) + tl.dot(q_rope, tl.trans(k_rope))  # [BLOCK_H, PAGE]
        s = s * qk_scale_log2
        s = tl.where(keys[None, :] < visible[:, None], s, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with no key yet in this split
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, k_lat)
        m_i = m_new

    has_keys = l_i > 0.0
    o = acc / tl.where(has_keys, l_i, 1.0)[:, None]
    if NUM_SPLITS == 1:
        out_row = out_ptr + (bid * n_rows + rows)[:, None] * D_LAT
        tl.store(out_row + offs_lat[None, :], o.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])
    else:
        part = (bid * NUM_SPLITS + split) * n_rows + rows
        tl.store(o_part_ptr + part[:, None] * D_LAT + offs_lat[None, :], o, mask=row_ok[:, None])
        lse = tl.where(has_keys, m_i + tl.log2(tl.where(has_keys, l_i, 1.0)), float("-inf"))
        tl.store(lse_part_ptr + part, lse, mask=row_ok)


@triton.jit
def _mla_combine_kernel(
    o_part_ptr, lse_part_ptr, out_ptr, n_rows,
    NUM_SPLITS: tl.constexpr, BLOCK_H: tl.constexpr, D_LAT: tl.constexpr,
):
    bid = tl.program_id(0)
    hblk = tl.program_id(1)
    rows = hblk * BLOCK_H + tl.arange(0, BLOCK_H)
    row_ok = rows < n_rows
    offs_lat = tl.arange(0, D_LAT)

    lse_max = tl.full([BLOCK_H], float("-inf"), tl.float32)
    for sp in tl.static_range(NUM_SPLITS):
        lse = tl.load(lse_part_ptr + (bid * NUM_SPLITS + sp) * n_rows + rows, mask=row_ok, other=0.0)
        lse_max = tl.maximum(lse_max, lse)
    acc = tl.zeros([BLOCK_H, D_LAT], tl.float32)
    den = tl.zeros([BLOCK_H], tl.float32)
    for sp in tl.static_range(NUM_SPLITS):
        part = (bid * NUM_SPLITS + sp) * n_rows + rows
        w = tl.exp2(tl.load(lse_part_ptr + part, mask=row_ok, other=0.0) - lse_max)  # 0 for empty splits
        o = tl.load(o_part_ptr + part[:, None] * D_LAT + offs_lat[None, :], mask=row_ok[:, None], other=0.0)
        acc += w[:, None] * o
        den += w
    out = acc / den[:, None]  # split 0 always holds key 0, which every row sees: den >= 1
    out_row = out_ptr + (bid * n_rows + rows)[:, None] * D_LAT
    tl.store(out_row + offs_lat[None, :], out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])


def _num_splits(b: int, n_row_blocks: int, max_blocks: int, device: torch.device) -> int:
    if device.type == "cuda":
        target = 2 * torch.cuda.get_device_properties(device).multi_processor_count
    else:
        target = 4  # the CPU interpreter runs programs one by one: keep the grid small
    return max(1, min(math.ceil(target / (b * n_row_blocks)), max_blocks, 16))


def custom_kernel(data):
    q, kv_cache, block_table, cache_seqlens, softmax_scale = data
    b, s_q, h_q, d = q.shape
    assert d == D_QK and kv_cache.shape[1] == PAGE_SIZE and kv_cache.shape[2] == 1
    q = q.contiguous()
    kv_cache = kv_cache.contiguous()
    block_table = block_table.contiguous()
    cache_seqlens = cache_seqlens.contiguous()
    n_rows = s_q * h_q
    n_row_blocks = triton.cdiv(n_rows, BLOCK_H)
    max_blocks = block_table.shape[1]
    num_splits = _num_splits(b, n_row_blocks, max_blocks, q.device)

    out = torch.empty(b, s_q, h_q, D_V, dtype=q.dtype, device=q.device)
    if num_splits > 1:
        o_part = torch.empty(b, num_splits, n_rows, D_V, dtype=torch.float32, device=q.device)
        lse_part = torch.empty(b, num_splits, n_rows, dtype=torch.float32, device=q.device)
    else:
        o_part = lse_part = out  # unused
    _mla_partial_kernel[(b, n_row_blocks, num_splits)](
        q, kv_cache, block_table, cache_seqlens, out, o_part, lse_part,
        softmax_scale * LOG2E, s_q, h_q, max_blocks,
        NUM_SPLITS=num_splits, BLOCK_H=BLOCK_H, PAGE=PAGE_SIZE, D_LAT=D_V, D_ROPE=D_ROPE,
        num_warps=8,  # a 16 x 512 float32 accumulator plus the K tile per program
    )
    if num_splits > 1:
        _mla_combine_kernel[(b, n_row_blocks)](
            o_part, lse_part, out, n_rows, NUM_SPLITS=num_splits, BLOCK_H=BLOCK_H, D_LAT=D_V,
        )
    return out
