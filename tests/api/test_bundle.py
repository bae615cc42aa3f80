"""A score's reproducibility bundle: what produced it, in one JSON document, with the judged samples
that give its numbers back through the statistics module."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from kernelrank.runner import stats
from tests.api.conftest import World, passed_result, record, submit


def _samples(ratio: float, pairs: int = 40, groups: bool = True) -> dict[str, Any]:
    """Judged samples of one case: the reference ``ratio`` times slower than the submission, with
    a little spread, timed by two pairs of processes."""
    ref = [1000.0 * ratio * (1 + 0.01 * ((i * 7) % 5 - 2)) for i in range(pairs)]
    sub = [1000.0 * (1 + 0.01 * ((i * 3) % 5 - 2)) for i in range(pairs)]
    return {"submission_ns": sub, "reference_ns": ref, "groups": [i % 2 for i in range(pairs)] if groups else None}


def _run(ratio: float, secret: bool = False) -> dict[str, Any]:
    """A passed leaderboard run of one benchmark case whose figures come from its samples, as the
    harness makes them (``timed.samples_event``)."""
    s = _samples(ratio)
    interval = stats.paired_speedup(s["reference_ns"], s["submission_ns"], groups=s["groups"])
    case = {"kind": "benchmark", "index": 0, "spec": {"seed": 201, "M": 4096, "N": 1024, "dtype": "float32"},
            "passed": True, "speedup": interval.estimate, "speedup_ci": [interval.low, interval.high],
            "reference_ns": 2000.0, "timing": {"runs": 40}, "pairing": {"pairs": 40, "processes": 2}}
    run = stats.combine([interval], [stats.group_means(s["reference_ns"], s["submission_ns"], s["groups"])])
    score, low, high = run.scaled(2000.0)
    return passed_result(score, speedup=run.estimate, speedup_ci=[run.low, run.high],
                         speedup_interval=run.to_dict(), score_ci_ns=[low, high], cases=[case],
                         device_info={"device": "cpu", "name": "test cpu", "torch": "2.13.0", "triton": "3.9.0",
                                      "python": "3.11.9", "threads": 4, "memory_bytes": 1},
                         samples=[{"case": 0, **s}], basis="run")


def _ranked(client: TestClient, world: World) -> int:
    sid = submit(client, world.tokens["alice"], mode="leaderboard").json()["id"]
    record(sid, "public", _run(2.0))
    record(sid, "secret", _run(2.0))
    return sid


def test_a_ranked_scores_bundle_gives_its_numbers_back_from_its_samples(client: TestClient, world: World) -> None:
    sid = _ranked(client, world)
    bundle = client.get(f"/api/v1/submissions/{sid}/bundle").json()
    assert bundle["format"] == 1 and bundle["submission"]["status"] == "passed" and bundle["submission"]["ranked"]
    assert bundle["submission"]["code_sha256"] and bundle["submission"]["code"] is None  # code: the owner's
    assert bundle["problem"]["revision"] == world.revisions["softmax"] and bundle["seeds"]["benchmarks"][0] == 201
    assert [r["kind"] for r in bundle["runs"]] == ["public", "secret"]
    for run in bundle["runs"]:
        assert run["samples_kept"] and run["device_info"]["python"] == "3.11.9" and run["runner"] == "runner-cpu-1"
        case = run["cases"][0]
        s = case["samples"]
        interval = stats.paired_speedup(s["reference_ns"], s["submission_ns"], groups=s["groups"])
        assert [interval.low, interval.high] == case["speedup_ci"]
        combined = stats.combine([interval], [stats.group_means(s["reference_ns"], s["submission_ns"], s["groups"])])
        assert combined.estimate == run["speedup"] and combined.scaled(case["reference_ns"])[0] == run["score_ns"]
    # the submission's interval over its runs, as the service combined them
    runs = [stats.Interval.from_dict(r["speedup_interval"]) for r in bundle["runs"]]
    assert bundle["submission"]["speedup"] == stats.combine_runs(runs).estimate
    assert bundle["runners"]["runner-cpu-1"]["info"]["name"] == "test cpu"
    assert "stats.paired_speedup" in bundle["recompute"]
    # the owner gets the code too; the page links the bundle
    mine = client.get(f"/api/v1/submissions/{sid}/bundle", headers=world.auth("alice")).json()
    assert mine["submission"]["code"].startswith("import torch")
    assert f'href="/api/v1/submissions/{sid}/bundle"' in client.get(f"/submissions/{sid}").text


def test_the_secret_seed_is_in_a_bundle_only_once_the_problem_is_closed_or_for_admins(
        client: TestClient, world: World) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services import problems

    sid = _ranked(client, world)
    public = client.get(f"/api/v1/submissions/{sid}/bundle", headers=world.auth("bob")).json()
    assert public["seeds"]["secret_seed"] is None and public["seeds"]["secret_seed_shown"] is False
    assert str(world.seeds["softmax"]) not in json.dumps(public)
    admin = client.get(f"/api/v1/submissions/{sid}/bundle", headers=world.auth("root")).json()
    assert admin["seeds"]["secret_seed"] == world.seeds["softmax"]
    with session_scope() as s:
        problems.close_problem(s, "softmax")
    closed = client.get(f"/api/v1/submissions/{sid}/bundle").json()
    assert closed["seeds"]["secret_seed"] == world.seeds["softmax"] and closed["problem"]["state"] == "closed"


def test_a_bundle_is_where_its_submission_is_and_nowhere_else(client: TestClient, world: World) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services import problems

    assert client.get("/api/v1/submissions/999999/bundle").status_code == 404
    sid = _ranked(client, world)
    with session_scope() as s:
        problems.hide_problem(s, "softmax")
    assert client.get(f"/api/v1/submissions/{sid}/bundle", headers=world.auth("bob")).status_code == 404
    assert client.get(f"/api/v1/submissions/{sid}/bundle", headers=world.auth("alice")).status_code == 200


def test_samples_a_runner_sends_are_checked_and_kept_apart_from_the_result(client: TestClient, world: World) -> None:
    from kernelrank.db.models import Run, RunSamples
    from kernelrank.db.session import session_scope
    from kernelrank.services.bundles import SAMPLES_LIMIT, clean_samples

    sid = _ranked(client, world)
    with session_scope() as s:
        runs = s.query(Run).filter(Run.submission_id == sid).all()
        assert all("samples" not in r.result for r in runs)  # the API and pages never carry them
        assert all(s.get(RunSamples, r.id) is not None for r in runs)
    assert "samples" not in json.dumps(client.get(f"/api/v1/submissions/{sid}").json())
    good = {"case": 0, **_samples(1.5)}
    assert clean_samples([good]) == [good]
    for bad in ("x", [{"case": "0"}], [{**good, "reference_ns": good["reference_ns"][:-1]}],
                [{**good, "submission_ns": [0.0] * 40}], [{**good, "groups": ["a"] * 40}],
                [{**good, "submission_ns": [float("nan")] * 40}]):
        assert clean_samples(bad) is None, bad
    many = SAMPLES_LIMIT // 2 + 1
    assert clean_samples([{"case": 0, "submission_ns": [1.0] * many, "reference_ns": [1.0] * many,
                           "groups": None}]) is None
    # a run whose samples were not valid keeps its result, and its bundle says it kept none
    sid = submit(client, world.tokens["bob"], mode="leaderboard").json()["id"]
    record(sid, "public", {**_run(2.0), "samples": [{"case": 0, "submission_ns": [-1.0]}]})
    bundle = client.get(f"/api/v1/submissions/{sid}/bundle").json()
    assert bundle["runs"][0]["samples_kept"] is False and bundle["runs"][0]["cases"][0]["samples"] is None
