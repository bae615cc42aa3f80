"""The application as a whole: liveness, the OpenAPI document, database outages and job dispatch."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import KERNEL, World


def test_healthz(client: TestClient) -> None:
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


def test_openapi_lists_every_route(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    assert doc["info"]["title"] == "KernelRank"
    paths = doc["paths"]
    expected = {
        "/api/v1/problems": {"get"}, "/api/v1/problems/{name}": {"get"},
        "/api/v1/submissions": {"get", "post"}, "/api/v1/submissions/{submission_id}": {"get"},
        "/api/v1/leaderboards/{problem}/{device}": {"get"}, "/api/v1/runners": {"get"},
        "/api/v1/me": {"get"}, "/api/v1/users": {"post"}, "/healthz": {"get"},
    }
    for path, methods in expected.items():
        assert methods <= set(paths[path]), path
    body = paths["/api/v1/submissions"]["post"]["requestBody"]["content"]
    assert {"multipart/form-data", "application/json"} <= set(body)
    assert "HTTPBearer" in doc["components"]["securitySchemes"]
    assert client.get("/docs").status_code == 200


def test_an_unmigrated_database_answers_503_without_details(database: str) -> None:
    from kernelrank.api.app import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as c:
        r = c.get("/api/v1/problems")
        assert r.status_code == 503
        assert r.json() == {"detail": "the database is unavailable; try again later"}
        assert c.get("/healthz").status_code == 200


def test_explicit_settings_get_their_own_database(world: World, tmp_path) -> None:
    from kernelrank.api.app import create_app
    from kernelrank.db.session import migrate
    from kernelrank.settings import Settings

    other = f"sqlite:///{tmp_path / 'other.db'}"
    migrate(other)
    with TestClient(create_app(Settings(database_url=other))) as c:
        assert c.get("/api/v1/problems").json() == []  # not the configured database's problems


@pytest.fixture
def real_dispatch_client(world: World):
    from kernelrank.api.app import create_app

    with TestClient(create_app()) as c:
        yield c


def test_default_dispatch_commits_then_sends_by_task_name(real_dispatch_client: TestClient, world: World,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import kernelrank.queue as queue
    from kernelrank.db.models import Submission
    from kernelrank.db.session import session_scope

    sent: list[dict[str, Any]] = []

    def fake_send(task: str, args: list[Any], queue: str, **options: Any) -> None:
        with session_scope() as s:  # another connection: the submission must already be committed
            visible = s.get(Submission, args[0]["submission_id"]) is not None
        sent.append({"task": task, "job": args[0], "queue": queue, "visible": visible, **options})

    monkeypatch.setattr(queue, "send", fake_send)
    r = real_dispatch_client.post("/api/v1/submissions", json={"problem": "softmax", "mode": "test", "code": KERNEL},
                                  headers=world.auth("alice"))
    assert r.status_code == 202, r.text
    [call] = sent
    assert call["task"] == queue.EVALUATE == "kernelrank.evaluate"
    assert call["queue"] == "cpu" and call["visible"] is True
    assert call["job"]["submission_id"] == r.json()["id"]
    assert call["soft_time_limit"] == call["time_limit"] - 30


def test_a_broker_failure_is_503_and_the_submission_is_closed(real_dispatch_client: TestClient, world: World,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import kernelrank.queue as queue

    def broken_send(*_args: Any, **_kwargs: Any) -> None:
        raise ConnectionError("redis://:hunter2@broker:6379/0 refused")

    monkeypatch.setattr(queue, "send", broken_send)
    r = real_dispatch_client.post("/api/v1/submissions", json={"problem": "softmax", "code": KERNEL},
                                  headers=world.auth("alice"))
    assert r.status_code == 503 and "hunter2" not in r.text
    [sub] = real_dispatch_client.get("/api/v1/submissions", headers=world.auth("alice")).json()
    assert sub["status"] == "error" and sub["message"] == "the job could not be queued"
