"""Moderation over the API: disqualify (leaves the ranking, reason shown to the author),
reinstate, and requeue (dispatched again as a new attempt, recorded once)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import Recorder, World, passed_result, record, submit


def ranked_submission(client: TestClient, world: World, user: str, score: float) -> int:
    sid = submit(client, world.tokens[user], "softmax").json()["id"]
    record(sid, "public", passed_result(score))
    record(sid, "secret", passed_result(score + 1))
    return sid


def board(client: TestClient) -> list[tuple[str, int]]:
    return [(r["user"], r["submission_id"]) for r in client.get("/api/v1/leaderboards/softmax/cpu").json()["rows"]]


def test_disqualify_takes_a_submission_off_the_board_and_tells_its_author_why(
        client: TestClient, world: World) -> None:
    fast = ranked_submission(client, world, "alice", 100.0)
    slow = ranked_submission(client, world, "bob", 900.0)
    assert board(client) == [("alice", fast), ("bob", slow)]

    r = client.post(f"/api/v1/admin/submissions/{fast}/disqualify", json={"reason": "caches outputs across calls"},
                    headers=world.auth("root"))
    assert r.status_code == 200, r.text
    assert r.json()["disqualified"] is True and r.json()["ranked"] is False
    assert board(client) == [("bob", slow)]

    author = client.get(f"/api/v1/submissions/{fast}", headers=world.auth("alice")).json()
    assert author["disqualified"] is True and author["disqualified_reason"] == "caches outputs across calls"
    assert author["status"] == "passed"  # the verdict stays; only the ranking changes
    other = client.get(f"/api/v1/submissions/{fast}", headers=world.auth("bob")).json()
    assert other["disqualified"] is True and other["disqualified_reason"] is None
    anonymous = client.get(f"/api/v1/submissions/{fast}")
    assert "caches outputs" not in anonymous.text
    mine = client.get("/api/v1/submissions", params={"disqualified": "true"}, headers=world.auth("alice")).json()
    assert [s["id"] for s in mine] == [fast] and mine[0]["disqualified_reason"] == "caches outputs across calls"

    # a second run arriving later (redelivery) cannot rank it again
    from kernelrank.db.session import session_scope
    from kernelrank.services.submissions import record_run

    with session_scope() as s:
        assert record_run(s, fast, "public", passed_result(50.0), "runner-cpu-1") is False
    assert board(client) == [("bob", slow)]

    r = client.post(f"/api/v1/admin/submissions/{fast}/reinstate", headers=world.auth("root"))
    assert r.status_code == 200 and r.json()["disqualified"] is False and r.json()["ranked"] is True
    assert board(client) == [("alice", fast), ("bob", slow)]


def test_disqualify_needs_an_admin_and_a_reason(client: TestClient, world: World) -> None:
    sid = ranked_submission(client, world, "alice", 100.0)
    url = f"/api/v1/admin/submissions/{sid}/disqualify"
    assert client.post(url, json={"reason": "x"}, headers=world.auth("bob")).status_code == 403
    assert client.post(url, json={"reason": "x"}, headers=world.auth("alice")).status_code == 403  # not even one's own
    assert client.post(url, json={"reason": "x"}).status_code == 401
    assert client.post(url, json={"reason": "   "}, headers=world.auth("root")).status_code == 422
    assert client.post(url, json={}, headers=world.auth("root")).status_code == 422
    assert client.post("/api/v1/admin/submissions/9999/disqualify", json={"reason": "x"},
                       headers=world.auth("root")).status_code == 404
    assert board(client) == [("alice", sid)]


def test_requeue_dispatches_again_and_the_result_is_recorded_once(
        client: TestClient, world: World, dispatched: Recorder) -> None:
    from kernelrank.db.models import Run
    from kernelrank.db.session import session_scope

    sid = ranked_submission(client, world, "alice", 400.0)
    assert len(dispatched.calls) == 1 and dispatched.calls[0][0]["attempt"] == 1

    r = client.post(f"/api/v1/admin/submissions/{sid}/requeue", headers=world.auth("root"))
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "queued" and r.json()["attempt"] == 2 and r.json()["runs"] == []
    assert len(dispatched.calls) == 2
    job, queue, limit = dispatched.calls[1]
    assert job["submission_id"] == sid and job["attempt"] == 2 and queue == "cpu" and limit > 0
    assert job["secret_seed"] == world.seeds["softmax"] and job["runs"] == ["public", "secret"]
    assert board(client) == []  # not ranked until the new attempt's runs are in

    record(sid, "public", passed_result(300.0))
    record(sid, "secret", passed_result(301.0))
    # a duplicate delivery of the new attempt's result is ignored
    from kernelrank.services.submissions import record_run

    with session_scope() as s:
        assert record_run(s, sid, "public", passed_result(1.0), "runner-cpu-1") is False

    rows = client.get("/api/v1/leaderboards/softmax/cpu").json()["rows"]
    assert [(r["submission_id"], r["score_ns"]) for r in rows] == [(sid, 300.0)]  # once, with the new score
    sub = client.get(f"/api/v1/submissions/{sid}", headers=world.auth("alice")).json()
    assert sub["status"] == "passed" and sub["attempt"] == 2
    assert [(r["kind"], r["attempt"], r["score_ns"]) for r in sub["runs"]] == [("public", 2, 300.0), ("secret", 2, 301.0)]
    with session_scope() as s:  # the first attempt's runs are kept as history
        runs = [(r.attempt, r.kind) for r in s.query(Run).filter(Run.submission_id == sid).order_by(Run.id)]
    assert runs == [(1, "public"), (1, "secret"), (2, "public"), (2, "secret")]


def test_requeue_of_a_queued_submission_needs_force(client: TestClient, world: World, dispatched: Recorder) -> None:
    sid = submit(client, world.tokens["alice"], "softmax").json()["id"]
    r = client.post(f"/api/v1/admin/submissions/{sid}/requeue", headers=world.auth("root"))
    assert r.status_code == 409 and "force" in r.json()["detail"]
    assert len(dispatched.calls) == 1
    r = client.post(f"/api/v1/admin/submissions/{sid}/requeue", params={"force": "true"}, headers=world.auth("root"))
    assert r.status_code == 202 and r.json()["attempt"] == 2
    assert len(dispatched.calls) == 2


def test_requeue_needs_an_admin(client: TestClient, world: World, dispatched: Recorder) -> None:
    sid = ranked_submission(client, world, "alice", 100.0)
    assert client.post(f"/api/v1/admin/submissions/{sid}/requeue", headers=world.auth("alice")).status_code == 403
    assert client.post("/api/v1/admin/submissions/9999/requeue", headers=world.auth("root")).status_code == 404
    assert len(dispatched.calls) == 1


def test_a_speedup_past_the_review_bound_is_marked_until_an_admin_clears_it(
        client: TestClient, world: World) -> None:
    sid = submit(client, world.tokens["alice"], "softmax").json()["id"]
    flagged = dict(passed_result(100.0), needs_review=True,
                   review_reason="speedup 80.0x over the reference is beyond this problem's review bound of 20x")
    record(sid, "public", flagged)
    record(sid, "secret", passed_result(101.0))
    honest = ranked_submission(client, world, "bob", 900.0)
    rows = client.get("/api/v1/leaderboards/softmax/cpu").json()["rows"]
    assert [(r["submission_id"], r["needs_review"]) for r in rows] == [(sid, True), (honest, False)]
    shown = client.get(f"/api/v1/submissions/{sid}").json()
    assert shown["needs_review"] is True and "review bound" in shown["review_reason"]
    page = client.get("/problems/softmax")
    assert page.status_code == 200 and page.text.count("under review") == 1

    url = f"/api/v1/admin/submissions/{sid}/clear-review"
    assert client.post(url, headers=world.auth("alice")).status_code == 403
    r = client.post(url, headers=world.auth("root"))
    assert r.status_code == 200 and r.json()["needs_review"] is False and r.json()["ranked"] is True
    assert client.post(url, headers=world.auth("root")).status_code == 409  # nothing left to clear
    rows = client.get("/api/v1/leaderboards/softmax/cpu").json()["rows"]
    assert [(r["submission_id"], r["needs_review"]) for r in rows] == [(sid, False), (honest, False)]
    assert "under review" not in client.get("/problems/softmax").text


def test_a_late_report_of_the_job_before_a_requeue_is_dropped(client: TestClient, world: World) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services.jobs import start_job
    from kernelrank.services.submissions import record_run

    sid = ranked_submission(client, world, "alice", 400.0)
    assert client.post(f"/api/v1/admin/submissions/{sid}/requeue", headers=world.auth("root")).status_code == 202
    with session_scope() as s:
        assert not start_job(s, sid, "runner-old", 3, 60.0, attempt=1).run  # the old job may not start
        assert record_run(s, sid, "public", passed_result(50.0), "runner-old", attempt=1) is False
        assert start_job(s, sid, "runner-new", 3, 60.0, attempt=2).run
        assert record_run(s, sid, "public", passed_result(420.0), "runner-new", attempt=2) is True
    shown = client.get(f"/api/v1/submissions/{sid}", headers=world.auth("root")).json()
    assert [(r["attempt"], r["score_ns"]) for r in shown["runs"]] == [(2, 420.0)]


def test_a_score_beyond_the_physics_floor_is_held_unranked_until_an_admin_clears_it(
        client: TestClient, world: World) -> None:
    # 0.5 TFLOP/s at 1 GB/s on a runner that multiplies at 0.1 TFLOP/s: five times its compute roof
    ceilings = {"copy_gbps": 10.0, "matmul_tflops": {"float32": 0.1}}
    fast = {"kind": "benchmark", "index": 0, "spec": {"M": 1}, "passed": True, "tflops": 0.5, "gbps": 1.0}
    sid = submit(client, world.tokens["alice"], "softmax", mode="leaderboard").json()["id"]
    record(sid, "public", passed_result(100.0, cases=[fast], ceilings=ceilings))
    record(sid, "secret", passed_result(101.0, cases=[fast], ceilings=ceilings))
    honest = ranked_submission(client, world, "bob", 900.0)
    shown = client.get(f"/api/v1/submissions/{sid}").json()
    assert shown["status"] == "passed" and shown["ranked"] is False and shown["needs_review"] is True
    assert "physics floor" in shown["review_reason"] and "held for an admin's review" in shown["message"]
    rows = client.get("/api/v1/leaderboards/softmax/cpu").json()["rows"]
    assert [r["submission_id"] for r in rows] == [honest]  # not first: not ranked at all while held

    r = client.post(f"/api/v1/admin/submissions/{sid}/clear-review", headers=world.auth("root"))
    assert r.status_code == 200 and r.json()["needs_review"] is False and r.json()["ranked"] is True
    rows = client.get("/api/v1/leaderboards/softmax/cpu").json()["rows"]
    assert [r["submission_id"] for r in rows] == [sid, honest]
