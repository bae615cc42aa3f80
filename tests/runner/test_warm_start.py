"""The runner's warm start (runner/warm_start.py): a pool process starts its zygote once the
runner's start-up is over, and the runner says "ready" only after that, so its first job finds a
zygote that forks at once."""

from __future__ import annotations

import types

import pytest

from kernelrank.runner import warm_start
from kernelrank.runner.host.devices import cpu_threads


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """The module's events and zygotes as in a new worker (none made yet)."""
    for name in ("_ready", "_warming", "_warm"):
        monkeypatch.setattr(warm_start, name, None)
    monkeypatch.setattr(warm_start, "_zygotes", {})


def test_the_zygote_starts_only_after_the_start_up_and_is_ready_when_the_runner_is(fresh) -> None:
    settings = types.SimpleNamespace(runner_warm_start=True, cpu_threads=0)
    assert warm_start.wait_warm(0.0)  # no pool process began to warm up: nothing to wait for
    warm_start.prepare()
    thread = warm_start.start_when_ready("cpu", settings)
    assert thread is not None
    thread.join(0.5)
    assert thread.is_alive() and warm_start._zygotes == {}  # the start-up is not over: nothing started
    assert not warm_start.wait_warm(0.0)  # and the runner would not be ready yet
    warm_start.started()
    try:
        assert warm_start.wait_warm(120.0)
        zygote = warm_start._zygotes[("cpu", cpu_threads(0))]
        assert zygote.wait_ready(0.0) and zygote.matches("cpu", cpu_threads(0))
        assert warm_start.warm_zygote("cpu", settings) is zygote  # the first job takes that one
    finally:
        for z in warm_start._zygotes.values():
            z.close()


def test_with_warm_starts_off_nothing_starts_and_nothing_waits(fresh) -> None:
    settings = types.SimpleNamespace(runner_warm_start=False, cpu_threads=0)
    warm_start.prepare()
    assert warm_start.start_when_ready("cpu", settings) is None
    warm_start.started()
    assert warm_start.wait_warm(0.0)
    assert warm_start.warm_zygote("cpu", settings) is None and warm_start._zygotes == {}
