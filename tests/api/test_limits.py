"""Per-user limits: the concurrent-job limit and the hourly quota answer 429 with Retry-After;
failed and cancelled submissions do not count; admins are exempt; simultaneous requests of one
user cannot both take the last slot."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import Recorder, World, passed_result, record, submit


@pytest.fixture
def limited(world: World, dispatched: Recorder, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., TestClient]]:
    """``limited(per_hour, concurrent)``: a client of an app with those limits."""
    from kernelrank.api.app import create_app
    from kernelrank.api.deps import get_dispatch
    from kernelrank.settings import get_settings

    clients: list[TestClient] = []

    def make(per_hour: int = 0, concurrent: int = 0) -> TestClient:
        monkeypatch.setenv("KERNELRANK_RATE_SUBMISSIONS_PER_HOUR", str(per_hour))
        monkeypatch.setenv("KERNELRANK_RATE_CONCURRENT_JOBS", str(concurrent))
        get_settings.cache_clear()
        app = create_app()
        app.dependency_overrides[get_dispatch] = lambda: dispatched
        c = TestClient(app)
        c.__enter__()
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.__exit__(None, None, None)


def _set(submission_id: int, **values) -> None:
    from kernelrank.db.models import Submission
    from kernelrank.db.session import session_scope

    with session_scope() as s:
        sub = s.get(Submission, submission_id)
        for k, v in values.items():
            setattr(sub, k, v)


def _ago(minutes: float) -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=minutes)


def test_concurrent_limit_answers_429_until_a_job_finishes(limited, world: World) -> None:
    c = limited(concurrent=2)
    ids = [submit(c, world.tokens["alice"], mode="test").json()["id"] for _ in range(2)]
    r = submit(c, world.tokens["alice"], mode="test")
    assert r.status_code == 429
    assert r.headers["Retry-After"] == "30"
    assert "2 submissions queued or running" in r.json()["detail"] and "limit is 2" in r.json()["detail"]
    # another user is not affected
    assert submit(c, world.tokens["bob"], mode="test").status_code == 202
    # a running job still holds its slot; a finished one frees it
    _set(ids[0], status="running")
    assert submit(c, world.tokens["alice"], mode="test").status_code == 429
    record(ids[0], "public", passed_result(100.0))
    assert submit(c, world.tokens["alice"], mode="test").status_code == 202


def test_cancelling_frees_a_concurrent_slot(limited, world: World) -> None:
    c = limited(concurrent=1)
    first = submit(c, world.tokens["alice"], mode="test").json()["id"]
    assert submit(c, world.tokens["alice"], mode="test").status_code == 429
    assert c.post(f"/api/v1/submissions/{first}/cancel", headers=world.auth("alice")).status_code == 200
    assert submit(c, world.tokens["alice"], mode="test").status_code == 202


def test_hourly_quota_skips_failed_and_cancelled_and_says_when_to_retry(limited, world: World) -> None:
    c = limited(per_hour=3)
    ids = [submit(c, world.tokens["alice"], mode="test").json()["id"] for _ in range(3)]
    r = submit(c, world.tokens["alice"], mode="test")
    assert r.status_code == 429
    assert "3 submissions in the last hour" in r.json()["detail"]
    # a failed verdict and a cancelled submission give their quota back
    record(ids[1], "public", {**passed_result(1.0), "status": "failed", "message": "wrong answer"})
    assert c.post(f"/api/v1/submissions/{ids[2]}/cancel", headers=world.auth("alice")).status_code == 200
    assert submit(c, world.tokens["alice"], mode="test").status_code == 202
    assert submit(c, world.tokens["alice"], mode="test").status_code == 202
    # full again: Retry-After is when the oldest counted submission (50 minutes old) leaves the window
    _set(ids[0], created_at=_ago(50))
    r = submit(c, world.tokens["alice"], mode="test")
    assert r.status_code == 429
    assert 595 <= int(r.headers["Retry-After"]) <= 600
    # older than an hour: it no longer counts
    _set(ids[0], created_at=_ago(61))
    assert submit(c, world.tokens["alice"], mode="test").status_code == 202


def test_passed_submissions_count_against_the_hourly_quota(limited, world: World) -> None:
    c = limited(per_hour=1)
    sid = submit(c, world.tokens["alice"], mode="test").json()["id"]
    record(sid, "public", passed_result(100.0))
    assert submit(c, world.tokens["alice"], mode="test").status_code == 429


def test_admins_are_exempt(limited, world: World) -> None:
    c = limited(per_hour=1, concurrent=1)
    assert all(submit(c, world.tokens["root"], mode="test").status_code == 202 for _ in range(3))


def test_zero_means_no_limit(limited, world: World) -> None:
    c = limited(per_hour=0, concurrent=0)
    assert all(submit(c, world.tokens["alice"], mode="test").status_code == 202 for _ in range(5))


@pytest.mark.parametrize("locked", [True, False], ids=["with-lock", "without-lock"])
def test_simultaneous_submissions_cannot_overshoot(world: World, monkeypatch: pytest.MonkeyPatch,
                                                   locked: bool) -> None:
    """Eight threads submit at once for a user with 3 slots: exactly 3 get in with the user lock.
    Without it (the control case) the race is real and more get in, so the lock is what works."""
    from sqlalchemy import func, select

    from kernelrank.db.models import ProblemRevision, Submission, User
    from kernelrank.db.session import session_scope
    from kernelrank.services import limits

    if not locked:
        monkeypatch.setattr(limits, "lock_user", lambda session, user_id: None)
    with session_scope() as s:
        alice_id = s.scalar(select(User.id).where(User.name == "alice"))
        rev_id = s.scalar(select(ProblemRevision.id).limit(1))
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def attempt() -> None:
        barrier.wait()
        try:
            with session_scope() as s:
                user = s.get(User, alice_id)
                limits.check_submission(s, user, limits.Limits(per_hour=0, concurrent=3))
                time.sleep(0.05)  # the work between the check and the insert (validation, dispatch)
                s.add(Submission(user_id=alice_id, problem_revision_id=rev_id, device="cpu", mode="test",
                                 language="pytorch", code="x", code_sha256="0" * 64, status="queued"))
            outcomes.append("accepted")
        except limits.RateLimited:
            outcomes.append("limited")

    threads = [threading.Thread(target=attempt) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    with session_scope() as s:
        stored = s.scalar(select(func.count()).select_from(Submission).where(Submission.user_id == alice_id))
    assert stored == outcomes.count("accepted")
    if locked:
        assert outcomes.count("accepted") == 3 and outcomes.count("limited") == 5
    else:
        assert outcomes.count("accepted") > 3
