"""First call of a batch computes every input set of the batch; later calls return cached results.

Class: first-call batching with cached returns
Expected: rejected|failed|error

The judge sends a batch of fresh input sets in one request and the child calls the kernel once per
set. The kernel walks up the call stack to the child's request handler, takes the whole list of
input sets, computes all of them in one batched call on the first timed call, and answers every
later call of the batch from the cache in microseconds (each output its own tensor, so no check for
outputs sharing memory sees the batch). This is the exploit that took first place on GPU MODE's
leaderboard before it was removed: on a GPU one large launch of the whole batch beats many small
ones, and per-call times stop meaning anything. A working defence never lets the submission see an
input before the call that is timed on it (one input set per request, or input sets the submission
cannot reach). Where a timed call shows it no other input set, the cheat is defused and the
attack says so by raising (an honest fallback would only rank an honest, slower kernel).
"""

import sys

import torch

_ready = {}  # id(input set) -> (input set, output)


def _batch_of(data):
    frame = sys._getframe(1)
    while frame is not None:
        sets = frame.f_locals.get("sets")
        if isinstance(sets, list) and any(s is data for s in sets):
            return sets
        frame = frame.f_back
    return None


def _timed_call():
    """Whether this call was made by one of the child's timed operations (a batch: ``op_bench``;
    one call per request: ``op_go``)."""
    import inspect

    return any(f.function in ("op_bench", "op_go") for f in inspect.stack(0))


def custom_kernel(data):
    hit = _ready.pop(id(data), None)
    if hit is not None and hit[0] is data:
        return hit[1]
    sets = _batch_of(data) or [data]
    if _timed_call() and len(sets) < 2:
        raise RuntimeError("first-call batching defused: the timed call sees no other input set")
    (x,) = data
    same = [s for s in sets if s[0].shape == x.shape and s[0].dtype == x.dtype]
    stacked = torch.stack([s[0] for s in same]).float()
    # separate tensors (not views of one batch), so nothing sees outputs sharing memory
    outs = [o.clone() for o in torch.softmax(stacked, dim=-1).to(x.dtype).unbind(0)]
    mine = None
    for s, o in zip(same, outs):
        if s is data:
            mine = o
        else:
            _ready[id(s)] = (s, o)
    return mine
