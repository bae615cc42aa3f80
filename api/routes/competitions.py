"""``/api/v1/competitions`` (public; competitions on hidden problems for admins only) and
``/api/v1/admin/competitions`` (admins: create, accept a late entry, finalize). See
:mod:`kernelrank.services.competitions` and :mod:`kernelrank.services.competition_final`."""

from __future__ import annotations

from fastapi import APIRouter, status

from kernelrank.api.competition_schemas import (
    CompetitionCreate,
    CompetitionPublic,
    CompetitionSummary,
    LateEntryCreate,
    LateEntryPublic,
    competition_public,
    competition_summary,
    late_entry_public,
)
from kernelrank.api.deps import AdminUser, DispatchDep, SessionDep, Viewer
from kernelrank.services import competition_final, competitions
from kernelrank.services.competitions import BoardSpec

router = APIRouter(prefix="/api/v1/competitions", tags=["competitions"])
admin_router = APIRouter(prefix="/api/v1/admin/competitions", tags=["admin"])

_ADMIN = {401: {"description": "No valid token"}, 403: {"description": "Not an admin"}}


@router.get("", response_model=list[CompetitionSummary], summary="Competitions")
def list_competitions(session: SessionDep, viewer: Viewer) -> list[CompetitionSummary]:
    """Every competition, the latest start first."""
    return [competition_summary(c) for c in competitions.list_competitions(session, viewer)]


@router.get("/{name}", response_model=CompetitionPublic, summary="A competition and its standings",
            responses={404: {"description": "No such competition"}})
def get_competition(name: str, session: SessionDep, viewer: Viewer) -> CompetitionPublic:
    """Its boards, times and standings: per user, the place on each board and the overall
    standing by the stated ``rule``; once ``final``, the standings on the re-judged scores with
    Kendall's tau-b before/after and each entry's move."""
    comp = competitions.get_competition(session, name, viewer)
    return competition_public(comp, competitions.standings(session, comp))


@admin_router.post("", response_model=CompetitionPublic, status_code=status.HTTP_201_CREATED,
                   summary="Create a competition",
                   responses={**_ADMIN, 404: {"description": "Unknown problem"},
                              409: {"description": "A competition of that name exists"},
                              422: {"description": "A malformed name, times, board or final_top"}})
def create_competition(body: CompetitionCreate, admin: AdminUser, session: SessionDep) -> CompetitionPublic:
    """Create a competition over boards (each problem's current revision on a device queue)."""
    comp = competitions.create_competition(session, admin, body.name, body.title,
                                           [BoardSpec(b.problem, b.device) for b in body.boards],
                                           body.starts_at, body.ends_at, body.final_top)
    return competition_public(comp, competitions.standings(session, comp))


@admin_router.post("/{name}/late-entries", response_model=LateEntryPublic, status_code=status.HTTP_201_CREATED,
                   summary="Accept a late entry",
                   responses={**_ADMIN, 404: {"description": "No such competition or submission"},
                              409: {"description": "Not late, accepted already, or finalized"},
                              422: {"description": "Not a leaderboard submission to one of its boards"}})
def accept_late_entry(name: str, body: LateEntryCreate, admin: AdminUser, session: SessionDep) -> LateEntryPublic:
    """Count a submission made after the end, recorded as late."""
    late = competitions.accept_late_entry(session, admin, name, body.submission_id)
    return late_entry_public(competitions.get_competition(session, name, admin), late)


@admin_router.post("/{name}/finalize", response_model=CompetitionPublic, status_code=status.HTTP_202_ACCEPTED,
                   summary="Finalize a competition",
                   responses={**_ADMIN, 404: {"description": "No such competition"},
                              409: {"description": "Not started yet, or final already"},
                              503: {"description": "The job queue is unavailable"}})
def finalize(name: str, admin: AdminUser, session: SessionDep, dispatch: DispatchDep) -> CompetitionPublic:
    """End it now if still open and judge each board's top ``final_top`` entries again with a new
    secret seed; ``final`` once every re-judging is in. Again before then: re-sends those pending."""
    comp = competition_final.finalize(session, admin, name, dispatch)
    return competition_public(comp, competitions.standings(session, comp))
