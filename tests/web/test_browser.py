"""In a real headless Chromium (Playwright driving Debian's ``/usr/bin/chromium``) against a real
``kernelrank serve`` (API + control worker + CPU runner): an admin pushes a problem through the
admin page, a user signs in with a password, submits a kernel through the problem page, watches
its status change live without a reload, finds it on the leaderboard; the admin closes the
problem. Screenshots of the main pages go to ``artifacts/screenshots/`` (not committed).

The tests run in order and share one browser context per user (module scope). The default tier
runs them on the embedded service, the full tier on Redis and PostgreSQL too (``tests/web/conftest.py``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import API, Service

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
PASSWORD = "a long browser password"
#: Seconds for the submission to reach its verdict (leaderboard mode of the tiny ``double``).
VERDICT_TIMEOUT = 240.0


@pytest.fixture(scope="module")
def dana(service: Service) -> str:
    """User ``dana`` with a password set through the API."""
    with service.client(service.admin_token) as c:
        r = c.post(f"{API}/users", json={"name": "dana", "admin": False})
        assert r.status_code == 201, r.text
        token = r.json()["token"]
    with service.client(token) as c:
        r = c.put(f"{API}/users/me/password", json={"new": PASSWORD})
        assert r.status_code == 204, r.text
    return token


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``double`` fixture problem packed as the admin page's upload."""
    from kernelrank.services.problem_admin import pack_folder

    path = tmp_path_factory.mktemp("upload") / "double.tar.gz"
    path.write_bytes(pack_folder(FIXTURES / "problems" / "double" / "problem.yaml",
                                 FIXTURES / "reference_kernels" / "double"))
    return path


@pytest.fixture(scope="module")
def admin_page(chromium, service: Service):
    """A page signed in as the first admin, with the API token ``serve`` printed."""
    context = chromium.new_context(base_url=service.url, viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.goto("/signin")
    page.fill("#signin-token input[name=token]", service.admin_token)
    page.click("#signin-token button[type=submit]")
    page.wait_for_url(f"{service.url}/")
    yield page
    context.close()


@pytest.fixture(scope="module")
def dana_page(chromium, service: Service, dana: str):
    context = chromium.new_context(base_url=service.url, viewport={"width": 1200, "height": 900})
    yield context.new_page()
    context.close()


def test_admin_creates_a_problem_through_the_upload(admin_page, archive: Path, screenshots: Path) -> None:
    page = admin_page
    page.goto("/admin")
    page.screenshot(path=screenshots / "admin.png", full_page=True)
    page.set_input_files("#push-form input[name=archive]", str(archive))
    page.click("#push-form button[type=submit]")  # the reference runs its own tests: a few seconds
    page.wait_for_selector("#pushed", timeout=120_000)
    assert "double" in page.inner_text("#pushed") and "a new problem" in page.inner_text("#pushed")
    assert page.locator('#admin-problems tr[data-problem="double"]').count() == 1


def test_user_signs_in_with_a_password(dana_page, screenshots: Path) -> None:
    page = dana_page
    page.goto("/signin?next=/problems/double")
    page.fill("#signin-password input[name=username]", "dana")
    page.fill("#signin-password input[name=password]", "wrong password!")
    page.click("#signin-password button[type=submit]")
    assert "wrong username or password" in page.inner_text("p.error")
    page.fill("#signin-password input[name=username]", "dana")
    page.fill("#signin-password input[name=password]", PASSWORD)
    page.click("#signin-password button[type=submit]")
    page.wait_for_url("**/problems/double")
    assert "signed in as dana" in page.inner_text("nav")


#: The judge rejects timings its own wall clock cannot confirm; on an overloaded machine (load
#: average several times the cores) a correct kernel can meet that. Such a verdict is retried.
WALL_CLOCK_REJECTION = "timing claims not supported by the judge's wall clock"
ATTEMPTS = 5


def submit_and_watch(page, service: Service, mode: str) -> tuple[int, list[str]]:
    """Submit ``double_ok.py`` in ``mode`` through the problem page's form, then watch the status
    on the submission page until the verdict: ``(id, statuses seen in order)``. Fails if the page
    reloads meanwhile."""
    page.goto("/problems/double")
    page.select_option("form.submit select[name=device]", "cpu")
    page.select_option("form.submit select[name=mode]", mode)
    page.set_input_files("form.submit input[name=file]", str(FIXTURES / "submissions" / "double_ok.py"))
    page.click("form.submit button[type=submit]")
    page.wait_for_url("**/submissions/*")
    sid = int(page.url.rstrip("/").rsplit("/", 1)[1])
    page.evaluate("window.__loaded_once = true")  # gone if the page reloads
    seen = [page.get_attribute("#status", "data-status")]
    deadline = time.monotonic() + VERDICT_TIMEOUT
    while seen[-1] in ("queued", "running"):
        if time.monotonic() > deadline:
            pytest.fail(f"no verdict for submission {sid} within {VERDICT_TIMEOUT:.0f} s (seen {seen}):\n"
                        f"{service.logs()}")
        page.wait_for_timeout(300)
        status = page.get_attribute("#status", "data-status")
        if status != seen[-1]:
            seen.append(status)
    assert seen[0] in ("queued", "running"), seen  # the verdict arrived after the page was shown
    assert page.evaluate("window.__loaded_once === true"), "the page reloaded instead of updating in place"
    return sid, seen


def wait_for_charts(page, timeout_s: float = 60.0) -> None:
    """Wait until every image (the SVG charts) has loaded and has a size. Polled from Python:
    ``wait_for_function`` evaluates a string, which the pages' CSP (no ``unsafe-eval``) refuses."""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)"):
        assert time.monotonic() < deadline, "a chart did not load"
        page.wait_for_timeout(200)
    assert page.locator("div.charts img").count() == 2


def test_submission_through_the_page_updates_live(dana_page, service: Service) -> None:
    """Test mode: correctness only, so the verdict does not depend on the machine's load."""
    page = dana_page
    sid, seen = submit_and_watch(page, service, "test")
    assert seen[-1] == "passed", (seen, page.inner_text("#live"))
    assert page.locator("section.run[data-kind=public] table.cases tbody tr").count() == 2  # the test cases
    assert page.locator("#code").count() == 1  # the owner sees the code


def test_leaderboard_submission_through_the_page_is_ranked(dana_page, service: Service,
                                                           screenshots: Path) -> None:
    page = dana_page
    for attempt in range(1, ATTEMPTS + 1):
        sid, seen = submit_and_watch(page, service, "leaderboard")
        if seen[-1] == "passed" or WALL_CLOCK_REJECTION not in page.inner_text("#live") or attempt == ATTEMPTS:
            break
        message = page.inner_text("pre.message").splitlines()[0]
        print(f"attempt {attempt}: rejected (load average {os.getloadavg()[0]:.1f}): {message}")
    assert seen[-1] == "passed", (seen, page.inner_text("#live"))
    assert page.locator("section.run[data-kind=public] table.timing tbody tr").count() == 2  # benchmark cases
    page.screenshot(path=screenshots / "submission.png", full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})  # a laptop's window: every column in view
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    time_header = page.locator("section.run[data-kind=public] table.timing thead th").last
    assert time_header.inner_text().startswith("Time") and time_header.bounding_box()["x"] + time_header.bounding_box()["width"] <= 1280
    page.set_viewport_size({"width": 1200, "height": 900})

    page.goto("/problems/double")
    board_top = page.locator('table.board[data-device="cpu"]').bounding_box()["y"]
    assert board_top < page.locator("section.description").bounding_box()["y"]  # the board before the text
    assert "geometric mean" in page.inner_text("#score-rule")
    first = page.locator('table.board[data-device="cpu"] tbody tr').first
    assert first.locator("td").nth(0).inner_text() == "1"
    assert first.locator("td").nth(1).inner_text() == "dana"
    assert first.locator("a").get_attribute("href") == f"/submissions/{sid}"
    wait_for_charts(page)
    page.screenshot(path=screenshots / "problem.png", full_page=True)
    page.goto("/me/submissions?problem=double&status=passed")
    assert page.locator("#my-submissions tbody tr").count() == 2  # the test-mode and the ranked one
    page.screenshot(path=screenshots / "my_submissions.png", full_page=True)
    page.goto("/runners")
    assert page.locator("#devices").inner_text().startswith("Device")
    page.screenshot(path=screenshots / "runners.png", full_page=True)
    page.goto("/")
    leader = page.locator("section.problem-card", has=page.locator('a[href="/problems/double"]'))
    assert "dana" in leader.locator("table.board tbody tr").first.inner_text()
    page.screenshot(path=screenshots / "home.png", full_page=True)
    page.goto("/me/tokens")
    assert page.locator("#tokens tbody tr").count() >= 1
    page.screenshot(path=screenshots / "tokens.png", full_page=True)


def test_admin_closes_the_problem(admin_page, dana_page, screenshots: Path) -> None:
    page = admin_page
    page.goto("/admin")
    page.click('#admin-problems tr[data-problem="double"] form[action$="/close"] button')
    page.wait_for_url("**/admin")
    assert page.inner_text('#admin-problems tr[data-problem="double"] .state') == "closed"
    dana_page.goto("/problems/double")
    assert dana_page.inner_text("#problem-state") == "closed"
    assert "leaderboard submissions are refused" in dana_page.inner_text("main")
    # the leaderboard stays readable after the close
    assert dana_page.locator('table.board[data-device="cpu"] tbody tr').count() == 1
    page.screenshot(path=screenshots / "admin_closed.png", full_page=True)
