"""Hostile HTTP clients against a real API process, for the tests and for
``bench/hostile_clients.py``: the API as ``python -m kernelrank.api.server`` in a subprocess, its
memory (``/proc/<pid>/status``), bodies of any size sent with a declared length or chunked, and
clients that send a byte at a time.

Traffic goes to 127.0.0.1 only, and every loop here is bounded in bytes and time.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: What fills a path parameter when every route is sent a body.
PATH_VALUES = {"submission_id": "1", "token_id": "1", "name": "softmax", "problem": "softmax", "device": "cpu",
               "filename": "triton.py", "action": "open", "path": "style.css"}
#: Routes whose body is a multipart form (the rest get JSON).
MULTIPART_ROUTES = {"/api/v1/submissions", "/api/v1/admin/problems", "/admin/problems", "/problems/{name}/submit"}


@dataclass
class Server:
    url: str
    port: int
    pid: int
    log: Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def api_server(env: dict[str, str], log: Path, start_timeout_s: float = 60.0) -> Iterator[Server]:
    """``python -m kernelrank.api.server`` on a free loopback port with ``env`` (its settings);
    stopped (SIGTERM, then SIGKILL) on exit."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kernelrank.api.server", "--host", "127.0.0.1", "--port",
                                 str(port)], env={**env, "PYTHONUNBUFFERED": "1"}, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + start_timeout_s
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the API did not start:\n{log.read_text(errors='replace')[-3000:]}")
                with contextlib.suppress(OSError):
                    if request(port, "GET", "/healthz")[0] == 200:
                        break
                time.sleep(0.2)
            yield Server(f"http://127.0.0.1:{port}", port, proc.pid, log)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def memory_kib(pid: int) -> dict[str, int]:
    """``VmRSS`` (resident now) and ``VmHWM`` (its peak) of a process, in KiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def reset_peak(pid: int) -> bool:
    """Reset a process's ``VmHWM`` to its current RSS (``/proc/<pid>/clear_refs``, value 5;
    Linux 4.0+); whether it worked."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


_STATUS = re.compile(rb"HTTP/1\.[01] (\d{3})")


def _status(sock: socket.socket, timeout_s: float) -> int | None:
    """The status of the answer on ``sock`` (``None``: closed or no answer in time)."""
    sock.settimeout(timeout_s)
    data = b""
    with contextlib.suppress(OSError):
        while b"\r\n" not in data and len(data) < 4096:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    m = _STATUS.match(data)
    return int(m.group(1)) if m else None


def request(port: int, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b"",
            timeout_s: float = 30.0) -> tuple[int | None, float]:
    """One small request on a new connection: ``(status, seconds to the answer)``."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        head = _head(method, path, {**(headers or {}), "Content-Length": str(len(body))})
        s.sendall(head + body)
        return _status(s, timeout_s), time.monotonic() - start


def _head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def body_envelope(path_template: str) -> tuple[str, bytes]:
    """``(content type, first bytes)`` of a large body for a route: a multipart form whose file
    (or code) part is the bulk, or a JSON object whose string is."""
    if path_template in MULTIPART_ROUTES:
        field = "archive" if "problems" in path_template and "submit" not in path_template else "file"
        head = (b"--hostile\r\nContent-Disposition: form-data; name=\"problem\"\r\n\r\nsoftmax\r\n--hostile\r\n"
                b"Content-Disposition: form-data; name=\"" + field.encode() + b"\"; filename=\"big.py\"\r\n"
                b"Content-Type: application/octet-stream\r\n\r\n")
        return "multipart/form-data; boundary=hostile", head
    return "application/json", b'{"name": "'


def send_body(port: int, method: str, path: str, headers: dict[str, str], size: int, chunked: bool,
              content_type: str, prefix: bytes = b"", timeout_s: float = 60.0) -> tuple[int | None, int]:
    """Send ``method path`` with a body of ``size`` bytes (``prefix`` then ``a``s), with its length
    declared or chunked, as fast as the server takes it; stop when the server answers or closes.
    Returns ``(status or None, body bytes sent)``."""
    piece = 256 * 1024
    sent = 0
    framing = {"Transfer-Encoding": "chunked"} if chunked else {"Content-Length": str(size)}
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(_head(method, path, {**headers, "Content-Type": content_type, **framing}))
        with contextlib.suppress(OSError):
            while sent < size and time.monotonic() - start < timeout_s:
                readable, _, _ = select.select([s], [], [], 0)
                if readable:  # an answer (or a close) before the whole body
                    break
                data = (prefix if sent == 0 else b"") or b""
                data += b"a" * min(piece - len(data), size - sent - len(data))
                s.sendall(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                sent += len(data)
            if sent >= size and chunked:
                s.sendall(b"0\r\n\r\n")
        return _status(s, timeout_s), sent


def flood_targets(app: Any) -> list[tuple[str, str, str]]:
    """``(method, path, path template)`` of every route of ``app`` (API and pages), with its path
    parameters filled from :data:`PATH_VALUES`, and one path no route matches."""
    from fastapi.routing import APIRoute, iter_route_contexts

    out = []
    for route in iter_route_contexts(app.routes):  # included routers' routes, with their prefixes
        if not isinstance(route.original_route, APIRoute):
            continue
        path = route.path_format
        for key, value in PATH_VALUES.items():
            path = path.replace("{" + key + "}", value)
        for method in sorted(set(route.methods) - {"HEAD"}):
            out.append((method, path, route.path_format))
    out.append(("POST", "/no/such/route", "/no/such/route"))
    return out


class Dribbler:
    """``n`` connections sending a request whose body (after ``prefix``) arrives a byte per
    :meth:`step` (a slow upload), all from one thread. :meth:`step` sends the next byte on every open connection and
    collects answers; :attr:`statuses` holds what each got (``None``: closed without one)."""

    def __init__(self, port: int, n: int, method: str, path: str, headers: dict[str, str], declared: int,
                 prefix: bytes = b""):
        self.socks: list[socket.socket | None] = []
        self.statuses: list[int | None] = [None] * n
        self.closed_after: list[float | None] = [None] * n
        self.started = time.monotonic()
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(_head(method, path, {**headers, "Content-Length": str(declared)}) + prefix)
            s.setblocking(False)
            self.socks.append(s)

    @property
    def open(self) -> int:
        return sum(1 for s in self.socks if s is not None)

    def step(self) -> None:
        for i, s in enumerate(self.socks):
            if s is None:
                continue
            try:
                data = s.recv(4096)
                closed = True
                m = _STATUS.match(data)
                if m:
                    self.statuses[i] = int(m.group(1))
            except BlockingIOError:
                closed = False
            except OSError:
                closed = True
            if not closed:
                try:
                    s.send(b"a")
                except BlockingIOError:
                    pass
                except OSError:
                    closed = True
            if closed:
                s.close()
                self.socks[i] = None
                self.closed_after[i] = time.monotonic() - self.started

    def close(self) -> None:
        for s in self.socks:
            if s is not None:
                s.close()
        self.socks = [None] * len(self.socks)
