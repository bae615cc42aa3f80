"""The service as separate processes a test can kill and restart one by one: the API (uvicorn),
the control worker (Celery, with the sweeper) and CPU runners (``kernelrank runner``), each in
its own process group, all over one backend (:class:`tests.servers.Backend`), with the test-only
problem ``double`` and short heartbeat, sweeper and redelivery periods."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import _descendants, free_port
from tests.servers import Backend

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
API = "/api/v1"
FINAL = {"passed", "failed", "error", "timeout", "compile_error", "rejected"}
START_TIMEOUT = 120.0

#: Short periods so faults are noticed in seconds (production: minutes, see kernelrank.settings).
PERIODS = {
    "KERNELRANK_HEARTBEAT_SECONDS": "1",
    "KERNELRANK_RUNNER_LOST_SECONDS": "5",
    "KERNELRANK_SWEEPER_SECONDS": "1",
    "KERNELRANK_BROKER_VISIBILITY_TIMEOUT": "10",
    "KERNELRANK_QUEUED_LOST_SECONDS": "6",
    "KERNELRANK_JOB_GATE_SECONDS": "5",
    "KERNELRANK_JOB_MAX_STARTS": "3",
    # runners restarted after a kill take jobs at once (no ceilings measured: a few seconds each)
    "KERNELRANK_RUNNER_CEILINGS": "false",
}


def sleeper(seconds: float) -> bytes:
    """A correct ``double`` kernel whose first call sleeps ``seconds`` (a job to kill mid-run)."""
    return (f"import time\n_slept = False\n\n\ndef custom_kernel(data):\n    global _slept\n"
            f"    if not _slept:\n        _slept = True\n        time.sleep({seconds})\n"
            f"    return data[0] + data[0]\n").encode()


QUICK = (FIXTURES / "submissions" / "double_ok.py").read_bytes()


@dataclass
class Stack:
    """One service's processes; ``start(role)`` / ``kill(role)`` with role ``api``, ``control``
    or ``runner``; the admin token from the one-shot preparation."""

    root: Path
    backend: Backend
    env: dict[str, str]
    port: int
    token: str = ""
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def argv(self, role: str) -> list[str]:
        py = sys.executable
        if role == "api":
            return [py, "-m", "uvicorn", "kernelrank.api.app:create_app", "--factory", "--host", "127.0.0.1",
                    "--port", str(self.port)]
        if role == "control":
            return [py, "-m", "celery", "-A", "kernelrank.control", "worker", "-Q", "control", "-P", "solo",
                    "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"control{self._starts}@%h",
                    "--loglevel", "INFO"]
        if role == "runner":
            return [py, "-m", "kernelrank.cli.main", "runner", "--device", "cpu", "--no-self-test"]
        raise ValueError(role)

    def prepare(self) -> None:
        """Migrate, load the problems, create the admin (``kernelrank serve --init-only``)."""
        out = subprocess.run([sys.executable, "-m", "kernelrank.cli.main", "serve", "--init-only"], env=self.env,
                             capture_output=True, text=True, timeout=300, cwd=self.root)
        assert out.returncode == 0, out.stderr[-3000:]
        self.token = out.stdout.split()[0]

    def start(self, role: str) -> subprocess.Popen[bytes]:
        assert role not in self.procs or self.procs[role].poll() is not None, f"{role} is running"
        self._starts += 1
        log = open(self.root / f"{role}.log", "ab")  # noqa: SIM115 - the child keeps it
        log.write(f"\n=== start {self._starts} ===\n".encode())
        log.flush()
        proc = subprocess.Popen(self.argv(role), env=self.env, cwd=self.root, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.procs[role] = proc
        return proc

    def send_signal(self, role: str, sig: int) -> None:
        """Send ``sig`` to the role's process and everything it started."""
        proc = self.procs.get(role)
        if proc is None:
            return
        tree = _descendants(proc.pid)
        for pid in [proc.pid, *tree]:
            for send in (os.killpg, os.kill):
                try:
                    send(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass

    def kill(self, role: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the role's process and everything it started; wait for it to end."""
        proc = self.procs.get(role)
        if proc is None:
            return
        self.send_signal(role, sig)
        if sig != signal.SIGKILL:
            self.send_signal(role, signal.SIGCONT)  # a stopped process would never see it
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill(role, signal.SIGKILL)

    def close(self) -> None:
        """Kill every process of the stack, then unmount and remove the job folders a runner killed
        outright (SIGKILL: nothing of it could) left in its scratch folder."""
        from kernelrank.runner.containment.jobdisk import sweep_scratch

        pids = [pid for proc in self.procs.values() for pid in (proc.pid, *_descendants(proc.pid))]
        for role in list(self.procs):
            self.kill(role)
        # a judge's folder is swept once its process is gone: kill waits for the role's own process only
        gone_by = time.monotonic() + 10.0
        while any(os.path.exists(f"/proc/{pid}") for pid in pids) and time.monotonic() < gone_by:
            time.sleep(0.05)
        sweep_scratch(self.root / "scratch")

    def client(self, token: str | None = None) -> httpx.Client:
        token = self.token if token is None else token
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=30.0)

    def logs(self, tail: int = 3000) -> str:
        out = []
        for path in sorted(self.root.glob("*.log")):
            out.append(f"--- {path.name} ---\n{path.read_text(errors='replace')[-tail:]}")
        return "\n".join(out)

    # -- waiting ----------------------------------------------------------------------------------
    def wait_for(self, what: str, check: Callable[[], Any], timeout: float = 120.0, every: float = 0.5) -> Any:
        """Poll ``check`` until it returns a true value (returned); fails with the logs on timeout.
        Transport errors (API down) count as not yet."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = check()
            except httpx.TransportError:
                value = None
            if value:
                return value
            time.sleep(every)
        pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{self.logs()}")

    def api_up(self) -> None:
        def ok() -> bool:
            with self.client() as c:
                return c.get("/healthz").status_code == 200
        self.wait_for("the API", ok, START_TIMEOUT)

    def runner_online(self, exclude: set[str] = frozenset()) -> str:
        """Wait for a cpu runner (not in ``exclude``) with a heartbeat from the last 3 s, past its
        start (its heartbeats no longer say ``starting``); its name."""
        def fresh() -> str | None:
            with self.client() as c:
                rows = c.get(f"{API}/runners").json()["runners"]
            for r in rows:
                if (r["device"] == "cpu" and r["name"] not in exclude and _age_s(r["last_heartbeat"]) < 3
                        and not (r.get("info") or {}).get("state")):
                    return r["name"]
            return None
        return self.wait_for("a cpu runner", fresh, START_TIMEOUT)

    def submit(self, code: bytes, mode: str = "test") -> int:
        with self.client() as c:
            r = c.post(f"{API}/submissions", data={"problem": "double", "device": "cpu", "mode": mode},
                       files={"file": ("k.py", code, "text/x-python")})
        assert r.status_code == 202, r.text
        return int(r.json()["id"])

    def get(self, sid: int) -> dict[str, Any]:
        with self.client() as c:
            r = c.get(f"{API}/submissions/{sid}")
        assert r.status_code == 200, r.text
        return r.json()

    def wait_status(self, sid: int, statuses: set[str], timeout: float = 120.0) -> dict[str, Any]:
        return self.wait_for(f"submission {sid} to be one of {sorted(statuses)}",
                             lambda: (lambda s: s if s["status"] in statuses else None)(self.get(sid)), timeout)

    def starts(self, sid: int) -> int:
        """How many times the submission's job was started, read from the database (not part of the API)."""
        return int(self.query("SELECT starts FROM submissions WHERE id = :i", i=sid)[0][0])

    def runner_of(self, sid: int) -> str | None:
        """The runner the submission was last started on (database)."""
        return self.query("SELECT runner FROM submissions WHERE id = :i", i=sid)[0][0]

    def run_rows(self, sid: int) -> list[tuple[str, str]]:
        """``(kind, runner)`` of every recorded run of the submission (database)."""
        return [tuple(r) for r in self.query("SELECT kind, runner FROM runs WHERE submission_id = :i ORDER BY id",
                                             i=sid)]

    def query(self, sql: str, **params: Any) -> list[Any]:
        from sqlalchemy import create_engine, text

        engine = create_engine(self.database_url)
        try:
            with engine.connect() as conn:
                return list(conn.execute(text(sql), params))
        finally:
            engine.dispose()

    @property
    def database_url(self) -> str:
        return self.backend.database_url or f"sqlite:///{self.root / 'data' / 'kernelrank.db'}"


def _age_s(iso: str) -> float:
    import datetime as dt

    t = dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return (dt.datetime.now(dt.timezone.utc) - t).total_seconds()


def make_stack(root: Path, backend: Backend, **settings: str) -> Stack:
    """A prepared stack in ``root``; ``settings`` override :data:`PERIODS` (``RUNNER_LOST_SECONDS="9"``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELRANK_")}
    env.update({
        "KERNELRANK_DATA_DIR": str(root / "data"),
        "KERNELRANK_CACHE_DIR": str(root / "cache"),
        "KERNELRANK_SCRATCH_DIR": str(root / "scratch"),
        "KERNELRANK_PROBLEMS_DIR": str(FIXTURES / "problems"),
        "KERNELRANK_REFERENCE_KERNELS_DIR": str(FIXTURES / "reference_kernels"),
        "PYTHONUNBUFFERED": "1",
        **PERIODS,
        **{f"KERNELRANK_{k}": v for k, v in settings.items()},
        **backend.env(),
    })
    stack = Stack(root, backend, env, free_port())
    stack.prepare()
    return stack
