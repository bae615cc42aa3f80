"""GET /api/v1/problems and /api/v1/problems/{name}: public, complete, and never the secret seed."""

from __future__ import annotations

from fastapi.testclient import TestClient

from kernelrank.problems import Problem
from tests.api.conftest import World


def test_list_shows_every_problem_with_case_counts(client: TestClient, world: World,
                                                    real_problems: list[Problem]) -> None:
    r = client.get("/api/v1/problems")
    assert r.status_code == 200
    body = r.json()
    assert [p["name"] for p in body] == sorted(p.name for p in real_problems)
    for item, problem in zip(body, sorted(real_problems, key=lambda p: p.name)):
        d = problem.definition
        assert item == {"name": d.name, "title": d.title, "revision": problem.revision, "tests": len(d.tests),
                        "benchmarks": {"cpu": len(d.benchmarks["cpu"]), "cuda": len(d.benchmarks["cuda"])},
                        "state": "open", "deadline": None}
    for seed in world.seeds.values():
        assert str(seed) not in r.text


def test_detail_has_contract_cases_budgets_and_templates(client: TestClient, world: World,
                                                          real_problems: list[Problem]) -> None:
    for problem in real_problems:
        r = client.get(f"/api/v1/problems/{problem.name}")
        assert r.status_code == 200, r.text
        body = r.json()
        d = problem.definition
        assert body["revision"] == world.revisions[problem.name] == problem.revision
        assert body["description"] == d.description
        assert body["contract"] == d.contract.model_dump(mode="json")
        assert body["tests"] == [c.params for c in d.tests]
        assert body["benchmarks"]["cpu"] == [c.params for c in d.benchmarks["cpu"]]
        assert body["budgets"]["leaderboard"] == d.budgets.leaderboard
        assert set(body["timing"]) == {"cpu", "cuda"}
        assert body["ranking"] == "geometric_mean"
        templates = problem.files("templates")
        assert templates, f"{problem.name} ships templates"
        assert body["templates"] == templates
        assert "secret_seed" not in r.text
        for seed in world.seeds.values():
            assert str(seed) not in r.text


def test_unknown_problem_is_404_naming_the_known_ones(client: TestClient) -> None:
    r = client.get("/api/v1/problems/nope")
    assert r.status_code == 404
    assert "nope" in r.json()["detail"] and "softmax" in r.json()["detail"]


def test_problems_are_public(client: TestClient) -> None:
    assert client.get("/api/v1/problems/softmax").status_code == 200
    assert client.get("/api/v1/problems/softmax", headers={"Authorization": "Bearer kr_wrong"}).status_code == 200
