"""Measuring again, backing off from a busy machine, and telling the admins when that does not help.

A passing leaderboard submission whose runs are too noisy to rank, could not be measured (the
judge found the machine too busy: :mod:`kernelrank.runner.judge.busy`) or disagree is measured
again (:func:`kernelrank.judgement.judge` decides; :func:`kernelrank.services.submissions.record_run`
records): a new attempt, ``queued``, whose job is sent after a wait that grows with each
measurement (:class:`~kernelrank.judgement.Backoff`: settings' ``remeasure_delay_seconds`` and
``remeasure_backoff``, 30 s, 2 min, 8 min). While it waits, ``remeasure_at`` holds when its job is
due and it has no place in its device's queue (``dispatched_at`` is ``None``); the control
worker's sweeper sends it then (:func:`due`, :func:`kernelrank.services.jobs.sweep`). Its message
says so: ``measuring again in 2 min (at 20:41:07 UTC; measurement 3 of 4): a run was too noisy
to rank``.

After the last measurement ``settings.remeasures`` allows it stays passed and unranked, marked
``too_noisy_at``, its message ending ``could not be measured quietly enough: an admin was told``;
it is on the admins' list (:func:`too_noisy`: ``GET /api/v1/admin/submissions/too-noisy`` and the
admin page) until an admin requeues it, which clears the mark.
"""

from __future__ import annotations

import datetime as dt
import logging

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelrank import format as fmt
from kernelrank.db.models import Submission, as_utc, utcnow
from kernelrank.vocab import SubmissionStatus

log = logging.getLogger("kernelrank.remeasure")

#: What a submission's message ends with once the service has stopped measuring it again.
TOLD = "could not be measured quietly enough: an admin was told"
#: Most submissions the admins' list shows.
LIST_LIMIT = 200


def waiting_message(measurement: int, measurements: int, wait_s: float, due: dt.datetime, why: str) -> str:
    """The message of a submission queued for measurement ``measurement`` of at most
    ``measurements``, its job sent in ``wait_s`` seconds (at ``due``, UTC), and why."""
    of = f"measurement {measurement} of {measurements}"
    if wait_s <= 0:
        return f"measuring again now ({of}): {why}"
    return f"measuring again in {fmt.waited(wait_s)} (at {as_utc(due):%H:%M:%S} UTC; {of}): {why}"


def defer(sub: Submission, wait_s: float, now: dt.datetime | None = None) -> dt.datetime:
    """Hold the job of the submission's new attempt (queued) for ``wait_s`` seconds: ``remeasure_at``
    is when it is due, and until then it is not in its device's queue (``dispatched_at`` is
    ``None``); with no wait it is to be sent now (``remeasure_at`` ``None``). Returns when it is due."""
    now = now or utcnow()
    if wait_s <= 0:
        sub.remeasure_at = None
        return now
    sub.remeasure_at = now + dt.timedelta(seconds=wait_s)
    sub.dispatched_at = None
    return sub.remeasure_at


def is_deferred(sub: Submission) -> bool:
    """Whether the submission is queued with its job held back (:func:`defer`), not yet sent."""
    return sub.status == SubmissionStatus.queued and sub.remeasure_at is not None


def due(sub: Submission, now: dt.datetime) -> bool:
    """Whether a held job (:func:`is_deferred`) is due to be sent at ``now``."""
    return is_deferred(sub) and as_utc(sub.remeasure_at) <= as_utc(now)  # type: ignore[arg-type]


def sent(sub: Submission, now: dt.datetime) -> None:
    """A held job was sent at ``now``: it takes its place in its device's queue."""
    sub.remeasure_at = None
    sub.dispatched_at = now


def tell_admins(sub: Submission, message: str, now: dt.datetime | None = None) -> None:
    """The service stops measuring ``sub`` again, still too noisy to rank: mark it for the admins'
    list (``too_noisy_at``, once, logged for the operator), its message (``message``: the
    verdict's) ending with :data:`TOLD`."""
    if sub.too_noisy_at is None:
        sub.too_noisy_at = now or utcnow()
        log.warning("submission %s could not be measured quietly enough in %d measurements: the admins are told",
                    sub.id, sub.measurements)
    sub.message = f"{message}; {TOLD}"[:4000] if message else TOLD


def cleared(sub: Submission) -> None:
    """Forget a submission's back-off and notice (a new judgement: an admin's requeue)."""
    sub.remeasure_at = None
    sub.too_noisy_at = None


def too_noisy(session: Session, limit: int = LIST_LIMIT) -> list[Submission]:
    """The admins' list: submissions the service stopped measuring again, still too noisy to rank
    (:func:`tell_admins`), the latest first."""
    q = (select(Submission).where(Submission.too_noisy_at.is_not(None))
         .order_by(Submission.too_noisy_at.desc(), Submission.id.desc()).limit(limit))
    return list(session.scalars(q))
