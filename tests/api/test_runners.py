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
    # one started; the H100 went offline a minute ago: its queue still takes submissions, which wait
    assert body["queues"] == {"cpu": 2, "cuda-h100": 0}
    assert [(r["name"], r["online"]) for r in body["runners"]] == [("runner-cpu-1", True), ("runner-h100-1", False)]


def test_a_runner_that_says_it_stops_is_offline_at_once(client: TestClient, world: World) -> None:
    """The stop message (the runner's last heartbeat, online false) makes it offline now,
    not runner_online_seconds later; it keeps the device facts it reported; a new heartbeat under
    the same name (a restarted container) brings it back."""
    from kernelrank import control
    from kernelrank.db.session import session_scope
    from kernelrank.services import runners

    control.heartbeat("runner-cpu-1", "cpu", {}, "0.1.0", 4, False)  # what the control worker runs
    [runner] = client.get("/api/v1/runners").json()["runners"]
    assert runner["online"] is False and runner["stopped_at"] and runner["jobs_done"] == 4
    assert runner["info"] == {"name": "test cpu", "threads": 4}
    with session_scope() as s:
        assert runners.served_queues(s, 60.0) == set()
    r = submit(client, world.tokens["alice"])  # a restart: the queue takes it, and says it waits
    assert r.status_code == 202 and "no runner of cpu is online now" in r.json()["message"]
    assert "(stopped " in client.get("/runners").text

    control.heartbeat("runner-cpu-1", "cpu", {"name": "test cpu", "threads": 4}, "0.1.0", 4)
    [runner] = client.get("/api/v1/runners").json()["runners"]
    assert runner["online"] is True and runner["stopped_at"] is None
    assert submit(client, world.tokens["alice"]).status_code == 202


def test_the_runners_page_shows_device_versions_and_ceilings(client: TestClient, world: World) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services import runners

    info = {"device": "cpu", "name": "Intel(R) Xeon(R) Gold 6338", "memory_bytes": 16 * 2**30, "threads": 8,
            "torch": "2.13.0+cpu", "triton": "3.9.0", "driver": None,
            "ceilings": {"copy_gbps": 18.4, "matmul_tflops": {"float32": 0.0781, "bfloat16": 0.774}}}
    with session_scope() as s:
        runners.heartbeat(s, "runner-cpu-1", "cpu", info, "0.1.0")
    html = client.get("/runners").text
    row = html[html.index('<tr data-runner="runner-cpu-1">'):]
    row = row[:row.index("</tr>")]
    for text in ("Intel(R) Xeon(R) Gold 6338", "<td>8</td>", "16.0 GiB", "2.13.0+cpu", "3.9.0", "18.4 GB/s",
                 "float32 78.1 GFLOP/s", "bfloat16 774 GFLOP/s"):
        assert text in row, text
    assert client.get("/api/v1/runners").json()["runners"][0]["info"]["ceilings"]["copy_gbps"] == 18.4
