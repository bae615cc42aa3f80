"""What the service benchmarks share: the machine's description, a ``kernelrank serve`` in a temp
folder, a private Postgres on loopback, an API process, and percentiles.

Not a test helper: the benchmarks print figures, they assert nothing.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from kernelrank.runner.containment.procfs import host_huge_pages
from kernelrank.vocab import CPU_QUEUE

ROOT = Path(__file__).resolve().parent.parent
API = "/api/v1"


def machine() -> str:
    """CPU model, cores, memory, load average, the host's huge page settings and Python: the line
    recorded with each figure."""
    model = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().split("\n", 1)[0].split()[1])
        mem = f", {kb / 2**20:.0f} GiB"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    # the huge page settings move readying by seconds a run (bench/README.md)
    pages = f"THP {host_huge_pages()}, shmem {host_huge_pages('shmem_enabled')}"
    return f"{model}, {os.cpu_count()} cores{mem}, load average {load}, {pages}, Python {platform.python_version()}"


def percentiles(samples_s: list[float], points: tuple[float, ...] = (50, 95, 99)) -> dict[float, float]:
    """Nearest-rank percentiles of ``samples_s``, in milliseconds."""
    if not samples_s:
        return {p: float("nan") for p in points}
    ordered = sorted(samples_s)
    out = {}
    for p in points:
        rank = max(1, -(-len(ordered) * p // 100))  # ceil(n * p / 100)
        out[p] = ordered[int(rank) - 1] * 1000.0
    return out


#: How long a long poll of :func:`follow` may wait on the server, in s.
LONG_POLL_S = 30.0


def follow(client: httpx.Client, sid: int, timeout_s: float = 300.0, poll_s: float = 0.0) -> dict:
    """Submission ``sid`` as first read with a final status and its ``finished_at`` (``{}`` when
    none came within ``timeout_s``), followed as the CLI follows it: each read after the first
    waits on the server for the next change (``If-None-Match`` and ``wait``); ``poll_s`` > 0 reads
    every ``poll_s`` seconds instead."""
    from kernelrank.vocab import FINAL_STATUSES

    deadline = time.monotonic() + timeout_s
    etag, sub = None, {}
    while time.monotonic() < deadline:
        long_poll = etag is not None and poll_s == 0
        read_s = client.timeout.read
        if long_poll and read_s is not None:  # the server holds a long poll up to its wait: allow for it
            read_s += LONG_POLL_S
        r = client.get(f"{API}/submissions/{sid}", headers={"If-None-Match": etag} if long_poll else {},
                       params={"wait": LONG_POLL_S} if long_poll else {}, timeout=read_s)
        if r.status_code != 304:
            sub, etag = r.json(), r.headers.get("ETag")
        if sub.get("status") in FINAL_STATUSES and sub.get("finished_at") is not None:
            return sub
        if not long_poll:
            time.sleep(poll_s)
    return {}


def describe(name: str, samples_s: list[float]) -> str:
    """``name: n requests, p50 .. ms, p95 .. ms, p99 .. ms, max .. ms``."""
    if not samples_s:
        return f"{name}: no requests"
    p = percentiles(samples_s)
    return (f"{name}: {len(samples_s)} requests, p50 {p[50]:.1f} ms, p95 {p[95]:.1f} ms, p99 {p[99]:.1f} ms, "
            f"max {max(samples_s) * 1000:.1f} ms")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any ``KERNELRANK_*``, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELRANK_")}
    env.update(extra)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _stop_group(proc: subprocess.Popen, sig: int = signal.SIGTERM, grace: float = 30.0) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


@dataclass
class Service:
    """A running ``kernelrank serve``."""

    url: str
    admin_token: str
    data_dir: Path


@contextlib.contextmanager
def embedded_service(root: Path, timeout_s: float = 300.0, **settings: str) -> Iterator[Service]:
    """``kernelrank serve`` (API, control worker, CPU runner) with its data, cache and scratch
    under ``root``; ``settings`` are extra ``KERNELRANK_*`` variables (without the prefix).
    Waits until its CPU runner is online and past its start-up; stops the whole process group at the end."""
    data_dir = root / "data"
    env = clean_env(KERNELRANK_DATA_DIR=str(data_dir), KERNELRANK_CACHE_DIR=str(root / "cache"),
                    KERNELRANK_SCRATCH_DIR=str(root / "scratch"), KERNELRANK_HEARTBEAT_SECONDS="2",
                    **{f"KERNELRANK_{k.upper()}": v for k, v in settings.items()})
    port = free_port()
    out_path, err_path = root / "serve.out", root / "serve.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "kernelrank.cli.main", "serve", "--port", str(port)],
                                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout_s
        token = ""
        while not token:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve did not start:\n{err_path.read_text()[-3000:]}")
            words = out_path.read_text().split()
            token = words[0] if words else ""
            time.sleep(0.2)
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=url, timeout=10) as c:
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"no cpu runner came online:\n{err_path.read_text()[-3000:]}")
                with contextlib.suppress(httpx.TransportError):
                    r = c.get(f"{API}/runners")
                    runners = r.json()["runners"] if r.status_code == 200 else []
                    # past its start-up too (serve says "ready" then): a runner measuring its
                    # ceilings is online, and the first job waited ~6 s for it
                    if any(x["device"] == CPU_QUEUE and x["online"] for x in runners) \
                            and "serve: ready" in err_path.read_text():
                        break
                time.sleep(0.5)
        yield Service(url, token, data_dir)
    finally:
        _stop_group(proc)


@contextlib.contextmanager
def api_process(database_url: str, data_dir: Path, workers: int = 1) -> Iterator[str]:
    """The API alone (uvicorn, ``workers`` processes) over ``database_url``; yields its URL."""
    port = free_port()
    env = clean_env(KERNELRANK_DATABASE_URL=database_url, KERNELRANK_DATA_DIR=str(data_dir),
                    KERNELRANK_LOG_LEVEL="WARNING")
    log = open(data_dir / "api.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "kernelrank.api.app:create_app", "--factory",
                             "--host", "127.0.0.1", "--port", str(port), "--no-access-log",
                             "--workers", str(workers)],
                            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        with httpx.Client(base_url=url, timeout=5) as c:
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the API did not start:\n{(data_dir / 'api.log').read_text()[-3000:]}")
                with contextlib.suppress(httpx.TransportError):
                    if c.get("/healthz").status_code == 200:
                        break
                time.sleep(0.2)
        yield url
    finally:
        _stop_group(proc)
        log.close()


def _pg_bin(name: str) -> str:
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if not found:
        raise RuntimeError("no PostgreSQL server: apt-get install -y postgresql")
    return str(found[-1])


@contextlib.contextmanager
def private_postgres() -> Iterator[str]:
    """A throw-away PostgreSQL cluster in a new temp folder (removed afterwards) listening on a
    free loopback port, run as the ``postgres`` user when this is root; yields a SQLAlchemy URL of
    its ``kernelrank`` database."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kernelrank-pg-") as tmp:
        with _postgres_in(Path(tmp)) as url:
            yield url


@contextlib.contextmanager
def _postgres_in(root: Path) -> Iterator[str]:
    pgdata, sockets = root / "pg", root / "pgsock"
    pgdata.mkdir(parents=True)
    sockets.mkdir(parents=True)
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(pgdata, "postgres")
        shutil.chown(sockets, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    def run(*argv: str) -> None:
        done = subprocess.run([*as_user, *argv], capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{Path(argv[0]).name} failed ({done.returncode}): {done.stderr[-2000:]}")

    run(_pg_bin("initdb"), "-D", str(pgdata), "-U", "postgres", "--auth=trust", "-E", "UTF8")
    run(_pg_bin("pg_ctl"), "-D", str(pgdata), "-w", "-l", str(root / "pg.log"), "-o",
        f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off -c shared_buffers=256MB", "start")
    try:
        run(_pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "kernelrank")
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/kernelrank"
    finally:
        subprocess.run([*as_user, _pg_bin("pg_ctl"), "-D", str(pgdata), "-m", "fast", "stop"],
                       capture_output=True, check=False)
