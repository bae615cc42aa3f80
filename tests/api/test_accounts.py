"""Accounts: passwords (Argon2id) and password sign-in, API tokens (create, list, revoke), web
sessions and their CSRF tokens, and "my submissions" filters."""

from __future__ import annotations

import datetime as dt

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import World, passed_result, record, submit


def _set_password(client: TestClient, world: World, user: str, new: str, current: str | None = None):
    return client.put("/api/v1/users/me/password", json={"current": current, "new": new}, headers=world.auth(user))


def test_password_sign_in_gives_a_working_token(client: TestClient, world: World) -> None:
    assert _set_password(client, world, "alice", "correct horse battery").status_code == 204
    assert client.get("/api/v1/me", headers=world.auth("alice")).json()["has_password"] is True

    r = client.post("/api/v1/auth/token", json={"name": "alice", "password": "correct horse battery",
                                                "token_name": "cli"})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["token"].startswith("kr_") and body["name"] == "cli" and body["prefix"] == body["token"][:10]
    me = client.get("/api/v1/me", headers={"Authorization": f"Bearer {body['token']}"})
    assert me.status_code == 200 and me.json()["name"] == "alice"


def test_wrong_password_and_unknown_user_get_the_same_401(client: TestClient, world: World) -> None:
    assert _set_password(client, world, "alice", "correct horse battery").status_code == 204
    wrong = client.post("/api/v1/auth/token", json={"name": "alice", "password": "correct horse batterY"})
    unknown = client.post("/api/v1/auth/token", json={"name": "mallory", "password": "correct horse battery"})
    no_password = client.post("/api/v1/auth/token", json={"name": "bob", "password": "anything at all"})
    for r in (wrong, unknown, no_password):
        assert r.status_code == 401
        assert r.json()["detail"] == "wrong user name or password"


def test_password_is_stored_as_an_argon2id_hash(client: TestClient, world: World) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services.users import get_user

    assert _set_password(client, world, "alice", "correct horse battery").status_code == 204
    with session_scope() as s:
        stored = get_user(s, "alice").password_hash
    assert stored is not None and stored.startswith("$argon2id$") and "correct horse" not in stored


def test_changing_a_password_needs_the_current_one(client: TestClient, world: World) -> None:
    assert _set_password(client, world, "alice", "first password").status_code == 204
    r = _set_password(client, world, "alice", "second password", current="not the first")
    assert r.status_code == 403 and "current password" in r.json()["detail"]
    assert _set_password(client, world, "alice", "second password").status_code == 403  # none given
    assert _set_password(client, world, "alice", "second password", current="first password").status_code == 204
    assert client.post("/api/v1/auth/token", json={"name": "alice", "password": "first password"}).status_code == 401
    assert client.post("/api/v1/auth/token", json={"name": "alice", "password": "second password"}).status_code == 201


def test_short_passwords_are_refused(client: TestClient, world: World) -> None:
    r = _set_password(client, world, "alice", "short")
    assert r.status_code == 422 and "at least 8" in r.json()["detail"]


def test_only_admins_set_other_users_passwords(client: TestClient, world: World) -> None:
    r = client.put("/api/v1/users/bob/password", json={"password": "bobs new password"}, headers=world.auth("alice"))
    assert r.status_code == 403
    r = client.put("/api/v1/users/bob/password", json={"password": "bobs new password"}, headers=world.auth("root"))
    assert r.status_code == 204
    assert client.post("/api/v1/auth/token", json={"name": "bob", "password": "bobs new password"}).status_code == 201
    r = client.put("/api/v1/users/nobody/password", json={"password": "whatever123"}, headers=world.auth("root"))
    assert r.status_code == 404


def test_tokens_are_created_listed_without_their_value_and_revoked(client: TestClient, world: World) -> None:
    r = client.post("/api/v1/users/me/tokens", json={"name": "laptop"}, headers=world.auth("alice"))
    assert r.status_code == 201
    new = r.json()
    raw = new["token"]
    auth = {"Authorization": f"Bearer {raw}"}
    assert client.get("/api/v1/me", headers=auth).json()["name"] == "alice"

    listed = client.get("/api/v1/users/me/tokens", headers=world.auth("alice"))
    assert listed.status_code == 200
    rows = listed.json()
    assert [t["name"] for t in rows] == ["laptop", "default"]  # newest first
    assert raw not in listed.text and world.tokens["alice"] not in listed.text
    assert "token_hash" not in listed.text and all("token" not in t for t in rows)
    assert rows[0]["prefix"] == raw[:10] and rows[0]["revoked_at"] is None

    # bob cannot revoke alice's token, nor see it
    assert client.delete(f"/api/v1/users/me/tokens/{new['id']}", headers=world.auth("bob")).status_code == 404
    assert "laptop" not in client.get("/api/v1/users/me/tokens", headers=world.auth("bob")).text

    assert client.delete(f"/api/v1/users/me/tokens/{new['id']}", headers=world.auth("alice")).status_code == 204
    assert client.get("/api/v1/me", headers=auth).status_code == 401
    assert client.get("/api/v1/me", headers=world.auth("alice")).status_code == 200  # the other token still works
    rows = client.get("/api/v1/users/me/tokens", headers=world.auth("alice")).json()
    assert rows[0]["revoked_at"] is not None


def test_token_routes_need_a_token(client: TestClient) -> None:
    assert client.get("/api/v1/users/me/tokens").status_code == 401
    assert client.post("/api/v1/users/me/tokens", json={"name": "x"}).status_code == 401


def test_web_sessions_sign_in_and_out(world: World) -> None:
    from kernelrank.db.models import WebSession
    from kernelrank.db.session import session_scope
    from kernelrank.services import users

    with session_scope() as s:
        alice = users.get_user(s, "alice")
        raw = users.start_web_session(s, alice, max_age_s=3600)
    assert raw.startswith("krs_")
    with session_scope() as s:
        assert users.web_session_user(s, raw).name == "alice"
        assert users.web_session_user(s, raw + "x") is None
        assert users.web_session_user(s, world.tokens["alice"]) is None  # an API token is not a session
        stored = [w.token_hash for w in s.query(WebSession)]
        assert raw not in stored and len(stored) == 1
    with session_scope() as s:
        users.end_web_session(s, raw)
    with session_scope() as s:
        assert users.web_session_user(s, raw) is None


def test_web_sessions_expire(world: World) -> None:
    from kernelrank.db.models import WebSession
    from kernelrank.db.session import session_scope
    from kernelrank.services import users

    with session_scope() as s:
        raw = users.start_web_session(s, users.get_user(s, "bob"), max_age_s=3600)
    with session_scope() as s:
        row = s.query(WebSession).one()
        row.expires_at = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1)
    with session_scope() as s:
        assert users.web_session_user(s, raw) is None


def test_csrf_tokens_belong_to_their_session() -> None:
    from kernelrank.services.users import check_csrf, csrf_token

    a, b = "krs_session-a", "krs_session-b"
    assert check_csrf(a, csrf_token(a))
    assert not check_csrf(a, csrf_token(b))
    assert not check_csrf(None, csrf_token(a)) and not check_csrf(a, None) and not check_csrf(a, "")


def test_authenticate_password_service(world: World) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services import Invalid, users

    with session_scope() as s:
        users.set_password(s, users.get_user(s, "bob"), "bob's password")
        with pytest.raises(Invalid):
            users.set_password(s, users.get_user(s, "bob"), "x" * 1025)
    with session_scope() as s:
        assert users.authenticate_password(s, "bob", "bob's password").name == "bob"
        assert users.authenticate_password(s, "bob", "bob's passwor") is None
        assert users.authenticate_password(s, "alice", "bob's password") is None  # alice has no password
        assert users.authenticate_password(s, "x" * 100, "bob's password") is None


def test_my_submissions_filter_by_problem_device_and_verdict(client: TestClient, world: World) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services import submissions, users

    a = submit(client, world.tokens["alice"], "softmax").json()["id"]
    b = submit(client, world.tokens["alice"], "gemm", mode="test").json()["id"]
    submit(client, world.tokens["bob"], "softmax")
    record(a, "public", passed_result(1000.0))
    record(a, "secret", passed_result(1001.0))
    record(b, "public", {**passed_result(5.0), "status": "failed", "message": "case 1 wrong"})

    def ids(**params: str) -> list[int]:
        r = client.get("/api/v1/submissions", params=params, headers=world.auth("alice"))
        assert r.status_code == 200, r.text
        return [x["id"] for x in r.json()]

    assert ids() == [b, a]
    assert ids(problem="softmax") == [a]
    assert ids(status="failed") == [b]
    assert ids(status="passed", problem="softmax", device="cpu") == [a]
    assert ids(device="cuda-h100") == []
    assert ids(disqualified="true") == []
    with session_scope() as s:
        alice = users.get_user(s, "alice")
        assert submissions.count_for_user(s, alice) == 2
        assert submissions.count_for_user(s, alice, problem="gemm", status="failed") == 1
        assert [x.id for x in submissions.list_for_user(s, alice, limit=1, offset=1)] == [a]


def test_signing_in_again_deletes_the_users_ended_sessions(world: World) -> None:
    from kernelrank.db.models import WebSession
    from kernelrank.db.session import session_scope
    from kernelrank.services import users

    with session_scope() as s:
        first = users.start_web_session(s, users.get_user(s, "alice"), max_age_s=3600)
        users.start_web_session(s, users.get_user(s, "bob"), max_age_s=3600)
    with session_scope() as s:
        users.end_web_session(s, first)
    with session_scope() as s:
        second = users.start_web_session(s, users.get_user(s, "alice"), max_age_s=3600)
    with session_scope() as s:
        owners = sorted(w.user.name for w in s.query(WebSession))
        assert owners == ["alice", "bob"]  # alice's ended session is gone, bob's untouched
        assert users.web_session_user(s, second).name == "alice"


def test_a_new_password_signs_out_every_browser(world: World) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services import users

    with session_scope() as s:
        alice = users.get_user(s, "alice")
        users.set_password(s, alice, "first password")
        browsers = [users.start_web_session(s, alice, max_age_s=3600) for _ in range(2)]
        bobs = users.start_web_session(s, users.get_user(s, "bob"), max_age_s=3600)
    with session_scope() as s:
        users.change_password(s, users.get_user(s, "alice"), "first password", "second password")
    with session_scope() as s:
        assert [users.web_session_user(s, raw) for raw in browsers] == [None, None]
        assert users.web_session_user(s, bobs).name == "bob"
        assert users.authenticate(s, world.tokens["alice"]).name == "alice"  # API tokens stay valid
