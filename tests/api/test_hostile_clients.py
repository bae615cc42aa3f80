"""A real API process under hostile clients: a 100 MB body to every route, declared or
chunked, leaves its memory within :data:`MEMORY_BOUND_MIB`; heads and bodies that dribble are cut
off at their deadlines; twenty slow uploads hold no database connection, and other requests are
answered meanwhile.

The server is ``python -m kernelrank.api.server`` (what ``kernelrank serve`` runs) over the API
tests' SQLite world, with short deadlines so the tests take seconds.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.conftest import World
from tests.api.hostile import (
    Dribbler,
    Server,
    api_server,
    body_envelope,
    flood_targets,
    memory_kib,
    request,
    send_body,
)

#: The README's bound: the API process's peak resident memory grows by at most this much while it
#: is sent a 100 MB body on every route (its largest reads: a problem archive of 8 MiB, unpacked).
MEMORY_BOUND_MIB = 64
HEAD_DEADLINE_S = 2.0
BODY_DEADLINE_S = 3.0
BODY = 100 * 1000 * 1000


@pytest.fixture
def live(world: World, tmp_path: Path) -> Iterator[Server]:
    env = {**os.environ, "KERNELRANK_HTTP_HEADER_TIMEOUT_SECONDS": str(HEAD_DEADLINE_S),
           "KERNELRANK_HTTP_BODY_TIMEOUT_SECONDS": str(BODY_DEADLINE_S), "KERNELRANK_LOG_LEVEL": "WARNING",
           "KERNELRANK_RATE_SUBMISSIONS_PER_HOUR": "0", "KERNELRANK_RATE_CONCURRENT_JOBS": "0"}
    with api_server(env, tmp_path / "api.log") as server:
        yield server


def _admin_cookie(world: World) -> str:
    from kernelrank.db.session import session_scope
    from kernelrank.services import users

    with session_scope() as s:
        raw = users.start_web_session(s, users.get_user(s, "root"), 3600)
    return f"kr_session={raw}"


def _pool_in_use(server: Server) -> float:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    for family in text_string_to_metric_families(text):
        if family.name == "kernelrank_database_connections_in_use":
            return family.samples[0].value
    raise AssertionError("no kernelrank_database_connections_in_use in /metrics")


def test_a_100_mb_body_to_every_route_stays_within_the_memory_bound(live: Server, world: World) -> None:
    from kernelrank.api.app import create_app

    headers = {"Authorization": f"Bearer {world.tokens['root']}", "Cookie": _admin_cookie(world)}
    targets = flood_targets(create_app())
    assert len(targets) > 40
    for method, path, _template in targets:  # warm every route first: its imports, templates, caches
        request(live.port, method, path, headers)
    before = memory_kib(live.pid)
    answers = {}
    for method, path, template in targets:
        content_type, prefix = body_envelope(template)
        for chunked in (False, True):
            status, sent = send_body(live.port, method, path, headers, BODY, chunked, content_type, prefix)
            answers[(method, path, chunked)] = status
            assert status is not None and status < 500, (method, path, chunked, status)
            assert sent < BODY, (method, path, chunked, "the whole body was taken")
    after = memory_kib(live.pid)
    grown_mib = (after["VmHWM"] - before["VmRSS"]) / 1024
    print(f"\nAPI RSS {before['VmRSS'] / 1024:.0f} MiB before, peak {after['VmHWM'] / 1024:.0f} MiB "
          f"over {len(answers)} 100 MB bodies: +{grown_mib:.1f} MiB")
    assert grown_mib < MEMORY_BOUND_MIB
    assert answers[("POST", "/api/v1/auth/token", True)] == 413
    assert answers[("POST", "/api/v1/submissions", False)] == 413
    assert _pool_in_use(live) == 0


def test_a_head_that_dribbles_is_cut_off(live: Server) -> None:
    import socket

    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", live.port), timeout=30) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        closed = False
        while time.monotonic() - start < 30:
            try:
                s.sendall(b"X-Slow: 1\r\n")
            except OSError:
                closed = True
                break
            s.settimeout(0.5)
            try:
                if s.recv(1024) == b"":
                    closed = True
                    break
            except TimeoutError:
                pass
    assert closed
    assert time.monotonic() - start < HEAD_DEADLINE_S + 10


def test_twenty_slow_uploads_hold_no_connection_and_stall_nobody(live: Server, world: World) -> None:
    """Twenty submissions sent at a byte per 0.2 s by a signed-in user: meanwhile the pool has no
    connection checked out and another user's reads are answered; each slow upload is answered 408
    and closed at the body deadline."""
    content_type, prefix = body_envelope("/api/v1/submissions")
    slow = Dribbler(live.port, 20, "POST", "/api/v1/submissions",
                    {"Authorization": f"Bearer {world.tokens['alice']}", "Content-Type": content_type},
                    declared=5000, prefix=prefix)
    try:
        for _ in range(5):  # a second of dribbling: every head is in, every body is awaited
            slow.step()
            time.sleep(0.2)
        assert slow.open == 20, slow.statuses
        in_use = _pool_in_use(live)
        answers = [request(live.port, "GET", "/api/v1/submissions", {"Authorization": f"Bearer {world.tokens['bob']}"})
                   for _ in range(10)]
        assert slow.open == 20  # still dribbling while the reads were answered
        assert in_use == 0
        assert [status for status, _ in answers] == [200] * 10
        deadline = time.monotonic() + BODY_DEADLINE_S + 15
        while slow.open and time.monotonic() < deadline:
            slow.step()
            time.sleep(0.2)
        assert slow.open == 0
        assert slow.statuses == [408] * 20
        assert max(slow.closed_after) < BODY_DEADLINE_S + 10
    finally:
        slow.close()
