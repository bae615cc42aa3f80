"""The pages without a browser (TestClient over a fresh SQLite world): each renders with zero
submissions, with failing ones (never ranked), and with thousands; user text is escaped; forms
need a session and its CSRF token."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import KERNEL, Recorder, World, passed_result, record
from tests.web.conftest import csrf_of, sign_in

XSS = "<script>alert(1)</script>"


def _insert_user(name: str) -> int:
    """A user row written directly (the account service refuses names like ``<script>``)."""
    from kernelrank.db.models import User
    from kernelrank.db.session import session_scope

    with session_scope() as s:
        user = User(name=name)
        s.add(user)
        s.flush()
        return user.id


def _case(index: int, mean_ns: float, kind: str = "benchmark") -> dict[str, Any]:
    return {"kind": kind, "index": index, "spec": {"M": 4, "N": 8, "seed": index}, "passed": True, "message": "ok",
            "timing": {"runs": 10, "mean_ns": mean_ns, "std_ns": mean_ns / 20, "stderr_ns": 1.0,
                       "min_ns": mean_ns * 0.9, "median_ns": mean_ns, "max_ns": mean_ns * 1.2},
            "tflops": 0.5, "gbps": 120.0, "ref_mean_ns": mean_ns * 2, "speedup": 2.0}


def _insert_ranked(problem: str, n_users: int, per_user: int, start_ns: float = 10_000.0) -> None:
    """``n_users × per_user`` ranked leaderboard submissions with public runs, written directly."""
    from sqlalchemy import insert

    from kernelrank.db.models import Run, Submission, User
    from kernelrank.db.session import session_scope
    from kernelrank.services.problems import current_revision

    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    with session_scope() as s:
        rev_id = current_revision(s, problem).id
        s.execute(insert(User), [{"name": f"user{i:04d}"} for i in range(n_users)])
        ids = dict(s.execute(User.__table__.select().with_only_columns(User.name, User.id)).all())
        rows = []
        for i in range(n_users):
            for j in range(per_user):
                score = start_ns + i * 10 + j
                rows.append({"user_id": ids[f"user{i:04d}"], "problem_revision_id": rev_id, "device": "cpu",
                             "mode": "leaderboard", "language": "pytorch", "code": KERNEL, "code_sha256": "0" * 64,
                             "status": "passed", "score_ns": score, "speedup": 2.0, "ranked": True, "tflops": 0.5, "gbps": 120.0,
                             "created_at": t0 + dt.timedelta(minutes=i * per_user + j), "progress": {}})
        s.execute(insert(Submission), rows)
        sub_ids = s.scalars(Submission.__table__.select().with_only_columns(Submission.id, Submission.score_ns)
                            .where(Submission.problem_revision_id == rev_id)).all()
        s.execute(insert(Run), [{"submission_id": sid, "kind": "public", "status": "passed", "score_ns": 1.0,
                                 "result": {"status": "passed", "cases": [_case(0, 1000.0 + sid), _case(1, 5000.0)]},
                                 "logs": ""} for sid in sub_ids])


def _rows(html: str, table_device: str = "cpu") -> list[str]:
    m = re.search(rf'<table class="board" data-device="{table_device}">(.*?)</table>', html, re.S)
    assert m, "no leaderboard table"
    return re.findall(r"<tr>\s*<td>(\d+)</td>", m.group(1))


# -- zero submissions ------------------------------------------------------------------------------
def test_home_lists_every_problem_with_no_leader_yet(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    for title in ("Row-wise softmax", "/problems/gemm", "/problems/mla_decode"):
        assert title in r.text
    assert r.text.count("no ranked submission yet") >= 3


def test_problem_page_shows_description_contract_cases_and_templates(client: TestClient) -> None:
    r = client.get("/problems/softmax")
    assert r.status_code == 200
    html = r.text
    assert "<strong>Data.</strong>" in html  # the Markdown description is rendered
    assert "Data contract" in html and ">x<" in html and "float32 | bfloat16" in html
    assert "Tolerances" in html and "3.2e-2" in html.replace("0.032", "3.2e-2")
    assert "Test cases (15)" in html and "Benchmark cases, cpu (4" in html
    assert 'href="/problems/softmax/templates/triton.py"' in html
    assert "No ranked submission on cpu yet." in html
    assert "Sign in</a> to submit" in html  # signed out: no form


def test_template_download_and_unknown_template(client: TestClient) -> None:
    r = client.get("/problems/softmax/templates/pytorch.py")
    assert r.status_code == 200 and "custom_kernel" in r.text
    assert r.headers["content-disposition"] == 'attachment; filename="softmax_pytorch.py"'
    assert client.get("/problems/softmax/templates/..%2Fproblem.yaml").status_code == 404


def test_runners_page_shows_the_online_cpu_runner_and_queue(client: TestClient, world: World) -> None:
    from tests.api.conftest import submit

    assert submit(client, world.tokens["alice"]).status_code == 202
    html = client.get("/runners").text
    row = re.search(r"<tr><td class=\"mono\">cpu</td><td>(\d+)</td><td>(\d+)</td><td>([^<]+)</td><td>(\d+)</td>"
                    r"<td>(\d+)</td>", html)
    assert row and row.groups()[:2] == ("1", "1") and row.groups()[3:] == ("0", "0")
    assert row.group(3) == "0 s"  # the oldest wait: the submission just made
    assert "runner-cpu-1" in html and "online" in html


def test_pages_carry_a_content_security_policy(client: TestClient) -> None:
    csp = client.get("/").headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "content-security-policy" not in client.get("/api/v1/problems").headers
    assert client.get("/problems/nope").headers["x-content-type-options"] == "nosniff"


def test_unknown_pages_are_html_and_api_errors_stay_json(client: TestClient) -> None:
    r = client.get("/problems/nope")
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    assert "unknown problem &#39;nope&#39;" in r.text
    r = client.get("/api/v1/problems/nope")
    assert r.status_code == 404 and r.json()["detail"].startswith("unknown problem")
    assert client.get("/submissions/999999").status_code == 404


def test_charts_are_svg_without_scripts_that_run(client: TestClient) -> None:
    for chart in ("best", "cases"):
        r = client.get(f"/problems/softmax/charts/cpu/{chart}.svg")
        assert r.status_code == 200 and r.headers["content-type"] == "image/svg+xml"
        assert "default-src 'none'" in r.headers["content-security-policy"]
        assert r.text.lstrip().startswith("<?xml") and "http://" not in r.text.split("<defs>")[-1]
    assert client.get("/problems/softmax/charts/gpu!/best.svg").status_code == 422


# -- failing submissions ----------------------------------------------------------------------------
def test_failing_submission_is_shown_but_never_ranked(client: TestClient, world: World, browser_for) -> None:
    from tests.api.conftest import submit

    sid = submit(client, world.tokens["alice"]).json()["id"]
    bad = {"status": "failed", "mode": "leaderboard", "message": "test case 3: mismatch at [0, 1]",
           "cases": [{**_case(3, 0, "test"), "passed": False, "message": "mismatch at [0, 1]", "timing": None,
                      "max_abs_error": 0.5, "max_rel_error": 0.25}],
           "score_ns": None, "speedup": None, "logs": {"stdout": "", "stderr": "Traceback: boom"}}
    record(sid, "public", bad)
    record(sid, "secret", passed_result(1000.0))
    html = browser_for("alice").get(f"/submissions/{sid}").text
    assert 'data-status="failed"' in html and 'data-final="1"' in html
    assert "Correctness (0/1 passed)" in html and "FAIL" in html and "mismatch at [0, 1]" in html
    assert "Traceback: boom" in html  # the owner sees the logs
    assert "(not ranked)" in html
    assert "No ranked submission on cpu yet." in client.get("/problems/softmax").text
    assert client.get("/").text.count("no ranked submission yet") >= 3


# -- thousands -------------------------------------------------------------------------------------
def test_pages_with_thousands_of_submissions_show_the_top_and_stay_paginated(client: TestClient,
                                                                                browser_for) -> None:
    _insert_ranked("softmax", n_users=400, per_user=8)  # 3,200 ranked submissions
    home = client.get("/").text
    assert "user0000" in home and re.search(r"<td>400</td>", home)  # leader and entrants
    html = client.get("/problems/softmax").text
    ranks = _rows(html)
    assert ranks == [str(i) for i in range(1, 101)]  # the top 100 of 400 users, each once
    first = re.search(r'<table class="board" data-device="cpu">.*?<tr>\s*<td>1</td>\s*<td><a [^>]*>(\w+)</a>', html, re.S)
    assert first and first.group(1) == "user0000"
    # the shared formatter's figures: three significant digits, the unit that reads best
    assert "10.0 µs" in html and "500 GFLOP/s · 120 GB/s" in html and "2.00×" in html
    assert client.get("/problems/softmax/charts/cpu/best.svg").status_code == 200
    cases = client.get("/problems/softmax/charts/cpu/cases.svg").text
    assert all(f"user000{i}" in cases for i in range(5)) and "user0005" not in cases
    assert client.get("/runners").status_code == 200


def test_best_over_time_keeps_only_improvements(world: World) -> None:
    from kernelrank.db.models import Submission
    from kernelrank.db.session import session_scope
    from kernelrank.services.problems import current_revision
    from kernelrank.api.web.queries import best_over_time

    t0 = dt.datetime(2026, 1, 1)
    with session_scope() as s:
        rev = current_revision(s, "softmax")
        for minute, score, ranked in [(0, 900.0, True), (1, 950.0, True), (2, 100.0, False), (3, 700.0, True),
                                      (4, 800.0, True)]:
            s.add(Submission(user_id=1, problem_revision_id=rev.id, device="cpu", mode="leaderboard",
                             language="pytorch", code=KERNEL, code_sha256="0" * 64, status="passed",
                             score_ns=score, ranked=ranked, created_at=t0 + dt.timedelta(minutes=minute)))
        s.flush()
        points = best_over_time(s, rev.id, "cpu")
        assert [(p[0].replace(tzinfo=None), p[1]) for p in points] == [(t0, 900.0), (t0 + dt.timedelta(minutes=3), 700.0)]
        assert best_over_time(s, rev.id, "cuda-h100") == []


def test_my_submissions_filters_and_pages(client: TestClient, world: World, browser_for) -> None:
    from tests.api.conftest import submit

    for _ in range(3):
        submit(client, world.tokens["alice"], "softmax")
    submit(client, world.tokens["alice"], "gemm", code="def custom_kernel(data):\n    return data[0] @ data[1]\n",
           mode="test")
    submit(client, world.tokens["bob"], "softmax")
    alice = browser_for("alice")

    def ids(query: str) -> list[str]:
        r = alice.get(f"/me/submissions{query}")
        assert r.status_code == 200, r.text
        return re.findall(r'<td><a href="/submissions/(\d+)">', r.text)

    assert len(ids("")) == 4  # bob's is not there
    assert len(ids("?problem=gemm")) == 1 and len(ids("?problem=softmax")) == 3
    assert ids("?status=passed") == [] and len(ids("?status=queued")) == 4
    assert ids("?device=cuda-h100") == []
    assert alice.get("/me/submissions?status=bogus").status_code == 422
    from kernelrank.vocab import STATUSES

    for status in STATUSES:  # every status filters, cancelled included (it answered 422)
        assert alice.get(f"/me/submissions?status={status}").status_code == 200, status
    page = alice.get("/me/submissions").text
    assert all(f"<option>{status}</option>" in page for status in STATUSES)
    _insert_ranked("softmax", n_users=1, per_user=120)
    bulk = browser_for(None)
    sign_in(bulk, _token_for("user0000"))
    page1 = bulk.get("/me/submissions").text
    assert len(re.findall(r'<td><a href="/submissions/', page1)) == 50 and "older →" in page1
    page3 = bulk.get("/me/submissions?page=3").text
    assert len(re.findall(r'<td><a href="/submissions/', page3)) == 20 and "older →" not in page3


def _token_for(name: str) -> str:
    from kernelrank.db.session import session_scope
    from kernelrank.services import users

    with session_scope() as s:
        return users.issue_token(s, users.get_user(s, name), "test")


# -- escaping --------------------------------------------------------------------------------------
def test_user_text_is_escaped_everywhere(client: TestClient, world: World) -> None:
    from kernelrank.db.models import Submission
    from kernelrank.db.session import session_scope
    from kernelrank.services.problems import current_revision

    _insert_user(XSS)
    token = _token_for(XSS)
    with session_scope() as s:  # a description with raw HTML and a script link
        rev = current_revision(s, "softmax")
        rev.definition = {**rev.definition, "description": f"Hello {XSS} [x](javascript:alert(2)) <img src=x onerror=alert(3)>"}
    from tests.api.conftest import submit

    sid = submit(client, token, code=KERNEL + f"# {XSS}\n").json()["id"]
    record(sid, "public", {**passed_result(2000.0), "message": XSS,
                           "logs": {"stdout": XSS, "stderr": ""}})
    record(sid, "secret", passed_result(2000.0))
    with session_scope() as s:
        assert s.get(Submission, sid).ranked
    owner = TestClient(client.app)
    sign_in(owner, token)
    pages = [client.get("/").text, client.get("/problems/softmax").text, client.get(f"/submissions/{sid}").text,
             owner.get(f"/submissions/{sid}").text, owner.get("/me/submissions").text,
             client.get(f"/submissions/{sid}/live").text, client.get("/problems/softmax/charts/cpu/cases.svg").text]
    owner.close()
    for i, html in enumerate(pages):
        assert "<script>alert" not in html and "<img src=x" not in html, i
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[0]  # the leader's name, escaped
    assert 'href="javascript:' not in pages[1]
    assert "&lt;img src=x onerror=alert(3)&gt;" in pages[1]


# -- sign-in, CSRF, tokens -------------------------------------------------------------------------
def test_password_sign_in_and_wrong_password(client: TestClient, world: World) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services import users

    with session_scope() as s:
        users.set_password(s, users.get_user(s, "alice"), "correct horse battery")
    r = client.post("/signin", data={"username": "alice", "password": "wrong password"}, follow_redirects=False)
    assert r.status_code == 401 and "wrong username or password" in r.text and "kr_session" not in client.cookies
    r = client.post("/signin", data={"username": "nobody", "password": "whatever1"}, follow_redirects=False)
    assert r.status_code == 401 and "wrong username or password" in r.text
    r = client.post("/signin", data={"username": "alice", "password": "correct horse battery",
                                     "next": "/me/tokens"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/me/tokens"
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie.replace("Lax", "lax")
    assert "signed in as <b>alice</b>" in client.get("/").text
    first = client.cookies["kr_session"]
    sign_in(client, world.tokens["bob"])  # signing in again ends the browser's previous session
    assert "signed in as <b>bob</b>" in client.get("/").text
    stale = TestClient(client.app, cookies={"kr_session": first})
    assert "signed in as" not in stale.get("/").text
    stale.close()


def test_sign_in_refuses_a_bad_token_and_an_open_redirect(client: TestClient, world: World) -> None:
    r = client.post("/signin", data={"token": "kr_nope"}, follow_redirects=False)
    assert r.status_code == 401 and "not valid" in r.text
    r = client.post("/signin", data={"token": world.tokens["bob"], "next": "//evil.example/x"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"


def test_sign_out_ends_the_session(browser_for) -> None:
    alice = browser_for("alice")
    page = alice.get("/")
    cookie = alice.cookies["kr_session"]
    assert alice.post("/signout", data={"csrf": "wrong"}).status_code == 403
    r = alice.post("/signout", data={"csrf": csrf_of(page.text)}, follow_redirects=False)
    assert r.status_code == 303
    stale = TestClient(alice.app, cookies={"kr_session": cookie})
    assert "signed in as" not in stale.get("/").text  # the old cookie no longer signs in
    stale.close()


def test_tokens_page_creates_once_and_revokes(client: TestClient, browser_for) -> None:
    alice = browser_for("alice")
    page = alice.get("/me/tokens").text
    assert "default" in page and "kr_" in page
    r = alice.post("/me/tokens", data={"csrf": csrf_of(page), "name": "laptop"})
    assert r.status_code == 201
    raw = re.search(r'<pre class="mono" id="new-token">(kr_[^<]+)</pre>', r.text).group(1)
    assert client.get("/api/v1/me", headers={"Authorization": f"Bearer {raw}"}).json()["name"] == "alice"
    again = alice.get("/me/tokens").text
    assert raw not in again and raw[:10] in again  # shown once; the prefix stays
    token_id = re.search(r'<tr data-token-id="(\d+)"><td>laptop</td>', again).group(1)
    assert alice.post(f"/me/tokens/{token_id}/revoke", data={"csrf": "x"}).status_code == 403
    r = alice.post(f"/me/tokens/{token_id}/revoke", data={"csrf": csrf_of(again)}, follow_redirects=False)
    assert r.status_code == 303
    assert client.get("/api/v1/me", headers={"Authorization": f"Bearer {raw}"}).status_code == 401
    assert "revoked" in alice.get("/me/tokens").text


def test_account_pages_need_sign_in(client: TestClient) -> None:
    for path in ("/me/tokens", "/me/submissions"):
        r = client.get(path, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/signin?next=")


# -- submitting through the page -------------------------------------------------------------------
def test_submit_form_queues_through_the_service(browser_for, dispatched: Recorder) -> None:
    alice = browser_for("alice")
    page = alice.get("/problems/softmax").text
    assert 'action="/problems/softmax/submit"' in page
    r = alice.post("/problems/softmax/submit", data={"csrf": csrf_of(page), "device": "cpu", "mode": "test"},
                   files={"file": ("k.py", KERNEL.encode(), "text/x-python")}, follow_redirects=False)
    assert r.status_code == 303, r.text
    sid = int(r.headers["location"].rsplit("/", 1)[1])
    (job, queue, _limit), = dispatched.calls
    assert job["submission_id"] == sid and queue == "cpu" and job["mode"] == "test" and job["source"] == KERNEL
    html = alice.get(f"/submissions/{sid}").text
    assert 'data-status="queued"' in html and 'data-final="0"' in html and "/static/live.js" in html
    assert "custom_kernel" in html  # the owner sees the code
    r = alice.post("/problems/softmax/submit", data={"csrf": csrf_of(page), "mode": "test", "code": KERNEL},
                   follow_redirects=False)
    assert r.status_code == 303 and len(dispatched.calls) == 2  # pasted code works too


def test_submit_form_refuses_bad_input_with_a_message(browser_for, dispatched: Recorder) -> None:
    alice = browser_for("alice")
    token = csrf_of(alice.get("/problems/softmax").text)
    r = alice.post("/problems/softmax/submit", data={"csrf": token, "code": "   "})
    assert r.status_code == 422 and "choose a kernel file" in r.text
    r = alice.post("/problems/softmax/submit", data={"csrf": token, "device": "cuda-h100", "code": KERNEL})
    assert r.status_code == 422 and "no runner serves device" in r.text
    r = alice.post("/problems/softmax/submit", data={"csrf": token, "code": "x" * 5000})
    assert r.status_code == 413
    assert dispatched.calls == []


def test_submit_form_needs_csrf_and_same_origin(browser_for, client: TestClient, dispatched: Recorder) -> None:
    alice = browser_for("alice")
    token = csrf_of(alice.get("/problems/softmax").text)
    assert alice.post("/problems/softmax/submit", data={"code": KERNEL}).status_code == 403
    r = alice.post("/problems/softmax/submit", data={"csrf": token, "code": KERNEL},
                   headers={"Origin": "https://evil.example"})
    assert r.status_code == 403 and "cross-site" in r.text
    r = client.post("/problems/softmax/submit", data={"code": KERNEL}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/signin")
    assert dispatched.calls == []


# -- the submission page ---------------------------------------------------------------------------
def test_submission_page_goes_live_to_verdict_with_stats(client: TestClient, world: World, browser_for) -> None:
    from tests.api.conftest import submit

    sid = submit(client, world.tokens["alice"]).json()["id"]
    live = client.get(f"/submissions/{sid}/live")
    assert 'data-status="queued"' in live.text and live.headers["cache-control"] == "no-store"
    from kernelrank.db.session import session_scope
    from kernelrank.services.submissions import mark_started

    with session_scope() as s:
        mark_started(s, sid, "runner-cpu-1")
    assert 'data-status="running"' in client.get(f"/submissions/{sid}/live").text
    result = passed_result(1234.0, cases=[_case(0, 1234.0), _case(1, 4321.0)],
                           profile={"table": "aten::softmax  12us", "sort_by": "self_cpu_time_total",
                                    "proton": None}, logs={"stdout": "secret-ish log", "stderr": ""})
    record(sid, "public", result)
    record(sid, "secret", passed_result(1234.0))
    final = client.get(f"/submissions/{sid}/live").text
    assert 'data-status="passed"' in final and 'data-final="1"' in final
    assert "1.23 µs" in final and "4.32 µs" in final and "10 calls" in final and "min " in final
    assert "500 GFLOP/s" in final and "120 GB/s" in final and "1.50×" in final
    # code, logs and the profile table: owner and admins only
    assert "secret-ish log" not in final and "aten::softmax" not in final and "custom_kernel" not in final
    owner = browser_for("alice").get(f"/submissions/{sid}").text
    assert "secret-ish log" in owner and "aten::softmax" in owner and "custom_kernel" in owner
    assert "custom_kernel" not in browser_for("bob").get(f"/submissions/{sid}").text
    assert "custom_kernel" in browser_for("root").get(f"/submissions/{sid}").text


@pytest.mark.parametrize("ns,text", [(None, "—"), (812, "812 ns"), (12_345, "12.3 µs"), (4_560_000, "4.56 ms"),
                                     (1.2e9, "1.20 s")])
def test_duration_units(ns: float | None, text: str) -> None:
    from kernelrank.api.web.format import duration

    assert duration(ns) == text


@pytest.mark.parametrize("value,kind,text", [
    ([4_510_000, 4_630_000], "duration", "4.51–4.63 ms"), ([900, 1_200], "duration", "0.900–1.20 µs"),
    ([0.98, 1.05], "speedup", "0.980–1.05×"), ([0.5, "Infinity"], "speedup", "0.500×–∞"),
    ([0.0, "Infinity"], "duration", "0.00 ns–∞"), (None, "duration", "—"), (["x", 1.0], "speedup", "—")])
def test_interval_text(value, kind: str, text: str) -> None:
    """A 95% interval as the pages show it; infinity, as stored results write it, reads ∞."""
    from kernelrank.api.web.format import interval

    assert interval(value, kind) == text


def test_submission_page_shows_paired_figures(client: TestClient, world: World, browser_for) -> None:
    """A passing leaderboard run: the speedup and time intervals per case, and the run's marks."""
    from tests.api.conftest import submit

    sid = submit(client, world.tokens["alice"], "softmax", mode="leaderboard").json()["id"]
    case = {"kind": "benchmark", "index": 0, "spec": {"N": 1}, "passed": True, "message": "ok",
            "timing": {"runs": 30, "mean_ns": 2000.0, "std_ns": 10.0, "min_ns": 1900.0, "max_ns": 2100.0},
            "ref_mean_ns": 3000.0, "speedup": 1.5, "speedup_ci": [1.4, 1.6], "time_ns": 2000.0,
            "time_ci_ns": [1875.0, 2143.0], "noisy": True, "claims_replaced": 3,
            "pairing": {"pairs": 30, "disturbed": {"throttled": 2, "flush_overlap": 1, "share": 0.09, "too_many": False}}}
    record(sid, "public", {"status": "passed", "message": "ok", "cases": [case], "score_ns": 2000.0,
                           "speedup": 1.5, "speedup_ci": [1.4, 1.6], "score_ci_ns": [1875.0, 2143.0], "noisy": True})
    record(sid, "secret", {"status": "passed", "message": "ok", "cases": []})
    r = browser_for("alice").get(f"/submissions/{sid}")
    assert r.status_code == 200
    assert "1.40–1.60×" in r.text and "1.88–2.14 µs" in r.text and "Too noisy to rank" in r.text
    assert "(not ranked)" in r.text
    # the claims the judge's clock replaced, and the pairs left out as disturbed, with the case
    assert "Claims replaced" in r.text and '<td class="claims-replaced">3 ' in r.text and "(3 pairs disturbed)" in r.text


def test_submission_page_shows_non_finite_error_figures(client: TestClient, world: World, browser_for) -> None:
    """Stored results write inf and NaN as "Infinity" and "NaN"; the page shows them, it does not fail."""
    from tests.api.conftest import submit

    sid = submit(client, world.tokens["alice"], "softmax", mode="test").json()["id"]
    case = {"kind": "test", "index": 0, "spec": {"N": 1}, "passed": False, "message": "6 of 10 values outside",
            "max_abs_error": "Infinity", "max_rel_error": "NaN", "mismatches": 6, "nan_mismatches": 1,
            "inf_mismatches": 5}
    record(sid, "public", {"status": "failed", "message": "bad", "cases": [case]})
    r = browser_for("alice").get(f"/submissions/{sid}")
    assert r.status_code == 200 and "<td>inf</td>" in r.text and "<td>nan</td>" in r.text


def test_case_chart_draws_whole_labels_and_each_cases_interval() -> None:
    from kernelrank.api.web import charts

    labels = ["#0 M=4096 N=1024 dtype=float32", "#1 M=160 N=20000 dtype=bfloat16"]
    svg = charts.case_times_chart(labels, [("alice", [(1.2e6, [1.1e6, 1.3e6]), (2.0e6, [1.9e6, 2.2e6])]),
                                           ("bob", [None, (3.0e6, None)])], "cpu").decode()
    assert all(label in svg for label in labels)  # whole: the dtype included
    assert svg.count('class="ci"') == 2  # alice's two intervals; bob's case without one has none
    assert "95% intervals" in svg and "(ms," in svg
