"""``/competitions`` and ``/competitions/{name}``: the boards' entries, the standings and, once
final, the re-judged standings with their stability; user text escaped; hidden problems' ones 404."""

from __future__ import annotations

import datetime as dt

from fastapi.testclient import TestClient

from tests.api.conftest import Recorder, World
from tests.api.test_competitions import create, entry, finalize, rejudge
from tests.api.conftest import passed_result


def test_the_page_shows_entries_standings_and_the_final_figures(client: TestClient, world: World,
                                                                dispatched: Recorder) -> None:
    assert client.get("/competitions").status_code == 200
    assert "No competition yet" in client.get("/competitions").text
    assert create(client, world, title="Cup <b>one</b>", final_top=2).status_code == 201
    a = entry(client, world, "alice", 10.0)
    b = entry(client, world, "bob", 20.0)
    page = client.get("/competitions/winter")
    assert page.status_code == 200, page.text
    html = page.text
    assert "Cup &lt;b&gt;one&lt;/b&gt;" in html and "<b>one</b>" not in html
    assert 'data-board="softmax/cpu"' in html and f"#{a}" in html and f"#{b}" in html
    assert 'id="standings"' in html and 'id="final-standings"' not in html
    assert '<span id="state">open</span>' in html
    assert "/competitions/winter" in client.get("/competitions").text

    before = len(dispatched.calls)
    assert finalize(client, world).status_code == 202
    jobs = {job["submission_id"]: job for job, _q, _l in dispatched.calls[before:]}
    assert str(jobs[a]["secret_seed"]) not in client.get("/competitions/winter").text
    rejudge(jobs[a], passed_result(30.0, speedup=2.0), passed_result(30.0, speedup=2.0))
    rejudge(jobs[b], passed_result(20.0, speedup=2.0), {"status": "error", "message": "the judge broke",
                                                         "cases": []})
    html = client.get("/competitions/winter").text
    assert '<span id="state">final</span>' in html and 'id="final-standings"' in html
    assert 'id="failures"' in html and "the judge broke" in html
    assert '<span id="tau">undefined</span>' in html  # one user left after: no pair to compare


def test_a_competition_on_a_hidden_problem_is_for_admins_only(client: TestClient, world: World) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services import problems

    assert create(client, world, starts_at=(dt.datetime.now(dt.timezone.utc)).isoformat()).status_code == 201
    with session_scope() as s:
        problems.hide_problem(s, "gemm")
    assert client.get("/competitions/winter").status_code == 404
    assert "winter" not in client.get("/competitions").text
    assert client.get("/api/v1/competitions/winter", headers=world.auth("root")).status_code == 200
