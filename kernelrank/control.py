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

from sqlalchemy.exc import OperationalError

from kernelrank.queue import HEARTBEAT, JOB_STARTED, RECORD_RESULT, device_class, get_celery

log = logging.getLogger("kernelrank.control")

#: ``celery -A kernelrank.control`` finds the app here.
app = get_celery()

_RETRY = {"autoretry_for": (OperationalError,), "retry_backoff": 1, "retry_backoff_max": 60, "max_retries": 10,
          "acks_late": True, "reject_on_worker_lost": True, "ignore_result": True}


@app.task(name=JOB_STARTED, **_RETRY)
def job_started(submission_id: int, runner: str) -> None:
    """A runner took the job: the submission becomes ``running``."""
    from kernelrank.db.session import session_scope
    from kernelrank.services import submissions

    with session_scope() as session:
        submissions.mark_started(session, int(submission_id), str(runner))


@app.task(name=RECORD_RESULT, **_RETRY)
def record_result(submission_id: int, kind: str, result: dict[str, Any], runner: str) -> bool:
    """Store one run's result (once); the verdict is set when every expected run is in.
    Returns whether anything was written."""
    from kernelrank.db.session import session_scope
    from kernelrank.services import ServiceError, submissions

    try:
        with session_scope() as session:
            written = submissions.record_run(session, int(submission_id), str(kind), dict(result), str(runner))
    except ServiceError as e:
        log.warning("result of submission %s (%s run) dropped: %s", submission_id, kind, e.message)
        return False
    if not written:
        log.info("duplicate %s result of submission %s ignored", kind, submission_id)
    return written


@app.task(name=HEARTBEAT, **_RETRY)
def heartbeat(name: str, device: str, info: dict[str, Any], version: str, jobs_done: int = 0) -> None:
    """Runner ``name`` serving queue ``device`` is alive."""
    from kernelrank.db.session import session_scope
    from kernelrank.services import runners

    try:
        device_class(str(device))
    except ValueError as e:
        log.warning("heartbeat of %s dropped: %s", name, e)
        return
    with session_scope() as session:
        runners.heartbeat(session, str(name), str(device), dict(info or {}), str(version), int(jobs_done))
