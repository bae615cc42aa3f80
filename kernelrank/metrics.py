"""Prometheus metrics of the service (``GET /metrics``, prometheus_client's text format).

Two sources, each in one place:

- **API latency**, measured in the API process by :class:`RequestMetricsMiddleware`:
  ``kernelrank_http_request_duration_seconds{method, route, status}`` (a histogram; ``route`` is
  the route's template, e.g. ``/api/v1/submissions/{submission_id}``, never the raw path, so ids
  do not multiply the series). The same middleware writes one log line per request.
- **Jobs**, read from the database at scrape time by :class:`DatabaseCollector` (the control
  worker that records verdicts is another process, and the database is the one record all
  processes share, so the figures agree across API restarts and several API processes):

  - ``kernelrank_queue_depth{device}``: submissions ``queued`` per device queue;
  - ``kernelrank_jobs_running{device}``: submissions ``running``;
  - ``kernelrank_verdicts_total{device, mode, status}``: finished submissions by final status
    (``passed``, ``failed``, ... ``cancelled``);
  - ``kernelrank_job_duration_seconds{device, mode}``: histogram of runner time per finished job
    (``finished_at - started_at``);
  - ``kernelrank_runners_online{device}``: runners with a recent heartbeat (and no stop message);
  - ``kernelrank_database_up``: 1 when the queries above succeeded, else 0 (and no job series);
  - ``kernelrank_database_connections_in_use``: connections of this API process's pool checked
    out at scrape time (the scrape's own queries come after), against ``..._pool_size`` (the
    pool's size plus its overflow): requests hold one only while they query, never while a body
    is still arriving.

Each API app has its own :class:`~prometheus_client.CollectorRegistry` (tests create many apps).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from kernelrank.vocab import ACTIVE_STATUSES, FINAL_STATUSES, SubmissionStatus

log = logging.getLogger("kernelrank.api.access")

#: Upper bounds (s) of the API latency histogram's buckets.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: Upper bounds (s) of the job duration histogram's buckets (a test job takes seconds, a
#: leaderboard job on a GPU minutes).
JOB_BUCKETS = (1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
UNMATCHED = "<unmatched>"


class ApiMetrics:
    """The metrics of one API app: its registry, the latency histogram, the database collector."""

    def __init__(self, session_factory: Callable[[], Any] | None = None, online_within_s: float = 60.0):
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram(
            "kernelrank_http_request_duration_seconds", "Time to answer an API request, by route template.",
            ["method", "route", "status"], buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        if session_factory is not None:
            self.registry.register(DatabaseCollector(session_factory, online_within_s))


def route_template(scope: dict[str, Any]) -> str:
    """The matched route's path template, or :data:`UNMATCHED` (404s, bad methods)."""
    route = scope.get("route")
    return getattr(route, "path", None) or UNMATCHED


#: Suffix of the route label of a read that may wait for a change (``wait`` with
#: ``If-None-Match``): its time is mostly the wait, kept apart from the route's latency.
LONG_POLL = " (long-poll)"


def long_polled(scope: dict[str, Any]) -> bool:
    """Whether a request asked to wait for a change: a ``wait`` query parameter and an
    ``If-None-Match`` header (``GET /api/v1/submissions/{id}``, :mod:`kernelrank.api.watch`)."""
    query = scope.get("query_string") or b""
    if not (query.startswith(b"wait=") or b"&wait=" in query):
        return False
    return any(name == b"if-none-match" for name, _ in scope.get("headers") or ())


class RequestMetricsMiddleware:
    """ASGI middleware: times each HTTP request into ``metrics.latency`` and logs one line
    (method, route, status, duration, and ``submission_id`` for a submission's routes)."""

    def __init__(self, app: Any, metrics: ApiMetrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = {"code": 500}

        async def send_wrapper(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            self._record(scope, status["code"], time.perf_counter() - start)

    def _record(self, scope: dict[str, Any], code: int, elapsed: float) -> None:
        """Observe and log one request; never raises (a failure here would replace the request's
        own answer or exception, and lose its log line): what cannot be recorded is logged."""
        try:
            route = route_template(scope) + (LONG_POLL if long_polled(scope) else "")
            self.metrics.latency.labels(str(scope.get("method", "")), route, str(code)).observe(elapsed)
            extra: dict[str, Any] = {"method": scope.get("method"), "route": route, "status": code,
                                     "duration_ms": round(elapsed * 1000, 2)}
            sub = submission_label(scope)
            if sub is not None:
                extra["submission_id"] = sub
            log.info("%s %s %s", scope.get("method"), route, code, extra=extra)
        except Exception as e:  # noqa: BLE001 - see the docstring
            log.error("could not record a request's metrics: %s", type(e).__name__)


def submission_label(scope: dict[str, Any]) -> int | None:
    """The ``submission_id`` path parameter of a request as an int, or ``None`` when there is none
    or it is not a plain ASCII decimal of at most 19 digits (``¹`` passes ``str.isdigit()``)."""
    value = (scope.get("path_params") or {}).get("submission_id")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value) if value is not None else ""
    if text.isascii() and text.isdigit() and len(text) <= 19:
        return int(text)
    return None


class DatabaseCollector(Collector):
    """Job metrics read from the submissions and runners tables at each scrape (a few GROUP BY
    queries; the queued/running counts use ``ix_submissions_status``)."""

    def __init__(self, session_factory: Callable[[], Any], online_within_s: float = 60.0):
        self.session_factory = session_factory
        self.online_within_s = online_within_s

    def describe(self) -> list:
        return []  # the series depend on the data: let the registry call collect() only at scrape time

    def collect(self):
        yield from self._pool_families()
        up = GaugeMetricFamily("kernelrank_database_up", "1 when the job metrics could be read from the database.")
        try:
            families = self._families()
        except Exception as e:  # noqa: BLE001 - a scrape must answer even when the database is down
            log.warning("metrics: the database could not be read: %s", type(e).__name__)
            up.add_metric([], 0.0)
            yield up
            return
        up.add_metric([], 1.0)
        yield up
        yield from families

    def _pool_families(self) -> list:
        """Connections checked out of the API's pool and its capacity (SQLAlchemy's ``QueuePool``;
        nothing for pools without those figures)."""
        try:
            session = self.session_factory()
            try:
                pool = session.get_bind().pool
            finally:
                session.close()
        except Exception:  # noqa: BLE001 - no engine (an unusable database URL): no pool figures
            return []
        checkedout, size, overflow = (getattr(pool, n, None) for n in ("checkedout", "size", "_max_overflow"))
        if not callable(checkedout) or not callable(size):
            return []
        in_use = GaugeMetricFamily("kernelrank_database_connections_in_use",
                                   "Database connections of this API process checked out of its pool.")
        in_use.add_metric([], float(checkedout()))
        capacity = GaugeMetricFamily("kernelrank_database_pool_size",
                                     "Connections the API's pool may hand out at once (size + overflow).")
        capacity.add_metric([], float(size() + max(0, overflow if isinstance(overflow, int) else 0)))
        return [in_use, capacity]

    def _families(self) -> list:
        session = self.session_factory()
        try:
            return _job_families(session, tuple(FINAL_STATUSES), self.online_within_s)
        finally:
            session.close()


def _duration_seconds(dialect: str, started: Any, finished: Any) -> Any:
    """SQL expression: seconds between two timestamps."""
    from sqlalchemy import func

    if dialect == "sqlite":
        return (func.julianday(finished) - func.julianday(started)) * 86400.0
    return func.extract("epoch", finished - started)


def _job_families(session: Any, final: tuple[str, ...], online_within_s: float) -> list:
    import datetime as dt

    from sqlalchemy import case, func, select

    from kernelrank.db.models import Runner, Submission, utcnow

    depth = GaugeMetricFamily("kernelrank_queue_depth", "Submissions queued per device queue.", labels=["device"])
    running = GaugeMetricFamily("kernelrank_jobs_running", "Submissions running per device queue.", labels=["device"])
    for device, status, n in session.execute(
            select(Submission.device, Submission.status, func.count())
            .where(Submission.status.in_(ACTIVE_STATUSES)).group_by(Submission.device, Submission.status)):
        (depth if status == SubmissionStatus.queued else running).add_metric([device], float(n))

    # verdicts and job durations in one scan of the finished submissions (the largest part of the
    # table): each row's duration is computed once (the OFFSET 0 subquery is not flattened) and
    # placed in its bucket; rows are counted per (device, mode, status, bucket)
    dur = _duration_seconds(session.get_bind().dialect.name, Submission.started_at, Submission.finished_at)
    rows = (select(Submission.device, Submission.mode, Submission.status, dur.label("d"))
            .where(Submission.status.in_(final)).offset(0).subquery())
    bucket = case(*[(rows.c.d <= b, i) for i, b in enumerate(JOB_BUCKETS)],
                  (rows.c.d.is_not(None), len(JOB_BUCKETS)), else_=None).label("bucket")
    verdicts = CounterMetricFamily("kernelrank_verdicts", "Finished submissions by device, mode and final status.",
                                   labels=["device", "mode", "status"])
    finished: dict[tuple[str, str, str], float] = {}
    per_bucket: dict[tuple[str, str], list[float]] = {}  # (device, mode) -> jobs per bucket (+Inf last)
    sums: dict[tuple[str, str], float] = {}
    for device, mode, status, b, n, total in session.execute(
            select(rows.c.device, rows.c.mode, rows.c.status, bucket, func.count(), func.sum(rows.c.d))
            .group_by(rows.c.device, rows.c.mode, rows.c.status, bucket)):
        finished[(device, mode, status)] = finished.get((device, mode, status), 0.0) + n
        if b is not None:
            per_bucket.setdefault((device, mode), [0.0] * (len(JOB_BUCKETS) + 1))[int(b)] += n
            sums[(device, mode)] = sums.get((device, mode), 0.0) + float(total or 0.0)
    for (device, mode, status), n in sorted(finished.items()):
        verdicts.add_metric([device, mode, status], n)
    durations = HistogramMetricFamily("kernelrank_job_duration_seconds",
                                      "Runner time of finished jobs (finished_at - started_at), seconds.",
                                      labels=["device", "mode"])
    for (device, mode), counts in sorted(per_bucket.items()):
        cumulative, running_total = [], 0.0
        for le, c in zip([repr(b) for b in JOB_BUCKETS] + ["+Inf"], counts):
            running_total += c
            cumulative.append((le, running_total))
        durations.add_metric([device, mode], cumulative, sums[(device, mode)])

    online = GaugeMetricFamily("kernelrank_runners_online", "Runners with a recent heartbeat, per device queue.",
                               labels=["device"])
    since = utcnow() - dt.timedelta(seconds=online_within_s)
    for device, n in session.execute(select(Runner.device, func.count())
                                     .where(Runner.last_heartbeat >= since, Runner.stopped_at.is_(None))
                                     .group_by(Runner.device)):
        online.add_metric([device], float(n))
    return [depth, running, verdicts, durations, online]
