"""The real service for end-to-end tests: ``kernelrank serve`` (API, control worker, CPU runner as
child processes) on a free loopback port, with a fresh data folder, over the embedded default
(SQLite and the filesystem broker) and over Redis and PostgreSQL, torn down whatever happens."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.servers import Backend

#: Seconds allowed for ``serve`` to start and its runner to report in.
START_TIMEOUT = 180.0
API = "/api/v1"


@dataclass
class Service:
    """A running ``kernelrank serve``: its URL, the first admin's token, its folders."""

    url: str
    admin_token: str
    data_dir: Path
    cache_dir: Path
    proc: subprocess.Popen[bytes]
    backend: Backend = Backend("embedded")

    def settings(self) -> Any:
        """Settings reaching this service's broker and database (for sending to it directly)."""
        from kernelrank.settings import Settings

        return Settings(data_dir=self.data_dir, broker_url=self.backend.broker_url,
                        database_url=self.backend.database_url, broker_key_prefix=self.backend.key_prefix)

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0)

    def logs(self, tail: int = 4000) -> str:
        """The end of every log of the service (for failure messages)."""
        out = []
        for path in sorted((self.data_dir / "logs").glob("*.log")) + [self.data_dir.parent / "serve.err"]:
            if path.exists():
                out.append(f"--- {path.name} ---\n{path.read_text(errors='replace')[-tail:]}")
        return "\n".join(out)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _descendants(root: int) -> list[int]:
    """Pids of ``root``'s descendants, from /proc (parents before children)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                ppid = int(f.read().rsplit(")", 1)[-1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            found.append(pid)
            todo.append(pid)
    return found


def stop(proc: subprocess.Popen[bytes], grace: float = 30.0) -> None:
    """SIGTERM ``serve`` (it stops its children), then SIGKILL whatever of its tree is left."""
    tree = _descendants(proc.pid)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    for pid in [proc.pid, *tree]:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    proc.wait(timeout=10)


def serve(tmp_path_factory: pytest.TempPathFactory, backend: Backend) -> Iterator[Service]:
    """``kernelrank serve`` over ``backend`` with its own data folder, cache and scratch and
    heartbeats every 2 s, until the generator is closed (the ``service`` fixture of
    ``tests/conftest.py``, one per backend for the whole session)."""
    root = tmp_path_factory.mktemp(f"e2e-{backend.name}")
    data_dir, cache_dir = root / "data", root / "cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELRANK_")}
    env.update({
        "KERNELRANK_DATA_DIR": str(data_dir),
        "KERNELRANK_CACHE_DIR": str(cache_dir),
        "KERNELRANK_SCRATCH_DIR": str(root / "scratch"),
        "KERNELRANK_HEARTBEAT_SECONDS": "2",
        # a noisy entry measured again at once, twice at most, as before the back-off (whose
        # schedule tests/api/test_remeasure.py checks): a verdict within the tests' timeouts
        "KERNELRANK_REMEASURE_DELAY_SECONDS": "0",
        "KERNELRANK_REMEASURES": "2",
        "PYTHONUNBUFFERED": "1",
        **backend.env(),
    })
    port = free_port()
    out_path, err_path = root / "serve.out", root / "serve.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "kernelrank.cli.main", "serve", "--port", str(port)],
                                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
    svc = None
    try:
        token = _wait_for_token(proc, out_path, err_path)
        svc = Service(f"http://127.0.0.1:{port}", token, data_dir, cache_dir, proc, backend)
        _wait_for_cpu_runner(svc)
        yield svc
    finally:
        stop(proc)
    # SIGTERM stops serve and its children cleanly: status 0
    assert proc.returncode == 0, f"serve ended with {proc.returncode}:\n{svc.logs() if svc else ''}"


def _wait_for_token(proc: subprocess.Popen[bytes], out_path: Path, err_path: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        lines = out_path.read_text().split()
        if lines:
            return lines[0]
        if proc.poll() is not None:
            pytest.fail(f"serve exited with {proc.returncode}:\n{err_path.read_text()}")
        time.sleep(0.2)
    pytest.fail(f"serve printed no admin token:\n{err_path.read_text()}")


def _wait_for_cpu_runner(svc: Service) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    with svc.client() as client:
        while time.monotonic() < deadline:
            if svc.proc.poll() is not None:
                pytest.fail(f"serve exited with {svc.proc.returncode}:\n{svc.logs()}")
            try:
                r = client.get(f"{API}/runners")
                if r.status_code == 200 and any(x["device"] == "cpu" and x["online"] and not (x.get("info") or {}).get("state")
                                             for x in r.json()["runners"]):  # online and past its start
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
    pytest.fail(f"no cpu runner came online within {START_TIMEOUT:.0f} s:\n{svc.logs()}")
