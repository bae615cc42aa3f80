"""The queue in view: where a queued submission stands in its device queue, when it may start, and
each queue's depth and oldest wait.

A device queue is first in, first out by dispatch time (``Submission.dispatched_at``: a requeued or
re-measured submission goes to the back). The estimate of a start is the work ahead (every job
ahead, and what is left of the jobs running now, each at the recent median job time of its mode
on that queue) spread over the runners serving the queue now. It is an estimate: a job's time
depends on the kernel, and runners come and go; ``None`` when the queue has no history yet or no
runner serves it.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from dataclasses import dataclass

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from kernelrank.db.models import Submission, as_utc, utcnow
from kernelrank.services import runners
from kernelrank.vocab import ACTIVE_STATUSES, SubmissionStatus

#: Finished jobs per device queue whose times make the median job time of a mode.
HISTORY_JOBS = 50


@dataclass(frozen=True)
class QueuePlace:
    """A queued submission's place: ``position`` jobs ahead of it in its device queue (0: next),
    and ``estimated_start`` (UTC), ``None`` when it cannot be estimated."""

    position: int
    estimated_start: dt.datetime | None



def job_seconds(session: Session, device_queue: str) -> dict[str, float]:
    """Per mode, the median time (s) from start to verdict of the last :data:`HISTORY_JOBS`
    finished jobs of ``device_queue``; modes without history are absent."""
    rows = session.execute(
        select(Submission.mode, Submission.started_at, Submission.finished_at)
        .where(Submission.device == device_queue, Submission.started_at.is_not(None),
               Submission.finished_at.is_not(None))
        .order_by(Submission.finished_at.desc()).limit(HISTORY_JOBS)).all()
    by_mode: dict[str, list[float]] = {}
    for mode, started, finished in rows:
        by_mode.setdefault(mode, []).append(max(0.0, (as_utc(finished) - as_utc(started)).total_seconds()))
    return {mode: statistics.median(times) for mode, times in by_mode.items()}


def place_in_queue(session: Session, sub: Submission, online_within_s: float,
                   now: dt.datetime | None = None) -> QueuePlace | None:
    """Where ``sub`` stands in its device queue; ``None`` unless it is queued.

    The estimate: the median job time of each job ahead's mode (any mode's median where its own
    has no history), plus what is left of each running job's, over the runners that served the
    queue within ``online_within_s`` seconds.
    """
    if sub.status != SubmissionStatus.queued or sub.dispatched_at is None:
        return None
    now = now or utcnow()
    same_queue = Submission.device == sub.device
    earlier = or_(Submission.dispatched_at < sub.dispatched_at,
                  and_(Submission.dispatched_at == sub.dispatched_at, Submission.id < sub.id))
    ahead = session.execute(select(Submission.mode, Submission.status, Submission.started_at)
                            .where(same_queue, Submission.status.in_(ACTIVE_STATUSES),
                                   or_(Submission.status == SubmissionStatus.running, earlier))).all()
    position = sum(1 for _m, status, _s in ahead if status == SubmissionStatus.queued)
    medians = job_seconds(session, sub.device)
    serving = sum(1 for r in runners.online(session, online_within_s) if r.device == sub.device)
    if not medians or not serving:
        return QueuePlace(position, None)
    fallback = statistics.median(medians.values())
    work = 0.0
    for mode, status, started in ahead:
        each = medians.get(mode, fallback)
        if status == SubmissionStatus.running and started is not None:
            each = max(0.0, each - (now - as_utc(started)).total_seconds())
        work += each
    return QueuePlace(position, now + dt.timedelta(seconds=math.ceil(work / serving)))


def queue_waits(session: Session, now: dt.datetime | None = None) -> dict[str, float]:
    """Per device queue with submissions waiting, how long (s) its oldest has waited since it was
    dispatched."""
    now = now or utcnow()
    rows = session.execute(select(Submission.device, func.min(Submission.dispatched_at))
                           .where(Submission.status == SubmissionStatus.queued, Submission.dispatched_at.is_not(None))
                           .group_by(Submission.device))
    return {queue: max(0.0, (now - as_utc(oldest)).total_seconds()) for queue, oldest in rows if oldest is not None}
