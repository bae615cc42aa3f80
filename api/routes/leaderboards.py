"""``/api/v1/leaderboards``: rankings per problem and device queue (public)."""

from __future__ import annotations

from fastapi import APIRouter

from kernelrank.api.deps import SessionDep
from kernelrank.api.schemas import LeaderboardPublic, LeaderboardRowPublic
from kernelrank.queue import device_class
from kernelrank.services import Invalid, leaderboard

router = APIRouter(prefix="/api/v1/leaderboards", tags=["leaderboards"])


@router.get("/{problem}/{device}", response_model=LeaderboardPublic, summary="A leaderboard",
            responses={404: {"description": "Unknown problem"}, 422: {"description": "Not a device queue name"}})
def get_leaderboard(problem: str, device: str, session: SessionDep) -> LeaderboardPublic:
    """Each user's best ranked submission to the current revision of ``problem`` on ``device``
    (``cpu`` or ``cuda-<model>``), by score (lower is better); ties go to the earlier submission."""
    try:
        device_class(device)
    except ValueError as e:
        raise Invalid(str(e)) from None
    revision, rows = leaderboard.leaderboard(session, problem, device)
    return LeaderboardPublic(
        problem=problem, device=device, revision=revision,
        rows=[LeaderboardRowPublic(rank=r.rank, user=r.user, submission_id=r.submission_id, score_ns=r.score_ns,
                                   speedup=r.speedup, language=r.language, submitted_at=r.submitted_at)
              for r in rows],
    )
