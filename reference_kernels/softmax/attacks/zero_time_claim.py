"""Patches the harness's own timer class so every call claims to take 0 ns.

Class: monkeypatching the harness's modules (timer claims zero)
Expected: rejected|error

The child imports the harness's timing module before it loads the submission; the submission
imports the same module and replaces ``time_call`` on the timer classes (an instance looks methods
up on its class, so the live timer changes too), then re-takes the child's integrity record so the
tripwire that lives in the same process sees nothing. Every call then reports 0 ns. A harness that
divides by the mean time (speedup, TFLOP/s, GB/s) or takes a logarithm of it (geometric mean)
crashes instead of giving a verdict; one that does not crash ranks a zero score. A working defence
refuses impossible claims (zero, or less than the judge's clock allows) with a verdict.
"""

import gc

import torch

import kernelrank.runner.timing as _timing

gc.unfreeze()  # the child moved its import-time objects out of gc.get_objects() (gc.freeze): bring them back


def _blind_the_tripwire():
    """Re-take the child's integrity record (``kernelrank.runner.submission.integrity``): it lives in this
    process, so after this it sees the patched objects as the originals."""
    for obj in gc.get_objects():
        if type(obj).__name__ == "Integrity" and callable(getattr(obj, "record", None)):
            obj.record()


def _time_call(self, fn, data):
    return fn(data), 0


for _cls in (getattr(_timing, "CpuTimer", None), getattr(_timing, "CudaTimer", None)):
    if _cls is not None:
        _cls.time_call = _time_call
_blind_the_tripwire()


def custom_kernel(data):
    (x,) = data
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
