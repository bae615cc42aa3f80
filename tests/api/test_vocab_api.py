"""The API speaks the vocabulary (kernelrank/vocab.py): its schema's enums are vocab's sets, and
"My submissions" filters by every status (``cancelled`` answered 422 before)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from kernelrank import vocab
from tests.api.conftest import World, submit


def _enum(schema: dict, ref_or_schema: dict) -> list[str]:
    if "$ref" in ref_or_schema:
        return _enum(schema, schema["components"]["schemas"][ref_or_schema["$ref"].rsplit("/", 1)[1]])
    if "anyOf" in ref_or_schema:
        return [v for s in ref_or_schema["anyOf"] for v in _enum(schema, s)]
    return ref_or_schema.get("enum", [])


def test_schema_enums_are_the_vocabulary(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    params = {p["name"]: p for p in schema["paths"]["/api/v1/submissions"]["get"]["parameters"]}
    assert set(_enum(schema, params["status"]["schema"])) == set(vocab.STATUSES)
    props = schema["components"]["schemas"]["SubmissionPublic"]["properties"]
    assert set(_enum(schema, props["status"])) == set(vocab.STATUSES)
    run = schema["components"]["schemas"]["RunPublic"]["properties"]
    assert set(_enum(schema, run["kind"])) == set(vocab.RUN_KINDS)
    assert set(_enum(schema, run["status"])) == set(vocab.VERDICTS)


@pytest.mark.parametrize("status", vocab.STATUSES)
def test_my_submissions_filter_by_every_status(client: TestClient, world: World, status: str) -> None:
    r = client.get("/api/v1/submissions", params={"status": status}, headers=world.auth("alice"))
    assert r.status_code == 200, r.text


def test_filter_by_cancelled_finds_the_cancelled_submission(client: TestClient, world: World) -> None:
    kept = submit(client, world.tokens["alice"]).json()["id"]
    gone = submit(client, world.tokens["alice"]).json()["id"]
    assert client.post(f"/api/v1/submissions/{gone}/cancel", headers=world.auth("alice")).status_code == 200
    r = client.get("/api/v1/submissions", params={"status": "cancelled"}, headers=world.auth("alice"))
    assert [s["id"] for s in r.json()] == [gone] and r.json()[0]["status"] == "cancelled"
    r = client.get("/api/v1/submissions", params={"status": "queued"}, headers=world.auth("alice"))
    assert [s["id"] for s in r.json()] == [kept]


def test_a_run_reported_with_an_unknown_verdict_is_an_error(client: TestClient, world: World) -> None:
    from tests.api.conftest import record

    sid = submit(client, world.tokens["alice"], mode="test").json()["id"]
    record(sid, "public", {"status": "great", "message": "", "cases": []})
    sub = client.get(f"/api/v1/submissions/{sid}", headers=world.auth("alice")).json()
    assert sub["status"] == "error" and "unknown verdict 'great'" in sub["message"]


def test_a_non_finite_score_is_stored_as_none_and_figures_as_strings(client: TestClient, world: World) -> None:
    from tests.api.conftest import record

    sid = submit(client, world.tokens["alice"], mode="test").json()["id"]
    case = {"kind": "test", "index": 0, "spec": {"N": 1}, "passed": False, "message": "bad",
            "max_abs_error": "Infinity", "max_rel_error": "NaN", "mismatches": 2, "nan_mismatches": 1,
            "inf_mismatches": 1}
    record(sid, "public", {"status": "failed", "message": "bad", "cases": [case], "score_ns": "Infinity"})
    r = client.get(f"/api/v1/submissions/{sid}", headers=world.auth("alice"))
    assert r.status_code == 200
    run = r.json()["runs"][0]
    assert run["score_ns"] is None and run["result"]["cases"][0]["max_abs_error"] == "Infinity"
