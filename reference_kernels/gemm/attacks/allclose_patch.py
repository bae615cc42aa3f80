"""Patches torch's comparison functions to always agree, then returns uninitialised memory.

Class: monkeypatching torch.allclose (and the other comparisons)
Expected: failed

Replaces ``torch.allclose``, ``torch.isclose``, ``torch.equal``, ``torch.testing.assert_close`` and
the matching ``Tensor`` methods with versions that report a perfect match, then returns
``torch.empty`` of the right shape without computing anything. A harness that compares outputs
inside the submission's process (KernelBench, early GPU MODE evals) reports "correct" at the
speed of an allocation. A working defence compares in the judge's own process, on a copy of the
output, with code the submission cannot touch.
"""

import torch
import torch.testing


def _agree(*args, **kwargs):
    return True


def _all_close(a, b, *args, **kwargs):
    return torch.ones(torch.broadcast_shapes(a.shape, b.shape), dtype=torch.bool)


def _assert_close(*args, **kwargs):
    return None


torch.allclose = _agree
torch.equal = _agree
torch.isclose = _all_close
torch.testing.assert_close = _assert_close
torch.Tensor.allclose = _agree
torch.Tensor.equal = _agree
torch.Tensor.isclose = _all_close


def custom_kernel(data):
    a, b = data
    return torch.empty(a.shape[0], b.shape[1], dtype=torch.bfloat16, device=a.device)
