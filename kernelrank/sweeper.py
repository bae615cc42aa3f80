"""The sweeper: a thread of the control worker that keeps every job moving to a verdict.

Every ``settings.sweeper_seconds`` it runs :func:`kernelrank.services.jobs.sweep` in one
transaction, commits, then sends the requeued jobs to their device queues. It waits
``settings.runner_lost_seconds`` after the control worker starts before its first sweep, so that
runners' heartbeats that queued up while the control worker was down are written first (a runner
alive all along is not taken for a vanished one). Several control workers may each run one: on
Postgres the rows a sweep looks at are locked (``SKIP LOCKED``), and a job sent twice is started
once (the runner's go-ahead, :func:`kernelrank.services.jobs.start_job`).
"""

from __future__ import annotations

import logging
import threading

from kernelrank.services.jobs import SweepReport

log = logging.getLogger("kernelrank.sweeper")


def sweep_once() -> SweepReport:
    """One sweep over the configured database and broker; returns what it did.

    Raises:
        sqlalchemy.exc.OperationalError: the database is unreachable (nothing was changed).
    """
    from kernelrank.db.session import session_scope
    from kernelrank.queue import pending_jobs, send_job
    from kernelrank.services.jobs import sweep
    from kernelrank.settings import get_settings

    settings = get_settings()

    def pending(queue: str) -> set[int] | None:
        try:
            return pending_jobs(queue)
        except Exception as e:  # noqa: BLE001 - broker down: requeue nothing from this queue now
            log.warning("cannot look into queue %s: %s", queue, type(e).__name__)
            return None

    with session_scope() as session:
        report = sweep(session, max_starts=settings.job_max_starts, runner_lost_s=settings.runner_lost_seconds,
                       queued_lost_s=settings.queued_lost_seconds, pending=pending)
    for job in report.requeued:
        try:
            send_job(job.message, job.queue, job.time_limit)
            log.warning("submission %s: requeued on %s (its runner vanished or its message was lost)",
                        job.submission_id, job.queue)
        except Exception as e:  # noqa: BLE001 - stays queued; the next sweep sends it again
            log.error("submission %s: could not requeue on %s: %s", job.submission_id, job.queue, type(e).__name__)
    for job in report.remeasured:
        try:
            send_job(job.message, job.queue, job.time_limit)
            log.info("submission %s: measured again (attempt %s) on %s, its back-off over", job.submission_id,
                     job.message.get("attempt"), job.queue)
        except Exception as e:  # noqa: BLE001 - the next sweep cannot tell: it stays queued, found as lost
            log.error("submission %s: could not send its next measurement on %s: %s", job.submission_id, job.queue,
                      type(e).__name__)
    for sid in report.failed:
        log.warning("submission %s: ended as error, its runners died on every attempt", sid)
    return report


class Sweeper:
    """The periodic sweep as a daemon thread: :meth:`start`, :meth:`stop`."""

    def __init__(self, interval_s: float, first_delay_s: float) -> None:
        self.interval_s = interval_s
        self.first_delay_s = first_delay_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="kernelrank-sweeper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        if self._stop.wait(self.first_delay_s):
            return
        while True:
            try:
                sweep_once()
            except Exception as e:  # noqa: BLE001 - database or broker down: try again next period
                log.warning("sweep failed: %s", type(e).__name__)
            if self._stop.wait(self.interval_s):
                return
