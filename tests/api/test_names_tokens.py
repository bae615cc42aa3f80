"""Accounts: user names matched whole, NFKC-normalised and unique regardless of case
(migration 0008 folds existing ones); API tokens with an expiry and the time they were last used,
over the API, the CLI's ``--expires`` and the tokens page."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from tests.api.conftest import World


@pytest.mark.parametrize("name", ["eve\n", "eve\r\n", " eve", "eve ", "-eve", "e" * 65, "ev e", "ève"])
def test_names_are_matched_whole(client: TestClient, world: World, name: str) -> None:
    r = client.post("/api/v1/users", json={"name": name}, headers=world.auth("root"))
    assert r.status_code == 422, (name, r.text)


@pytest.mark.parametrize("taken", ["Alice", "ALICE", "\uff41\uff4c\uff49\uff43\uff45"])  # fullwidth "alice"
def test_names_are_unique_regardless_of_case_and_form(client: TestClient, world: World, taken: str) -> None:
    r = client.post("/api/v1/users", json={"name": taken}, headers=world.auth("root"))
    assert r.status_code == 409, r.text
    assert "alice" in r.json()["detail"]


def test_names_are_stored_in_nfkc_and_signed_in_in_any_case(client: TestClient, world: World) -> None:
    from kernelrank.db.models import User
    from kernelrank.db.session import session_scope
    from kernelrank.services import users

    r = client.post("/api/v1/users", json={"name": "\uff25\uff56\uff45"}, headers=world.auth("root"))  # "Ｅｖｅ"
    assert r.status_code == 201 and r.json()["name"] == "Eve"
    with session_scope() as s:
        eve = s.query(User).filter_by(name="Eve").one()
        assert eve.name_folded == "eve"
        users.set_password(s, eve, "a long password")
    assert client.post("/api/v1/auth/token", json={"name": "EVE", "password": "a long password"}).status_code == 201
    from sqlalchemy.exc import IntegrityError

    with pytest.raises(IntegrityError), session_scope() as s:  # the unique index holds without the service
        s.add(User(name="eVe"))
        s.flush()


def test_the_cli_refuses_a_trailing_newline(world: World) -> None:
    from typer.testing import CliRunner

    from kernelrank.cli.main import app

    result = CliRunner().invoke(app, ["users", "create", "eve\n"])
    assert result.exit_code != 0
    assert "user names are" in result.output


def _iso(t: dt.datetime) -> str:
    return t.isoformat()


def test_tokens_expire(client: TestClient, world: World) -> None:
    from kernelrank.db.models import ApiToken, utcnow
    from kernelrank.db.session import session_scope

    past = utcnow() - dt.timedelta(minutes=1)
    r = client.post("/api/v1/users/me/tokens", json={"name": "old", "expires_at": _iso(past)}, headers=world.auth("alice"))
    assert r.status_code == 422
    soon = utcnow() + dt.timedelta(days=1)
    r = client.post("/api/v1/users/me/tokens", json={"name": "ci", "expires_at": _iso(soon)}, headers=world.auth("alice"))
    assert r.status_code == 201, r.text
    created = r.json()
    assert dt.datetime.fromisoformat(created["expires_at"]) == soon.replace(microsecond=soon.microsecond)
    assert created["state"] == "active" and created["last_used_at"] is None
    token = {"Authorization": f"Bearer {created['token']}"}
    assert client.get("/api/v1/me", headers=token).status_code == 200

    with session_scope() as s:  # a day later
        s.get(ApiToken, created["id"]).expires_at = utcnow() - dt.timedelta(seconds=1)
    r = client.get("/api/v1/me", headers=token)
    assert r.status_code == 401 and "expired" in r.json()["detail"]
    listed = {t["id"]: t for t in client.get("/api/v1/users/me/tokens", headers=world.auth("alice")).json()}
    assert listed[created["id"]]["state"] == "expired"
    assert client.post("/signin", data={"token": created["token"]}, follow_redirects=False).status_code == 401


def test_tokens_record_their_last_use_to_the_minute(client: TestClient, world: World) -> None:
    from kernelrank.db.models import ApiToken, utcnow
    from kernelrank.db.session import session_scope
    from kernelrank.services.users import hash_token

    before = utcnow()
    assert client.get("/api/v1/me", headers=world.auth("bob")).status_code == 200
    with session_scope() as s:
        row = s.query(ApiToken).filter_by(token_hash=hash_token(world.tokens["bob"])).one()
        first = row.last_used_at.replace(tzinfo=dt.timezone.utc) if row.last_used_at.tzinfo is None else row.last_used_at
        assert first >= before - dt.timedelta(seconds=1)
    assert client.get("/api/v1/problems", headers=world.auth("bob")).status_code == 200  # a public read counts too
    with session_scope() as s:
        row = s.query(ApiToken).filter_by(token_hash=hash_token(world.tokens["bob"])).one()
        again = row.last_used_at.replace(tzinfo=dt.timezone.utc) if row.last_used_at.tzinfo is None else row.last_used_at
        assert again == first  # within the minute: no write
        row.last_used_at = first - dt.timedelta(minutes=5)
    client.get("/api/v1/me", headers=world.auth("bob"))
    listed = client.get("/api/v1/users/me/tokens", headers=world.auth("bob")).json()
    assert dt.datetime.fromisoformat(listed[0]["last_used_at"]) >= before - dt.timedelta(seconds=1)


def test_the_tokens_page_shows_expiry_and_last_use(client: TestClient, world: World) -> None:
    from tests.web.conftest import csrf_of, sign_in

    sign_in(client, world.tokens["alice"])
    page = client.get("/me/tokens")
    assert "Expires" in page.text and "Last used" in page.text
    r = client.post("/me/tokens", data={"csrf": csrf_of(page.text), "name": "week", "expires_days": "7"})
    assert r.status_code == 201
    row = r.text.split('data-token-id="', 2)[1]  # newest first: the new one
    in_a_week = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=7)).strftime("%Y-%m-%d")
    assert "week" in row and in_a_week in row.split('class="expires"')[1].split("</td>")[0]
    assert "never" in row.split('class="last-used"')[1].split("</td>")[0]
    # alice's first token signed this browser in: its last use is shown
    assert client.get("/me/tokens").text.count('class="last-used">never') == 1


def test_cli_expiry_parsing() -> None:
    from kernelrank.cli.admin_cmd import parse_expiry

    now = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.timezone.utc)
    assert parse_expiry("30d", now) == now + dt.timedelta(days=30)
    assert parse_expiry("12h", now) == now + dt.timedelta(hours=12)
    assert parse_expiry("2w", now) == now + dt.timedelta(weeks=2)
    assert parse_expiry("2027-01-01", now) == dt.datetime(2027, 1, 1, tzinfo=dt.timezone.utc)
    assert parse_expiry("2027-01-01T12:00:00+02:00", now) == dt.datetime(2027, 1, 1, 10, tzinfo=dt.timezone.utc)
    with pytest.raises(ValueError):
        parse_expiry("soon", now)


def test_migration_0008_folds_existing_names(tmp_path: Path) -> None:
    """Accounts made under the old rule: ``eve`` and ``eve\\n`` side by side, ``Bob`` and ``bob``."""
    from alembic import command
    from alembic.config import Config

    from kernelrank.settings import PROJECT_ROOT

    url = f"sqlite:///{tmp_path / 'm.db'}"
    cfg = Config()
    cfg.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    cfg.set_main_option("sqlalchemy.url", url)
    command.upgrade(cfg, "0007")
    engine = create_engine(url)
    with engine.begin() as conn:
        for uid, name in [(1, "eve\n"), (2, "eve"), (3, "Bob"), (4, "bob"), (5, "carol"), (6, "\uff24an")]:
            conn.execute(text("INSERT INTO users (id, name, is_admin) VALUES (:id, :name, 0)"), {"id": uid, "name": name})
    command.upgrade(cfg, "0008")
    with engine.connect() as conn:
        rows = dict(conn.execute(text("SELECT id, name FROM users")).all())
        folded = dict(conn.execute(text("SELECT id, name_folded FROM users")).all())
    engine.dispose()
    # the account whose name needed no change keeps it; the older of two canonical names keeps its own
    assert rows == {1: "eve-1", 2: "eve", 3: "Bob", 4: "bob-4", 5: "carol", 6: "Dan"}
    assert folded == {1: "eve-1", 2: "eve", 3: "bob", 4: "bob-4", 5: "carol", 6: "dan"}
