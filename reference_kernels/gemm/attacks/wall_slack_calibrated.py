"""Patches the harness's own timer to hide as much time as an earlier wall-clock check forgave.

Class: monkeypatching the harness's modules (timer calibrated to the wall-clock slack)
Expected: rejected
Message: no longer those it started with

The harness's source is public and importable in the child. Its first wall-clock cross-check
timed batches of calls with their data on the judge's clock and forgave, per call, a fraction of
the claimed mean plus an absolute slack beyond what the reference left unexplained; this
submission wraps ``time_call`` of the harness's timer classes so that each call claims
``c = (real - 0.8 * WALL_SLACK_NS) / (1 + 0.8 * WALL_SLACK_FRACTION)`` (at least 1 µs) and
re-takes the child's integrity record so the tripwire that lives in the same process sees nothing.
The kernel is honest and every output right; against that check the lie stayed inside the slack
on every request (about 15-20% plus 0.8 ms a call).
Two defences now stand. The judge compares the fingerprint of the watched functions in every
answer with the one the child sent before the submission was imported: re-taking the record
inside the child does not change that, so the run is rejected. And were the fingerprint forged
too, the lie would buy nothing: each timed call is its own data-free request, and a call counts
for at least the judge's window less the reference's overhead and a 30 µs jitter allowance
(``judged_times``); measured with the fingerprint check off, this attack passed at 0.99x the
kernel's honest time, with the judge's figures on every request.
"""

import gc

import torch

import kernelrank.runner.timing as _timing

gc.unfreeze()  # the child moved its import-time objects out of gc.get_objects() (gc.freeze): bring them back

try:
    import kernelrank.runner.judge.harness as _harness

    _FRACTION = float(getattr(_harness, "WALL_SLACK_FRACTION", 0.1))
    _SLACK = float(getattr(_harness, "WALL_SLACK_NS", 1_000_000))
except Exception:  # noqa: BLE001
    _FRACTION, _SLACK = 0.1, 1_000_000.0


def _blind_the_tripwire():
    """Re-take the child's integrity record (``kernelrank.runner.submission.integrity``): it lives in this
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
