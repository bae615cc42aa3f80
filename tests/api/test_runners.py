"""GET /api/v1/runners: runners with their online flag, and queued submissions per device."""

from __future__ import annotations

import datetime as dt

from fastapi.testclient import TestClient

from tests.api.conftest import World, submit


def test_runners_and_queue_depths(client: TestClient, world: World) -> None:
    from kernelrank.db.models import Runner
    from kernelrank.db.session import session_scope
    from kernelrank.services import runners, submissions
    from kernelrank.settings import get_settings

    body = client.get("/api/v1/runners").json()
    assert body["queues"] == {"cpu": 0}
    [runner] = body["runners"]
    assert runner["name"] == "runner-cpu-1" and runner["device"] == "cpu" and runner["online"] is True
    assert runner["info"] == {"name": "test cpu", "threads": 4}
    assert runner["version"] == "0.1.0" and runner["jobs_done"] == 3
    assert runner["last_heartbeat"].endswith(("Z", "+00:00"))

    ids = [submit(client, world.tokens[u]).json()["id"] for u in ("alice", "alice", "bob")]
    with session_scope() as s:
        submissions.mark_started(s, ids[0], "runner-cpu-1")
        runners.heartbeat(s, "runner-h100-1", "cuda-h100", {}, "0.1.0")
        stale = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=get_settings().runner_online_seconds + 5)
        s.query(Runner).filter(Runner.name == "runner-h100-1").one().last_heartbeat = stale

    body = client.get("/api/v1/runners").json()
    assert body["queues"] == {"cpu": 2}  # one started; the offline H100 serves nothing
    assert [(r["name"], r["online"]) for r in body["runners"]] == [("runner-cpu-1", True), ("runner-h100-1", False)]
