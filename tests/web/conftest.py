"""Page test fixtures: the API tests' fresh migrated SQLite world (real problems, users ``alice``,
``bob`` and admin ``root``, an online ``cpu`` runner, recorded dispatch), TestClients signed in
through the sign-in form; for the browser tests, Debian's chromium (the real ``kernelrank serve`` is
the ``service`` fixture of ``tests/conftest.py``, shared with the end-to-end tests)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import World, client, database, dispatched, migrated_template, real_problems, world  # noqa: F401

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


# -- browser tests: a real `kernelrank serve` and Debian's chromium driven by Playwright ------------
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The browser tests over Redis and PostgreSQL are the full tier's (``slow``): the pages do
    not depend on the backend, the end-to-end tests cover both in the default tier."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.module.__name__.endswith("test_browser") and params.get("service") == "redis+postgres":
            item.add_marker(pytest.mark.slow)
#: Debian's chromium; ``.ci/run`` installs it at the same path (``KERNELRANK_CHROMIUM``, one setting for both)
CHROMIUM = Path(os.environ.get("KERNELRANK_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"


def browser_required() -> bool:
    """CI (``CI`` set, as .ci/run runs) or ``KERNELRANK_REQUIRE_BROWSER=1``: a missing browser fails."""
    return bool(os.environ.get("CI")) or os.environ.get("KERNELRANK_REQUIRE_BROWSER") == "1"


@pytest.fixture(scope="session")
def chromium():
    """Headless Chromium from the Debian package (never a browser Playwright downloads).

    Skips when :data:`CHROMIUM` is absent, except where :func:`browser_required`: there it fails.
    """
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is absent: apt-get install -y chromium (browser tests need Debian's chromium)"
        if browser_required():
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    """Folder of the screenshots the browser tests leave as artifacts (gitignored)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
