"""Jobs that must end (``kernelrank.services.jobs``), on a fresh SQLite database: the runner's
go-ahead counts starts and drops finished or duplicate jobs; the sweeper requeues jobs of
vanished runners and lost messages, and ends a job whose runners died on every attempt."""

from __future__ import annotations

from kernelrank.services.runners import Served

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

KERNEL = b"import torch\n\n\ndef custom_kernel(data):\n    return torch.softmax(data[0], dim=-1)\n"
LOST = 60.0


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from kernelrank.db import session as db_session
    from kernelrank.problems import load_all
    from kernelrank.services import problems
    from kernelrank.settings import get_settings

    monkeypatch.setenv("KERNELRANK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("KERNELRANK_DATABASE_URL", raising=False)

    def clear() -> None:
        get_settings.cache_clear()
        db_session.get_sessionmaker.cache_clear()
        db_session.get_engine.cache_clear()

    clear()
    db_session.migrate()
    with db_session.session_scope() as s:
        problems.sync_all(s, load_all())
    yield
    db_session.get_engine().dispose()
    clear()


def _submission(name: str = "u", mode: str = "test") -> int:
    from kernelrank.db.session import session_scope
    from kernelrank.services import submissions, users

    with session_scope() as s:
        user, _ = users.create_user(s, name)
        return submissions.create_submission(s, user, "softmax", "cpu", mode, KERNEL, "k.py", Served(frozenset({"cpu"})), 1 << 20,
                                             lambda job, queue, limit: None).id


def _beat(name: str, ago_s: float = 0.0) -> None:
    from kernelrank.db.models import Runner, utcnow
    from kernelrank.db.session import session_scope
    from kernelrank.services import runners

    with session_scope() as s:
        runners.heartbeat(s, name, "cpu", {}, "0")
        s.flush()
        row = s.query(Runner).filter_by(name=name).one()
        row.last_heartbeat = utcnow() - dt.timedelta(seconds=ago_s)


def _start(sid: int, runner: str, max_starts: int = 3) -> tuple[bool, str]:
    from kernelrank.db.session import session_scope
    from kernelrank.services.jobs import start_job

    with session_scope() as s:
        d = start_job(s, sid, runner, max_starts, LOST)
        return d.run, d.reason


def _state(sid: int) -> tuple[str, int, str]:
    from kernelrank.db.session import session_scope
    from kernelrank.services.submissions import get_submission

    with session_scope() as s:
        sub = get_submission(s, sid)
        return sub.status, sub.starts, sub.message


def _age(sid: int, started_s: float | None = None, dispatched_s: float | None = None) -> None:
    from kernelrank.db.models import Submission, utcnow
    from kernelrank.db.session import session_scope

    with session_scope() as s:
        sub = s.get(Submission, sid)
        if started_s is not None:
            sub.started_at = utcnow() - dt.timedelta(seconds=started_s)
        if dispatched_s is not None:
            sub.dispatched_at = utcnow() - dt.timedelta(seconds=dispatched_s)


def _sweep(pending: set[int] | None = frozenset(), max_starts: int = 3):
    from kernelrank.db.session import session_scope
    from kernelrank.services.jobs import sweep

    with session_scope() as s:
        return sweep(s, max_starts=max_starts, runner_lost_s=LOST, queued_lost_s=300.0,
                     pending=lambda queue: None if pending is None else set(pending))


def test_a_start_counts_an_attempt_and_a_finished_job_is_dropped(db: None) -> None:
    from kernelrank.control import record_result

    sid = _submission()
    assert _start(sid, "h:1:cpu") == (True, "")
    assert _state(sid)[:2] == ("running", 1)
    record_result(sid, "public", {"status": "passed", "message": "ok", "cases": []}, "h:1:cpu")
    run, reason = _start(sid, "h:2:cpu")
    assert not run and "already finished" in reason
    assert _state(sid)[:2] == ("passed", 1)


def test_a_copy_of_a_job_running_on_a_live_runner_is_dropped(db: None) -> None:
    sid = _submission()
    _beat("h:1:cpu")
    assert _start(sid, "h:1:cpu")[0]
    run, reason = _start(sid, "h:2:cpu")
    assert not run and "running on h:1:cpu" in reason
    assert _state(sid)[:2] == ("running", 1)


def test_a_job_whose_runner_died_every_time_ends_as_an_error(db: None) -> None:
    sid = _submission()
    for attempt in (1, 2, 3):  # each runner dies: no heartbeat row at all
        assert _start(sid, f"h:{attempt}:cpu") == (True, "")
    run, reason = _start(sid, "h:4:cpu")
    assert not run
    status, starts, message = _state(sid)
    assert (status, starts) == ("error", 3)
    assert message == reason and "the runner died 3 times running this job" in message
    assert _start(sid, "h:5:cpu")[0] is False  # and stays ended


def test_a_late_result_of_an_ended_job_is_not_recorded(db: None) -> None:
    from kernelrank.control import record_result

    sid = _submission()
    _start(sid, "h:1:cpu", max_starts=1)
    assert not _start(sid, "h:2:cpu", max_starts=1)[0]
    assert record_result(sid, "public", {"status": "passed", "message": "", "cases": []}, "h:1:cpu") is False
    assert _state(sid)[0] == "error"


def test_sweeper_requeues_the_job_of_a_vanished_runner(db: None) -> None:
    sid = _submission()
    _start(sid, "h:1:cpu")
    _beat("h:1:cpu", ago_s=LOST + 5)
    _age(sid, started_s=LOST + 30)
    report = _sweep()
    assert [j.submission_id for j in report.requeued] == [sid] and report.failed == []
    (job,) = report.requeued
    assert job.queue == "cpu" and job.message["submission_id"] == sid and job.time_limit > 0
    assert job.message["redelivered"] is True  # its runner asks before it starts it (runner/goahead.py)
    assert _state(sid)[:2] == ("queued", 1)
    assert _start(sid, "h:2:cpu") == (True, "")
    assert _state(sid)[:2] == ("running", 2)


def test_sweeper_leaves_running_jobs_of_live_runners_and_young_jobs(db: None) -> None:
    alive, young = _submission("a"), _submission("b")
    _start(alive, "h:1:cpu")
    _beat("h:1:cpu", ago_s=5)
    _age(alive, started_s=LOST + 30)
    _start(young, "h:9:cpu")  # never heard of, but started just now
    assert _sweep().requeued == []
    assert _state(alive)[0] == _state(young)[0] == "running"


def test_sweeper_ends_a_vanished_job_out_of_starts(db: None) -> None:
    sid = _submission()
    _start(sid, "h:1:cpu", max_starts=1)
    _age(sid, started_s=LOST + 30)
    report = _sweep(max_starts=1)
    assert report.requeued == [] and report.failed == [sid]
    status, _, message = _state(sid)
    assert status == "error" and "the runner died once running this job" in message


def test_sweeper_requeues_an_old_queued_job_only_when_its_message_is_gone(db: None) -> None:
    waiting, lost, fresh = _submission("a"), _submission("b"), _submission("c")
    _age(waiting, dispatched_s=400)
    _age(lost, dispatched_s=400)
    assert [j.submission_id for j in _sweep(pending={waiting}).requeued] == [lost]
    assert _sweep(pending={waiting}).requeued == []  # requeued just now: young again
    _age(lost, dispatched_s=400)
    assert _sweep(pending=None).requeued == []  # a broker that cannot be looked into: no guess
    assert _state(fresh)[0] == "queued"


def test_sweeper_requeues_a_job_that_outlived_its_time_limit_on_a_live_runner(db: None) -> None:
    """The runner is alive but the job was lost inside it (its time limit is long past)."""
    sid = _submission()
    _start(sid, "h:1:cpu", max_starts=2)
    _beat("h:1:cpu")
    _age(sid, started_s=10 * 24 * 3600)
    assert [j.submission_id for j in _sweep(max_starts=2).requeued] == [sid]
    _start(sid, "h:1:cpu", max_starts=2)
    _beat("h:1:cpu")
    _age(sid, started_s=10 * 24 * 3600)
    report = _sweep(max_starts=2)
    assert report.requeued == [] and report.failed == [sid]
    status, starts, message = _state(sid)
    assert (status, starts) == ("error", 2) and "outlived its time limit 2 times" in message


def test_the_advisory_scan_is_made_when_a_timed_job_starts_and_after_a_test_verdict(db: None) -> None:
    """kernelguard's scan (tens of ms) is stored by the go-ahead of a timed job (beside the judging's
    untimed start), and for a test job only once its verdict is committed: neither verdict waits."""
    from kernelrank.control import record_result
    from kernelrank.db.models import Submission
    from kernelrank.db.session import session_scope

    timed, test = _submission(mode="leaderboard"), _submission("v")
    assert _start(timed, "h:1:cpu") == (True, "") and _start(test, "h:1:cpu") == (True, "")
    with session_scope() as s:
        assert s.get(Submission, timed).guard["tool"] == "kernelguard"
        assert s.get(Submission, test).guard is None
    result = {"status": "passed", "mode": "test", "message": "ok", "cases": [], "logs": {"stdout": "", "stderr": ""}}
    assert record_result(test, "public", result, "h:1:cpu") is True
    with session_scope() as s:
        sub = s.get(Submission, test)
        assert sub.status == "passed" and sub.guard["tool"] == "kernelguard"
