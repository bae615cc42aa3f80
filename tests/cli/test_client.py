"""The client commands (``submit``, ``leaderboard``, ``login``, ``users create``) as a user runs
them: the real console script against a real API served in-process by uvicorn, over a fresh SQLite
database. A thread plays the runner: it judges each dispatched job with the real harness and
records the results through the service layer, as the control worker would (with fixed
benchmark timings: see ``_judge``).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES, SUBMISSIONS

KERNELRANK = str(Path(sys.executable).parent / "kernelrank")
RUNNER_NAME = "test-runner-cpu"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Service:
    url: str
    data_dir: Path
    home: Path
    tokens: dict[str, str]
    runner_errors: list[str] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        """The CLI's environment: no KERNELRANK_* of the caller's, a private config folder."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELRANK_", "XDG_"))}
        env.update(COLUMNS="200", HOME=str(self.home), XDG_CONFIG_HOME=str(self.home / "config"),
                   KERNELRANK_DATA_DIR=str(self.data_dir),
                   KERNELRANK_CACHE_DIR=os.environ.get("KERNELRANK_CACHE_DIR", str(self.home / "cache")))
        env.update(extra)
        return env

    def run(self, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([KERNELRANK, *args], capture_output=True, text=True, env=env or self.env(),
                              timeout=timeout, stdin=subprocess.DEVNULL)


#: Fixed time (ns) of every benchmark case in the simulated runner's timed results.
FIXED_MEAN_NS = 250_000.0


def _judge(job: dict[str, Any], queue: str, work: Path, kind: str) -> dict[str, Any]:
    """One run's result: the real harness checks correctness (test mode: no timing); in a timed
    mode, benchmark cases with fixed timings are added, so the verdict cannot depend on how busy
    this machine is (the harness's timing and its wall-clock check have their own tests)."""
    import math

    from kernelrank.problems import ProblemSpec
    from kernelrank.vocab import device_class
    from kernelrank.runner.judge.harness import EvalOptions, evaluate
    from kernelrank.runner.results import CaseResult

    spec = ProblemSpec.from_message(job["problem"])
    device = device_class(queue)
    options = EvalOptions(scratch_dir=work / "scratch",
                          secret=job["secret_seed"] if kind == "secret" else None)
    result = evaluate(spec, job["source"], "test", device, options)
    result.mode = job["mode"]
    if job["mode"] in ("benchmark", "leaderboard") and result.passed:
        timing = {"runs": 10, "mean_ns": FIXED_MEAN_NS, "std_ns": 1000.0, "stderr_ns": 316.0,
                  "min_ns": FIXED_MEAN_NS - 2000, "median_ns": FIXED_MEAN_NS, "max_ns": FIXED_MEAN_NS + 3000}
        for i, case in enumerate(spec.definition.benchmarks[device]):
            result.cases.append(CaseResult("benchmark", i, case.params, True, "ok", timing=dict(timing),
                                           ref_mean_ns=2 * FIXED_MEAN_NS, speedup=2.0))
        result.speedup = 2.0
        if job["mode"] == "leaderboard":
            result.score_ns = math.exp(math.fsum(math.log(FIXED_MEAN_NS) for _ in spec.definition.benchmarks[device])
                                       / len(spec.definition.benchmarks[device]))
    return result.to_dict()


def _runner(job: dict[str, Any], queue: str, work: Path, errors: list[str]) -> None:
    """What a runner and the control worker do with one job, minus the broker."""
    from kernelrank.db.session import session_scope
    from kernelrank.services import submissions

    try:
        sid = job["submission_id"]
        with session_scope() as s:
            submissions.mark_started(s, sid, RUNNER_NAME)
        for kind in job["runs"]:
            result = _judge(job, queue, work, kind)
            with session_scope() as s:
                submissions.record_run(s, sid, kind, result, RUNNER_NAME)
    except BaseException:  # surfaced by the fixture's teardown
        errors.append(traceback.format_exc())


def _create_app():
    from kernelrank.api.app import create_app
    from kernelrank.api.deps import get_dispatch

    return create_app(), get_dispatch


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The API on a free loopback port over a fresh database with the ``double`` problem, users
    ``alice`` (admin) and ``bob``, and an online cpu runner (the thread above)."""
    import uvicorn

    from kernelrank.db import session as db
    from kernelrank.problems import load_problem
    from kernelrank.services import problems, runners, users
    from kernelrank.settings import get_settings

    root = tmp_path_factory.mktemp("service")
    with pytest.MonkeyPatch.context() as mp:
        for k in list(os.environ):
            if k.startswith("KERNELRANK_") and k != "KERNELRANK_CACHE_DIR":
                mp.delenv(k)
        mp.setenv("KERNELRANK_DATA_DIR", str(root / "data"))
        get_settings.cache_clear()
        db.get_engine.cache_clear()
        db.get_sessionmaker.cache_clear()
        db.migrate()
        tokens = {}
        with db.session_scope() as s:
            problems.sync_problem(s, load_problem("double", FIXTURES / "problems", FIXTURES / "reference_kernels"))
            for name, admin in (("alice", True), ("bob", False)):
                tokens[name] = users.create_user(s, name, admin=admin)[1]
            runners.heartbeat(s, RUNNER_NAME, "cpu", {"device": "cpu"}, "test")

        app, get_dispatch = _create_app()
        from kernelrank.api.deps import SessionDep

        svc = Service(url="", data_dir=root / "data", home=root / "home", tokens=tokens)
        threads: list[threading.Thread] = []

        def test_dispatch(session):  # the route's own session (annotated below: this module's
            # annotations are strings, and FastAPI cannot resolve a name local to this fixture)
            def dispatch(job: dict[str, Any], queue: str, time_limit: float) -> None:
                session.commit()  # as the real dispatch: the runner must find the submission
                t = threading.Thread(target=_runner, args=(job, queue, root / "runner", svc.runner_errors), daemon=True)
                threads.append(t)
                t.start()

            return dispatch

        test_dispatch.__annotations__ = {"session": SessionDep}
        app.dependency_overrides[get_dispatch] = test_dispatch
        port = _free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        svc.url = f"http://127.0.0.1:{port}"
        try:
            yield svc
        finally:
            server.should_exit = True
            thread.join(15)
            for t in threads:
                t.join(120)
            db.get_engine().dispose()
            db.get_engine.cache_clear()
            db.get_sessionmaker.cache_clear()
    get_settings.cache_clear()
    assert not svc.runner_errors, svc.runner_errors[0]


@pytest.fixture(scope="module")
def ranked(service: Service) -> subprocess.CompletedProcess[str]:
    """alice's passing leaderboard submission (public and secret-seed runs)."""
    return service.run("submit", "double", str(SUBMISSIONS / "double_ok.py"), "--mode", "leaderboard",
                       "--server", service.url, "--token", service.tokens["alice"])


# -- submit -------------------------------------------------------------------------------------


def test_submit_passing_kernel_prints_the_result_table_and_exits_0(service: Service,
                                                                   ranked: subprocess.CompletedProcess[str]) -> None:
    assert ranked.returncode == 0, ranked.stderr
    out = ranked.stdout
    assert "double · test cases · cpu" in out and "double · leaderboard · cpu" in out
    assert "public run: passed" in out
    assert "verdict:" not in out + ranked.stderr  # the verdict once: the submission's line
    assert "secret-seed run: passed" in out
    assert "ranked with score 250 µs" in out and "speedup over the reference: 2.00×" in out
    # progress on stderr: the runs and their cases as they arrived
    assert "public run: passed" in ranked.stderr and "secret run: passed" in ranked.stderr
    assert "test case 1 (N=1000)" in ranked.stderr
    assert service.tokens["alice"] not in out + ranked.stderr


def test_submit_wrong_kernel_exits_1_with_the_failing_case(service: Service) -> None:
    p = service.run("submit", "double", str(SUBMISSIONS / "double_wrong.py"), "--mode", "test",
                    "--server", service.url, "--token", service.tokens["bob"])
    assert p.returncode == 1, p.stderr
    assert "public run: failed" in p.stdout and "FAIL" in p.stdout
    assert "test case 0" in p.stdout  # the harness's message names the first failing case


def test_submit_json_is_the_submission_as_the_api_returns_it(service: Service) -> None:
    import httpx

    p = service.run("submit", "double", str(SUBMISSIONS / "double_ok.py"), "--mode", "test", "--json",
                    "--server", service.url, "--token", service.tokens["bob"])
    assert p.returncode == 0, p.stderr
    sub = json.loads(p.stdout)  # the whole stdout is one JSON object
    assert sub["status"] == "passed" and sub["mode"] == "test" and sub["user"] == "bob"
    assert [r["kind"] for r in sub["runs"]] == ["public"] and sub["runs"][0]["status"] == "passed"
    api = httpx.get(f"{service.url}/api/v1/submissions/{sub['id']}",
                    headers={"Authorization": f"Bearer {service.tokens['bob']}"}).json()
    assert api == sub


def test_submit_gives_up_after_timeout_with_exit_1(service: Service) -> None:
    p = service.run("submit", "double", str(SUBMISSIONS / "hang.py"), "--mode", "test", "--timeout", "1",
                    "--server", service.url, "--token", service.tokens["bob"])
    assert p.returncode == 1
    assert "gave up after 1 s" in p.stderr and "goes on" in p.stderr
    assert "verdict:" not in p.stdout  # no run result yet


def test_submit_missing_file_exits_2(service: Service) -> None:
    p = service.run("submit", "double", "/no/such/kernel.py", "--server", service.url, "--token", service.tokens["bob"])
    assert p.returncode == 2
    assert "cannot read /no/such/kernel.py" in p.stderr and p.stdout == ""


def test_submit_unknown_problem_exits_2_with_the_servers_detail(service: Service) -> None:
    p = service.run("submit", "no_such_problem", str(SUBMISSIONS / "double_ok.py"),
                    "--server", service.url, "--token", service.tokens["bob"])
    assert p.returncode == 2
    assert "unknown problem 'no_such_problem'" in p.stderr and "404" in p.stderr


def test_submit_without_a_token_exits_2_and_says_how_to_log_in(service: Service) -> None:
    p = service.run("submit", "double", str(SUBMISSIONS / "double_ok.py"), "--server", service.url)
    assert p.returncode == 2
    assert "401" in p.stderr and "kernelrank login" in p.stderr


def test_submit_exits_3_when_no_server_listens(service: Service) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    p = service.run("submit", "double", str(SUBMISSIONS / "double_ok.py"), "--server", url, "--token", "kr_x")
    assert p.returncode == 3
    assert f"cannot reach the server at {url}" in p.stderr


# -- leaderboard --------------------------------------------------------------------------------


def test_leaderboard_lists_the_ranked_submission(service: Service, ranked: subprocess.CompletedProcess[str]) -> None:
    assert ranked.returncode == 0, ranked.stderr
    p = service.run("leaderboard", "double", "--server", service.url)
    assert p.returncode == 0, p.stderr
    for col in ("rank", "user", "score", "95% interval", "speedup", "language", "submitted"):
        assert col in p.stdout
    line = next(ln for ln in p.stdout.splitlines() if "alice" in ln)
    cells = [c.strip() for c in line.split("│")[1:-1]]
    # this fake run reports no interval (see the fixture): none shown, and never tied
    assert cells[:6] == ["1", "alice", "250 µs", "—", "2.00×", "pytorch"] and cells[6].startswith("20")

    p = service.run("leaderboard", "double", "--device", "cpu", "--json", "--server", service.url)
    assert p.returncode == 0, p.stderr
    board = json.loads(p.stdout)
    assert board["problem"] == "double" and board["device"] == "cpu"
    assert [(r["rank"], r["user"]) for r in board["rows"]][:1] == [(1, "alice")]
    assert board["rows"][0]["score_ns"] == pytest.approx(FIXED_MEAN_NS)


def test_leaderboard_of_an_unknown_problem_exits_2(service: Service) -> None:
    p = service.run("leaderboard", "no_such_problem", "--server", service.url)
    assert p.returncode == 2
    assert "no_such_problem" in p.stderr


# -- login --------------------------------------------------------------------------------------


def test_login_writes_a_private_config_that_later_commands_use(service: Service) -> None:
    token = service.tokens["bob"]
    config = service.home / "config" / "kernelrank" / "config.toml"
    p = service.run("login", "--server", service.url, "--token", token)
    assert p.returncode == 0, p.stderr
    assert "as bob" in p.stdout and token not in p.stdout + p.stderr and token[:7] in p.stdout
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    import tomllib

    assert tomllib.loads(config.read_text()) == {"server": service.url, "token": token}

    # neither --server nor --token: both come from the config file
    p = service.run("submit", "double", str(SUBMISSIONS / "double_ok.py"), "--mode", "test", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["user"] == "bob"

    # the environment wins over the config file
    p = service.run("submit", "double", str(SUBMISSIONS / "double_ok.py"), "--mode", "test", "--json",
                    env=service.env(KERNELRANK_TOKEN=service.tokens["alice"]))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["user"] == "alice"
    config.unlink()


def test_login_with_a_refused_token_exits_2_and_writes_nothing(service: Service) -> None:
    config = service.home / "config" / "kernelrank" / "config.toml"
    p = service.run("login", "--server", service.url, "--token", "kr_not_a_real_token")
    assert p.returncode == 2
    assert "refused" in p.stderr and "kr_not_a_real_token" not in p.stderr
    assert not config.exists()


# -- users create -------------------------------------------------------------------------------


def test_users_create_prints_a_working_token_and_refuses_a_duplicate(service: Service) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services.users import authenticate

    p = service.run("users", "create", "carol", "--admin")
    assert p.returncode == 0, p.stderr
    token = p.stdout.strip()
    assert token.startswith("kr_") and "\n" not in token  # the token alone on stdout
    with session_scope() as s:
        user = authenticate(s, token)
        assert user is not None and user.name == "carol" and user.is_admin

    p = service.run("login", "--server", service.url, "--token", token)
    assert p.returncode == 0 and "carol (admin)" in p.stdout

    p = service.run("users", "create", "carol")
    assert p.returncode == 2
    assert "exists" in p.stderr and p.stdout == ""
    p = service.run("users", "create", "bad name!")
    assert p.returncode == 2 and "user names are" in p.stderr


# -- configuration (no server) ------------------------------------------------------------------


def test_server_and_token_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelrank.cli.client import DEFAULT_SERVER, ClientError, Target, resolve_target, write_config
    from kernelrank.settings import get_settings

    for k in ("KERNELRANK_SERVER", "KERNELRANK_TOKEN", "KERNELRANK_CLIENT_CONFIG"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    get_settings.cache_clear()
    try:
        assert resolve_target(None, None) == Target(DEFAULT_SERVER, None)
        path = write_config("http://config:1/", "kr_config")
        assert path == tmp_path / "xdg" / "kernelrank" / "config.toml"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        t = resolve_target(None, None)
        assert (t.server, t.token) == ("http://config:1", "kr_config")
        assert "kr_config" not in repr(t)
        monkeypatch.setenv("KERNELRANK_SERVER", "http://env:2")
        monkeypatch.setenv("KERNELRANK_TOKEN", "kr_env")
        get_settings.cache_clear()
        t = resolve_target(None, None)
        assert (t.server, t.token) == ("http://env:2", "kr_env")
        t = resolve_target("https://flag:3", "kr_flag")
        assert (t.server, t.token) == ("https://flag:3", "kr_flag")
        with pytest.raises(ClientError) as e:
            resolve_target("ftp://x", None)
        assert e.value.exit_code == 2
        path.write_text("server = [broken")
        monkeypatch.delenv("KERNELRANK_TOKEN")
        get_settings.cache_clear()
        with pytest.raises(ClientError) as e:
            resolve_target(None, None)
        assert e.value.exit_code == 2 and "not valid TOML" in e.value.message
    finally:
        get_settings.cache_clear()


def test_eval_result_tolerates_server_added_keys() -> None:
    from kernelrank.cli.views import eval_result
    from kernelrank.runner.results import CaseResult, EvalResult
    from kernelrank.vocab import Verdict

    r = EvalResult(Verdict.failed, "test", "double", "abc", "cpu", "wrong", [CaseResult("test", 0, {"N": 1}, False)])
    d = r.to_dict() | {"logs": "--- stdout ---\nhi\n", "extra": 1}
    d["cases"][0]["new_field"] = 2
    back = eval_result(d)
    assert back.status is Verdict.failed and back.cases[0].spec == {"N": 1} and back.logs == {"stdout": "", "stderr": ""}


def test_submission_view_shows_each_measurement_made_again() -> None:
    """A leaderboard submission measured twice: the first measurement's secret-seed run, a line for
    the second measurement's runs (status, speedup, noisy) and the speedup over its four runs."""
    from rich.console import Console

    from kernelrank.cli.views import submission_view

    def run(kind: str, attempt: int, speedup: float, noisy: bool = False) -> dict[str, Any]:
        return {"kind": kind, "attempt": attempt, "status": "passed", "score_ns": 1e3,
                "result": {"speedup": speedup, "speedup_ci": [speedup * 0.9, speedup * 1.1], "noisy": noisy}}

    sub = {"id": 7, "status": "passed", "problem": "softmax", "mode": "leaderboard", "device": "cpu",
           "language": "pytorch", "ranked": True, "score_ns": 1000.0, "score_ci_ns": [900.0, 1100.0],
           "speedup": 2.3, "speedup_ci": [2.1, 2.5], "measurements": 2, "message": "ok",
           "runs": [run("public", 1, 2.0), run("secret", 1, 2.6, noisy=True), run("public", 2, 2.3), run("secret", 2, 2.3)]}
    console = Console(width=200, record=True)
    console.print(submission_view(sub))
    out = console.export_text()
    assert "secret-seed run: passed  speedup 2.60×" in out
    assert "measured again (attempt 2): public passed speedup 2.30× (2.07–2.53×); secret passed" in out
    assert "speedup over its 4 runs 2.30× (2.10–2.50×)" in out


def test_the_waiting_view_says_when_the_service_measures_again() -> None:
    """While ``submit`` waits: the first measurement's runs (the last one arriving in the same poll
    as the news), then the service's message that it measures again, then the second
    measurement's runs and cases under their attempt (not taken for the first's)."""
    from rich.console import Console

    from kernelrank.cli.views import Progress

    class Status:
        def update(self, text: str) -> None:
            pass

    case = {"kind": "benchmark", "index": 0, "passed": True, "spec": {"M": 1}}

    def run(kind: str, attempt: int) -> dict[str, Any]:
        return {"kind": kind, "attempt": attempt, "status": "passed", "result": {"cases": [case]}}

    console = Console(width=200, record=True)
    view = Progress(console, Status())
    first = [run("public", 1), run("secret", 1)]
    view.update({"id": 3, "status": "running", "attempt": 1, "measurements": 1, "runs": first[:1]}, 1.0)
    view.update({"id": 3, "status": "queued", "attempt": 2, "measurements": 2, "runs": first,
                 "message": "measuring again (measurement 2): its runs disagree (speedups 0.5x and 1x)"}, 2.0)
    view.update({"id": 3, "status": "passed", "attempt": 2, "measurements": 2,
                 "runs": first + [run("public", 2), run("secret", 2)]}, 3.0)
    out = console.export_text()
    assert "measuring again (measurement 2): its runs disagree" in out
    assert out.index("secret run: passed") < out.index("measuring again") < out.index("public (attempt 2) run: passed")
    assert "pass public (attempt 2): benchmark case 0 (M=1)" in out and "secret (attempt 2) run: passed" in out
    assert "verdict" not in out  # the submission's view that follows states the verdict, once


@pytest.mark.parametrize("etags", [True, False], ids=["long-polls", "a server without ETags"])
def test_following_a_submission_waits_on_the_server_or_polls_an_older_one(etags: bool,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``wait_for`` sends the last ``ETag`` with a ``wait`` and reads again at once after a 304 or
    a change; a server that sends no ``ETag`` is polled with sleeps in between (no busy loop)."""
    from kernelrank.cli import client

    states = ["queued", None, "running", None, "passed"]  # None: unchanged (304)
    asked: list[tuple[str | None, float]] = []

    class Api:
        def read_if_changed(self, path: str, etag: str | None, wait_s: float) -> tuple[Any, str | None]:
            asked.append((etag, wait_s))
            state = states.pop(0) if etags else next(s for s in iter(lambda: states.pop(0), "") if s)
            if state is None:
                return None, etag
            return {"id": 7, "status": state}, (f'W/"{state}"' if etags else None)

    slept: list[float] = []
    monkeypatch.setattr(client.time, "sleep", slept.append)
    sub = client.wait_for(Api(), 7, 600.0, None)
    assert sub["status"] == "passed"
    if etags:
        assert asked == [(None, 0.0), ('W/"queued"', 1.0), ('W/"queued"', 1.0), ('W/"running"', 1.0),
                         ('W/"running"', 1.0)]
        assert slept == []
    else:
        assert [e for e, _ in asked] == [None, None, None] and slept == [0.5, 0.5]
