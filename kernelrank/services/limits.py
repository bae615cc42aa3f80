"""Per-user limits against abuse: submissions per rolling hour and jobs queued or running at once.

Both are computed from the submissions table (no counter to drift out of step with it):

- **hourly quota**: the user's submissions created in the last hour whose status is in
  :data:`COUNTED` (``queued``, ``running``, ``passed``). Failed submissions (any other verdict:
  ``failed``, ``error``, ``timeout``, ``compile_error``, ``rejected``) and ``cancelled`` ones do
  not count, so an author iterating on a wrong kernel or hit by a broken runner is not locked
  out; the concurrency limit still bounds the runner time one user can hold.
- **concurrency**: the user's submissions that are ``queued`` or ``running``.

A refusal is :class:`RateLimited` (HTTP 429) with ``Retry-After`` seconds: for the hourly quota,
when the oldest counted submission of the window leaves it; for concurrency,
:data:`CONCURRENT_RETRY_S` (a job's end cannot be predicted). Admins are exempt.

Two simultaneous requests of one user cannot both take the last slot: :func:`check_submission`
first locks the user's row (``SELECT ... FOR UPDATE`` on Postgres; on SQLite a no-op write takes
the database's single write lock), held until the transaction that inserts the submission commits.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from kernelrank.db.models import Submission, User, utcnow
from kernelrank.services import ServiceError
from kernelrank.vocab import ACTIVE_STATUSES, SubmissionStatus

#: Statuses that use up the hourly quota.
COUNTED = (*ACTIVE_STATUSES, SubmissionStatus.passed.value)
#: The hourly quota's rolling window.
WINDOW = dt.timedelta(hours=1)
#: ``Retry-After`` (s) when the concurrency limit refuses a submission.
CONCURRENT_RETRY_S = 30


@dataclass(frozen=True)
class Limits:
    """A user's limits; 0 means no limit."""

    per_hour: int = 0
    concurrent: int = 0

    @classmethod
    def from_settings(cls, settings) -> "Limits":
        """The limits in :class:`~kernelrank.settings.Settings` (``rate_submissions_per_hour``,
        ``rate_concurrent_jobs``)."""
        return cls(settings.rate_submissions_per_hour, settings.rate_concurrent_jobs)


class RateLimited(ServiceError):
    """Too many submissions (HTTP 429); ``retry_after`` whole seconds, sent as ``Retry-After``."""

    status_code = 429

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = max(1, int(retry_after))
        self.headers = {"Retry-After": str(self.retry_after)}


@dataclass(frozen=True)
class Usage:
    """What a user holds now: counted submissions in the window, the oldest one's creation time,
    and active (queued or running) jobs."""

    in_window: int
    oldest_in_window: dt.datetime | None
    active: int


def usage(session: Session, user_id: int, now: dt.datetime | None = None) -> Usage:
    """The user's current :class:`Usage` (two indexed queries on ``ix_submissions_user``)."""
    now = now or utcnow()
    since = now - WINDOW
    n, oldest = session.execute(
        select(func.count(), func.min(Submission.created_at))
        .where(Submission.user_id == user_id, Submission.created_at > since, Submission.status.in_(COUNTED))
    ).one()
    active = session.scalar(select(func.count())
                            .where(Submission.user_id == user_id, Submission.status.in_(ACTIVE_STATUSES)))
    return Usage(int(n), oldest, int(active or 0))


def lock_user(session: Session, user_id: int) -> None:
    """Hold the user's row until the transaction ends, so concurrent submissions of one user are
    checked one after the other (Postgres: row lock; SQLite: the database write lock)."""
    if session.get_bind().dialect.name == "sqlite":
        session.execute(update(User).where(User.id == user_id).values(id=User.id))
    else:
        session.execute(select(User.id).where(User.id == user_id).with_for_update())


def check_submission(session: Session, user: User, limits: Limits, now: dt.datetime | None = None) -> None:
    """Refuse a new submission by ``user`` that would go over ``limits``; admins are exempt.

    Call inside the transaction that then inserts the submission: the user's row stays locked
    until it commits.

    Raises:
        RateLimited: over the concurrent-job limit or the hourly quota (429, with ``Retry-After``).
    """
    if user.is_admin or not (limits.per_hour or limits.concurrent):
        return
    lock_user(session, user.id)
    now = now or utcnow()
    use = usage(session, user.id, now)
    if limits.concurrent and use.active >= limits.concurrent:
        raise RateLimited(f"you have {use.active} submissions queued or running; the limit is "
                          f"{limits.concurrent} at once: wait for one to finish or cancel one",
                          CONCURRENT_RETRY_S)
    if limits.per_hour and use.in_window >= limits.per_hour:
        oldest = _aware(use.oldest_in_window) if use.oldest_in_window is not None else now
        wait = math.ceil((oldest + WINDOW - now).total_seconds())
        raise RateLimited(f"you made {use.in_window} submissions in the last hour; the limit is "
                          f"{limits.per_hour} per hour (failed and cancelled ones do not count)", wait)


def _aware(t: dt.datetime) -> dt.datetime:
    """SQLite hands times back naive; they are UTC."""
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.timezone.utc)
