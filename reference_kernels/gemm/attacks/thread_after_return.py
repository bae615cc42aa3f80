"""Returns before the work is done: a background thread fills the output after the timer stopped.

Class: background threads finishing after return
Expected: rejected|failed

``custom_kernel`` allocates the output, hands ``torch.mm(a, b, out=c)`` to a worker thread and
returns ``c`` at once, so the timed call costs a queue put. The worker thread is started, and its
own OpenMP team created, while the submission loads, so a check for "threads started by the call"
sees nothing new. So that the output is complete when the harness copies it, the submission wraps
``torch.Tensor.detach`` (the first thing a copy of the output does) to wait for the pending product
first, and re-takes the child's integrity record so the tripwire that lives in the same process sees
nothing. Every output is correct; the claimed times are microseconds. A working defence measures
from the judge's side until the output is in hand, and rejects time that the claims do not explain.
"""

import gc
import queue
import threading

import torch

gc.unfreeze()  # the child moved its import-time objects out of gc.get_objects() (gc.freeze): bring them back

_jobs = queue.Queue()
_pending = {}
_detach = torch.Tensor.detach


def _blind_the_tripwire():
    """Re-take the child's integrity record (``kernelrank.runner.submission.integrity``): it lives in this
    process, so after this it sees the patched objects as the originals."""
    for obj in gc.get_objects():
        if type(obj).__name__ == "Integrity" and callable(getattr(obj, "record", None)):
            obj.record()


def _worker():
    while True:
        a, b, c, done = _jobs.get()
        try:
            torch.mm(a, b, out=c)
        finally:
            done.set()


def _wait_then_detach(self, *args, **kwargs):
    done = _pending.pop(id(self), None)
    if done is not None:
        done.wait()
    return _detach(self, *args, **kwargs)


def _submit(a, b, c):
    done = threading.Event()
    _jobs.put((a, b, c, done))
    return done


threading.Thread(target=_worker, daemon=True).start()
_warm = torch.ones(512, 512, dtype=torch.bfloat16)
_submit(_warm, _warm, torch.empty_like(_warm)).wait()  # the worker's thread team exists from now on
torch.Tensor.detach = _wait_then_detach
_blind_the_tripwire()


def custom_kernel(data):
    a, b = data
    c = torch.empty(a.shape[0], b.shape[1], dtype=torch.bfloat16, device=a.device)
    _pending[id(c)] = _submit(a, b, c)
    return c
