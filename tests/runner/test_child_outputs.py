"""The child's record of the previous output (runner/submission/child.py), in this process: it must catch
memory a submission kept and returned again, without keeping outputs alive itself."""

from __future__ import annotations

import gc

import torch

from kernelrank.runner.submission.child import PreviousOutput, _alias, _storages


def test_returning_the_same_tensor_is_caught() -> None:
    prev = PreviousOutput()
    cache = torch.ones(1000)
    prev.track(cache)
    assert "same tensor object" in (_alias(cache, [], prev, 2) or "")


def test_a_view_of_kept_memory_is_caught() -> None:
    prev = PreviousOutput()
    kept = torch.ones(1000)
    prev.track(kept[:])  # the tracked tensor object dies at once; its storage lives on in ``kept``
    gc.collect()
    assert "shares memory with the previous call's output" in (_alias(kept[10:], [], prev, 2) or "")


def test_freed_memory_reused_by_the_allocator_is_not_an_alias() -> None:
    prev = PreviousOutput()
    out = torch.ones(1 << 20)
    span = _storages(out)
    prev.track(out)
    del out
    gc.collect()
    assert prev.live_span() == []  # nothing of the previous output is held
    again = torch.empty(1 << 20)
    assert _alias(again, [], prev, 2) is None, (span, _storages(again))


def test_input_aliasing_is_caught() -> None:
    x = torch.ones(10)
    assert "shares memory with an input" in (_alias(x[2:], _storages((x,)), PreviousOutput(), 1) or "")
