"""``/api/v1/leaderboards``: rankings per problem revision and device queue (public; hidden
problems for admins only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from kernelrank.api.deps import Viewer, SessionDep
from kernelrank.api.schemas import LeaderboardPublic, LeaderboardRowPublic
from kernelrank.queue import device_class
from kernelrank.services import Invalid, leaderboard
from kernelrank.services.problems import sees_hidden

router = APIRouter(prefix="/api/v1/leaderboards", tags=["leaderboards"])


@router.get("/{problem}/{device}", response_model=LeaderboardPublic, summary="A leaderboard",
            responses={404: {"description": "Unknown problem or revision"},
                       422: {"description": "Not a device queue name, or a malformed revision"}})
def get_leaderboard(
    problem: str, device: str, session: SessionDep, viewer: Viewer,
    revision: Annotated[str | None, Query(max_length=64, description=(
        "A revision hash (or a unique prefix of 6+ hex digits): that revision's ranking. Default: the current one."
    ))] = None,
) -> LeaderboardPublic:
    """Each user's best ranked submission to a revision of ``problem`` (the current one by
    default) on ``device`` (``cpu`` or ``cuda-<model>``), by score (lower is better), each with its
    95% interval; an entry whose interval overlaps the one above is marked ``tied``; equal scores
    go to the earlier submission. Disqualified submissions and those made after the deadline are not ranked."""
    try:
        device_class(device)
    except ValueError as e:
        raise Invalid(str(e)) from None
    rev, rows = leaderboard.leaderboard(session, problem, device, revision=revision, include_hidden=sees_hidden(viewer))
    return LeaderboardPublic(
        problem=problem, device=device, revision=rev,
        rows=[LeaderboardRowPublic(rank=r.rank, user=r.user, submission_id=r.submission_id, score_ns=r.score_ns,
                                   score_ci_ns=_interval(r.score_low_ns, r.score_high_ns), tied=r.tied,
                                   speedup=r.speedup, language=r.language, submitted_at=r.submitted_at,
                                   needs_review=r.needs_review, tflops=r.tflops, gbps=r.gbps)
              for r in rows],
    )


def _interval(low: float | None, high: float | None) -> list[float] | None:
    return None if low is None or high is None else [low, high]
