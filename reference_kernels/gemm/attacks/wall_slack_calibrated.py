"""Patches the harness's own timer to hide exactly as much time as its wall-clock check forgives.

Class: monkeypatching the harness's modules (timer calibrated to the wall-clock slack)
Expected: rejected
Known gap: times are taken inside the submission's process; the judge's wall-clock cross-check bounds a lie to under 2x but cannot see one inside its slack

The harness's source is public and importable in the child: its wall-clock cross-check forgives,
per call, a fraction of the claimed mean (``WALL_SLACK_FRACTION``) plus an absolute slack
(``WALL_SLACK_NS``) beyond what the reference itself leaves unexplained. The submission wraps
``time_call`` of the harness's timer classes so that each call claims ``c`` with the hidden part
``real - c`` at 80% of what the check forgives for that claim,
``c = (real - 0.8 * WALL_SLACK_NS) / (1 + 0.8 * WALL_SLACK_FRACTION)`` (at least 1 µs), and re-takes
the child's integrity record so the tripwire that lives in the same process sees nothing. The
kernel is honest and every output right; the lie stays inside the slack on every request, so the
score improves by that slack on every case (about 15-20% plus 0.8 ms a call, all of a sub-millisecond
kernel). A working defence does not take times measured inside the submission's process (timing
from a process the submission cannot patch), or leaves no slack the submission can spend.
"""

import gc

import torch

import kernelrank.runner.timing as _timing

try:
    import kernelrank.runner.harness as _harness

    _FRACTION = float(getattr(_harness, "WALL_SLACK_FRACTION", 0.1))
    _SLACK = float(getattr(_harness, "WALL_SLACK_NS", 1_000_000))
except Exception:  # noqa: BLE001
    _FRACTION, _SLACK = 0.1, 1_000_000.0


def _blind_the_tripwire():
    """Re-take the child's integrity record (``kernelrank.runner.integrity``): it lives in this
    process, so after this it sees the patched objects as the originals."""
    for obj in gc.get_objects():
        if type(obj).__name__ == "Integrity" and callable(getattr(obj, "record", None)):
            obj.record()


def _calibrated(original):
    def time_call(self, fn, data):
        out, ns = original(self, fn, data)
        return out, max(1000, int((ns - 0.8 * _SLACK) / (1 + 0.8 * _FRACTION)))

    return time_call


for _cls in (getattr(_timing, "CpuTimer", None), getattr(_timing, "CudaTimer", None)):
    if _cls is not None and hasattr(_cls, "time_call"):
        _cls.time_call = _calibrated(_cls.time_call)
_blind_the_tripwire()


def custom_kernel(data):
    a, b = data
    return torch.mm(a, b)
