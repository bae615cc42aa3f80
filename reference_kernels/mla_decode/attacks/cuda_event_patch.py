"""Replaces ``torch.cuda.Event`` with an event that always reports 1 µs, and times itself with it.

Class: monkeypatching torch.cuda.Event
Expected: rejected

On a GPU the harness times each call with a pair of CUDA events. The submission replaces
``torch.cuda.Event`` (and ``torch.cuda.synchronize``, so nothing waits for the work) with a fake
whose ``elapsed_time`` is always 0.001 ms, patches any live timer object that kept a reference to
the real class, and installs an event-timed timer in the child's worker (found through ``gc``) built
on the fake, so the patch bites on a CPU runner too, where the harness would otherwise read
``perf_counter_ns``; then it re-takes the child's integrity record, so the tripwire that lives in
the same process sees nothing. The kernel is honest and correct; every call claims 1 µs. A working defence
bounds every claimed time by the judge's own clock (or times in a process the submission cannot
touch), so a call that took tens of milliseconds cannot claim 1 µs.
"""

import gc

import torch
import torch.cuda

gc.unfreeze()  # the child moved its import-time objects out of gc.get_objects() (gc.freeze): bring them back

PAGE_SIZE = 64
D_V = 512


class FakeEvent:
    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        pass

    def record(self, stream=None):
        pass

    def wait(self, stream=None):
        pass

    def query(self):
        return True

    def synchronize(self):
        pass

    def elapsed_time(self, end_event):
        return 0.001  # milliseconds


def _no_sync(device=None):
    return None


class EventTimer:
    """A timer that measures with ``torch.cuda.Event``, i.e. with the fake."""

    def __init__(self, device):
        self.device = device

    def time_call(self, fn, data):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = fn(data)
        end.record()
        end.synchronize()
        return out, int(start.elapsed_time(end) * 1e6)

    def synchronize(self):
        torch.cuda.synchronize()


_real_event = torch.cuda.Event
torch.cuda.Event = FakeEvent
torch.cuda.synchronize = _no_sync
for _obj in gc.get_objects():
    _d = getattr(_obj, "__dict__", None)
    if not isinstance(_d, dict) or _d is globals():
        continue
    for _k, _v in list(_d.items()):
        if _v is _real_event:
            _d[_k] = FakeEvent
    if type(_obj).__name__ == "ChildLoop" and hasattr(_d.get("timer"), "time_call"):  # the child's request loop
        _obj.timer = EventTimer(getattr(_d["timer"], "device", "cpu"))
for _obj in gc.get_objects():  # the tripwire lives in this process: re-take its record
    if type(_obj).__name__ == "Integrity" and callable(getattr(_obj, "record", None)):
        _obj.record()


def custom_kernel(data):
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
