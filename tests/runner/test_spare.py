"""A child started ahead of its evaluation (runner/containment/spare.py): the next evaluation with the
same settings takes it and judges its own source in it; one for other settings, or dead, is not
used; nothing is left behind."""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelrank.runner.containment import isolation
from kernelrank.runner.containment.spare import Spare
from kernelrank.runner.judge.harness import EvalOptions, evaluate, start_spare
from kernelrank.runner.submission.zygote import Zygote
from kernelrank.vocab import Verdict
from tests.conftest import submission
from tests.runner.conftest import zygote_children


@pytest.fixture
def spare() -> Iterator[Spare]:
    s = Spare()
    yield s
    s.close()


@pytest.fixture
def ahead(options: EvalOptions, zygote: Zygote, spare: Spare) -> EvalOptions:
    return dataclasses.replace(options, zygote=zygote, spare=spare)


def _folders(options: EvalOptions) -> list[Path]:
    scratch = options.scratch_dir
    assert scratch is not None
    return sorted(scratch.iterdir()) if scratch.exists() else []


def _ready(spare: Spare) -> None:
    spare._join()  # the start's thread done: the child forked and its folder made


def test_the_next_evaluation_takes_the_child_and_judges_its_own_source_in_it(double, ahead, spare) -> None:
    start_spare(double.spec(), "test", "cpu", ahead)
    _ready(spare)
    (folder,) = _folders(ahead)
    assert not (folder / "submission.py").exists()  # no submission in it until an evaluation takes it
    wrong = evaluate(double.spec(), submission("double_wrong.py"), "test", "cpu", ahead)
    assert wrong.status is Verdict.failed and wrong.isolation["started_ahead"] is True, wrong.message
    start_spare(double.spec(), "test", "cpu", ahead)
    right = evaluate(double.spec(), submission("double_ok.py"), "test", "cpu", ahead)
    assert right.status is Verdict.passed and right.isolation["started_ahead"] is True, right.message
    assert right.isolation["start"] == "warm" and right.isolation["containment"] != "none"
    assert _folders(ahead) == []  # both children closed with their folders


def test_a_child_started_for_other_settings_is_closed_and_not_used(double, ahead, spare) -> None:
    start_spare(double.spec(), "test", "cpu", dataclasses.replace(ahead, log_limit=ahead.log_limit + 1))
    _ready(spare)
    assert len(_folders(ahead)) == 1
    result = evaluate(double.spec(), submission("double_ok.py"), "test", "cpu", ahead)
    assert result.status is Verdict.passed and result.isolation["started_ahead"] is False
    _ready(spare)  # the other child's close
    assert _folders(ahead) == []


@pytest.mark.parametrize("reported", [True, False], ids=["report-may-arrive", "report-held-back"])
def test_a_dead_child_is_not_used(double, ahead, spare, zygote, reported: bool) -> None:
    # the exit report crosses the zygote's socket after the process is gone: an evaluation taking
    # the child in between saw a live one and failed with error (seen once in CI)
    start_spare(double.spec(), "test", "cpu", ahead)
    _ready(spare)
    (pid,) = zygote_children(zygote, live=True)
    if not reported:
        spare._child.proc.poll = lambda: None  # the report held back
    os.kill(pid, signal.SIGKILL)
    end = time.monotonic() + 10
    while zygote_children(zygote, live=True) and time.monotonic() < end:
        time.sleep(0.01)
    result = evaluate(double.spec(), submission("double_ok.py"), "test", "cpu", ahead)
    assert result.status is Verdict.passed and result.isolation["started_ahead"] is False, result.message


def test_a_child_dying_after_the_take_gives_way_to_a_fresh_one(double, ahead, spare, zygote, monkeypatch) -> None:
    """Killed between the take and its ``hello`` (an operator, the OOM killer), a child started
    ahead has run no submitted code: the evaluation starts a fresh process, and the submission
    passes instead of getting ``error`` (it did before)."""
    start_spare(double.spec(), "test", "cpu", ahead)
    _ready(spare)
    real = Spare.take

    def take_then_die(self: Spare, key: tuple) -> object:
        child = real(self, key)
        # the process serving the requests: PID 1 of the child's namespace
        os.kill(isolation.inner_pid(child.proc.pid), signal.SIGKILL)
        end = time.monotonic() + 10
        while zygote_children(zygote, live=True) and time.monotonic() < end:
            time.sleep(0.01)
        return child

    monkeypatch.setattr(Spare, "take", take_then_die)
    result = evaluate(double.spec(), submission("double_ok.py"), "test", "cpu", ahead)
    assert result.status is Verdict.passed and result.isolation["started_ahead"] is False, result.message
    assert _folders(ahead) == []  # the dead child's folder removed with it


def test_closing_the_spare_ends_its_child_and_removes_its_folder(double, ahead, spare, zygote) -> None:
    start_spare(double.spec(), "test", "cpu", ahead)
    _ready(spare)
    assert len(_folders(ahead)) == 1 and zygote_children(zygote, live=True)
    spare.close()
    assert _folders(ahead) == [] and zygote_children(zygote, live=True) == []
    start_spare(double.spec(), "test", "cpu", ahead)  # closed: no more children started ahead
    _ready(spare)
    assert _folders(ahead) == []


def test_a_child_closed_while_it_starts_is_dead_when_its_kill_returns(double, ahead, monkeypatch) -> None:
    """Closed right after its fork (not yet in its groups nor its own process group), a child is
    killed by its pid: the kill's wait for it does not run out (it ran its whole 10 s, and a
    runner closing its spare waited that long)."""
    from kernelrank.runner.containment import sandbox

    alive_after: list[bool] = []
    real = sandbox.kill_group

    def kill_group(proc) -> None:
        real(proc)
        alive_after.append(proc.poll() is None)

    monkeypatch.setattr(sandbox, "kill_group", kill_group)
    for _ in range(3):
        fresh = Spare()
        start_spare(double.spec(), "test", "cpu", dataclasses.replace(ahead, spare=fresh))
        fresh.close()  # at once, once started: the child is still isolating itself
    assert alive_after == [False, False, False]
    assert _folders(ahead) == []


def test_a_leaderboard_run_of_the_runner_takes_the_child_its_public_run_left(double, monkeypatch, tmp_path) -> None:
    """The runner (run_job) starts a child ahead once each run's result is sent: a leaderboard
    job's secret run takes the one its public run left, and the next job the one after that."""
    from kernelrank.runner import warm_start, worker
    from kernelrank.settings import get_settings

    settings = get_settings().model_copy(update={"scratch_dir": tmp_path / "scratch", "runner_warm_start": True,
                                                 "runner_allow_unisolated_network": True})
    monkeypatch.setattr(worker, "get_settings", lambda: settings)
    reports: list[tuple[str, list]] = []
    job = {"submission_id": 7, "problem": double.spec().to_message(), "source": submission("double_ok.py"),
           "mode": "leaderboard", "device": "cpu", "runs": ["public", "secret"], "secret_seed": 1234}
    try:
        worker.run_job(job, "host:1:cpu", lambda task, args: reports.append((task, args)))
        worker.run_job({**job, "submission_id": 8}, "host:1:cpu", lambda task, args: reports.append((task, args)))
        results = [args[2] for task, args in reports if len(args) > 2 and isinstance(args[2], dict)]
        assert [r["status"] for r in results] == ["passed"] * 4, [r.get("message") for r in results]
        assert [r["isolation"]["started_ahead"] for r in results][1:] == [True, True, True]
    finally:
        warm_start.close_spares()
    assert not list((tmp_path / "scratch").iterdir())
