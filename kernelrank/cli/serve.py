"""``kernelrank serve``: the whole service on one machine, in one command.

Prepares the data folder (database migrated, problems loaded, a first admin), then runs three
child processes and watches them: the HTTP API (uvicorn, :mod:`kernelrank.api.server`), the
control worker (writes runners' reports to the database) and a CPU runner. Their output goes to ``<data_dir>/logs/<name>.log``.
Ctrl-C or SIGTERM stops them all (each asked to stop, killed after a grace period); when one of
them dies, serve names it, stops the others and exits with status 1.

Defaults need no server: SQLite and the filesystem broker, both in the data folder
(``./.kernelrank`` or ``KERNELRANK_DATA_DIR``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable, TextIO

import typer

from kernelrank.vocab import CPU_QUEUE

#: Seconds a child is given to stop after its stop signal, before it is killed.
GRACE_SECONDS = 10.0
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


@dataclass
class Child:
    """One supervised child process, in its own process group."""

    name: str
    argv: list[str]
    log_path: Path
    #: Signal asking it to stop: Celery runners get SIGQUIT (cold shutdown: the running job is
    #: handed back to the queue instead of being waited for).
    stop_signal: int = signal.SIGTERM
    proc: subprocess.Popen[bytes] | None = None
    log_file: TextIO | None = field(default=None, repr=False)

    def start(self, env: dict[str, str]) -> None:
        self.log_file = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in stop()
        self.log_file.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} starting {self.name} ===\n")
        self.log_file.flush()
        self.proc = subprocess.Popen(self.argv, env=env, stdin=subprocess.DEVNULL, stdout=self.log_file,
                                     stderr=subprocess.STDOUT, process_group=0, preexec_fn=_die_with_parent)

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the child's process group (it and the processes it started)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, deadline: float) -> None:
        """Wait until ``deadline`` (monotonic) for it to exit, then kill its group."""
        if self.proc is not None:
            try:
                self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail this way
                    pass
            self.signal(signal.SIGKILL)  # anything of its group that outlived it
        if self.log_file is not None:
            self.log_file.close()
            self.log_file = None


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """In the child, before exec: get SIGTERM when serve dies, whatever killed it (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def _set_subreaper(on: bool) -> bool:
    """While on, orphaned descendants (a judged kernel whose runner process died) are adopted by
    this process, so they can be killed at the end (Linux); returns whether it worked."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, int(on)) == 0
    except (OSError, AttributeError):
        return False


def _adopted_children(known: set[int]) -> list[int]:
    """Pids whose parent is this process and that serve did not start itself."""
    me, found = os.getpid(), []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) in known:
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[1] == str(me):
            found.append(int(entry))
    return found


def _reap_adopted(known: set[int], kill: bool) -> None:
    """Reap exited adopted orphans; with ``kill``, kill the live ones (and their process groups:
    a judged kernel leads its own) first."""
    for pid in _adopted_children(known):
        if kill:
            for send in (os.killpg, os.kill):
                try:
                    send(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        try:
            os.waitpid(pid, 0 if kill else os.WNOHANG)
        except ChildProcessError:
            pass


def prepare(data_dir: Path) -> str | None:
    """Migrate the database, load the problems (a folder whose content is new becomes the
    problem's current revision), and create the first admin when there is none.

    Returns the new admin's token (only on the start that created it), else ``None``.
    """
    from kernelrank.db.session import migrate, session_scope
    from kernelrank.problems import load_all
    from kernelrank.services import problems as problem_service
    from kernelrank.services import users

    data_dir.mkdir(parents=True, exist_ok=True)
    migrate()
    with session_scope() as session:
        # only new folder content becomes current: a revision pushed over the API survives a restart
        problem_service.sync_all(session, load_all(), make_current=False)
        if users.any_admin(session):
            return None
        _, token = users.create_user(session, "admin", admin=True)
    return token


def login_host(host: str) -> str:
    """The address a client on this machine reaches the API at: ``127.0.0.1`` when the API listens
    on every address (``0.0.0.0``, ``::``, empty), else ``host`` (an IPv6 address in brackets)."""
    if host in ("", "0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def children(host: str, port: int, logs: Path) -> list[Child]:
    """The processes of the service: API, control worker, CPU runner."""
    py = sys.executable
    celery_flags = ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    return [
        # uvicorn with a deadline for request heads; the app logs each request as JSON
        Child("api", [py, "-m", "kernelrank.api.server", "--host", host, "--port", str(port)], logs / "api.log"),
        Child("control", [py, "-m", "celery", "-A", "kernelrank.control", "worker", "-Q", "control", "-P", "solo",
                          *celery_flags, "-n", "control@%h", "--loglevel", "INFO"], logs / "control.log"),
        # the embedded trial's runner starts at once; `kernelrank runner --self-test` checks this machine
        Child("runner", [py, "-m", "kernelrank.cli.main", "runner", "--device", "cpu", "--no-self-test"],
              logs / "runner.log",
              stop_signal=signal.SIGQUIT),
    ]


def supervise(procs: list[Child], env: dict[str, str], say: Any, ready: Callable[[], str | None] | None = None) -> int:
    """Start ``procs`` and watch them until a stop signal (returns 0) or one of them exits (1);
    ``ready`` (polled every :data:`READY_POLL_S` until it answers) says when the service takes
    jobs: its answer is said once."""
    stopping: list[int] = []
    started, polled = time.monotonic(), 0.0

    def on_signal(signum: int, _frame: Any) -> None:
        stopping.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    subreaper = _set_subreaper(True)
    status = 0
    try:
        for child in procs:
            if stopping:
                break
            child.start(env)
        while not stopping:
            dead = next((c for c in procs if c.proc is not None and c.proc.poll() is not None), None)
            if dead is not None:
                assert dead.proc is not None
                say(f"serve: {dead.name} exited with status {dead.proc.returncode}; see {dead.log_path}; "
                    "stopping the others")
                status = 1
                break
            if subreaper:  # an adopted process lost its judge: nothing will ever ask it for anything
                _reap_adopted({c.proc.pid for c in procs if c.proc is not None}, kill=True)
            if ready is not None and time.monotonic() - polled >= READY_POLL_S:
                polled = time.monotonic()
                answer = _poll(ready)
                if answer:
                    say(f"serve: ready: {answer} ({polled - started:.0f} s after start)")
                    ready = None
            time.sleep(0.5)
        else:
            say(f"serve: {signal.Signals(stopping[0]).name}: stopping")
    finally:
        for child in procs:
            if child.proc is not None and child.proc.poll() is None:
                child.signal(child.stop_signal)
        deadline = time.monotonic() + GRACE_SECONDS
        for child in procs:
            child.stop(deadline)
        if subreaper:
            _reap_adopted({c.proc.pid for c in procs if c.proc is not None}, kill=True)
            _set_subreaper(False)
        for s, handler in previous.items():
            signal.signal(s, handler)
    return status


#: Seconds between asks of whether the service's runner takes jobs yet.
READY_POLL_S = 1.0


def _poll(ready: Callable[[], str | None]) -> str | None:
    try:
        return ready()
    except Exception:  # noqa: BLE001 - the database may not answer yet: asked again
        return None


def runner_ready(online_within_s: float) -> str | None:
    """``"runner NAME takes cpu jobs"`` once a CPU runner is online and past its start-up (its
    heartbeat no longer says ``starting``), else ``None``."""
    from kernelrank.db.session import session_scope
    from kernelrank.services import runners

    with session_scope() as session:
        for r in runners.online(session, online_within_s):
            state = str((r.info or {}).get("state", "")) if isinstance(r.info, dict) else ""
            if r.device == CPU_QUEUE and not state.startswith("starting"):
                return f"runner {r.name} takes {CPU_QUEUE} jobs"
    return None


def serve(
    host: Annotated[str, typer.Option(help="Address the API listens on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port of the API.", min=1, max=65535)] = 8000,
    init_only: Annotated[bool, typer.Option("--init-only", help="Only migrate the database, load the problems "
                                            "and create the first admin, then exit (a deployment's one-shot step).")] = False,
) -> None:
    """Run the API, the control worker and a CPU runner until Ctrl-C.

    Before starting them: migrates the database, loads every problem under problems/, and on the
    very first start creates the user ``admin`` and prints its API token, alone on stdout, once.
    """
    from kernelrank.cli.runner_cmd import broker_description
    from kernelrank.settings import get_settings

    settings = get_settings()
    data_dir = settings.data_dir.expanduser().resolve()
    env = {**os.environ, "KERNELRANK_DATA_DIR": str(data_dir)}
    os.environ["KERNELRANK_DATA_DIR"] = str(data_dir)  # this process's own settings agree with its children's
    get_settings.cache_clear()
    settings = get_settings()
    logs = data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    def say(message: str) -> None:
        typer.echo(message, err=True)

    try:
        token = prepare(data_dir)
    except Exception as e:  # noqa: BLE001 - any setup failure ends serve with a message
        say(f"serve: cannot prepare {data_dir}: {type(e).__name__}: {e}")
        raise typer.Exit(1) from None
    url = f"http://{login_host(host)}:{port}"
    if token is not None:
        say("serve: created the user 'admin'. Its API token is shown once, below; keep it secret:")
        typer.echo(token)
        say(f"serve: to use it from the CLI, paste:\n    kernelrank login --server {url} --token {token}")
    else:
        say(f"serve: to log in from the CLI: kernelrank login --server {url} (it asks for your API token)")
    if init_only:
        say(f"serve: {data_dir} is ready (database migrated, problems loaded)")
        return
    say(f"serve: data in {data_dir}; {broker_description(settings.resolved_broker_url(), str(settings.broker_folder))}")
    say(f"serve: API on http://{host}:{port} (docs at /docs); logs in {logs}")
    say("serve: starting the API, the control worker and a CPU runner (submissions made before the runner is "
        "ready wait in its queue)")
    raise typer.Exit(supervise(children(host, port, logs), env, say,
                               ready=lambda: runner_ready(settings.runner_online_seconds)))
