"""The queue in view (kernelrank/services/queueing.py): a queued submission's place in its device
queue and an estimated start, through the API, the page and the CLI's progress line; each queue's
oldest wait on the runners page and in ``/api/v1/runners``."""

from __future__ import annotations

import datetime as dt

from fastapi.testclient import TestClient

from kernelrank.cli.views import queue_text
from tests.api.conftest import World, passed_result, record, submit

API = "/api/v1"


def _auth(world: World, user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {world.tokens[user]}"}


def _queued(client: TestClient, world: World, user: str, mode: str = "test") -> int:
    r = submit(client, world.tokens[user], "softmax", mode=mode)
    assert r.status_code == 202, r.text
    return r.json()["id"]


def _age(sid: int, started_s: float, finished_s: float) -> None:
    """Make ``sid`` a finished job that started and ended that many seconds ago."""
    from kernelrank.db.models import Submission, utcnow
    from kernelrank.db.session import session_scope

    with session_scope() as s:
        sub = s.get(Submission, sid)
        now = utcnow()
        sub.started_at, sub.finished_at = now - dt.timedelta(seconds=started_s), now - dt.timedelta(seconds=finished_s)


def _start(sid: int) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services.submissions import mark_started

    with session_scope() as s:
        mark_started(s, sid, "runner-cpu-1")


def test_a_queued_submission_knows_how_many_jobs_are_ahead_of_it(client: TestClient, world: World) -> None:
    first, second, third = (_queued(client, world, u) for u in ("alice", "bob", "alice"))
    places = [client.get(f"{API}/submissions/{sid}").json()["queue_position"] for sid in (first, second, third)]
    assert places == [0, 1, 2]
    _start(first)  # running: no place; the others move up
    assert client.get(f"{API}/submissions/{first}").json()["queue_position"] is None
    assert client.get(f"{API}/submissions/{third}").json()["queue_position"] == 1
    mine = client.get(f"{API}/submissions", headers=_auth(world, "alice")).json()
    assert {s["id"]: s["queue_position"] for s in mine} == {first: None, third: 1}


def test_the_estimated_start_follows_the_queues_recent_job_times(client: TestClient, world: World) -> None:
    """Without history there is no estimate; with finished test jobs of 40 s each, a job behind one
    queued and one running for 10 s starts in about 40 + 30 s (one runner serves the queue)."""
    old = _queued(client, world, "bob")
    ahead, running, mine = (_queued(client, world, u) for u in ("bob", "bob", "alice"))
    assert client.get(f"{API}/submissions/{mine}").json()["estimated_start"] is None  # no history yet
    _start(old)
    record(old, "public", passed_result(1000.0, mode="test"))
    _age(old, started_s=100, finished_s=60)
    _start(running)
    _age_started(running, 10)
    body = client.get(f"{API}/submissions/{mine}").json()
    assert body["queue_position"] == 1
    start = dt.datetime.fromisoformat(body["estimated_start"])
    wait = (start - dt.datetime.now(dt.timezone.utc)).total_seconds()
    assert 60 <= wait <= 72, wait
    assert queue_text(body).startswith("1 job ahead; starts in about 2 min")
    page = client.get(f"/submissions/{mine}").text
    assert "1 job ahead; starts in about" in page
    assert client.get(f"{API}/submissions/{ahead}").json()["queue_position"] == 0


def _age_started(sid: int, seconds: float) -> None:
    from kernelrank.db.models import Submission, utcnow
    from kernelrank.db.session import session_scope

    with session_scope() as s:
        s.get(Submission, sid).started_at = utcnow() - dt.timedelta(seconds=seconds)


def test_the_runners_show_each_queues_oldest_wait(client: TestClient, world: World) -> None:
    _queued(client, world, "alice")
    body = client.get(f"{API}/runners").json()
    assert body["queues"]["cpu"] == 1 and 0 <= body["oldest_wait_s"]["cpu"] < 60
    assert "Oldest wait" in client.get("/runners").text


def test_the_cli_says_nothing_of_a_queue_it_was_not_told() -> None:
    assert queue_text({"status": "running", "queue_position": None}) == ""
    assert queue_text({"queue_position": 0}) == "next in its queue"
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    later = (now + dt.timedelta(seconds=30)).isoformat()
    assert queue_text({"queue_position": 3, "estimated_start": later}, now) == "3 jobs ahead; starts in under a minute"
