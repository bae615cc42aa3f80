"""The ranking: per problem revision and device, each user's best passing leaderboard score.

Score = the geometric mean over benchmark cases of each case's mean time (ns), lower is better;
ties go to the earlier submission. One SQL query with a window function (SQLite >= 3.25 and
Postgres), served by the partial index ``ix_submissions_user_best`` (migration 0004).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import Select, func, select
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


def leaderboard_query(revision_id: int, device: str, limit: int = 100) -> Select:
    """The ranking query of one problem revision on one device: each user's best ranked
    submission (lowest ``score_ns``, then earliest), best first, at most ``limit`` rows.

    The window runs over key columns only, so Postgres answers it from the partial index
    ``ix_submissions_user_best`` alone (an index-only scan already in per-user order, no sort);
    the other columns are read for the ``limit`` winners only.
    """
    best = (
        select(
            Submission.id,
            Submission.user_id,
            Submission.score_ns,
            Submission.created_at,
            func.row_number().over(
                partition_by=Submission.user_id,
                order_by=(Submission.score_ns.asc(), Submission.created_at.asc(), Submission.id.asc()),
            ).label("rn"),
        )
        # ``ranked`` alone (not ``ranked IS TRUE``): the partial index's predicate
        .where(Submission.problem_revision_id == revision_id, Submission.device == device, Submission.ranked)
        .subquery()
    )
    top = (
        select(best.c.id, best.c.user_id, best.c.score_ns, best.c.created_at)
        .where(best.c.rn == 1)
        .order_by(best.c.score_ns.asc(), best.c.created_at.asc(), best.c.id.asc())
        .limit(limit)
        .subquery()
    )
    return (
        select(top, Submission.speedup, Submission.language, Submission.needs_review, User.name)
        .join(Submission, Submission.id == top.c.id)
        .join(User, User.id == top.c.user_id)
        .order_by(top.c.score_ns.asc(), top.c.created_at.asc(), top.c.id.asc())
    )


def leaderboard(session: Session, problem: str, device: str, limit: int = 100, revision: str | None = None,
                include_hidden: bool = False) -> tuple[str, list[LeaderboardRow]]:
    """``(revision, rows)`` for ``problem`` on ``device``: the current revision's ranking, or that
    of ``revision`` (a hash or a unique prefix of one; every revision keeps its own leaderboard).

    Raises:
        NotFound: unknown problem (or hidden, unless ``include_hidden``), unknown revision.
        Invalid: a malformed or ambiguous revision.
    """
    rev = get_revision(session, problem, revision, include_hidden)
    rows = [
        LeaderboardRow(i + 1, r.name, r.id, r.score_ns, r.speedup, r.language, r.created_at, bool(r.needs_review))
        for i, r in enumerate(session.execute(leaderboard_query(rev.id, device, limit)))
    ]
    return rev.revision, rows
