"""Output cache keyed by the input's data pointer.

Class: output cache by data_ptr
Expected: failed|rejected
Timing: 3.0

Remembers the output computed for each address of ``a`` (with the shapes, so it never returns a
wrongly shaped tensor) and returns it whenever the same address comes back. A harness that reuses
its input buffers between timed calls, or refills them in place, gets the first output back every
time at the cost of a dictionary lookup (GPU MODE met this one). A working defence gives fresh
inputs, in fresh buffers or not, on every timed call and checks every output: once an address is
reused for new values, the cached output is stale and fails. Addresses come back only now and then
on the CPU (fresh buffers from the system allocator; on a GPU the caching allocator hands them back
all the time), so the test judges this attack with the problem's full per-case timing budget
(``Timing:``), which gives enough calls. ``rejected`` is expected too: the wall-clock check may end
the run before a stale output comes back.
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
