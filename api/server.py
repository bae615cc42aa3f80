"""Serving the API over HTTP: ``python -m kernelrank.api.server --host H --port P`` (what
``kernelrank serve`` and the production compose run): uvicorn, one process, with a deadline for
each request head.

Deadlines against slow clients, from the settings:

- **Request head** (``http_header_timeout_seconds``, default 10 s): :class:`HeadDeadlineProtocol`.
  A connection must send a complete request head (request line and headers) within the deadline
  of opening, and of each response for the next request, or it is closed. Heads are also bounded
  in size (h11's 16 KiB: a 400 past it).
- **Request body** (``http_body_timeout_seconds``): :class:`kernelrank.api.edge.EdgeMiddleware`
  answers 408; its ``Connection: close`` makes uvicorn close the connection.

Why this and not another server. uvicorn (0.54) has no deadline for the request head: its
keep-alive timer runs only after a response, and any byte received cancels it, so a client sending
a header byte every few seconds keeps a connection for as long as it likes (six such
connections, one byte per 2 s, were still open after a minute); h11 bounds the head's size, not
its time, and uvicorn has no option for it. Hypercorn's idle timer is such a deadline, and was
tried: but a connection answered before its body was read (a 401 or 413 to a large upload) was
never closed there — the request's queue to the app was full, and Hypercorn waits for room in it
to deliver ``http.disconnect`` after the app has returned (measured here, 0.18.0). uvicorn closes
such a connection as soon as the answer is sent. So uvicorn stays, and its h11 protocol gets the
one missing timer, a subclass of a few lines over attributes uvicorn has kept for years
(``conn``, ``transport``, ``connection_made``, ``data_received``, ``on_response_complete``);
``tests/api/test_hostile_clients.py`` checks it against the uvicorn installed.

In production a reverse proxy (``deploy/nginx.conf``) sits in front with the same limits and
deadlines, and buffers each request before the API sees it.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from kernelrank.settings import get_settings


class HeadDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection that has not sent a complete request head
    within ``settings.http_header_timeout_seconds`` of opening or of its last response. Bytes of
    an incomplete head do not extend the deadline (they do cancel uvicorn's keep-alive timer)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_timeout_s = get_settings().http_header_timeout_seconds
        self._head_deadline: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._head_deadline = self.loop.call_later(self.head_timeout_s, self._head_overdue)

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_overdue(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.logger.info("closing a connection that sent no complete request head in %g s", self.head_timeout_s)
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # a head arrived (its body, if any, is the edge's)
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm()  # waiting for the next request's head

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def uvicorn_config(host: str, port: int) -> Any:
    """The uvicorn configuration of the API: the app factory, :class:`HeadDeadlineProtocol`, no
    access log (the app logs each request: :mod:`kernelrank.metrics`) and no logging set-up of
    uvicorn's own (its lines go through :mod:`kernelrank.logs`)."""
    import uvicorn

    return uvicorn.Config("kernelrank.api.app:create_app", factory=True, host=host, port=port,
                          http=HeadDeadlineProtocol, access_log=False, log_config=None, lifespan="on")


def main(argv: list[str] | None = None) -> None:
    """Serve the API until SIGINT or SIGTERM."""
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m kernelrank.api.server",
                                     description="Serve the KernelRank API (uvicorn with a request head deadline).")
    parser.add_argument("--host", default=None, help="address to listen on (default: settings.api_host)")
    parser.add_argument("--port", type=int, default=None, help="port (default: settings.api_port)")
    args = parser.parse_args(argv)
    settings = get_settings()
    uvicorn.Server(uvicorn_config(args.host or settings.api_host, args.port or settings.api_port)).run()


if __name__ == "__main__":
    main()
