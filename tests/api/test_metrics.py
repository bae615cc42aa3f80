"""``/metrics``: Prometheus text that parses, with queue depth per device, verdict counts and job
durations read from the database, and API latency by route template."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.api.conftest import World, passed_result, record, submit


def scrape(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels): value}`` of one scrape."""
    r = client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_queue_depth_verdicts_and_job_durations(client: TestClient, world: World) -> None:
    from kernelrank.db.models import Submission
    from kernelrank.db.session import session_scope
    from kernelrank.services.submissions import mark_started

    ids = [submit(client, world.tokens["alice"], mode="test").json()["id"] for _ in range(3)]
    m = scrape(client)
    assert m[("kernelrank_database_up", ())] == 1.0
    assert m[("kernelrank_queue_depth", (("device", "cpu"),))] == 3.0
    assert m[("kernelrank_runners_online", (("device", "cpu"),))] == 1.0

    with session_scope() as s:
        mark_started(s, ids[0], "runner-cpu-1")
        mark_started(s, ids[1], "runner-cpu-1")
    record(ids[0], "public", {**passed_result(100.0), "mode": "test"})
    record(ids[1], "public", {**passed_result(1.0), "status": "failed", "mode": "test"})
    with session_scope() as s:  # known runner times: 3 s and 40 s
        for sid, secs in ((ids[0], 3), (ids[1], 40)):
            sub = s.get(Submission, sid)
            sub.finished_at = sub.started_at + dt.timedelta(seconds=secs)
    assert client.post(f"/api/v1/submissions/{ids[2]}/cancel", headers=world.auth("alice")).status_code == 200

    m = scrape(client)
    assert ("kernelrank_queue_depth", (("device", "cpu"),)) not in m
    verdict = lambda status: m[("kernelrank_verdicts_total", (("device", "cpu"), ("mode", "test"), ("status", status)))]
    assert verdict("passed") == 1.0 and verdict("failed") == 1.0 and verdict("cancelled") == 1.0
    hist = lambda suffix, **extra: m[(f"kernelrank_job_duration_seconds{suffix}",
                                      tuple(sorted({"device": "cpu", "mode": "test", **extra}.items())))]
    assert hist("_count") == 2.0  # the cancelled one never ran
    assert abs(hist("_sum") - 43.0) < 0.01
    assert hist("_bucket", le="2.5") == 0.0 and hist("_bucket", le="5.0") == 1.0
    assert hist("_bucket", le="30.0") == 1.0 and hist("_bucket", le="60.0") == 2.0
    assert hist("_bucket", le="+Inf") == 2.0


def test_api_latency_by_route_template(client: TestClient, world: World) -> None:
    sid = submit(client, world.tokens["alice"], mode="test").json()["id"]
    for _ in range(3):
        client.get(f"/api/v1/submissions/{sid}")
    client.get("/no/such/page")
    m = scrape(client)
    key = lambda route, status: ("kernelrank_http_request_duration_seconds_count",
                                 (("method", "GET"), ("route", route), ("status", status)))
    assert m[key("/api/v1/submissions/{submission_id}", "200")] == 3.0
    assert m[key("<unmatched>", "404")] == 1.0
    assert m[("kernelrank_http_request_duration_seconds_count",
              (("method", "POST"), ("route", "/api/v1/submissions"), ("status", "202")))] == 1.0
    assert not any(f"/submissions/{sid}" in dict(labels).get("route", "") for _, labels in m)


def test_a_scrape_answers_when_the_database_is_down(tmp_path) -> None:
    from kernelrank.api.app import create_app
    from kernelrank.settings import Settings

    blocker = tmp_path / "file"
    blocker.write_text("")
    with TestClient(create_app(Settings(database_url=f"sqlite:///{blocker}/k.db"))) as c:
        m = scrape(c)
    assert m[("kernelrank_database_up", ())] == 0.0
    assert not any(name.startswith("kernelrank_queue_depth") for name, _ in m)


def test_api_log_lines_about_a_submission_carry_its_id(client: TestClient, world: World,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The app logs JSON lines to stderr: the request line and "submission accepted" name the id."""
    capsys.readouterr()
    sid = submit(client, world.tokens["alice"], mode="test").json()["id"]
    client.get(f"/api/v1/submissions/{sid}")
    err = capsys.readouterr().err
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    accepted = [x for x in lines if x["message"] == "submission accepted"]
    assert accepted and accepted[0]["submission_id"] == sid and accepted[0]["user"] == "alice"
    read = [x for x in lines if x.get("route") == "/api/v1/submissions/{submission_id}"]
    assert read and read[0]["submission_id"] == sid and read[0]["status"] == 200
    assert world.tokens["alice"] not in err
