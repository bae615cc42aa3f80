"""Reference for ``mla_decode``: DeepSeek multi-head latent attention (MLA) decoding, FlashMLA convention.

Data (see ``problems/mla_decode/problem.yaml``)::

    q             [b, s_q, h_q, 576]            bfloat16  512 latent dims + 64 RoPE dims
    kv_cache      [num_blocks, 64, 1, 576]      bfloat16  paged latent cache, page size 64, h_kv = 1;
                                                          K = all 576 dims, V = the first 512 dims
    block_table   [b, max_blocks]               int32     page j of sequence i is kv_cache[block_table[i, j]]
    cache_seqlens [b]                           int32     number of cached tokens of each sequence (>= s_q)
    softmax_scale python float                            576 ** -0.5

    output        [b, s_q, h_q, 512]            bfloat16

For sequence ``i`` with ``L = cache_seqlens[i]`` its keys are the first ``L`` rows of the pages
``block_table[i, 0], block_table[i, 1], ...`` laid end to end; query token ``t`` (0-based, of ``s_q``)
attends to the first ``L - s_q + 1 + t`` of them (causal: the ``s_q`` new tokens are the last ``s_q``
keys of the sequence)::

    out[i, t, h] = softmax(scale * q[i, t, h] . K[:n_t]^T) @ V[:n_t],   n_t = L - s_q + 1 + t

This is FlashMLA's ``flash_mla_with_kvcache`` with ``causal=True`` (https://github.com/deepseek-ai/FlashMLA,
``tests/test_flash_mla.py``: paged cache of block size 64, ``d = 576``, ``dv = 512``, ``h_kv = 1``,
randomly permuted block table, per-sequence lengths drawn from ``normal(seqlen, seqlen / 2)``).

Every cache slot beyond a sequence's length holds NaN (the tail of its last page and every page of
its block-table row that the sequence does not reach), so a kernel that reads out of bounds shows
it in its output.
"""

from __future__ import annotations

import math

import torch

D_QK = 576  # latent (512) + RoPE (64) dims of q and K
D_V = 512  # V = first 512 dims of each cache row
PAGE_SIZE = 64
H_KV = 1
# Standard deviation of the entries of q. K ~ N(0, 1) and scale = 576 ** -0.5, so the attention
# logits scale * q.k have standard deviation Q_STD: with 2.0 the attention is peaked enough that
# each output (a weighted average of V rows) stays O(0.1-1) for seqlens up to ~10k, instead of
# shrinking like 1/sqrt(seqlen) as it would with a flat softmax (Q_STD = 1, FlashMLA's test).
Q_STD = 2.0


def generate_input(*, b: int, s_q: int, h_q: int, seqlen: int, seed: int, device: str = "cpu"):
    """Random MLA decode inputs.

    Args:
        b: batch size (number of sequences).
        s_q: new query tokens per sequence (1 = plain decoding, 2+ = speculative decoding).
        h_q: query heads (16 or 128 for DeepSeek V3 with tensor parallelism 8 / 1).
        seqlen: nominal cached length. Sequence 0 has exactly ``seqlen`` tokens, the others
            ``round(normal(seqlen, seqlen / 2))`` clipped to ``[s_q, 2 * seqlen]``.
        seed: RNG seed (a local generator; the global RNG is untouched).
        device: where the tensors are made.

    Returns:
        ``(q, kv_cache, block_table, cache_seqlens, softmax_scale)`` as in the module docstring, with
        ``max_blocks = ceil(max(cache_seqlens) / 64)``, ``num_blocks = b * max_blocks`` and
        ``block_table = randperm(num_blocks).view(b, max_blocks)``. Slots past each sequence's length
        are NaN.
    """
    if min(b, s_q, h_q, seqlen) < 1:
        raise ValueError("b, s_q, h_q and seqlen must be >= 1")
    if seqlen < s_q:
        raise ValueError(f"seqlen ({seqlen}) must be >= s_q ({s_q})")
    g = torch.Generator(device=device).manual_seed(seed)

    lens = torch.normal(float(seqlen), seqlen / 2.0, (b,), generator=g, device=device)
    lens = lens.round().clamp(min=s_q, max=2 * seqlen).to(torch.int32)
    lens[0] = seqlen
    max_blocks = math.ceil(int(lens.max().item()) / PAGE_SIZE)
    num_blocks = b * max_blocks

    q = (torch.randn(b, s_q, h_q, D_QK, generator=g, device=device) * Q_STD).to(torch.bfloat16)
    kv_cache = torch.randn(num_blocks, PAGE_SIZE, H_KV, D_QK, generator=g, device=device, dtype=torch.bfloat16)
    block_table = torch.randperm(num_blocks, generator=g, device=device).view(b, max_blocks).to(torch.int32)

    # NaN in every slot at or past each sequence's length (its logical positions, mapped to physical slots).
    slot = block_table.long()[:, :, None] * PAGE_SIZE + torch.arange(PAGE_SIZE, device=device)
    slot = slot.view(b, max_blocks * PAGE_SIZE)
    pos = torch.arange(max_blocks * PAGE_SIZE, device=device)
    unused = slot[pos[None, :] >= lens.long()[:, None]]
    kv_cache.view(num_blocks * PAGE_SIZE, D_QK)[unused] = float("nan")

    softmax_scale = D_QK**-0.5
    return q.contiguous(), kv_cache.contiguous(), block_table.contiguous(), lens.contiguous(), softmax_scale


def ref_kernel(data):
    """Paged causal MLA attention in float32; returns ``[b, s_q, h_q, 512]`` bfloat16.

    For each sequence: gather its pages through ``block_table``, keep the first ``cache_seqlens[i]``
    rows (before any arithmetic, so the NaN padding never enters), scores = scale * q @ K^T,
    causal mask for ``s_q > 1``, softmax in float32, out = P @ V, cast to bfloat16.
    """
    q, kv_cache, block_table, cache_seqlens, softmax_scale = data
    b, s_q, h_q, d = q.shape
    out = torch.empty(b, s_q, h_q, D_V, dtype=q.dtype, device=q.device)
    for i, L in enumerate(cache_seqlens.tolist()):
        n_pages = math.ceil(L / PAGE_SIZE)
        pages = block_table[i, :n_pages].long()
        kv = kv_cache[pages].reshape(n_pages * PAGE_SIZE, d)[:L].float()  # [L, 576]
        qi = q[i].float().reshape(s_q * h_q, d)
        scores = (qi @ kv.T).mul_(softmax_scale).view(s_q, h_q, L)
        if s_q > 1:
            visible = L - s_q + 1 + torch.arange(s_q, device=q.device)  # keys seen by each query token
            masked = torch.arange(L, device=q.device)[None, :] >= visible[:, None]  # [s_q, L]
            scores.masked_fill_(masked[:, None, :], float("-inf"))
        p = torch.softmax(scores, dim=-1).view(s_q * h_q, L)
        out[i] = (p @ kv[:, :D_V]).view(s_q, h_q, D_V).to(q.dtype)
    return out


def flops(case: dict) -> int:
    """FlashMLA's count: ``2 * b * h_q * s_q * seqlen * (d + dv)`` with d = 576, dv = 512
    (QK^T and PV matmuls at the case's nominal ``seqlen``; softmax and the causal saving ignored).
    Source: FlashMLA ``tests/test_flash_mla.py``."""
    return 2 * case["b"] * case["h_q"] * case["s_q"] * case["seqlen"] * (D_QK + D_V)


def bytes(case: dict) -> int:  # noqa: A001 - name fixed by the harness
    """FlashMLA's count of bytes moved: ``b * (s_q*h_q*d + seqlen*h_kv*d + s_q*h_q*dv) * 2``
    (q read, the sequence's cache read once, output written; bf16; nominal ``seqlen``).
    Source: FlashMLA ``tests/test_flash_mla.py``."""
    b, s_q, h_q, s_k = case["b"], case["s_q"], case["h_q"], case["seqlen"]
    return b * (s_q * h_q * D_QK + s_k * H_KV * D_QK + s_q * h_q * D_V) * 2
