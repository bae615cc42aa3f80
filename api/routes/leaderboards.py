"""``/api/v1/leaderboards``: rankings per problem revision and device queue (public; hidden
problems for admins only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from kernelrank.api.deps import Viewer, SessionDep
from kernelrank.api.presenters import leaderboard_public
from kernelrank.api.schemas import LeaderboardPublic
from kernelrank.services import Invalid, leaderboard
from kernelrank.services.problems import sees_hidden
from kernelrank.vocab import device_class

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
    return leaderboard_public(problem, device, rev, rows)
