"""The FastAPI application: ``create_app()`` wires the routers, the settings, the database sessions
and the error handlers. Nothing is built at import time (``uvicorn --factory kernelrank.api.app:create_app``).

Errors answer ``{"detail": message}``: a :class:`~kernelrank.services.ServiceError` with its own
status (404, 409, 413, 422...), an unreachable or failing database with 503, invalid parameters or
bodies 422 with a list of errors that quote at most :data:`INPUT_ECHO_CHARS` characters of the
input. A client that goes away before its request was read is logged as such (status 499, nginx's
"client closed request"), not as a server error. Every request first passes
:class:`~kernelrank.api.edge.EdgeMiddleware` (body limits and deadline, 401 before the body).
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import AsyncIterator

from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from kernelrank.services import ServiceError
from kernelrank.settings import Settings, get_settings

log = logging.getLogger(__name__)

#: Characters of a rejected input a 422 quotes back (and of each ``ctx`` value): enough to
#: recognise it, never the input itself (a 10 MB field was once answered with a 10 MB reply).
INPUT_ECHO_CHARS = 64


def create_app(settings: Settings | None = None) -> FastAPI:
    """The KernelRank HTTP API (OpenAPI at ``/docs``).

    Args:
        settings: the configuration; default :func:`kernelrank.settings.get_settings`, with the
            process's shared engine. Explicit settings get an engine of their own (created
            lazily, on the first request).
    """
    from kernelrank.api.routes import routers

    app = FastAPI(
        title="KernelRank",
        summary="A self-hosted GPU kernel leaderboard: submissions judged and timed outside the submitted code.",
        version=_version(),
        docs_url="/docs",
        openapi_url="/openapi.json",
        lifespan=_lifespan,
    )
    app.state.settings = settings or get_settings()
    app.state.session_factory = _session_factory(settings)

    for router in routers:
        app.include_router(router)

    from kernelrank.api.edge import CLIENT_CLOSED_REQUEST, EdgeMiddleware
    from kernelrank.api.watch import SubmissionWatch
    from kernelrank.logs import configure_logging
    from kernelrank.metrics import ApiMetrics, RequestMetricsMiddleware

    configure_logging(app.state.settings)
    # long-polled reads of submissions (GET /submissions/{id}?wait=): one watcher per process
    app.state.watch = SubmissionWatch(app.state.session_factory, app.state.settings.resolved_database_url())
    app.state.metrics = ApiMetrics(app.state.session_factory, app.state.settings.runner_online_seconds)
    app.add_middleware(EdgeMiddleware, settings=app.state.settings)  # inside the metrics: its refusals are logged
    app.add_middleware(RequestMetricsMiddleware, metrics=app.state.metrics)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": short_errors(exc.errors())}, status_code=422)

    @app.exception_handler(ClientDisconnect)
    async def _client_gone(request: Request, _exc: ClientDisconnect) -> Response:
        log.info("client disconnected before its request was read: %s %s", request.method, request.url.path)
        return Response(status_code=CLIENT_CLOSED_REQUEST)

    @app.exception_handler(ServiceError)
    async def _service_error(_request: Request, exc: ServiceError) -> JSONResponse:
        return JSONResponse({"detail": exc.message}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(OperationalError)
    async def _database_down(request: Request, exc: OperationalError) -> JSONResponse:
        # str(exc) carries the SQL and its parameters (code, token hashes): log the driver error only
        log.error("database error on %s %s: %s: %s", request.method, request.url.path,
                  type(exc.orig).__name__, exc.orig)
        return JSONResponse({"detail": "the database is unavailable; try again later"}, status_code=503)

    from kernelrank.api.openapi import install as install_openapi
    from kernelrank.api.web import install as install_pages  # after the handlers: page errors become HTML

    install_pages(app)
    install_openapi(app)
    return app


def _short(value: Any) -> Any:
    """``value`` as a 422 may quote it: numbers, booleans and ``None`` as they are (a number of
    more than :data:`INPUT_ECHO_CHARS` digits as the text of its first digits), anything else as
    the first :data:`INPUT_ECHO_CHARS` characters of its text, with ``…`` when cut."""
    if value is None or isinstance(value, bool | float):
        return value
    if isinstance(value, int) and len(str(value)) <= INPUT_ECHO_CHARS:  # str(): 4300 digits at most
        return value
    if isinstance(value, bytes | bytearray):
        text = bytes(value[:INPUT_ECHO_CHARS * 4]).decode("utf-8", "replace")
    elif isinstance(value, str):
        text = value
    else:
        text = repr(value) if not isinstance(value, dict | list | tuple) else _container_text(value)
    return text if len(text) <= INPUT_ECHO_CHARS else text[:INPUT_ECHO_CHARS] + "…"


def _container_text(value: Any) -> str:
    import json

    try:
        return json.dumps(value, default=str, ensure_ascii=False)[:INPUT_ECHO_CHARS + 1]
    except (TypeError, ValueError):
        return type(value).__name__


def short_errors(errors: Any) -> list[dict[str, Any]]:
    """Validation errors as a 422 shows them: ``type``, ``loc``, ``msg`` (at most 300 characters),
    and ``input`` and ``ctx`` values cut by :func:`_short`."""
    out = []
    for err in errors:
        item: dict[str, Any] = {"type": str(err.get("type", "value_error")),
                                "loc": [p if isinstance(p, int) else _short(str(p)) for p in err.get("loc", ())],
                                "msg": str(err.get("msg", ""))[:300]}
        if "input" in err:
            item["input"] = _short(err["input"])
        if isinstance(err.get("ctx"), dict):
            item["ctx"] = {str(k): _short(v) for k, v in err["ctx"].items()}
        out.append(item)
    return jsonable_encoder(out)


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Server start: move every object built so far (imported modules, routes, templates) into
    the garbage collector's permanent generation (:func:`gc.freeze`), so full collections stop
    traversing them. Measured with 100,000 submissions in Postgres (bench/leaderboard.py): each
    full collection of the ~150k startup objects paused a request for about 100 ms, which made the
    leaderboard page's p99 174 ms against a p50 of 66 ms; frozen, the p99 was 76 ms. Shutdown:
    the long-polls' listener thread stops."""
    gc.freeze()
    yield
    app.state.watch.close()


def _session_factory(settings: Settings | None):
    """A callable returning a new session: the process's shared sessionmaker, or (for explicit
    settings) one over an engine for their database URL, built on first call."""
    from functools import lru_cache

    from sqlalchemy.orm import sessionmaker

    from kernelrank.db.session import get_sessionmaker, make_engine

    if settings is None:
        return lambda: get_sessionmaker()()

    @lru_cache(maxsize=1)
    def own() -> sessionmaker:
        return sessionmaker(make_engine(settings.resolved_database_url()), expire_on_commit=False)

    return lambda: own()()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kernelrank")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"
