"""The control tasks, called directly (as the control worker would) on a fresh SQLite database:
reports land through the service layer, and a second delivery changes nothing."""

from __future__ import annotations

from kernelrank.services.runners import Served

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

KERNEL = b"import torch\n\n\ndef custom_kernel(data):\n    return torch.softmax(data[0], dim=-1)\n"


@pytest.fixture
def control(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``kernelrank.control`` over a migrated database in ``tmp_path`` holding the real problems."""
    from kernelrank.db import session as db_session
    from kernelrank.queue import get_celery
    from kernelrank.settings import get_settings

    monkeypatch.setenv("KERNELRANK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("KERNELRANK_DATABASE_URL", raising=False)
    monkeypatch.delenv("KERNELRANK_BROKER_URL", raising=False)

    def clear() -> None:
        get_settings.cache_clear()
        get_celery.cache_clear()
        db_session.get_sessionmaker.cache_clear()
        db_session.get_engine.cache_clear()

    clear()
    from kernelrank import control as module
    from kernelrank.problems import load_all
    from kernelrank.services import problems

    db_session.migrate()
    with db_session.session_scope() as s:
        problems.sync_all(s, load_all())
    yield module
    db_session.get_engine().dispose()
    clear()


def _submission(mode: str = "test", user_name: str | None = None) -> int:
    from kernelrank.db.session import session_scope
    from kernelrank.services import submissions, users

    with session_scope() as s:
        user, _ = users.create_user(s, user_name or f"u{mode}")
        sub = submissions.create_submission(s, user, "softmax", "cpu", mode, KERNEL, "k.py", Served(frozenset({"cpu"})), 1 << 20,
                                            lambda job, queue, limit: None)
        return sub.id


def _result(status: str = "passed", score: float | None = None) -> dict[str, Any]:
    return {"status": status, "message": f"all {status}", "score_ns": score, "speedup": 1.0, "cases": [],
            "logs": {"stdout": "out", "stderr": ""}}


def _read(submission_id: int) -> tuple[str, bool, float | None, list[tuple[str, str]]]:
    from kernelrank.db.session import session_scope
    from kernelrank.services import submissions

    with session_scope() as s:
        sub = submissions.get_submission(s, submission_id)
        return sub.status, sub.ranked, sub.score_ns, [(r.kind, r.status) for r in sub.runs]


def test_job_started_then_one_result_finishes_a_test_submission(control: Any) -> None:
    sid = _submission()
    control.job_started(sid, "h:1:cpu")
    assert _read(sid)[0] == "running"
    assert control.record_result(sid, "public", _result(), "h:1:cpu") is True
    assert _read(sid) == ("passed", False, None, [("public", "passed")])
    control.job_started(sid, "h:1:cpu")  # a late or repeated start does not reopen it
    assert _read(sid)[0] == "passed"


def test_a_result_delivered_twice_is_recorded_once(control: Any) -> None:
    sid = _submission("leaderboard")
    assert control.record_result(sid, "public", _result(score=5e6), "h:1:cpu") is True
    assert _read(sid)[0] == "running"
    assert control.record_result(sid, "public", _result("failed"), "h:1:cpu") is False
    assert control.record_result(sid, "secret", _result(score=6e6), "h:1:cpu") is True
    assert control.record_result(sid, "secret", _result("error"), "h:1:cpu") is False
    assert _read(sid) == ("passed", True, 5e6, [("public", "passed"), ("secret", "passed")])


def test_results_for_unknown_submissions_or_kinds_are_dropped(control: Any) -> None:
    sid = _submission()
    assert control.record_result(999, "public", _result(), "h:1:cpu") is False
    assert control.record_result(sid, "bogus", _result(), "h:1:cpu") is False
    assert _read(sid)[3] == []


def test_heartbeat_registers_the_runner_and_drops_non_device_queues(control: Any) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services import runners

    control.heartbeat("h:1:cpu", "cpu", {"device": "cpu"}, "0.1.0", 3)
    control.heartbeat("h:2:x", "control", {}, "0.1.0", 0)
    with session_scope() as s:
        online = runners.online(s, 60)
        assert [(r.name, r.device, r.jobs_done) for r in online] == [("h:1:cpu", "cpu", 3)]
        assert runners.served_queues(s, 60) == {"cpu"}


def test_a_leaderboard_submission_whose_runs_disagree_is_sent_to_be_measured_again(
        control: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the default back-off the next measurement waits (no job now: the sweeper sends it when
    due, tests/api/test_remeasure.py). Without one the control worker sends its job after
    committing the result (attempt 2, same queue); when the broker refuses it, the submission
    stays ``queued`` for the sweeper."""
    from kernelrank.settings import get_settings

    sent: list[tuple[dict[str, Any], str, float]] = []
    monkeypatch.setattr(control, "send_job", lambda message, queue, limit: sent.append((message, queue, limit)))

    def run(speedup: float) -> dict[str, Any]:
        return {**_result(score=1e6 / speedup), "speedup": speedup, "speedup_ci": [speedup * 0.98, speedup * 1.02],
                "cases": [{"kind": "benchmark", "index": 0, "pairing": {"reference_run_ns": 1e6}}]}

    waits = _submission("leaderboard", "waits")
    control.record_result(waits, "public", run(2.0), "h:1:cpu", 1)
    assert control.record_result(waits, "secret", run(3.0), "h:1:cpu", 1) is True
    assert sent == [] and _read(waits)[:2] == ("queued", False)

    monkeypatch.setenv("KERNELRANK_REMEASURE_DELAY_SECONDS", "0")
    get_settings.cache_clear()
    sid = _submission("leaderboard")
    assert control.record_result(sid, "public", run(2.0), "h:1:cpu", 1) is True
    assert control.record_result(sid, "secret", run(3.0), "h:1:cpu", 1) is True
    assert [(m["submission_id"], m["attempt"], q) for m, q, _ in sent] == [(sid, 2, "cpu")]
    assert _read(sid)[:2] == ("queued", False)

    def refuse(message: dict[str, Any], queue: str, limit: float) -> None:
        raise ConnectionError("broker down")

    monkeypatch.setattr(control, "send_job", refuse)
    other = _submission("leaderboard", "another")
    control.record_result(other, "public", run(2.0), "h:1:cpu", 1)
    assert control.record_result(other, "secret", run(3.0), "h:1:cpu", 1) is True
    assert _read(other)[:2] == ("queued", False)
