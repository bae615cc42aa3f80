"""Correct PyTorch MLA decode: all sequences at once on a padded, masked copy of the cache.

Gathers every sequence's pages through ``block_table`` into one ``[b, max_blocks * 64, 576]`` tensor,
zeroes the slots past each sequence's length with ``torch.where`` (the cache holds NaN there, and
``0 * NaN`` would poison the ``P @ V`` product), applies the length and causal masks to the scores,
and computes softmax and ``P @ V`` in float32 with batched matmuls.
"""

import torch

PAGE_SIZE = 64
D_V = 512


def custom_kernel(data):
    q, kv_cache, block_table, cache_seqlens, softmax_scale = data
    b, s_q, h_q, d = q.shape
    max_blocks = block_table.shape[1]
    n = max_blocks * PAGE_SIZE
    kv = kv_cache[block_table.long()].view(b, n, d)  # [b, n, 576], pages in logical order
    pos = torch.arange(n, device=q.device)
    lens = cache_seqlens.long()
    in_seq = pos[None, :] < lens[:, None]  # [b, n]
    kv = torch.where(in_seq[:, :, None], kv.float(), 0.0)

    scores = torch.matmul(q.float().view(b, s_q * h_q, d), kv.transpose(1, 2)) * softmax_scale
    scores = scores.view(b, s_q, h_q, n)
    # query token t of sequence i sees keys [0, L_i - s_q + 1 + t)
    visible = lens[:, None] - s_q + 1 + torch.arange(s_q, device=q.device)[None, :]  # [b, s_q]
    allowed = pos[None, None, :] < visible[:, :, None]  # [b, s_q, n]
    scores = scores.masked_fill(~allowed[:, :, None, :], float("-inf"))
    p = torch.softmax(scores, dim=-1).view(b, s_q * h_q, n)
    out = torch.matmul(p, kv[:, :, :D_V])
    return out.view(b, s_q, h_q, D_V).to(q.dtype)
