"""Admin pages without a browser: push (upload), open/close/hide, disqualify, reinstate, requeue.

The reference check is the service's own concern (tested in tests/api with the real harness);
here it is replaced by a recorder so a push takes milliseconds, and set to fail to show that the
page gives the reason.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import Recorder, World, passed_result, record, submit
from tests.web.conftest import csrf_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


class FakeCheck:
    """A reference check that answers ``reason`` (``None``: passes) and remembers what it saw."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.seen: list[str] = []

    def __call__(self, spec) -> str | None:
        self.seen.append(spec.name)
        return self.reason


@pytest.fixture
def check(client: TestClient) -> FakeCheck:
    from kernelrank.api.deps import get_reference_check

    fake = FakeCheck()
    client.app.dependency_overrides[get_reference_check] = lambda: fake
    return fake


def double_archive(tmp_path: Path, description: str | None = None) -> bytes:
    """The ``double`` fixture problem packed for upload, optionally with another description."""
    from kernelrank.services.problem_admin import pack_folder

    definition = FIXTURES / "problems" / "double" / "problem.yaml"
    if description is not None:
        copy = tmp_path / "problem.yaml"
        shutil.copy(definition, copy)
        copy.write_text(re.sub(r"^description: .*$", f"description: {description!r}", copy.read_text(), flags=re.M))
        definition = copy
    return pack_folder(definition, FIXTURES / "reference_kernels" / "double")


def push(root: TestClient, data: bytes, hidden: bool = False):
    token = csrf_of(root.get("/admin").text)
    form = {"csrf": token, **({"hidden": "true"} if hidden else {})}
    return root.post("/admin/problems", data=form, files={"archive": ("double.tar.gz", data, "application/gzip")})


def test_admin_pages_are_for_admins_only(client: TestClient, browser_for) -> None:
    r = client.get("/admin", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/signin")
    alice = browser_for("alice")
    assert alice.get("/admin").status_code == 403
    token = csrf_of(alice.get("/").text)
    assert alice.post("/admin/problems/softmax/hide", data={"csrf": token}).status_code == 403
    assert ">Admin<" not in alice.get("/").text and ">Admin<" in browser_for("root").get("/").text


def test_push_creates_a_problem_then_a_revision(client: TestClient, browser_for, check: FakeCheck,
                                                 tmp_path: Path) -> None:
    root = browser_for("root")
    r = push(root, double_archive(tmp_path))
    assert r.status_code == 201, r.text
    assert "Pushed <a href=\"/problems/double\">double</a>" in r.text and "(a new problem)" in r.text
    assert check.seen == ["double"]
    assert "/problems/double" in client.get("/").text
    first = re.search(r'revision <span class="mono" title="([0-9a-f]{64})"', client.get("/problems/double").text).group(1)
    r = push(root, double_archive(tmp_path, "`y = 2 * x`, revised"))
    assert r.status_code == 201 and "a new revision" in r.text
    page = client.get("/problems/double").text
    assert "revised" in page and "<h2>Revisions</h2>" in page and first[:12] in page
    old = client.get(f"/problems/double?revision={first[:12]}")
    assert old.status_code == 200 and "an older revision" in old.text and "revised" not in old.text
    assert client.get("/problems/double?revision=zz").status_code == 422


def test_push_refused_with_the_reason(browser_for, check: FakeCheck, tmp_path: Path) -> None:
    check.reason = "failed: test case 1: mismatch at [3]"
    r = push(browser_for("root"), double_archive(tmp_path))
    assert r.status_code == 422
    assert "the reference fails its own tests: failed: test case 1: mismatch at [3]" in r.text
    r = push(browser_for("root"), b"not an archive")
    assert r.status_code == 422


def test_push_needs_csrf(browser_for, check: FakeCheck, tmp_path: Path) -> None:
    r = browser_for("root").post("/admin/problems", data={"csrf": "nope"},
                                 files={"archive": ("d.tar.gz", double_archive(tmp_path), "application/gzip")})
    assert r.status_code == 403 and check.seen == []


def test_close_open_and_hide(client: TestClient, browser_for, dispatched: Recorder) -> None:
    root, alice = browser_for("root"), browser_for("alice")
    token = csrf_of(root.get("/admin").text)
    r = root.post("/admin/problems/softmax/close", data={"csrf": token, "deadline": "2020-01-02T03:04"},
                  follow_redirects=False)
    assert r.status_code == 303
    row = re.search(r'<tr data-problem="softmax">(.*?)</tr>', root.get("/admin").text, re.S).group(1)
    assert "state-closed" in row and "2020-01-02 03:04 UTC" in row
    page = alice.get("/problems/softmax").text
    assert 'id="problem-state">closed' in page and "leaderboard submissions are refused" in page
    r = alice.post("/problems/softmax/submit", data={"csrf": csrf_of(page), "mode": "leaderboard",
                                                     "code": "def custom_kernel(d):\n    return d[0]\n"})
    assert r.status_code == 409 and dispatched.calls == []
    assert root.post("/admin/problems/softmax/close", data={"csrf": token, "deadline": "soon"}).status_code == 422
    root.post("/admin/problems/softmax/open", data={"csrf": token})
    assert 'id="problem-state">open' in alice.get("/problems/softmax").text
    root.post("/admin/problems/gemm/hide", data={"csrf": token})
    assert client.get("/problems/gemm").status_code == 404 and "/problems/gemm" not in client.get("/").text
    assert alice.get("/problems/gemm/templates/pytorch.py").status_code == 404
    assert root.get("/problems/gemm").status_code == 200 and "state-hidden" in root.get("/").text
    root.post("/admin/problems/gemm/unhide", data={"csrf": token})
    assert client.get("/problems/gemm").status_code == 200
    assert root.post("/admin/problems/gemm/explode", data={"csrf": token}).status_code == 422


def test_disqualify_reinstate_requeue(client: TestClient, world: World, browser_for, dispatched: Recorder) -> None:
    sid = submit(client, world.tokens["alice"]).json()["id"]
    record(sid, "public", passed_result(900.0))
    record(sid, "secret", passed_result(900.0))
    assert f'href="/submissions/{sid}"' in client.get("/problems/softmax").text  # ranked
    root, alice, bob = browser_for("root"), browser_for("alice"), browser_for("bob")
    page = root.get(f"/submissions/{sid}").text
    assert 'id="moderation"' in page and 'id="moderation"' not in alice.get(f"/submissions/{sid}").text
    token = csrf_of(page)
    assert root.post(f"/admin/submissions/{sid}/disqualify", data={"csrf": token, "reason": " "}).status_code == 422
    r = root.post(f"/admin/submissions/{sid}/disqualify", data={"csrf": token, "reason": "reads <the> answer"},
                  follow_redirects=False)
    assert r.status_code == 303
    assert "No ranked submission on cpu yet." in client.get("/problems/softmax").text
    assert "Reason: reads &lt;the&gt; answer" in alice.get(f"/submissions/{sid}").text  # the author sees why
    assert 'title="reads &lt;the&gt; answer">disqualified</span>' in alice.get("/me/submissions").text
    other = bob.get(f"/submissions/{sid}").text
    assert "Disqualified" in other and "reads" not in other
    root.post(f"/admin/submissions/{sid}/reinstate", data={"csrf": token})
    assert f'href="/submissions/{sid}"' in client.get("/problems/softmax").text
    n = len(dispatched.calls)
    r = root.post(f"/admin/submissions/{sid}/requeue", data={"csrf": token}, follow_redirects=False)
    assert r.status_code == 303 and len(dispatched.calls) == n + 1
    html = root.get(f"/submissions/{sid}").text
    assert 'data-status="queued"' in html and "Attempt</th><td>2" in html
    assert root.post(f"/admin/submissions/{sid}/requeue", data={"csrf": token}).status_code == 409
    assert alice.post(f"/admin/submissions/{sid}/requeue", data={"csrf": csrf_of(alice.get('/').text)}).status_code == 403
