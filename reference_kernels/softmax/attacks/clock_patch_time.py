"""Slows the clock the timer reads a thousandfold: every call claims a thousandth of its real time.

Class: monkeypatching time
Expected: rejected

The child times each call with ``time.perf_counter_ns`` read before and after. The submission
replaces ``time.perf_counter_ns`` with a clock that runs 1000x slower and, since a timer may have
kept a reference to the real function, finds every object attribute that holds it (through ``gc``)
and swaps it too. The kernel itself is honest and correct, so every check passes and the claimed
mean is 1000x too small: a ranked score 1000x better than the truth. A working defence never trusts
a time measured inside the submission's process without bounding it by the judge's own clock
tightly enough that a 1000x lie (here ~50 ms hidden per call) cannot fit.
"""

import gc
import time
import warnings

import torch

gc.unfreeze()  # the child moved its import-time objects out of gc.get_objects() (gc.freeze): bring them back

_real = time.perf_counter_ns
_origin = _real()


def _slow_clock():
    return _origin + (_real() - _origin) // 1000


time.perf_counter_ns = _slow_clock
warnings.simplefilter("ignore")
for _obj in gc.get_objects():
    _d = getattr(_obj, "__dict__", None)
    if isinstance(_d, dict) and _d is not globals():
        for _k, _v in list(_d.items()):
            if _v is _real:
                try:
                    setattr(_obj, _k, _slow_clock)
                except (AttributeError, TypeError):
                    pass


def custom_kernel(data):
    (x,) = data
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
