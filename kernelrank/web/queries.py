"""Read-only aggregates that only the pages need (the home overview, charts, runner throughput).

Each is one query however many submissions there are: the home page's leaders come from window
functions over the ranked submissions of every current revision at once, the chart series select
two columns, and per-case results are fetched for a bounded list of submission ids.
Rankings themselves stay in :mod:`kernelrank.services.leaderboard`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from kernelrank.db.models import Run, Runner, Submission, User

#: Most points the best-score-over-time chart reads (newest ranked submissions win past this).
MAX_HISTORY_POINTS = 20_000


@dataclass(frozen=True)
class BoardLeader:
    """The first place of one leaderboard (revision × device) and how many users are ranked."""

    user: str
    submission_id: int
    score_ns: float
    speedup: float | None
    entrants: int


def board_leaders(session: Session, revision_ids: list[int]) -> dict[tuple[int, str], BoardLeader]:
    """``{(revision_id, device): leader}`` for every board of the given revisions that has a
    ranked entry. Same order as the leaderboard: score, then the earlier submission."""
    if not revision_ids:
        return {}
    order = (Submission.score_ns.asc(), Submission.created_at.asc(), Submission.id.asc())
    per_user = (
        select(Submission.id, Submission.user_id, Submission.problem_revision_id, Submission.device,
               Submission.score_ns, Submission.speedup, Submission.created_at,
               func.row_number().over(partition_by=(Submission.problem_revision_id, Submission.device,
                                                    Submission.user_id), order_by=order).label("rn"))
        .where(Submission.problem_revision_id.in_(revision_ids), Submission.ranked.is_(True))
        .subquery()
    )
    best = (
        select(per_user,
               func.row_number().over(partition_by=(per_user.c.problem_revision_id, per_user.c.device),
                                      order_by=(per_user.c.score_ns.asc(), per_user.c.created_at.asc(),
                                                per_user.c.id.asc())).label("place"),
               func.count().over(partition_by=(per_user.c.problem_revision_id, per_user.c.device)).label("entrants"))
        .where(per_user.c.rn == 1)
        .subquery()
    )
    q = select(best, User.name).join(User, User.id == best.c.user_id).where(best.c.place == 1)
    return {(r.problem_revision_id, r.device): BoardLeader(r.name, r.id, r.score_ns, r.speedup, r.entrants)
            for r in session.execute(q)}


def ranked_devices(session: Session, revision_id: int) -> list[str]:
    """Devices that have at least one ranked submission for a revision, sorted."""
    q = (select(Submission.device).where(Submission.problem_revision_id == revision_id, Submission.ranked.is_(True))
         .distinct().order_by(Submission.device))
    return list(session.scalars(q))


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
         .where(Run.submission_id.in_(submission_ids), Run.kind == "public", Run.attempt == Submission.attempt))
    return {sid: result or {} for sid, result in session.execute(q)}


def finished_since(session: Session, since: dt.datetime) -> dict[str, int]:
    """Submissions that got their verdict since ``since``, per device (recent throughput)."""
    q = (select(Submission.device, func.count()).where(Submission.finished_at >= since)
         .group_by(Submission.device))
    return {device: n for device, n in session.execute(q)}


def running_counts(session: Session) -> dict[str, int]:
    """Submissions a runner has started and not finished, per device."""
    q = select(Submission.device, func.count()).where(Submission.status == "running").group_by(Submission.device)
    return {device: n for device, n in session.execute(q)}


def all_runners(session: Session) -> list[Runner]:
    """Every runner ever seen, by device and name."""
    return list(session.scalars(select(Runner).order_by(Runner.device, Runner.name)))
