"""The API under hostile clients: its peak memory while each route is sent a 100 MB
body (declared length, then chunked), and the latency of ordinary requests while 0, 20 and 200
slow clients dribble submission bodies (a byte per client every 0.5 s).

The API is ``python -m kernelrank.api.server`` (uvicorn with the head deadline, as ``kernelrank
serve`` runs it) over a fresh SQLite database in a temp folder, with the default limits and
deadlines. Traffic goes to 127.0.0.1 only.

Usage: ``python bench/hostile_clients.py [--seconds 15] [--body-mb 100]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.service import describe, machine  # noqa: E402
from tests.api.hostile import (  # noqa: E402
    Dribbler,
    api_server,
    body_envelope,
    flood_targets,
    memory_kib,
    request,
    reset_peak,
    send_body,
)


def prepare(folder: Path) -> tuple[dict[str, str], dict[str, str], str]:
    """A migrated database with the problems, an admin, two users and an online cpu runner;
    returns the server's environment, the tokens and the admin's web session cookie."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KERNELRANK_")},
           "KERNELRANK_DATA_DIR": str(folder / "data"), "KERNELRANK_DATABASE_URL": f"sqlite:///{folder / 'k.db'}",
           "KERNELRANK_LOG_LEVEL": "WARNING"}
    os.environ.update(env)
    from kernelrank.db.session import migrate, session_scope
    from kernelrank.problems import load_all
    from kernelrank.services import problems, runners, users
    from kernelrank.settings import get_settings

    get_settings.cache_clear()
    migrate()
    with session_scope() as s:
        problems.sync_all(s, load_all())
        tokens = {name: users.create_user(s, name, admin=name == "root")[1] for name in ("root", "alice", "bob")}
        runners.heartbeat(s, "bench-cpu", "cpu", {"name": "bench"}, "0", jobs_done=0)
        cookie = users.start_web_session(s, users.get_user(s, "root"), 3600)
    return env, tokens, f"kr_session={cookie}"


def memory(port: int, pid: int, tokens: dict[str, str], cookie: str, size: int) -> None:
    from kernelrank.api.app import create_app

    headers = {"Authorization": f"Bearer {tokens['root']}", "Cookie": cookie}
    targets = flood_targets(create_app())
    for method, path, _ in targets:
        request(port, method, path, headers)
    idle = memory_kib(pid)["VmRSS"]
    print(f"API resident after warming every route: {idle / 1024:.0f} MiB")
    worst: list[tuple[float, str]] = []
    resettable = reset_peak(pid)
    for method, path, template in targets:
        content_type, prefix = body_envelope(template)
        for chunked in (False, True):
            if resettable:
                reset_peak(pid)
            start = memory_kib(pid)["VmRSS"]
            status, sent = send_body(port, method, path, headers, size, chunked, content_type, prefix)
            peak = memory_kib(pid)["VmHWM"]
            label = (f"{method} {template} ({'chunked' if chunked else 'declared'}): {status} after {sent / 1e6:.2f} MB "
                     "sent (socket buffers included)")
            worst.append(((peak - start) / 1024, label))
    overall = memory_kib(pid)["VmHWM"]
    worst.sort(reverse=True)
    print(f"{len(worst)} bodies of {size / 1e6:.0f} MB; peak resident {overall / 1024:.0f} MiB "
          f"({(overall - idle) / 1024:+.1f} MiB over idle)" + ("" if resettable else " (peak not resettable here)"))
    for grown, label in worst[:6]:
        print(f"  {grown:+6.1f} MiB  {label}")


def latency(port: int, tokens: dict[str, str], slow_clients: int, seconds: float) -> None:
    from tests.api.hostile import body_envelope as envelope

    content_type, prefix = envelope("/api/v1/submissions")
    slow = Dribbler(port, slow_clients, "POST", "/api/v1/submissions",
                    {"Authorization": f"Bearer {tokens['alice']}", "Content-Type": content_type},
                    declared=200_000, prefix=prefix) if slow_clients else None
    stop = threading.Event()

    def dribble() -> None:
        while slow is not None and not stop.is_set():
            slow.step()
            stop.wait(0.5)

    thread = threading.Thread(target=dribble, daemon=True)
    thread.start()
    samples: list[float] = []
    statuses: dict[int | None, int] = {}
    end = time.monotonic() + seconds
    reads = ({"Authorization": f"Bearer {tokens['bob']}"}, "/api/v1/submissions"), ({}, "/api/v1/problems")
    i = 0
    while time.monotonic() < end:
        headers, path = reads[i % 2]
        status, took = request(port, "GET", path, headers)
        statuses[status] = statuses.get(status, 0) + 1
        samples.append(took)
        i += 1
    still_open = slow.open if slow is not None else 0
    stop.set()
    thread.join()
    if slow is not None:
        slow.close()
    print(describe(f"{slow_clients:3d} slow clients ({still_open} still open at the end)", samples)
          + f"; statuses {dict(sorted(statuses.items(), key=str))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="seconds of ordinary requests per load")
    parser.add_argument("--body-mb", type=int, default=100, help="size of the bodies sent to every route")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="kernelrank-hostile-") as tmp:
        env, tokens, cookie = prepare(Path(tmp))
        with api_server(env, Path(tmp) / "api.log") as server:
            memory(server.port, server.pid, tokens, cookie, args.body_mb * 1000 * 1000)
            for n in (0, 20, 200):
                latency(server.port, tokens, n, args.seconds)
            print(f"API resident at the end: {memory_kib(server.pid)['VmRSS'] / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
