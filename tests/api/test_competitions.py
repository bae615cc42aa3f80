"""Competitions: an admin creates one over boards and a window; entries count in the window (or
accepted late); finalize re-judges each board's top entries with a new secret seed through the
dispatch, and their results, routed by the job's negative attempt, make the standings final."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import Recorder, World, passed_result, record, submit

NOW = dt.datetime.now(dt.timezone.utc)
BOARDS = [{"problem": "softmax", "device": "cpu"}, {"problem": "gemm", "device": "cpu"}]


def iso(t: dt.datetime) -> str:
    return t.isoformat()


def create(client: TestClient, world: World, name: str = "winter", **overrides: Any):
    body = {"name": name, "title": "Winter cup", "boards": BOARDS, "starts_at": iso(NOW - dt.timedelta(days=1)),
            "ends_at": iso(NOW + dt.timedelta(days=1)), "final_top": 2, **overrides}
    return client.post("/api/v1/admin/competitions", json=body, headers=world.auth("root"))


def entry(client: TestClient, world: World, user: str, score: float, problem: str = "softmax",
          created: dt.datetime | None = None) -> int:
    """A ranked leaderboard entry of ``user`` scoring ``score`` ns (both runs at speedup 2)."""
    r = submit(client, world.tokens[user], problem, mode="leaderboard")
    assert r.status_code == 202, r.text
    sid = r.json()["id"]
    if created is not None:
        from kernelrank.db.models import Submission
        from kernelrank.db.session import session_scope

        with session_scope() as s:
            s.get(Submission, sid).created_at = created
    record(sid, "public", passed_result(score, speedup=2.0))
    record(sid, "secret", passed_result(score, speedup=2.0))
    return sid


def show(client: TestClient, name: str = "winter", user: str | None = None, world: World | None = None) -> dict:
    r = client.get(f"/api/v1/competitions/{name}", headers=world.auth(user) if user and world else {})
    assert r.status_code == 200, r.text
    return r.json()


def board(body: dict, problem: str) -> dict:
    return next(b for b in body["competition_boards"] if b["problem"] == problem)


def places(b: dict) -> list[tuple[int, str, float]]:
    return [(e["place"], e["user"], e["score_ns"]) for e in b["entries"]]


def test_an_admin_creates_a_competition_anyone_lists_and_shows_it(client: TestClient, world: World) -> None:
    r = create(client, world)
    assert r.status_code == 201, r.text
    body = r.json()
    assert (body["name"], body["title"], body["state"], body["final"], body["final_top"]) == (
        "winter", "Winter cup", "open", False, 2)
    assert body["boards"] == ["softmax/cpu", "gemm/cpu"]
    assert board(body, "softmax")["revision"] == world.revisions["softmax"]
    assert "secret" not in r.text and "seed" not in r.text
    listed = client.get("/api/v1/competitions").json()
    assert [c["name"] for c in listed] == ["winter"]
    assert show(client)["starts_at"].endswith(("Z", "+00:00"))
    assert client.get("/api/v1/competitions/nope").status_code == 404


@pytest.mark.parametrize("overrides, status, says", [
    ({"name": "Bad Name"}, 422, "lower-case"),
    ({"ends_at": iso(NOW - dt.timedelta(days=2))}, 422, "after the start"),
    ({"starts_at": "2026-12-01T00:00:00"}, 422, "time zone"),
    ({"boards": [{"problem": "nope", "device": "cpu"}]}, 404, "unknown problem"),
    ({"boards": [{"problem": "softmax", "device": "gpu"}]}, 422, "device queue"),
    ({"boards": BOARDS[:1] * 2}, 422, "twice"),
    ({"final_top": -1}, 422, "final_top"),
])
def test_a_bad_competition_is_refused_with_the_reason(client: TestClient, world: World, overrides: dict,
                                                      status: int, says: str) -> None:
    r = create(client, world, **overrides)
    assert r.status_code == status, r.text
    assert says in r.text


def test_only_admins_create_and_names_are_unique(client: TestClient, world: World) -> None:
    assert client.post("/api/v1/admin/competitions", json={}, headers=world.auth("alice")).status_code == 403
    assert create(client, world).status_code == 201
    r = create(client, world)
    assert r.status_code == 409 and "exists" in r.text


def test_standings_count_entries_in_the_window_and_rank_overall(client: TestClient, world: World) -> None:
    assert create(client, world).status_code == 201
    entry(client, world, "alice", 40.0)
    entry(client, world, "alice", 30.0)  # her best counts
    entry(client, world, "bob", 20.0)
    entry(client, world, "root", 10.0, created=NOW - dt.timedelta(days=3))  # before the start: not an entry
    entry(client, world, "alice", 50.0, problem="gemm")
    body = show(client)
    assert places(board(body, "softmax")) == [(1, "bob", 20.0), (2, "alice", 30.0)]
    assert places(board(body, "gemm")) == [(1, "alice", 50.0)]
    # the leaderboard itself still shows root's earlier submission
    assert [row["user"] for row in client.get("/api/v1/leaderboards/softmax/cpu").json()["rows"]][0] == "root"
    # sum of places; bob has no gemm entry: counts as that board's entries + 1 = 2
    assert "sum of the user's places" in body["rule"]
    assert [(s["rank"], s["user"], s["total"]) for s in body["standings"]] == [(1, "alice", 3), (1, "bob", 3)]
    assert body["standings"][1]["places"] == {"softmax/cpu": 1, "gemm/cpu": None}


def test_a_submission_after_the_end_is_on_the_board_not_in_the_competition_unless_accepted(
        client: TestClient, world: World) -> None:
    ended = NOW - dt.timedelta(hours=1)
    assert create(client, world, ends_at=iso(ended)).status_code == 201
    assert show(client)["state"] == "ended"
    early = entry(client, world, "alice", 30.0, created=ended - dt.timedelta(minutes=5))
    late = entry(client, world, "bob", 20.0)  # made now, after the end
    assert [row["user"] for row in client.get("/api/v1/leaderboards/softmax/cpu").json()["rows"]] == ["bob", "alice"]
    assert places(board(show(client), "softmax")) == [(1, "alice", 30.0)]

    path = "/api/v1/admin/competitions/winter/late-entries"
    assert client.post(path, json={"submission_id": late}, headers=world.auth("alice")).status_code == 403
    r = client.post(path, json={"submission_id": early}, headers=world.auth("root"))
    assert r.status_code == 409 and "counts already" in r.text
    r = client.post(path, json={"submission_id": late}, headers=world.auth("root"))
    assert r.status_code == 201, r.text
    assert r.json()["submission_id"] == late
    assert client.post(path, json={"submission_id": late}, headers=world.auth("root")).status_code == 409
    assert client.post(path, json={"submission_id": 999}, headers=world.auth("root")).status_code == 404
    entries = board(show(client), "softmax")["entries"]
    assert [(e["user"], e["late"]) for e in entries] == [("bob", True), ("alice", False)]


def finalize(client: TestClient, world: World, name: str = "winter"):
    return client.post(f"/api/v1/admin/competitions/{name}/finalize", headers=world.auth("root"))


def rejudge(job: dict, public: dict, secret: dict | None = None) -> None:
    """The runner's reports of a re-judging job, through the control worker's tasks."""
    from kernelrank import control

    sid, attempt = job["submission_id"], job["attempt"]
    assert control.job_started.run(sid, "runner-cpu-2", attempt)["run"] is True
    assert control.record_result.run(sid, "public", public, "runner-cpu-2", attempt) is True
    if secret is not None:
        assert control.record_result.run(sid, "secret", secret, "runner-cpu-2", attempt) is True


def test_finalize_rejudges_the_top_entries_and_publishes_the_final_standings(
        client: TestClient, world: World, dispatched: Recorder) -> None:
    assert create(client, world, final_top=2).status_code == 201
    a = entry(client, world, "alice", 10.0)
    b = entry(client, world, "bob", 20.0)
    entry(client, world, "root", 30.0)  # third: not re-judged (final_top 2)
    g = entry(client, world, "bob", 5.0, problem="gemm")
    before = len(dispatched.calls)

    r = finalize(client, world)
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["state"] == "finalizing" and body["final"] is False
    assert body["ends_at"] <= dt.datetime.now(dt.timezone.utc).isoformat()  # ended at once
    assert "seed" not in r.text
    jobs = [job for job, _queue, _limit in dispatched.calls[before:]]
    assert sorted(job["submission_id"] for job in jobs) == sorted([a, b, g])
    seeds = {job["secret_seed"] for job in jobs}
    assert len(seeds) == 1 and seeds != {world.seeds["softmax"]} and seeds != {world.seeds["gemm"]}
    assert all(job["mode"] == "leaderboard" and job["runs"] == ["public", "secret"] and job["attempt"] < 0
               for job in jobs)
    assert {q for _job, q, _l in dispatched.calls[before:]} == {"cpu"}
    # after the end: a submission still runs, and a new one is not in the competition
    late = entry(client, world, "alice", 1.0)
    assert late not in [e["submission_id"] for e in board(show(client), "softmax")["entries"]]

    by_sub = {job["submission_id"]: job for job in jobs}
    rejudge(by_sub[a], passed_result(25.0, speedup=2.0), passed_result(25.0, speedup=2.0))  # alice slower now
    rejudge(by_sub[b], passed_result(15.0, speedup=2.0), passed_result(15.0, speedup=2.0))
    assert show(client)["final"] is False  # one still out
    rejudge(by_sub[g], passed_result(5.0, speedup=2.0), passed_result(5.0, speedup=2.0))

    body = show(client)
    assert body["final"] is True and body["state"] == "final"
    soft = board(body, "softmax")
    final = [(e["user"], e["place"], e["final_place"], e["final_score_ns"], e["move"], e["rejudging"])
             for e in soft["entries"]]
    assert final == [("alice", 1, 2, 25.0, -1, "passed"), ("bob", 2, 1, 15.0, 1, "passed"),
                     ("root", 3, 3, None, 0, None)]
    assert soft["tau"] == -1.0  # the two re-judged entries swapped
    assert board(body, "gemm")["tau"] is None  # one entry: undefined
    # the original submissions are untouched by the re-judging
    assert client.get(f"/api/v1/submissions/{a}", headers=world.auth("alice")).json()["score_ns"] == 10.0
    # overall: softmax places + gemm places (bob alone there; alice and root count 2, its entries + 1)
    assert [(s["user"], s["rank"], s["total"]) for s in body["standings"]] == [
        ("alice", 1, 3), ("bob", 1, 3), ("root", 3, 5)]
    assert [(s["user"], s["rank"], s["total"]) for s in body["final_standings"]] == [
        ("bob", 1, 2), ("alice", 2, 4), ("root", 3, 5)]
    # tau-b of ranks (1, 1, 3) against (2, 1, 3): 2 concordant pairs, one tied before: 2 / sqrt(2 * 3)
    assert body["stability"]["tau"] == pytest.approx(2 / 6 ** 0.5)
    assert body["stability"]["moves"] == {"alice": -1, "bob": 0, "root": 0}
    assert body["failures"] == []
    assert finalize(client, world).status_code == 409  # final already


def test_a_failing_rejudging_says_why_and_which_entry(client: TestClient, world: World,
                                                      dispatched: Recorder) -> None:
    assert create(client, world, boards=BOARDS[:1]).status_code == 201
    a = entry(client, world, "alice", 10.0)
    b = entry(client, world, "bob", 20.0)
    before = len(dispatched.calls)
    assert finalize(client, world).status_code == 202
    jobs = {job["submission_id"]: job for job, _q, _l in dispatched.calls[before:]}
    rejudge(jobs[a], passed_result(10.0), {"status": "failed", "message": "case 2: values differ", "cases": []})
    rejudge(jobs[b], passed_result(20.0, speedup=2.0), passed_result(20.0, speedup=2.0))
    body = show(client)
    assert body["final"] is True
    assert body["failures"] == [{"board": "softmax/cpu", "user": "alice", "submission_id": a, "status": "failed",
                                 "message": "secret-seed run: case 2: values differ"}]
    entries = board(body, "softmax")["entries"]
    assert [(e["user"], e["final_place"], e["rejudging"]) for e in entries] == [("alice", None, "failed"),
                                                                                 ("bob", 1, "passed")]
    # alice has no final place on any board: she is out of the final standings
    assert [s["user"] for s in body["final_standings"]] == ["bob"]


def test_rejudging_reports_never_touch_the_submission_and_are_kept_once(client: TestClient, world: World,
                                                                       dispatched: Recorder) -> None:
    from kernelrank import control

    assert create(client, world, boards=BOARDS[:1], final_top=1).status_code == 201
    a = entry(client, world, "alice", 10.0)
    before = len(dispatched.calls)
    assert finalize(client, world).status_code == 202
    job = dispatched.calls[before][0]
    attempt = job["attempt"]
    assert control.job_started.run(a, "runner-cpu-2", attempt)["run"] is True
    assert control.record_result.run(a, "public", passed_result(12.0), "runner-cpu-2", attempt) is True
    assert control.record_result.run(a, "public", passed_result(99.0), "runner-cpu-2", attempt) is False
    assert control.record_result.run(a + 1000, "secret", passed_result(1.0), "runner-cpu-2", attempt) is False
    # finalizing again before it is final re-sends the pending re-judging with the same seed
    r = finalize(client, world)
    assert r.status_code == 202 and r.json()["state"] == "finalizing"
    assert dispatched.calls[-1][0]["secret_seed"] == job["secret_seed"]
    sub = client.get(f"/api/v1/submissions/{a}", headers=world.auth("alice")).json()
    assert (sub["status"], sub["score_ns"]) == ("passed", 10.0)


def test_finalize_without_entries_is_final_at_once_and_not_before_the_start(client: TestClient,
                                                                           world: World) -> None:
    assert create(client, world, name="later", starts_at=iso(NOW + dt.timedelta(days=1)),
                  ends_at=iso(NOW + dt.timedelta(days=2))).status_code == 201
    r = finalize(client, world, "later")
    assert r.status_code == 409 and "has not started" in r.text
    assert create(client, world).status_code == 201
    r = finalize(client, world)
    assert r.status_code == 202 and r.json()["final"] is True and r.json()["stability"] == {"tau": None,
                                                                                            "moves": {}}
    assert finalize(client, world, "nope").status_code == 404


def test_a_rejudging_the_broker_refuses_stays_queued_and_leaves_the_submission_alone(
        client: TestClient, world: World, dispatched: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelrank import queue
    from kernelrank.api.app import create_app

    assert create(client, world, boards=BOARDS[:1]).status_code == 201
    a = entry(client, world, "alice", 10.0)

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise ConnectionError("broker down")

    monkeypatch.setattr(queue, "send_job", refuse)
    with TestClient(create_app()) as real:  # the real dispatch, whose broker refuses
        r = real.post("/api/v1/admin/competitions/winter/finalize", headers=world.auth("root"))
    assert r.status_code == 503, r.text
    sub = client.get(f"/api/v1/submissions/{a}", headers=world.auth("alice")).json()
    assert (sub["status"], sub["score_ns"]) == ("passed", 10.0)
    body = show(client)
    assert body["state"] == "finalizing" and board(body, "softmax")["entries"][0]["rejudging"] == "queued"
    before = len(dispatched.calls)
    assert finalize(client, world).status_code == 202  # sent again
    assert [job["submission_id"] for job, _q, _l in dispatched.calls[before:]] == [a]


def test_an_entry_judged_after_finalize_does_not_replace_the_one_re_judged(client: TestClient, world: World,
                                                                           dispatched: Recorder) -> None:
    assert create(client, world, boards=BOARDS[:1], final_top=1).status_code == 201
    a = entry(client, world, "alice", 10.0)
    r = submit(client, world.tokens["alice"], "softmax", mode="leaderboard")  # made in the window, judged later
    in_flight = r.json()["id"]
    before = len(dispatched.calls)
    assert finalize(client, world).status_code == 202
    job = dispatched.calls[before][0]
    record(in_flight, "public", passed_result(5.0, speedup=2.0))
    record(in_flight, "secret", passed_result(5.0, speedup=2.0))
    assert [e["submission_id"] for e in board(show(client), "softmax")["entries"]] == [a]
    rejudge(job, passed_result(12.0, speedup=2.0), passed_result(12.0, speedup=2.0))
    [e] = board(show(client), "softmax")["entries"]
    assert (e["submission_id"], e["final_place"], e["final_score_ns"]) == (a, 1, 12.0)
