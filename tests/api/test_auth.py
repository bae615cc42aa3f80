"""Bearer tokens: every write and every private read needs a valid one; creating users needs an admin."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import KERNEL, Recorder, World

NO_TOKEN: dict[str, str] = {}
BAD_TOKENS = [{"Authorization": "Bearer kr_not-a-real-token"}, {"Authorization": "Basic YWxpY2U6cHc="},
              {"Authorization": "Bearer"}]

PRIVATE = [
    ("POST", "/api/v1/submissions", {"json": {"problem": "softmax", "code": KERNEL}}),
    ("POST", "/api/v1/submissions", {"data": {"problem": "softmax"}, "files": {"file": ("k.py", KERNEL.encode())}}),
    ("POST", "/api/v1/users", {"json": {"name": "carol"}}),
    ("GET", "/api/v1/me", {}),
    ("GET", "/api/v1/submissions", {}),
]


@pytest.mark.parametrize(("method", "path", "kwargs"), PRIVATE, ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("headers", [NO_TOKEN, *BAD_TOKENS], ids=["none", "unknown", "basic", "empty"])
def test_private_endpoints_need_a_valid_token(client: TestClient, world: World, dispatched: Recorder,
                                              method: str, path: str, kwargs: dict, headers: dict[str, str]) -> None:
    r = client.request(method, path, headers=headers, **kwargs)
    assert r.status_code == 401, r.text
    assert r.headers["www-authenticate"] == "Bearer"
    assert isinstance(r.json()["detail"], str) and r.json()["detail"]
    assert dispatched.calls == []


def test_a_bad_token_on_a_public_submission_read_is_401(client: TestClient, world: World) -> None:
    sid = client.post("/api/v1/submissions", json={"problem": "softmax", "code": KERNEL},
                      headers=world.auth("alice")).json()["id"]
    assert client.get(f"/api/v1/submissions/{sid}").status_code == 200
    assert client.get(f"/api/v1/submissions/{sid}", headers=BAD_TOKENS[0]).status_code == 401


def test_me(client: TestClient, world: World) -> None:
    assert client.get("/api/v1/me", headers=world.auth("alice")).json() == {"name": "alice", "is_admin": False,
                                                                         "has_password": False}
    assert client.get("/api/v1/me", headers=world.auth("root")).json() == {"name": "root", "is_admin": True,
                                                                        "has_password": False}


def test_only_admins_create_users_and_the_token_works_once_shown(client: TestClient, world: World) -> None:
    r = client.post("/api/v1/users", json={"name": "carol"}, headers=world.auth("alice"))
    assert r.status_code == 403 and "admin" in r.json()["detail"]

    r = client.post("/api/v1/users", json={"name": "carol", "admin": False}, headers=world.auth("root"))
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["name"] == "carol" and body["is_admin"] is False and body["token"].startswith("kr_")
    me = client.get("/api/v1/me", headers={"Authorization": f"Bearer {body['token']}"})
    assert me.json() == {"name": "carol", "is_admin": False, "has_password": False}

    assert client.post("/api/v1/users", json={"name": "carol"}, headers=world.auth("root")).status_code == 409
    bad = client.post("/api/v1/users", json={"name": "-bad name"}, headers=world.auth("root"))
    assert bad.status_code == 422 and "user names" in bad.json()["detail"]
    assert client.post("/api/v1/users", json={}, headers=world.auth("root")).status_code == 422


def test_a_revoked_token_is_refused(client: TestClient, world: World) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services import users

    with session_scope() as s:
        alice = users.get_user(s, "alice")
        users.revoke_token(s, alice, alice.tokens[0].id)
    assert client.get("/api/v1/me", headers=world.auth("alice")).status_code == 401
