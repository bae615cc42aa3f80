"""Output cache keyed by the input's data pointer.

Class: output cache by data_ptr
Expected: failed

Remembers the output computed for each address of ``a`` (with the shapes, so it never returns a
wrongly shaped tensor) and returns it whenever the same address comes back. A harness that reuses
its input buffers between timed calls, or refills them in place, gets the first output back every
time at the cost of a dictionary lookup (GPU MODE met this one). A working defence gives fresh
inputs, in fresh buffers or not, on every timed call and checks every output. The judge places
every input set at recurring offsets of the shared memory (``runner.slots``), so the address comes
back on the first repeat: on the warm-up's second call (the same set) the cache returns the very
object of the first, and on any later set at that offset a stale output; either fails, on every
path alike. In test mode, where each case has its own shapes, it computes every output and passes.
"""

import torch

_cache = {}


def custom_kernel(data):
    a, b = data
    key = (a.data_ptr(), tuple(a.shape), tuple(b.shape))
    out = _cache.get(key)
    if out is None:
        out = torch.mm(a, b)
        _cache[key] = out
    return out
