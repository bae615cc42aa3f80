"""The administration commands as an admin runs them: the real console script against a real API
(served in-process, see ``tests/cli/test_client.py``'s ``service`` fixture: the ``double``
problem, admin ``alice``, user ``bob``, a thread judging jobs with the real harness).

``problems push`` runs the real reference check (the harness in a subprocess) on the server side.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.cli.test_client import KERNELRANK, Service, service  # noqa: F401 - the fixture
from tests.conftest import FIXTURES, SUBMISSIONS


def as_user(svc: Service, user: str) -> tuple[str, ...]:
    return ("--server", svc.url, "--token", svc.tokens[user])


def api(svc: Service, method: str, path: str, user: str | None = None, **kwargs) -> httpx.Response:
    headers = {"Authorization": f"Bearer {svc.tokens[user]}"} if user else {}
    return httpx.request(method, f"{svc.url}/api/v1{path}", headers=headers, timeout=60, **kwargs)


def double_copy(tmp_path: Path, yaml_edit=None, reference_edit=None) -> Path:
    """``problems/double`` and ``reference_kernels/double`` copied side by side under ``tmp_path``;
    returns the problem folder."""
    folder = tmp_path / "problems" / "double"
    ref = tmp_path / "reference_kernels" / "double"
    folder.mkdir(parents=True)
    text = (FIXTURES / "problems" / "double" / "problem.yaml").read_text()
    (folder / "problem.yaml").write_text(yaml_edit(text) if yaml_edit else text)
    shutil.copytree(FIXTURES / "reference_kernels" / "double", ref, ignore=shutil.ignore_patterns("__pycache__"))
    if reference_edit:
        (ref / "reference.py").write_text(reference_edit((ref / "reference.py").read_text()))
    return folder


def wait_final(svc: Service, sid: int, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sub = api(svc, "GET", f"/submissions/{sid}", "alice").json()
        if sub["status"] not in ("queued", "running"):
            return sub
        time.sleep(0.5)
    raise AssertionError(f"submission {sid} still {sub['status']} after {timeout} s")


def test_push_a_new_revision_and_the_same_content_again(service: Service, tmp_path: Path) -> None:  # noqa: F811
    folder = double_copy(tmp_path, yaml_edit=lambda y: y.replace("{N: 10, seed: 1}", "{N: 11, seed: 1}"))
    p = service.run("problems", "push", str(folder), *as_user(service, "alice"), timeout=600)
    assert p.returncode == 0, p.stderr
    assert "pushed double: revision" in p.stdout and "(new revision)" in p.stdout
    revisions = api(service, "GET", "/problems/double/revisions").json()
    assert len(revisions) == 2 and revisions[1]["is_current"]
    p = service.run("leaderboard", "double", "--json", "--server", service.url)
    assert json.loads(p.stdout)["revision"] == revisions[1]["revision"]
    p = service.run("leaderboard", "double", "--revision", revisions[0]["revision"][:8], "--json",
                    "--server", service.url)
    assert p.returncode == 0 and json.loads(p.stdout)["revision"] == revisions[0]["revision"]

    p = service.run("problems", "push", str(FIXTURES / "problems" / "double"), "--reference",
                    str(FIXTURES / "reference_kernels" / "double"), "--json", *as_user(service, "alice"), timeout=600)
    assert p.returncode == 0, p.stderr
    answer = json.loads(p.stdout)
    assert answer["new_revision"] is False and answer["revision"] == revisions[0]["revision"]
    assert api(service, "GET", "/problems/double").json()["revision"] == revisions[0]["revision"]


def test_push_of_a_reference_failing_its_tests_exits_2_with_the_reason(service: Service, tmp_path: Path) -> None:  # noqa: F811
    folder = double_copy(tmp_path, reference_edit=lambda src: src.replace(
        "    return data[0] * 2\n", "    return data[0] * 2 + torch.rand_like(data[0])\n"))
    p = service.run("problems", "push", str(folder), *as_user(service, "alice"), timeout=600)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "the reference fails its own tests" in p.stderr and "(HTTP 422)" in p.stderr


def test_push_needs_an_admin_and_a_folder(service: Service, tmp_path: Path) -> None:  # noqa: F811
    p = service.run("problems", "push", str(FIXTURES / "problems" / "double"), *as_user(service, "bob"))
    assert p.returncode == 2 and "only an admin" in p.stderr
    p = service.run("problems", "push", str(tmp_path / "nowhere"), *as_user(service, "alice"))
    assert p.returncode == 2 and "problem.yaml" in p.stderr


def test_close_refuses_leaderboard_submissions_then_open(service: Service) -> None:  # noqa: F811
    p = service.run("problems", "close", "double", "--deadline", "2030-01-01T00:00:00", *as_user(service, "alice"))
    assert p.returncode == 2 and "time zone" in p.stderr
    p = service.run("problems", "close", "double", *as_user(service, "alice"))
    assert p.returncode == 0 and "double: closed, deadline" in p.stdout
    runner_online()
    try:
        p = service.run("submit", "double", str(SUBMISSIONS / "double_ok.py"), "--mode", "leaderboard",
                        *as_user(service, "bob"))
        assert p.returncode == 2 and "closed" in p.stderr and "(HTTP 409)" in p.stderr
    finally:
        p = service.run("problems", "open", "double", *as_user(service, "alice"))
    assert p.returncode == 0 and p.stdout.strip() == "double: open"


def test_hide_and_unhide(service: Service) -> None:  # noqa: F811
    p = service.run("problems", "hide", "double", "--json", *as_user(service, "alice"))
    assert p.returncode == 0 and json.loads(p.stdout)["state"] == "hidden"
    try:
        p = service.run("leaderboard", "double", "--server", service.url)
        assert p.returncode == 2 and "unknown problem" in p.stderr
    finally:
        p = service.run("problems", "unhide", "double", *as_user(service, "alice"))
    assert p.returncode == 0 and "double: open" in p.stdout
    assert service.run("leaderboard", "double", "--server", service.url).returncode == 0


def runner_online() -> None:
    """A fresh heartbeat of the fixture's runner thread (earlier tests may outlast the last one)."""
    from kernelrank.db.session import session_scope
    from kernelrank.services import runners
    from tests.cli.test_client import RUNNER_NAME

    with session_scope() as s:
        runners.heartbeat(s, RUNNER_NAME, "cpu", {"device": "cpu"}, "test")


def test_disqualify_requeue_and_reinstate(service: Service) -> None:  # noqa: F811
    runner_online()
    p = service.run("submit", "double", str(SUBMISSIONS / "double_ok.py"), "--mode", "leaderboard", "--json",
                    *as_user(service, "bob"))
    assert p.returncode == 0, p.stderr
    sid = json.loads(p.stdout)["id"]
    board = lambda: [r["submission_id"] for r in api(service, "GET", "/leaderboards/double/cpu").json()["rows"]]  # noqa: E731
    assert sid in board()

    p = service.run("admin", "disqualify", str(sid), "--reason", "reads the answer from a file",
                    *as_user(service, "alice"))
    assert p.returncode == 0 and f"submission #{sid} disqualified" in p.stdout
    assert sid not in board()
    mine = api(service, "GET", f"/submissions/{sid}", "bob").json()
    assert mine["disqualified_reason"] == "reads the answer from a file"

    p = service.run("admin", "requeue", str(sid), *as_user(service, "bob"))
    assert p.returncode == 2 and "only an admin" in p.stderr
    p = service.run("admin", "requeue", str(sid), *as_user(service, "alice"))
    assert p.returncode == 0 and f"submission #{sid} requeued (attempt 2)" in p.stdout
    sub = wait_final(service, sid)
    assert sub["status"] == "passed" and sub["attempt"] == 2 and [r["attempt"] for r in sub["runs"]] == [2, 2]
    assert sid not in board()  # still disqualified

    p = service.run("admin", "reinstate", str(sid), *as_user(service, "alice"))
    assert p.returncode == 0 and "ranked: True" in p.stdout
    assert board().count(sid) == 1


def test_users_passwd_sets_a_password_that_signs_in(service: Service) -> None:  # noqa: F811
    def passwd(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([KERNELRANK, "users", "passwd", *args], input=stdin, capture_output=True, text=True,
                              env=service.env(), timeout=120)

    p = passwd("bob", "--password-stdin", stdin="bob's long password\n")
    assert p.returncode == 0, p.stderr
    assert "bob's long password" not in p.stdout + p.stderr
    r = api(service, "POST", "/auth/token", json={"name": "bob", "password": "bob's long password"})
    assert r.status_code == 201 and r.json()["token"].startswith("kr_")

    assert passwd("bob", "--password-stdin", stdin="short\n").returncode == 2
    p = passwd("nobody", "--password-stdin", stdin="long enough password\n")
    assert p.returncode == 2 and "no user" in p.stderr
    p = passwd("bob", stdin="")  # no terminal, no --password-stdin
    assert p.returncode == 2 and "--password-stdin" in p.stderr
    assert passwd("bob", "--clear", stdin="").returncode == 0
    assert api(service, "POST", "/auth/token", json={"name": "bob", "password": "bob's long password"}).status_code == 401


def test_tokens_create_list_revoke(service: Service) -> None:  # noqa: F811
    p = service.run("tokens", "create", "ci-bot", *as_user(service, "bob"))
    assert p.returncode == 0, p.stderr
    raw = p.stdout.strip()
    assert raw.startswith("kr_") and "\n" not in raw
    assert httpx.get(f"{service.url}/api/v1/me", headers={"Authorization": f"Bearer {raw}"}).status_code == 200

    p = service.run("tokens", "list", "--json", *as_user(service, "bob"))
    rows = json.loads(p.stdout)
    new = next(t for t in rows if t["name"] == "ci-bot")
    assert raw not in p.stdout and new["prefix"] == raw[:10]

    p = service.run("tokens", "revoke", str(new["id"]), *as_user(service, "bob"))
    assert p.returncode == 0 and f"token #{new['id']} revoked" in p.stdout
    assert httpx.get(f"{service.url}/api/v1/me", headers={"Authorization": f"Bearer {raw}"}).status_code == 401
    p = service.run("tokens", "revoke", str(new["id"]), *as_user(service, "alice"))
    assert p.returncode == 2 and "no such token" in p.stderr


def test_login_with_a_password_saves_a_new_token(service: Service) -> None:  # noqa: F811
    from kernelrank.db.session import session_scope
    from kernelrank.services import users

    with session_scope() as s:
        users.set_password(s, users.get_user(s, "alice"), "alice's password")

    def login(password: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([KERNELRANK, "login", "--server", service.url, "--user", "alice", "--password-stdin"],
                              input=password + "\n", capture_output=True, text=True, env=service.env(), timeout=120)

    p = login("not alice's password")
    assert p.returncode == 2 and "wrong user name or password" in p.stderr
    p = login("alice's password")
    assert p.returncode == 0, p.stderr
    assert "as alice (admin)" in p.stdout and "alice's password" not in p.stdout + p.stderr
    config = (service.home / "config" / "kernelrank" / "config.toml").read_text()
    token = config.split('token = "')[1].split('"')[0]
    assert token.startswith("kr_") and token != service.tokens["alice"]
    names = [t["name"] for t in api(service, "GET", "/users/me/tokens", "alice").json()]
    assert "kernelrank login" in names


def test_board_limits_are_set_listed_and_removed_from_the_cli(service: Service) -> None:  # noqa: F811
    p = service.run("admin", "limit", "double", "cpu", "leaderboard", "5", *as_user(service, "alice"))
    assert p.returncode == 0, p.stderr
    assert "double on cpu, leaderboard: 5 per user per hour" in p.stdout
    listed = service.run("admin", "limits", "--json", *as_user(service, "alice"))
    assert json.loads(listed.stdout) == [{"problem": "double", "device": "cpu", "mode": "leaderboard", "per_hour": 5}]
    refused = service.run("admin", "limit", "double", "cpu", "leaderboard", "1", *as_user(service, "bob"))
    assert refused.returncode == 2 and "admin" in refused.stderr.lower()
    p = service.run("admin", "limit", "double", "cpu", "leaderboard", "0", *as_user(service, "alice"))
    assert p.returncode == 0 and "no board limits set" in p.stdout


def test_import_push_publishes_to_a_running_server(service: Service, tmp_path: Path) -> None:  # noqa: F811
    """``problems import gpumode FOLDER --push`` against a real server: the imported problem is
    checked and published there (its reference passes the server's check), then listed."""
    env = service.env(KERNELRANK_PROBLEMS_DIR=str(tmp_path / "problems"),
                      KERNELRANK_REFERENCE_KERNELS_DIR=str(tmp_path / "reference_kernels"))
    p = service.run("problems", "import", "gpumode", str(FIXTURES / "imports" / "gpumode" / "pmpp" / "rowsum_py"),
                    "--name", "rowsum", "--push", *as_user(service, "alice"), env=env, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "push: pushed: revision" in p.stdout
    problem = api(service, "GET", "/problems/rowsum").json()
    assert problem["name"] == "rowsum" and len(problem["revision"]) == 64
    # a user who is not an admin may import, not publish: the push is refused, the exit status says so
    p = service.run("problems", "import", "gpumode", str(FIXTURES / "imports" / "gpumode" / "pmpp" / "rowsum_py"),
                    "--name", "rowsum", "--force", "--push", *as_user(service, "bob"), env=env, timeout=600)
    assert p.returncode == 1 and "push refused" in p.stdout
