"""Server-side control tasks: what runners report, written to the database by the service layer.

Run with ``celery -A kernelrank.control worker -Q control -P solo`` (``kernelrank serve`` does).
Each task is one short transaction (:func:`~kernelrank.db.session.session_scope`) calling
:mod:`kernelrank.services`; all of them are safe to deliver twice (``record_run`` ignores a second
result for the same submission and run kind, ``mark_started`` ignores finished submissions, a
heartbeat overwrites the last one). A report about an unknown submission is logged and dropped;
a database that is briefly unavailable (locked, restarting) is retried.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import signals
from sqlalchemy.exc import OperationalError

from kernelrank.queue import CONTROL_QUEUE, HEARTBEAT, JOB_STARTED, RECORD_RESULT, get_celery, send_job
from kernelrank.vocab import device_class

log = logging.getLogger("kernelrank.control")

#: ``celery -A kernelrank.control`` finds the app here.
app = get_celery()

_RETRY = {"autoretry_for": (OperationalError,), "retry_backoff": 1, "retry_backoff_max": 60, "max_retries": 10,
          "acks_late": True, "reject_on_worker_lost": True, "ignore_result": True}


@app.task(name=JOB_STARTED, **{**_RETRY, "ignore_result": False})
def job_started(submission_id: int, runner: str, attempt: int | None = None) -> dict[str, Any]:
    """A runner starts the job: may it? Returns ``{"run": bool, "reason": str}``, which the
    runner waits for before it reports (it judges a first delivery meanwhile, and stops it on a
    no: :mod:`kernelrank.runner.goahead`; see :func:`kernelrank.services.jobs.start_job`). Yes makes
    the submission ``running`` and counts a start; no drops a finished or duplicate job, or
    ends one whose runners died ``job_max_starts`` times as ``error``."""
    from kernelrank.db.session import session_scope
    from kernelrank.services import competition_final, jobs
    from kernelrank.settings import get_settings

    settings = get_settings()
    with session_scope() as session:
        if competition_final.is_rejudging(attempt):  # a competition's re-judging, not the submission's job
            decision = competition_final.start_rejudging(session, int(attempt), int(submission_id), str(runner),
                                                         settings.job_max_starts, settings.runner_lost_seconds)
        else:
            decision = jobs.start_job(session, int(submission_id), str(runner), settings.job_max_starts,
                                      settings.runner_lost_seconds, attempt)
    if not decision.run:
        log.warning("job of submission %s not started on %s: %s", submission_id, runner, decision.reason)
    return decision.to_dict()


@app.task(name=RECORD_RESULT, **_RETRY)
def record_result(submission_id: int, kind: str, result: dict[str, Any], runner: str,
                  attempt: int | None = None) -> bool:
    """Store one run's result (once); the verdict is set when every expected run is in, or the
    submission is measured again (``settings.remeasures``): that job is sent once the result is
    committed (if sending fails it stays ``queued`` and the sweeper sends it again).
    Returns whether anything was written."""
    from kernelrank.db.session import session_scope
    from kernelrank.services import ServiceError, competition_final, guard, submissions
    from kernelrank.settings import get_settings

    again: list[tuple[dict[str, Any], str, float]] = []
    try:
        if competition_final.is_rejudging(attempt):  # a competition's re-judging: never the submission's runs
            with session_scope() as session:
                return competition_final.record_rejudging(session, int(attempt), int(submission_id), str(kind),
                                                          dict(result), str(runner))
        with session_scope() as session:
            written = submissions.record_run(session, int(submission_id), str(kind), dict(result), str(runner),
                                             attempt, remeasures=get_settings().remeasures,
                                             again=lambda *job: again.append(job))
        if written:  # committed: the verdict is seen before the advisory scan is made
            try:
                with session_scope() as session:
                    guard.store(session, int(submission_id))
            except Exception:  # noqa: BLE001 - advisory: its failure must not redo the record
                log.warning("submission %s: the advisory scan was not stored", submission_id, exc_info=True)
    except ServiceError as e:
        log.warning("result of submission %s (%s run) dropped: %s", submission_id, kind, e.message)
        return False
    for message, queue, time_limit in again:
        try:
            send_job(message, queue, time_limit)
            log.info("submission %s: measured again (attempt %s) on %s", submission_id, message.get("attempt"), queue)
        except Exception as e:  # noqa: BLE001 - stays queued: the sweeper sends it again
            log.error("submission %s: could not queue its next measurement on %s: %s", submission_id, queue,
                      type(e).__name__)
    if not written:
        log.info("result of submission %s (%s run) not recorded: already recorded, or the submission is finished",
                 submission_id, kind)
    return written


@app.task(name=HEARTBEAT, **_RETRY)
def heartbeat(name: str, device: str, info: dict[str, Any], version: str, jobs_done: int = 0,
              online: bool = True) -> None:
    """Runner ``name`` serving queue ``device`` is alive; ``online`` false: it is shutting down
    (its last message), offline at once."""
    from kernelrank.db.session import session_scope
    from kernelrank.services import runners

    try:
        device_class(str(device))
    except ValueError as e:
        log.warning("heartbeat of %s dropped: %s", name, e)
        return
    with session_scope() as session:
        runners.heartbeat(session, str(name), str(device), dict(info or {}), str(version), int(jobs_done),
                          online=bool(online))


_sweeper = None


@signals.worker_ready.connect
def _start_sweeper(sender: Any = None, **_: Any) -> None:
    """A worker consuming the ``control`` queue runs the sweeper (runners do not)."""
    global _sweeper
    from kernelrank.settings import get_settings
    from kernelrank.sweeper import Sweeper

    queues = set(sender.app.amqp.queues.consume_from) if sender is not None else set()
    if CONTROL_QUEUE not in queues or _sweeper is not None:
        return
    settings = get_settings()
    _sweeper = Sweeper(settings.sweeper_seconds, settings.runner_lost_seconds)
    _sweeper.start()
    log.info("sweeper: every %.0f s, first in %.0f s", settings.sweeper_seconds, settings.runner_lost_seconds)


@signals.worker_shutting_down.connect
def _stop_sweeper(**_: Any) -> None:
    if _sweeper is not None:
        _sweeper.stop()
