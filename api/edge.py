"""The edge: what every HTTP request meets before a route reads it.

- **Integers in paths and queries** are bounded where they are parsed (:data:`Id`, :data:`Offset`,
  :data:`PageNumber`): a value a database column cannot hold (SQLite and Postgres ``BIGINT`` stop
  at 2^63 - 1) is a 422, never a driver's ``OverflowError``.
- **Bodies are bounded while they are read** (:class:`EdgeMiddleware`, pure ASGI around
  ``receive``): every route reads at most ``settings.max_json_body_bytes`` unless its endpoint is
  marked with :func:`body_limit` (the uploads). A declared ``Content-Length`` over the route's limit
  is refused before a byte is read; a chunked body is counted as it arrives and refused (413) one
  chunk past the limit. Nothing is buffered here: the route's own parser holds at most the limit.
- **A deadline for the body**: the whole body must arrive within
  ``settings.http_body_timeout_seconds`` of its head, or the request is answered 408. Deadlines
  for the request head are the server's (:mod:`kernelrank.api.server`).
- **No token, no body**: a route that needs a token (``CurrentUser``, ``AdminUser``) answers a
  request without an ``Authorization`` header 401 before reading its body (FastAPI parses a
  declared body before it resolves dependencies, so without this the body came first).
- An answer sent before the body was read whole carries ``Connection: close``: the server drops
  the rest instead of reading it to keep the connection.
- A client that goes away mid-body is :class:`ClientGone` (logged with status 499), not a 400
  from the body parser nor a 500.

The limit and the token rule are looked up on the matched route at the first ``receive()`` (the
router has matched by then, and put the route in the scope); before any route matched (a 404, a
path under ``/static``) the default limit applies.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import HTTPException, status
from pydantic import Field

from kernelrank.settings import Settings

#: Largest value of a signed 64-bit column: every integer the API takes for the database is <= it.
INT64_MAX = 2**63 - 1

#: A database id in a path or query (``/submissions/{submission_id}``, token ids): 1 to 2^63 - 1.
Id = Annotated[int, Field(ge=1, le=INT64_MAX)]
#: Rows to skip in a list (``?offset=``): 0 to 2^63 - 1.
Offset = Annotated[int, Field(ge=0, le=INT64_MAX)]
#: A page number of a web list (``?page=``): 1 to 10^9, so that ``(page - 1) * rows`` stays a
#: 64-bit integer for any page size up to 9 x 10^9.
PageNumber = Annotated[int, Field(ge=1, le=10**9)]

#: Status logged for a request whose client went away before it was read (nginx's convention).
CLIENT_CLOSED_REQUEST = 499
#: Bytes a request may carry besides an upload (form fields, multipart boundaries, JSON keys).
ENVELOPE_BYTES = 64 * 1024
#: Worst-case growth of text written as a JSON string (``\\u00XX`` escapes).
JSON_ESCAPE_FACTOR = 6

_LIMIT_ATTR = "__kernelrank_body_limit__"
log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


def submission_body_bytes(settings: Settings) -> int:
    """Largest body of a submission (JSON or form): the code, JSON-escaped at worst, and its envelope."""
    return settings.max_code_bytes * JSON_ESCAPE_FACTOR + ENVELOPE_BYTES


def problem_body_bytes(settings: Settings) -> int:
    """Largest body of a problem push: the archive and its form fields."""
    return settings.max_problem_bytes + ENVELOPE_BYTES


def body_limit(limit: Callable[[Settings], int]) -> Callable[[F], F]:
    """Mark an endpoint as reading bodies up to ``limit(settings)`` bytes (default for unmarked
    endpoints: ``settings.max_json_body_bytes``)."""

    def mark(endpoint: F) -> F:
        setattr(endpoint, _LIMIT_ATTR, limit)
        return endpoint

    return mark


def largest_body_bytes(settings: Settings) -> int:
    """The largest body any route takes: a declared length over it is refused before routing."""
    return max(settings.max_json_body_bytes, submission_body_bytes(settings), problem_body_bytes(settings))


class BodyTooLarge(HTTPException):
    """413: the body is over the route's limit (declared or counted)."""

    def __init__(self, limit: int):
        super().__init__(status.HTTP_413_CONTENT_TOO_LARGE, f"the request body is over this route's limit of "
                                                            f"{limit} bytes", headers={"Connection": "close"})


class BodyTimeout(HTTPException):
    """408: the body did not arrive in time."""

    def __init__(self, seconds: float):
        super().__init__(status.HTTP_408_REQUEST_TIMEOUT, f"the request body did not arrive within {seconds:g} s",
                         headers={"Connection": "close"})


class ClientGone(HTTPException):
    """499 (nginx's "client closed request"): the client went away before its body was read whole.
    Raised from ``receive`` as an ``HTTPException``, so that FastAPI's body parsing passes it on
    instead of answering 400; the answer reaches nobody, the request's log line says 499."""

    def __init__(self) -> None:
        super().__init__(CLIENT_CLOSED_REQUEST, "the client went away before its request was read")


class TokenFirst(HTTPException):
    """401: a route that needs a token, asked without one (before its body is read)."""

    def __init__(self) -> None:
        super().__init__(status.HTTP_401_UNAUTHORIZED,
                         "an API token is required: send 'Authorization: Bearer <token>'",
                         headers={"WWW-Authenticate": "Bearer", "Connection": "close"})


def needs_token(route: Any) -> bool:
    """Whether ``route`` (a FastAPI ``APIRoute``) resolves :func:`kernelrank.api.deps.get_current_user`
    (``CurrentUser``, ``AdminUser``) somewhere among its dependencies."""
    from kernelrank.api.deps import get_current_user

    stack = [getattr(route, "dependant", None)]
    while stack:
        dep = stack.pop()
        if dep is None:
            continue
        if dep.call is get_current_user:
            return True
        stack.extend(dep.dependencies)
    return False


def _header(scope: dict[str, Any], name: bytes) -> bytes | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return value
    return None


class EdgeMiddleware:
    """Pure ASGI middleware: body size limits counted while reading, the body deadline, 401 before
    the body for routes that need a token, and ``Connection: close`` on answers sent before the
    body was read (see the module's docstring)."""

    def __init__(self, app: Any, settings: Settings):
        self.app = app
        self.settings = settings
        self.largest = largest_body_bytes(settings)
        self._token_routes: dict[int, bool] = {}

    def _route_rules(self, scope: dict[str, Any]) -> tuple[int, bool]:
        """``(limit, token_required)`` of the route matched for ``scope``."""
        route = scope.get("route")
        endpoint = getattr(route, "endpoint", None)
        limit_of = getattr(endpoint, _LIMIT_ATTR, None)
        limit = limit_of(self.settings) if limit_of is not None else self.settings.max_json_body_bytes
        if route is None:
            return limit, False
        key = id(route)
        if key not in self._token_routes:
            self._token_routes[key] = needs_token(route)
        return limit, self._token_routes[key]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length_header = _header(scope, b"content-length")
        chunked = b"chunked" in (_header(scope, b"transfer-encoding") or b"").lower()
        declared: int | None = None
        if length_header is not None:
            text = length_header.strip()
            declared = int(text) if text.isdigit() and text.isascii() else None
        if not chunked and not declared:
            await self.app(scope, receive, send)  # no body (or a malformed length: the server refuses it)
            return
        if declared is not None and declared > self.largest:
            await _refuse(send, BodyTooLarge(self.largest))
            return

        settings = self.settings
        deadline = time.monotonic() + settings.http_body_timeout_seconds
        state = {"received": 0, "done": False, "limit": None}

        async def guarded_receive() -> dict[str, Any]:
            if state["done"]:
                return await receive()
            if state["limit"] is None:
                limit, token_required = self._route_rules(scope)
                state["limit"] = limit
                if token_required and _header(scope, b"authorization") is None:
                    raise TokenFirst()
                if declared is not None and declared > limit:
                    raise BodyTooLarge(limit)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BodyTimeout(settings.http_body_timeout_seconds)
            try:
                async with asyncio.timeout(remaining):
                    message = await receive()
            except TimeoutError:
                raise BodyTimeout(settings.http_body_timeout_seconds) from None
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > state["limit"]:
                    raise BodyTooLarge(state["limit"])
                if not message.get("more_body", False):
                    state["done"] = True
            else:  # http.disconnect before the body's end
                state["done"] = True
                log.info("client disconnected before its request was read: %s %s", scope.get("method"),
                         scope.get("path"))
                raise ClientGone()
            return message

        async def guarded_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and not state["done"]:
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
                message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)

        await self.app(scope, guarded_receive, guarded_send)


async def _refuse(send: Any, exc: HTTPException) -> None:
    """Answer ``exc`` as JSON ``{"detail": ...}`` without calling the app."""
    body = json.dumps({"detail": exc.detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in (exc.headers or {}).items()]
    await send({"type": "http.response.start", "status": exc.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body})
