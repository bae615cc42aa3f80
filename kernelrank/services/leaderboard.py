"""The ranking: per problem revision and device, each user's best passing leaderboard score.

Score = the geometric mean over benchmark cases of each case's time (ns): the board's calibrated
reference time over the case's paired speedup (:mod:`kernelrank.services.calibration`), lower is
better, with its 95% interval; equal scores go to the earlier submission. An entry whose interval
overlaps the one above it cannot be told apart from it and is marked ``tied`` (its place is still
its order). One SQL query with a window function (SQLite >= 3.25 and
Postgres), served by the partial index ``ix_submissions_user_best`` (migration 0004).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from kernelrank.db.models import Submission, User
from kernelrank.runner.stats import overlap  # torch-free
from kernelrank.services.problems import get_revision


@dataclass(frozen=True)
class LeaderboardRow:
    """One place on a board: ``score_ns`` in ns (geometric mean of the benchmark cases' mean
    times), ``speedup`` the reference's geometric mean over the submission's."""

    rank: int
    user: str
    submission_id: int
    score_ns: float
    speedup: float | None
    language: str
    submitted_at: dt.datetime
    #: marked for an admin's review (a speedup beyond the problem's bound), shown as such
    needs_review: bool = False
    #: users ranked on this board
    entrants: int = 0
    #: achieved TFLOP/s and GB/s of the headline case (the first benchmark case), when known
    tflops: float | None = None
    gbps: float | None = None
    #: the score's 95% interval (ns), when the run had one
    score_low_ns: float | None = None
    score_high_ns: float | None = None
    #: cannot be told apart from the entry above: the two intervals overlap (:func:`mark_ties`)
    tied: bool = False


def ranking_query(revision_ids: Sequence[int], device_queue: str | None = None, limit: int = 100) -> Select:
    """The ranking query of boards (problem revision × device): each user's best ranked submission
    (lowest ``score_ns``, then earliest, then lowest id), placed per board, the first ``limit``
    places of every board. All devices of the revisions when ``device_queue`` is ``None``.

    Rows, ordered by revision, device, place: ``id, user_id, problem_revision_id, device,
    score_ns, created_at, place`` (1-based), ``entrants`` (users ranked on that board),
    ``speedup, language, needs_review, tflops, gbps, score_low_ns, score_high_ns, name`` (the user's).

    The per-user window runs over key columns only, partitioned by device and user, so Postgres
    answers it from the partial index ``ix_submissions_user_best`` alone (an index-only scan already
    in that order, no sort); the other columns are read for the winners only. One query serves a
    page's every board at once (bench/leaderboard.py).
    """
    board = (Submission.problem_revision_id, Submission.device)
    in_revisions = (Submission.problem_revision_id == revision_ids[0] if len(revision_ids) == 1
                    else Submission.problem_revision_id.in_(revision_ids))
    # ``ranked`` alone (not ``ranked IS TRUE``): the partial index's predicate
    where = [in_revisions, Submission.ranked] + ([Submission.device == device_queue] if device_queue is not None
                                                 else [])
    per_user = (
        select(Submission.id, Submission.user_id, *board, Submission.score_ns, Submission.created_at,
               func.row_number().over(partition_by=(*board, Submission.user_id),
                                      order_by=_best_first(Submission.__table__.c)).label("rn"))
        .where(*where)
        .subquery()
    )
    best = per_user.c
    placed = (
        select(best.id, best.user_id, best.problem_revision_id, best.device, best.score_ns, best.created_at,
               func.row_number().over(partition_by=(best.problem_revision_id, best.device),
                                      order_by=_best_first(best)).label("place"),
               func.count().over(partition_by=(best.problem_revision_id, best.device)).label("entrants"))
        .where(best.rn == 1)
        .subquery()
    )
    top = placed.c
    return (
        select(placed, Submission.speedup, Submission.language, Submission.needs_review, Submission.tflops,
               Submission.gbps, Submission.score_low_ns, Submission.score_high_ns, User.name)
        .join(Submission, Submission.id == top.id)
        .join(User, User.id == top.user_id)
        .where(top.place <= limit)
        .order_by(top.problem_revision_id, top.device, top.place)
    )


def _best_first(c) -> tuple:
    """The ranking order over columns ``c``: score, then the earlier submission, then the lower id."""
    return (c.score_ns.asc(), c.created_at.asc(), c.id.asc())


def _row(r) -> LeaderboardRow:
    return LeaderboardRow(r.place, r.name, r.id, r.score_ns, r.speedup, r.language, r.created_at,
                          bool(r.needs_review), r.entrants, r.tflops, r.gbps, r.score_low_ns, r.score_high_ns)


def mark_ties(rows: list[LeaderboardRow]) -> list[LeaderboardRow]:
    """``rows`` (one board, in place order) with ``tied`` set on each entry whose score's 95%
    interval overlaps the interval of the entry right above it
    (:func:`kernelrank.runner.stats.overlap`); entries without an interval are never tied."""
    out: list[LeaderboardRow] = []
    for i, row in enumerate(rows):
        above = rows[i - 1] if i else None
        tied = (above is not None and None not in (row.score_low_ns, row.score_high_ns, above.score_low_ns,
                                                   above.score_high_ns)
                and overlap((row.score_low_ns, row.score_high_ns), (above.score_low_ns, above.score_high_ns)))
        out.append(replace(row, tied=bool(tied)))
    return out


def boards(session: Session, revision_id: int, limit: int = 100) -> dict[str, list[LeaderboardRow]]:
    """``{device: rows}`` of every device with a ranked submission on a problem revision, each
    board's first ``limit`` places, in one query (:func:`ranking_query`)."""
    out: dict[str, list[LeaderboardRow]] = {}
    for r in session.execute(ranking_query([revision_id], None, limit)):
        out.setdefault(r.device, []).append(_row(r))
    return {device_queue: mark_ties(rows) for device_queue, rows in out.items()}


def leaders(session: Session, revision_ids: Sequence[int]) -> dict[tuple[int, str], LeaderboardRow]:
    """``{(revision_id, device): first place}`` of every board of the given revisions that has a
    ranked entry (its ``entrants`` counts the users ranked there), in one query."""
    if not revision_ids:
        return {}
    return {(r.problem_revision_id, r.device): _row(r)
            for r in session.execute(ranking_query(revision_ids, None, 1))}


def leaderboard(session: Session, problem: str, device_queue: str, limit: int = 100, revision: str | None = None,
                include_hidden: bool = False) -> tuple[str, list[LeaderboardRow]]:
    """``(revision, rows)`` for ``problem`` on ``device_queue``: the current revision's ranking, or that
    of ``revision`` (a hash or a unique prefix of one; every revision keeps its own leaderboard).

    Raises:
        NotFound: unknown problem (or hidden, unless ``include_hidden``), unknown revision.
        Invalid: a malformed or ambiguous revision.
    """
    rev = get_revision(session, problem, revision, include_hidden)
    rows = mark_ties([_row(r) for r in session.execute(ranking_query([rev.id], device_queue, limit))])
    return rev.revision, rows
