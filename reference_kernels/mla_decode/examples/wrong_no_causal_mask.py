"""WRONG on purpose: forgets the causal rule for s_q > 1.

Every query token attends to all ``cache_seqlens[i]`` keys, but token ``t`` of ``s_q`` may only see
the first ``L - s_q + 1 + t``: the earlier speculative tokens must not see the later ones. Correct
whenever ``s_q == 1``; exposed by every test case with ``s_q >= 2`` (e.g. ``b=1 s_q=2 h_q=16
seqlen=2``, where token 0 must see only key 0).
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
        kv = kv_cache[block_table[i, :n_pages].long()].reshape(-1, d)[:L].float()
        scores = q[i].float().reshape(s_q * h_q, d) @ kv.T * softmax_scale  # bug: no causal mask
        p = torch.softmax(scores, dim=-1)
        out[i] = (p @ kv[:, :D_V]).view(s_q, h_q, D_V).to(q.dtype)
    return out
