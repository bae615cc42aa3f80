"""Jobs that must end: the runner's go-ahead before each start, and the sweeper's rules for jobs
whose runner vanished or whose message was lost.

A job may be *started* at most ``max_starts`` times (``Submission.starts`` counts them; not
``Submission.attempt``, which judgement it is). A runner asks :func:`start_job` before it runs a
job (``JOB_STARTED``): a job already finished, or running on another runner that is still alive,
is dropped unrun; a job that has used its starts (its runners died every time) ends as ``error``
with the reason, and is dropped.

:func:`sweep` (run periodically by :mod:`kernelrank.sweeper`) finds ``running`` jobs whose runner
sent no heartbeat for ``runner_lost_s`` (or that outlived their time limit by as much) and
``queued`` ones older than ``queued_lost_s`` whose message is in no queue, and puts them back in
their queue, or, once a job has used its starts, ends it as ``error``; and it sends the jobs of
measurements made again whose back-off is over (:mod:`kernelrank.services.remeasure`). Every
function only changes rows; the caller commits, then sends the returned jobs (a job committed as queued whose
message could not be sent is found again by the next sweep).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Callable

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelrank.db.models import Runner, Submission, utcnow
from kernelrank.queue import job_time_limit
from kernelrank.services import guard, remeasure
from kernelrank.services.problems import definition
from kernelrank.services.submissions import current_job
from kernelrank.vocab import FINAL_STATUSES, Mode, SubmissionStatus, Verdict


@dataclass(frozen=True)
class StartDecision:
    """The control worker's answer to a runner about to start a job."""

    run: bool
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "reason": self.reason}


@dataclass(frozen=True)
class Job:
    """An evaluation job to (re)send: the message, its device queue, its hard time limit in s."""

    submission_id: int
    message: dict[str, Any]
    queue: str
    time_limit: float


@dataclass
class SweepReport:
    """What one sweep did: jobs to send (``requeued``; ``remeasured``: measurements made again
    whose back-off is over, :mod:`kernelrank.services.remeasure`) and submissions ended as ``error``."""

    requeued: list[Job] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    remeasured: list[Job] = field(default_factory=list)


def died_message(starts: int) -> str:
    """The verdict message of a job that used its starts."""
    times = "once" if starts == 1 else f"{starts} times"
    return f"the runner died {times} running this job (no result, no heartbeat); not retried"


def runner_alive(session: Session, name: str | None, within_s: float, now: dt.datetime | None = None) -> bool:
    """Whether runner ``name`` sent a heartbeat in the last ``within_s`` seconds."""
    if not name:
        return False
    since = (now or utcnow()) - dt.timedelta(seconds=within_s)
    last = session.scalar(select(Runner.last_heartbeat).where(Runner.name == name))
    return last is not None and _aware(last) >= since


def start_job(session: Session, submission_id: int, runner: str, max_starts: int,
              runner_lost_s: float, attempt: int | None = None) -> StartDecision:
    """A runner is about to start the job of ``submission_id``: may it?

    Yes (``starts`` + 1, status ``running`` on ``runner``, the code's kernelguard scan stored but in
    test mode)
    unless the submission is unknown or
    finished, runs on another runner heard from within ``runner_lost_s`` seconds, or was already
    started ``max_starts`` times, in which case it ends now as ``error`` with the reason.
    """
    sub = session.get(Submission, submission_id, with_for_update=True)
    if sub is None:
        return StartDecision(False, f"no submission {submission_id}")
    if sub.status in FINAL_STATUSES:
        return StartDecision(False, f"submission {submission_id} is already finished ({sub.status})")
    if attempt is not None and int(attempt) != sub.attempt:
        return StartDecision(False, f"the job is for attempt {attempt} of submission {submission_id}, "
                                    f"which was requeued (attempt {sub.attempt})")
    if (sub.status == SubmissionStatus.running and sub.runner and sub.runner != runner
            and runner_alive(session, sub.runner, runner_lost_s)):
        return StartDecision(False, f"submission {submission_id} is running on {sub.runner}")
    if sub.starts >= max_starts:
        _fail(sub, died_message(sub.starts))
        return StartDecision(False, sub.message)
    sub.starts += 1
    sub.status = SubmissionStatus.running.value
    sub.runner = runner[:255]
    sub.started_at = utcnow()
    if sub.guard is None and sub.mode != Mode.test:
        # the advisory scan (20-80 ms) beside the judging's untimed start; a test job's verdict would
        # wait for it (the go-ahead's answer, and the 2 cores of a one-machine service): scanned once
        # its verdict is committed (guard.store)
        sub.guard = guard.scan(sub.code)
    return StartDecision(True)


def sweep(session: Session, *, max_starts: int, runner_lost_s: float, queued_lost_s: float,
          pending: Callable[[str], set[int] | None], now: dt.datetime | None = None) -> SweepReport:
    """Requeue or end the jobs that would otherwise never finish (see the module's docstring).

    ``pending(queue)`` gives the submission ids whose job message is in ``queue`` (waiting or
    delivered and unacknowledged), or ``None`` when the broker cannot tell: then no ``queued``
    job of that queue is requeued.
    """
    now = now or utcnow()
    report = SweepReport()
    lost_before = now - dt.timedelta(seconds=runner_lost_s)
    running = session.scalars(select(Submission).where(Submission.status == SubmissionStatus.running.value)
                              .order_by(Submission.id).with_for_update(skip_locked=True))
    for sub in running:
        started = _aware(sub.started_at) if sub.started_at else None
        if started is None or started > lost_before:
            continue
        vanished = not runner_alive(session, sub.runner, runner_lost_s, now)
        overtime = started + dt.timedelta(seconds=_time_limit(sub)) < lost_before
        if not (vanished or overtime):
            continue
        if sub.starts >= max_starts:
            _fail(sub, died_message(sub.starts) if vanished else
                  f"the job outlived its time limit {sub.starts} times on its runners; not retried")
            report.failed.append(sub.id)
        else:
            report.requeued.append(_requeue(sub, now))

    queued_before = now - dt.timedelta(seconds=queued_lost_s)
    stale = list(session.scalars(select(Submission).where(Submission.status == SubmissionStatus.queued.value)
                                 .order_by(Submission.id).with_for_update(skip_locked=True)))
    by_queue: dict[str, set[int] | None] = {}
    for sub in stale:
        if remeasure.is_deferred(sub):  # a measurement made again, held while it backs off
            if remeasure.due(sub, now):
                remeasure.sent(sub, now)
                report.remeasured.append(Job(sub.id, *current_job(sub)))
            continue
        sent = _aware(sub.dispatched_at or sub.created_at)
        if sent > queued_before:
            continue
        if sub.device not in by_queue:
            by_queue[sub.device] = pending(sub.device)
        waiting = by_queue[sub.device]
        if waiting is None or sub.id in waiting:
            continue
        report.requeued.append(_requeue(sub, now))
    return report


def _requeue(sub: Submission, now: dt.datetime) -> Job:
    """The job sent again, marked ``redelivered``: its runner waits for the go-ahead before it
    starts it (it may be a job that kills its runner; :mod:`kernelrank.runner.goahead`)."""
    sub.status = SubmissionStatus.queued.value
    sub.dispatched_at = now
    message, queue, time_limit = current_job(sub)
    return Job(sub.id, {**message, "redelivered": True}, queue, time_limit)


def _time_limit(sub: Submission) -> float:
    return job_time_limit(definition(sub.problem_revision).budgets.model_dump(), sub.mode)


def _fail(sub: Submission, message: str) -> None:
    sub.status = Verdict.error.value
    sub.message = message
    sub.ranked = False
    sub.score_ns = None
    sub.finished_at = utcnow()


def _aware(t: dt.datetime) -> dt.datetime:
    """SQLite returns naive datetimes (stored as UTC)."""
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.timezone.utc)
