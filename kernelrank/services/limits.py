"""Per-user limits against abuse: submissions per rolling hour, jobs queued or running at once, and
an admin's limit per board and mode (GPU MODE's rule: so many leaderboard submissions per hour).

Both are computed from the submissions table (no counter to drift out of step with it):

- **hourly quota**: the user's submissions created in the last hour whose status is in
  :data:`COUNTED` (``queued``, ``running``, ``passed``). Failed submissions (any other verdict:
  ``failed``, ``error``, ``timeout``, ``compile_error``, ``rejected``) and ``cancelled`` ones do
  not count, so an author iterating on a wrong kernel or hit by a broken runner is not locked
  out; the concurrency limit still bounds the runner time one user can hold.
- **concurrency**: the user's submissions that are ``queued`` or ``running``.
- **per board and mode** (:class:`~kernelrank.db.models.BoardLimit`, set by admins): the user's
  submissions of that mode to that problem (any revision) on that device queue in the last hour,
  counted as the hourly quota counts.

A refusal is :class:`RateLimited` (HTTP 429) with ``Retry-After`` seconds: for an hourly limit,
when the oldest counted submission of the window leaves it (the message names that time); for concurrency,
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

from kernelrank.db.models import BoardLimit, Problem, ProblemRevision, Submission, User, as_utc, utcnow
from kernelrank.services import Invalid, NotFound, ServiceError
from kernelrank.vocab import ACTIVE_STATUSES, SubmissionStatus, device_class, parse_mode

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


def check_submission(session: Session, user: User, limits: Limits, now: dt.datetime | None = None,
                     board: tuple[Problem, str, str] | None = None) -> None:
    """Refuse a new submission by ``user`` that would go over ``limits``, or over the admins' limit
    on ``board`` (``(problem, device queue, mode)``) where one is set; admins are exempt.

    Call inside the transaction that then inserts the submission: the user's row stays locked
    until it commits.

    Raises:
        RateLimited: over the concurrent-job limit, the hourly quota or the board's limit (429,
            with ``Retry-After``).
    """
    if user.is_admin:
        return
    rule = _board_rule(session, board) if board is not None else None
    if not (limits.per_hour or limits.concurrent or rule):
        return
    lock_user(session, user.id)
    now = now or utcnow()
    if rule is not None and board is not None:
        _check_board(session, user, rule, board, now)
    use = usage(session, user.id, now)
    if limits.concurrent and use.active >= limits.concurrent:
        raise RateLimited(f"you have {use.active} submissions queued or running; the limit is "
                          f"{limits.concurrent} at once: wait for one to finish or cancel one",
                          CONCURRENT_RETRY_S)
    if limits.per_hour and use.in_window >= limits.per_hour:
        oldest = as_utc(use.oldest_in_window) if use.oldest_in_window is not None else now
        wait = math.ceil((oldest + WINDOW - now).total_seconds())
        raise RateLimited(f"you made {use.in_window} submissions in the last hour; the limit is "
                          f"{limits.per_hour} per hour (failed and cancelled ones do not count)", wait)



def _board_rule(session: Session, board: tuple[Problem, str, str]) -> BoardLimit | None:
    problem, device_queue, mode = board
    return session.scalar(select(BoardLimit).where(BoardLimit.problem_id == problem.id,
                                                   BoardLimit.device == device_queue, BoardLimit.mode == mode))


def _check_board(session: Session, user: User, rule: BoardLimit, board: tuple[Problem, str, str],
                 now: dt.datetime) -> None:
    """Refuse a submission over the board's per-hour limit, naming when the next is allowed."""
    problem, device_queue, mode = board
    n, oldest = session.execute(
        select(func.count(), func.min(Submission.created_at))
        .join(ProblemRevision, Submission.problem_revision_id == ProblemRevision.id)
        .where(Submission.user_id == user.id, ProblemRevision.problem_id == problem.id,
               Submission.device == device_queue, Submission.mode == mode,
               Submission.created_at > now - WINDOW, Submission.status.in_(COUNTED))).one()
    if n < rule.per_hour:
        return
    allowed = (as_utc(oldest) if oldest is not None else now) + WINDOW
    wait = math.ceil((allowed - now).total_seconds())
    raise RateLimited(f"you made {n} {mode} submissions to {problem.name} on {device_queue} in the last hour; this "
                      f"board takes {rule.per_hour} per hour from each user: the next is allowed at "
                      f"{allowed.astimezone(dt.timezone.utc):%H:%M:%S} UTC (in {wait} s)", wait)


def set_board_limit(session: Session, problem: str, device_queue: str, mode: str, per_hour: int) -> BoardLimit | None:
    """Set (``per_hour`` >= 1) or remove (0) the limit of ``mode`` submissions per user per hour on
    the board ``problem`` x ``device_queue``; the limit set, or ``None`` once removed.

    Raises:
        NotFound: unknown problem.
        Invalid: not a mode, not a device queue, or a negative limit.
    """
    try:
        parse_mode(mode)
        device_class(device_queue)
    except ValueError as e:
        raise Invalid(str(e)) from None
    if per_hour < 0:
        raise Invalid("a limit per hour is 0 (none) or more")
    row = session.scalar(select(Problem).where(Problem.name == problem))
    if row is None:
        raise NotFound(f"no problem {problem!r}")
    rule = _board_rule(session, (row, device_queue, mode))
    if per_hour == 0:
        if rule is not None:
            session.delete(rule)
            session.flush()
        return None
    if rule is None:
        rule = BoardLimit(problem_id=row.id, device=device_queue, mode=mode, per_hour=per_hour)
        session.add(rule)
    rule.per_hour = per_hour
    session.flush()
    return rule


def board_limits(session: Session) -> list[BoardLimit]:
    """Every board limit, by problem, device queue and mode."""
    return list(session.scalars(select(BoardLimit).join(Problem)
                                .order_by(Problem.name, BoardLimit.device, BoardLimit.mode)))
