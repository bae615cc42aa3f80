"""Operations endpoints: ``/healthz`` (liveness), ``/readyz`` (database and broker) and
``/metrics`` (Prometheus). Public: they show no URL, secret or user data."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from kernelrank import health

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness (touches no database)")
def healthz() -> dict[str, str]:
    """200 while the process answers."""
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness: the database and the broker answer",
            responses={503: {"description": "A dependency failed; `checks` says which"}})
def readyz(request: Request, response: Response) -> dict:
    """200 with each check ``ok`` when the database answers ``SELECT 1`` and the broker accepts
    a connection (filesystem broker: its folders are writable); else 503 naming the failed ones."""
    checks = [health.check_database(request.app.state.session_factory),
              health.check_broker(request.app.state.settings)]
    ready = all(c.ok for c in checks)
    response.status_code = 200 if ready else 503
    return {"status": "ready" if ready else "unavailable", "checks": {c.name: c.detail for c in checks}}


@router.get("/metrics", summary="Prometheus metrics", response_class=Response,
            responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}})
def metrics(request: Request) -> Response:
    """API latency by route, queue depth per device, job durations and verdict counts
    (see :mod:`kernelrank.metrics`)."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
