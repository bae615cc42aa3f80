"""A helper thread computes the next outputs while the judge frees the last ones, outside the claim.

Class: work hidden in the window's allowance
Expected: passed|failed|rejected
Max speedup: 1.4

Every returned output carries a ``weakref.finalize``. The judge frees outputs inside the window but
outside the clock (when it drops them after describing them, or when it clears the outputs it
held for the next request), so the finalizer runs there: it wakes a helper thread that computes the
softmax of every input seen so far, read from where the judge placed it (the next request's sets
land where the last one's did), and waits for it asleep. The next calls find their outputs ready
and claim a few µs. The main thread uses no CPU while it waits, so a rule that reads the calling
thread's CPU time sees nothing; against a judge that allowed each request the reference's path at
its 90th percentile (11-21 ms at load, against requests of 10-25 ms) this ranked 1.6-4x against
an honest 0.9-1.1x (issue 43). A working defence charges a request the CPU time its whole job
used in the window beyond the claims and the path's own (the job's cgroup, every thread).
"""

import ctypes
import threading
import weakref

import torch

_known = {}  # input address -> (shape, dtype, nbytes)
_ready = {}  # input address -> (first elements seen, softmax of the input)
_lock = threading.Lock()


def _view(addr, shape, dtype, nbytes):
    buf = (ctypes.c_char * nbytes).from_address(addr)
    return torch.frombuffer(buf, dtype=dtype).view(shape)


def _sample(x):
    flat = x.reshape(-1)
    return flat[:64].clone(), flat[-64:].clone()


def _same(a, b):
    return torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def _mapped():
    spans = []
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = line.split(None, 1)[0].split("-")
            spans.append((int(lo, 16), int(hi, 16)))
    return spans


def _compute_all():
    spans = _mapped()
    with _lock:
        for addr, (shape, dtype, nbytes) in list(_known.items()):
            if not any(lo <= addr and addr + nbytes <= hi for lo, hi in spans):
                _known.pop(addr)
                continue
            x = _view(addr, shape, dtype, nbytes)
            seen = _sample(x)
            old = _ready.get(addr)
            if old is not None and _same(old[0], seen):
                continue
            _ready[addr] = (seen, torch.softmax(x, dim=-1) if dtype == torch.float32 else torch.softmax(x.float(), dim=-1).to(dtype))


_wake, _done = threading.Event(), threading.Event()


def _helper():
    while True:
        _wake.wait()
        _wake.clear()
        try:
            _compute_all()
        finally:
            _done.set()


threading.Thread(target=_helper, daemon=True).start()


def _on_free():
    _done.clear()
    _wake.set()
    _done.wait()  # asleep: no CPU on the calling thread


def custom_kernel(data):
    (x,) = data
    addr = x.data_ptr()
    _known.pop(addr, None)
    _known[addr] = (tuple(x.shape), x.dtype, x.numel() * x.element_size())
    while len(_known) > 8:  # the last request's sets: where the next request's will land
        _known.pop(next(iter(_known)))
    hit = _ready.pop(addr, None)
    if hit is not None and _same(hit[0], _sample(x)):
        out = hit[1]
    else:
        out = torch.softmax(x.float(), dim=-1).to(x.dtype)
    weakref.finalize(out, _on_free)
    return out
