"""MLA decode template (PyTorch): a working, simple submission to start from.

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

    For sequence i, its keys are the first L_i slots of its pages laid end to end. Query token t
    (0-based) of the s_q new tokens sees the first L_i - s_q + 1 + t keys (causal), and
    out[i, t, h] = softmax(softmax_scale * q[i, t, h] . K^T) @ V over those keys.

Slots past L_i hold NaN: slice before computing, never multiply them by a zero weight
(0 * NaN = NaN). This version loops over the sequences in Python and computes in float32.
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
        pages = block_table[i, :n_pages].long()
        kv = kv_cache[pages].reshape(n_pages * PAGE_SIZE, d)[:L].float()  # [L, 576]: K; V = kv[:, :512]
        scores = q[i].float() @ kv.T * softmax_scale  # [s_q, h_q, L]
        if s_q > 1:
            visible = L - s_q + 1 + torch.arange(s_q, device=q.device)  # keys seen by each token
            hidden = torch.arange(L, device=q.device)[None, :] >= visible[:, None]  # [s_q, L]
            scores = scores.masked_fill(hidden[:, None, :], float("-inf"))
        p = torch.softmax(scores, dim=-1)
        out[i] = (p @ kv[:, :D_V]).to(q.dtype)
    return out
