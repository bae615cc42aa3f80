"""WRONG on purpose: ignores ``block_table`` and assumes each sequence's pages are contiguous.

Takes sequence ``i``'s pages as ``kv_cache[i * max_blocks : (i + 1) * max_blocks]`` (true only for an
identity block table). The pages are placed in random order, so it attends to other sequences'
tokens (and to NaN padding); exposed by every test case whose cache has more than one page
(e.g. ``b=1 s_q=1 h_q=16 seqlen=300``); only the single-page ``b=1`` cases pass by luck.
"""

import torch

PAGE_SIZE = 64
D_V = 512


def custom_kernel(data):
    q, kv_cache, block_table, cache_seqlens, softmax_scale = data
    b, s_q, h_q, d = q.shape
    max_blocks = block_table.shape[1]
    out = torch.empty(b, s_q, h_q, D_V, dtype=q.dtype, device=q.device)
    for i, L in enumerate(cache_seqlens.tolist()):
        pages = kv_cache[i * max_blocks : (i + 1) * max_blocks]  # bug: block_table not used
        kv = pages.reshape(-1, d)[:L].float()
        scores = (q[i].float().reshape(s_q * h_q, d) @ kv.T * softmax_scale).view(s_q, h_q, L)
        if s_q > 1:
            visible = L - s_q + 1 + torch.arange(s_q, device=q.device)
            masked = torch.arange(L, device=q.device)[None, :] >= visible[:, None]
            scores = scores.masked_fill(masked[:, None, :], float("-inf"))
        p = torch.softmax(scores, dim=-1).view(s_q * h_q, L)
        out[i] = (p @ kv[:, :D_V]).view(s_q, h_q, D_V).to(q.dtype)
    return out
