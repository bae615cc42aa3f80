"""WRONG on purpose: reads whole pages, i.e. all 64 slots of a sequence's last page.

The length mask is applied per page instead of per token: every slot of the
``ceil(L / 64)`` pages is used as a key. The tail of the last page holds NaN in the cache, so the
output becomes NaN for every sequence whose length is not a multiple of 64; exposed by every test
case (e.g. ``b=1 s_q=1 h_q=16 seqlen=40``).
"""

import torch

PAGE_SIZE = 64
D_V = 512


def custom_kernel(data):
    q, kv_cache, block_table, cache_seqlens, softmax_scale = data
    b, s_q, h_q, d = q.shape
    out = torch.empty(b, s_q, h_q, D_V, dtype=q.dtype, device=q.device)
    for i, L in enumerate(cache_seqlens.tolist()):
        n_pages = (L + PAGE_SIZE - 1) // PAGE_SIZE
        kv = kv_cache[block_table[i, :n_pages].long()].reshape(-1, d).float()  # bug: no [:L]
        n = kv.shape[0]
        scores = (q[i].float().reshape(s_q * h_q, d) @ kv.T * softmax_scale).view(s_q, h_q, n)
        if s_q > 1:
            # causal mask for the s_q new tokens (the last s_q keys of the sequence); the page tail stays in
            pos = torch.arange(n, device=q.device)
            visible = L - s_q + 1 + torch.arange(s_q, device=q.device)
            masked = (pos[None, :] >= visible[:, None]) & (pos[None, :] < L)
            scores = scores.masked_fill(masked[:, None, :], float("-inf"))
        p = torch.softmax(scores, dim=-1).view(s_q * h_q, n)
        out[i] = (p @ kv[:, :D_V]).view(s_q, h_q, D_V).to(q.dtype)
    return out
