"""Page test fixtures: the API tests' fresh migrated SQLite world (real problems, users ``alice``,
``bob`` and admin ``root``, an online ``cpu`` runner, recorded dispatch), plus browsers signed
in through the sign-in form."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import Recorder, World, client, database, dispatched, real_problems, world  # noqa: F401

CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')


def sign_in(client: TestClient, token: str) -> None:
    """Sign ``client`` in through the sign-in form with an API token."""
    r = client.post("/signin", data={"token": token, "next": "/"}, follow_redirects=False)
    assert r.status_code == 303, r.text
    assert "kr_session" in client.cookies


def csrf_of(html: str) -> str:
    """The CSRF token in a page's forms."""
    m = CSRF.search(html)
    assert m, "no CSRF field in the page"
    return m.group(1)


@pytest.fixture
def browser_for(client: TestClient, world: World):  # noqa: F811
    """``browser_for(user)``: a separate TestClient on the same app, signed in as ``user``."""
    opened: list[TestClient] = []

    def make(user: str | None) -> TestClient:
        c = TestClient(client.app)
        opened.append(c)
        if user:
            sign_in(c, world.tokens[user])
        return c

    yield make
    for c in opened:
        c.close()
