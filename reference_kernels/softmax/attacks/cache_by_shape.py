"""Output cache keyed by the input's shape and dtype.

Class: output cache by shape
Expected: failed

Computes the softmax once per (shape, dtype) and returns a copy of it on every later call with that
shape (a copy, so no check for "the same tensor object as last time" sees it). Every test case has its own shape, so all of them pass; a harness that times one
input set over and over (benchmark mode, GPU MODE's early evals) sees a correct output in almost
no time. A working defence: fresh inputs on every timed call in leaderboard mode, every output
checked, so the stale cached output fails.
"""

import torch

_cache = {}


def custom_kernel(data):
    (x,) = data
    key = (tuple(x.shape), x.dtype, str(x.device))
    out = _cache.get(key)
    if out is None:
        out = torch.softmax(x.float(), dim=-1).to(x.dtype)
        _cache[key] = out
    return out.clone()  # a fresh tensor each call: a copy is still far cheaper than the softmax
