"""Output cache keyed by the identity of the input objects.

Class: output cache by object identity
Expected: failed

Remembers the output computed for each ``id(q)`` (with the shape of ``q``, so it never returns a
wrongly shaped tensor) and returns it whenever the same object comes back. A harness that
calls the kernel again and again on the same input objects (benchmark mode, or a leaderboard that
reuses its input sets) gets the first output back every time for the cost of a lookup. A working
defence gives fresh inputs on every timed call and checks every output. The judge's child hands
the kernel the same tensor object at each place of the input set on every call, re-pointed at
that call's fresh values (``runner.mapping.Mapping.build``), so the cache hits on the first call
with the shape of the call before: in test mode the fourth case (the third's shape, other values)
gets the third case's output back, the very object, and fails, and so does every leaderboard
case's second call. With a fresh object per call the cache hit only when CPython reused a freed object's
address, now and then, and a warm runner and ``kernelrank eval`` once judged it differently.
"""

import torch

_cache = {}

PAGE_SIZE = 64
D_V = 512


def _attention(data):
    q, kv_cache, block_table, cache_seqlens, softmax_scale = data
    b, s_q, h_q, d = q.shape
    n = block_table.shape[1] * PAGE_SIZE
    kv = kv_cache[block_table.long()].view(b, n, d)
    pos = torch.arange(n, device=q.device)
    lens = cache_seqlens.long()
    kv = torch.where((pos[None, :] < lens[:, None])[:, :, None], kv.float(), 0.0)
    scores = torch.matmul(q.float().view(b, s_q * h_q, d), kv.transpose(1, 2)).view(b, s_q, h_q, n) * softmax_scale
    visible = lens[:, None] - s_q + 1 + torch.arange(s_q, device=q.device)[None, :]
    scores = scores.masked_fill(~(pos[None, None, :] < visible[:, :, None])[:, :, None, :], float("-inf"))
    p = torch.softmax(scores, dim=-1).view(b, s_q * h_q, n)
    return torch.matmul(p, kv[:, :, :D_V]).view(b, s_q, h_q, D_V).to(q.dtype)


def custom_kernel(data):
    q = data[0]
    hit = _cache.get(id(q))
    if hit is not None and hit[0] == tuple(q.shape):
        return hit[1]
    out = _attention(data)
    _cache[id(q)] = (tuple(q.shape), out)
    return out
