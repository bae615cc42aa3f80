"""Read-only aggregates that only the pages need (the home overview, charts, runner throughput).

Each is one query however many submissions there are: the chart series select two columns, and
per-case results are fetched for a bounded list of submission ids. Rankings (boards, the home
page's leaders) stay in :mod:`kernelrank.services.leaderboard`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from kernelrank.db.models import Run, Runner, Submission
from kernelrank.vocab import RunKind, SubmissionStatus

#: Most points the best-score-over-time chart reads (newest ranked submissions win past this).
MAX_HISTORY_POINTS = 20_000


def best_over_time(session: Session, revision_id: int, device: str) -> list[tuple[dt.datetime, float]]:
    """The best ranked score (ns) of a board each time it improved: ``[(time, score_ns), ...]``
    in time order, from at most :data:`MAX_HISTORY_POINTS` newest ranked submissions."""
    q = (select(Submission.created_at, Submission.score_ns)
         .where(Submission.problem_revision_id == revision_id, Submission.device == device,
                Submission.ranked.is_(True), Submission.score_ns.is_not(None))
         .order_by(Submission.created_at.desc(), Submission.id.desc()).limit(MAX_HISTORY_POINTS))
    points: list[tuple[dt.datetime, float]] = []
    for created, score in reversed(session.execute(q).all()):
        if not points or score < points[-1][1]:
            points.append((created, float(score)))
    return points


def public_results(session: Session, submission_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The stored harness result of each submission's ``public`` run of its current attempt
    (cases with timing stats and roofline figures), for a bounded list of ids."""
    if not submission_ids:
        return {}
    q = (select(Run.submission_id, Run.result).join(Submission, Submission.id == Run.submission_id)
         .where(Run.submission_id.in_(submission_ids), Run.kind == RunKind.public.value,
                Run.attempt == Submission.attempt))
    return {sid: result or {} for sid, result in session.execute(q)}


def finished_since(session: Session, since: dt.datetime) -> dict[str, int]:
    """Submissions that got their verdict since ``since``, per device (recent throughput)."""
    q = (select(Submission.device, func.count()).where(Submission.finished_at >= since)
         .group_by(Submission.device))
    return {device: n for device, n in session.execute(q)}


def running_counts(session: Session) -> dict[str, int]:
    """Submissions a runner has started and not finished, per device."""
    running = Submission.status == SubmissionStatus.running.value
    q = select(Submission.device, func.count()).where(running).group_by(Submission.device)
    return {device: n for device, n in session.execute(q)}


def all_runners(session: Session) -> list[Runner]:
    """Every runner ever seen, by device and name."""
    return list(session.scalars(select(Runner).order_by(Runner.device, Runner.name)))
