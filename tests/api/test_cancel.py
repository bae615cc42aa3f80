"""Cancelling a queued submission: who may, when it is too late, and that a runner's later
reports about it are dropped."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import World, passed_result, submit


def _cancel(client: TestClient, world: World, sid: int, user: str | None):
    headers = world.auth(user) if user else {}
    return client.post(f"/api/v1/submissions/{sid}/cancel", headers=headers)


def test_the_owner_cancels_a_queued_submission(client: TestClient, world: World) -> None:
    sid = submit(client, world.tokens["alice"], mode="test").json()["id"]
    r = _cancel(client, world, sid, "alice")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "cancelled" and body["message"] == "cancelled by alice"
    assert body["finished_at"] is not None and body["code"] is not None
    assert client.get(f"/api/v1/submissions/{sid}").json()["status"] == "cancelled"
    listed = client.get("/api/v1/submissions", params={"status": "cancelled"}, headers=world.auth("alice")).json()
    assert [s["id"] for s in listed] == [sid]


def test_only_the_owner_or_an_admin_may_cancel(client: TestClient, world: World) -> None:
    sid = submit(client, world.tokens["alice"], mode="test").json()["id"]
    assert _cancel(client, world, sid, None).status_code == 401
    r = _cancel(client, world, sid, "bob")
    assert r.status_code == 403 and "owner or an admin" in r.json()["detail"]
    assert client.get(f"/api/v1/submissions/{sid}").json()["status"] == "queued"
    assert _cancel(client, world, sid, "root").json()["message"] == "cancelled by root"
    assert _cancel(client, world, 999999, "alice").status_code == 404


def test_too_late_once_running_or_finished(client: TestClient, world: World) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services.submissions import mark_started

    sid = submit(client, world.tokens["alice"], mode="test").json()["id"]
    with session_scope() as s:
        mark_started(s, sid, "runner-cpu-1")
    r = _cancel(client, world, sid, "alice")
    assert r.status_code == 409 and "is running" in r.json()["detail"]
    other = submit(client, world.tokens["alice"], mode="test").json()["id"]
    assert _cancel(client, world, other, "alice").status_code == 200
    r = _cancel(client, world, other, "alice")
    assert r.status_code == 409 and "is cancelled" in r.json()["detail"]


def test_a_runners_reports_after_cancelling_are_dropped(client: TestClient, world: World) -> None:
    from kernelrank import control

    sid = submit(client, world.tokens["alice"], mode="leaderboard").json()["id"]
    assert _cancel(client, world, sid, "alice").status_code == 200
    # the runner took the job anyway: job_started and both results arrive through the control tasks
    control.job_started(sid, "runner-cpu-1")
    assert control.record_result(sid, "public", passed_result(100.0), "runner-cpu-1") is False
    assert control.record_result(sid, "secret", passed_result(100.0), "runner-cpu-1") is False
    body = client.get(f"/api/v1/submissions/{sid}", headers=world.auth("alice")).json()
    assert body["status"] == "cancelled" and body["runs"] == [] and body["ranked"] is False
    assert client.get("/api/v1/leaderboards/softmax/cpu").json()["rows"] == []
