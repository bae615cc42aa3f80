"""The ranking: per problem revision and device, each user's best passing leaderboard score.

Score = the geometric mean over benchmark cases of each case's mean time (ns), lower is better;
ties go to the earlier submission. One SQL query with a window function (SQLite >= 3.25 and
Postgres), served by the index ``ix_submissions_board (problem_revision_id, device, ranked, score_ns)``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from kernelrank.db.models import Submission, User
from kernelrank.services.problems import get_revision


@dataclass(frozen=True)
class LeaderboardRow:
    rank: int
    user: str
    submission_id: int
    score_ns: float
    speedup: float | None
    language: str
    submitted_at: dt.datetime
    #: marked for an admin's review (a speedup beyond the problem's bound), shown as such
    needs_review: bool = False


def leaderboard(session: Session, problem: str, device: str, limit: int = 100, revision: str | None = None,
                include_hidden: bool = False) -> tuple[str, list[LeaderboardRow]]:
    """``(revision, rows)`` for ``problem`` on ``device``: the current revision's ranking, or that
    of ``revision`` (a hash or a unique prefix of one; every revision keeps its own leaderboard).

    Raises:
        NotFound: unknown problem (or hidden, unless ``include_hidden``), unknown revision.
        Invalid: a malformed or ambiguous revision.
    """
    rev = get_revision(session, problem, revision, include_hidden)
    best = (
        select(
            Submission.id,
            Submission.user_id,
            Submission.score_ns,
            Submission.speedup,
            Submission.language,
            Submission.created_at,
            Submission.needs_review,
            func.row_number().over(
                partition_by=Submission.user_id,
                order_by=(Submission.score_ns.asc(), Submission.created_at.asc(), Submission.id.asc()),
            ).label("rn"),
        )
        .where(Submission.problem_revision_id == rev.id, Submission.device == device, Submission.ranked.is_(True))
        .subquery()
    )
    q = (
        select(best, User.name)
        .join(User, User.id == best.c.user_id)
        .where(best.c.rn == 1)
        .order_by(best.c.score_ns.asc(), best.c.created_at.asc(), best.c.id.asc())
        .limit(limit)
    )
    rows = [
        LeaderboardRow(i + 1, r.name, r.id, r.score_ns, r.speedup, r.language, r.created_at, bool(r.needs_review))
        for i, r in enumerate(session.execute(q))
    ]
    return rev.revision, rows
