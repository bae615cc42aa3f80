"""GET /api/v1/leaderboards/{problem}/{device}: each user's best ranked entry, ties to the earlier."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import World, passed_result, record, submit


def test_ranks_best_per_user_with_ties_to_the_earlier_submission(client: TestClient, world: World) -> None:
    def entry(user: str, public: dict, secret: dict | None = None, mode: str = "leaderboard") -> int:
        r = submit(client, world.tokens[user], "softmax", mode=mode)
        assert r.status_code == 202, r.text
        sid = r.json()["id"]
        record(sid, "public", public)
        if secret is not None:
            record(sid, "secret", secret)
        return sid

    headline = {"kind": "benchmark", "index": 0, "tflops": 0.25, "gbps": 310.0}
    cases = [{"kind": "test", "index": 0}, headline, {"kind": "benchmark", "index": 1, "tflops": 9.0, "gbps": 9.0}]
    # the secret runs measured the same speedups (the score combines both runs: test_calibration)
    bob = entry("bob", passed_result(50.0, speedup=2.0, cases=cases), passed_result(51.0, speedup=2.0))
    entry("alice", passed_result(100.0), passed_result(101.0))
    alice_best = entry("alice", passed_result(50.0, speedup=2.1), passed_result(49.0, speedup=2.1))  # ties bob, later
    # not ranked: the secret run failed; a test-mode run; a run still waiting for its secret half
    entry("root", passed_result(10.0), {"status": "failed", "message": "mismatch", "cases": []})
    entry("root", passed_result(5.0), mode="test")
    entry("root", passed_result(1.0))

    r = client.get("/api/v1/leaderboards/softmax/cpu")
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["problem"], body["device"], body["revision"]) == ("softmax", "cpu", world.revisions["softmax"])
    rows = [(row["rank"], row["user"], row["submission_id"], row["score_ns"]) for row in body["rows"]]
    assert rows == [(1, "bob", bob, 50.0), (2, "alice", alice_best, 50.0)]
    assert body["rows"][0]["speedup"] == 2.0 and body["rows"][0]["language"] == "pytorch"
    assert body["rows"][0]["submitted_at"].endswith(("Z", "+00:00"))
    # the headline (first benchmark) case's roofline figures, copied with the verdict; none without one
    assert [(row["tflops"], row["gbps"]) for row in body["rows"]] == [(0.25, 310.0), (None, None)]


def test_empty_board_and_refusals(client: TestClient, world: World) -> None:
    empty = client.get("/api/v1/leaderboards/gemm/cuda-h100")
    assert empty.status_code == 200
    assert empty.json() == {"problem": "gemm", "device": "cuda-h100", "revision": world.revisions["gemm"], "rows": []}
    unknown = client.get("/api/v1/leaderboards/nope/cpu")
    assert unknown.status_code == 404 and "nope" in unknown.json()["detail"]
    assert client.get("/api/v1/leaderboards/softmax/gpu").status_code == 422
