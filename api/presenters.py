"""Presenters: database rows (and the services' rows) turned into the public schemas of
:mod:`kernelrank.api.schemas`, for the JSON API's routes (``api/routes/``) and the pages
(``api/web/``) alike, so that a submission reads the same, and hides the same, everywhere.

Each is a pure function of what it is given: no session, no commits, no requests. What a viewer
may see is decided by the caller (the service's rules, such as
:func:`kernelrank.services.submissions.can_see_code`) and passed in as flags.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kernelrank.api.schemas import (
    BoardLimitPublic,
    LeaderboardPublic,
    LeaderboardRowPublic,
    Me,
    ProblemPublic,
    ProblemPushed,
    ProblemStatePublic,
    ProblemSummary,
    RevisionPublic,
    RunnerPublic,
    RunPublic,
    SubmissionPublic,
    TokenPublic,
)
from kernelrank.db.models import ApiToken, BoardLimit, Problem, ProblemRevision, Runner, Submission, User
from kernelrank.services import problems, users
from kernelrank.services.leaderboard import LeaderboardRow
from kernelrank.services.problem_admin import PushResult
from kernelrank.services.queueing import QueuePlace
from kernelrank.vocab import SubmissionStatus

#: Characters of a message's first line shown to viewers who may not see its details.
FIRST_LINE_CHARS = 300


# -- submissions ----------------------------------------------------------------------------------
def submission_public(sub: Submission, full: bool, with_code: bool, admin: bool = False,
                      queue: QueuePlace | None = None) -> SubmissionPublic:
    """The submission as ``SubmissionPublic``; ``full`` (owner or admin) adds messages' details
    and the disqualification reason, ``with_code`` the code and logs, ``admin`` the kernelguard
    signal, ``queue`` its place while queued (:func:`kernelrank.services.queueing.place_in_queue`).
    Runs: those of the measurements that count (the current attempt's, and the earlier ones it
    was measured again after)."""
    rev = sub.problem_revision
    runs = sub.counted_runs
    logs = ("".join(f"=== {run.kind} run (attempt {run.attempt}) ===\n{run.logs}\n" for run in runs if run.logs)
            if with_code else None)
    return SubmissionPublic(
        id=sub.id, user=sub.user.name, problem=rev.problem.name, revision=rev.revision, device=sub.device,
        mode=sub.mode, language=sub.language, status=sub.status,
        message=sub.message if full else _first_line(sub.message),
        score_ns=sub.score_ns, speedup=sub.speedup, ranked=sub.ranked, created_at=sub.created_at,
        score_ci_ns=_interval(sub.score_low_ns, sub.score_high_ns),
        speedup_ci=_interval(sub.speedup_low, sub.speedup_high),
        started_at=sub.started_at, finished_at=sub.finished_at, progress=sub.progress or {},
        queue_position=queue.position if queue else None, estimated_start=queue.estimated_start if queue else None,
        attempt=sub.attempt, measurements=sub.measurements, disqualified=sub.disqualified_at is not None,
        remeasure_at=sub.remeasure_at if sub.status == SubmissionStatus.queued else None,
        too_noisy=sub.too_noisy_at is not None,
        disqualified_reason=sub.disqualified_reason if full else None,
        needs_review=sub.needs_review, review_reason=sub.review_reason, guard=sub.guard if admin else None,
        runs=[RunPublic(kind=r.kind, attempt=r.attempt, status=r.status, score_ns=r.score_ns,
                        result=run_result_public(r.result, full))
              for r in runs],
        code=sub.code if with_code else None, logs=logs,
    )


def run_result_public(result: dict[str, Any] | None, full: bool) -> dict[str, Any]:
    """A run's result as shown: whole (less its logs) for the owner; for others without logs or
    profile, and with messages cut to their first line (tracebacks and compiler output quote the
    code)."""
    out = {k: v for k, v in (result or {}).items() if k != "logs"}
    if full:
        return out
    out.pop("profile", None)
    out["message"] = _first_line(out.get("message"))
    out["cases"] = [{**c, "message": _first_line(c.get("message"))} if isinstance(c, dict) else c
                    for c in out.get("cases") or []]
    return out


# -- problems -------------------------------------------------------------------------------------
def problem_summary(rev: ProblemRevision) -> ProblemSummary:
    """A problem's current revision ``rev`` as a row of the problem list."""
    d = problems.definition(rev)
    return ProblemSummary(name=d.name, title=d.title, revision=rev.revision, tests=len(d.tests),
                          benchmarks={dev: len(cases) for dev, cases in d.benchmarks.items()},
                          state=problems.state_of(rev.problem), deadline=rev.problem.deadline)


def problem_public(rev: ProblemRevision) -> ProblemPublic:
    """A revision of a problem whole: description, data contract, cases, budgets and templates
    (never its secret seed: the schema has no field for it)."""
    d = problems.definition(rev)
    return ProblemPublic(
        name=d.name, title=d.title, revision=rev.revision, is_current=rev.is_current,
        state=problems.state_of(rev.problem), deadline=rev.problem.deadline, description=d.description,
        contract=d.contract, tolerances=d.tolerances, tests=[c.params for c in d.tests],
        benchmarks={dev: [c.params for c in cases] for dev, cases in d.benchmarks.items()},
        budgets=d.budgets, timing=d.timing, ranking=d.ranking, templates=dict(rev.templates or {}),
    )


def revision_public(number: int, rev: ProblemRevision) -> RevisionPublic:
    """Revision ``rev``, the ``number``-th of its problem (counted from 1, oldest first)."""
    return RevisionPublic(number=number, revision=rev.revision, is_current=rev.is_current, created_at=rev.created_at)


def problem_state_public(row: Problem) -> ProblemStatePublic:
    """A problem's state (open, closed), visibility and deadline, as the admin routes answer."""
    return ProblemStatePublic(name=row.name, state=problems.state_of(row), hidden=row.hidden, deadline=row.deadline)


def problem_pushed(result: PushResult) -> ProblemPushed:
    """What a push made: the revision now current, and whether the problem or the revision is new."""
    return ProblemPushed(name=result.revision.problem.name, revision=result.revision.revision,
                         new_problem=result.new_problem, new_revision=result.new_revision,
                         state=problems.state_of(result.revision.problem))


# -- leaderboards and runners ---------------------------------------------------------------------
def leaderboard_public(problem: str, device: str, revision: str, rows: Iterable[LeaderboardRow]) -> LeaderboardPublic:
    """The ranked ``rows`` of revision ``revision`` of ``problem`` on ``device``."""
    return LeaderboardPublic(
        problem=problem, device=device, revision=revision,
        rows=[LeaderboardRowPublic(rank=r.rank, user=r.user, submission_id=r.submission_id, score_ns=r.score_ns,
                                   score_ci_ns=_interval(r.score_low_ns, r.score_high_ns), tied=r.tied,
                                   speedup=r.speedup, language=r.language, submitted_at=r.submitted_at,
                                   needs_review=r.needs_review, tflops=r.tflops, gbps=r.gbps)
              for r in rows],
    )


def runner_public(row: Runner, online: bool) -> RunnerPublic:
    """A runner as last seen through its heartbeats; ``online`` is the caller's judgement."""
    return RunnerPublic(name=row.name, device=row.device, info=row.info or {}, version=row.version,
                        last_heartbeat=row.last_heartbeat, jobs_done=row.jobs_done, online=online,
                        stopped_at=row.stopped_at)


# -- users ----------------------------------------------------------------------------------------
def me_public(user: User) -> Me:
    """The caller: name, admin or not, and whether a password is set (never the password's hash)."""
    return Me(name=user.name, is_admin=user.is_admin, has_password=user.password_hash is not None)


def token_public(token: ApiToken) -> TokenPublic:
    """An API token's name, prefix, dates and state (never the token itself nor its hash)."""
    return TokenPublic(id=token.id, name=token.name, prefix=token.prefix, created_at=token.created_at,
                       revoked_at=token.revoked_at, expires_at=token.expires_at, last_used_at=token.last_used_at,
                       state=users.token_state(token))


def _first_line(text: Any, limit: int = FIRST_LINE_CHARS) -> str:
    return str(text or "").strip().split("\n", 1)[0][:limit]


def _interval(low: float | None, high: float | None) -> list[float] | None:
    return None if low is None or high is None else [low, high]


# -- limits ---------------------------------------------------------------------------------------
def board_limit_public(rule: BoardLimit) -> BoardLimitPublic:
    """An admin's board limit as ``BoardLimitPublic``."""
    return BoardLimitPublic(problem=rule.problem.name, device=rule.device, mode=rule.mode, per_hour=rule.per_hour)
