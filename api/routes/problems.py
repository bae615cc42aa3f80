"""``/api/v1/problems``: the problems, their revisions and state (public; hidden problems are
listed and shown to admins only, 404 to anyone else)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from kernelrank.api.deps import Viewer, SessionDep
from kernelrank.api.presenters import problem_public, problem_summary, revision_public
from kernelrank.api.schemas import ProblemPublic, ProblemSummary, RevisionPublic
from kernelrank.services import problems

router = APIRouter(prefix="/api/v1/problems", tags=["problems"])

RevisionQuery = Annotated[str | None, Query(
    max_length=64, description="A revision hash (or a unique prefix of 6+ hex digits); default: the current one.")]


@router.get("", response_model=list[ProblemSummary], summary="List problems")
def list_problems(session: SessionDep, viewer: Viewer) -> list[ProblemSummary]:
    """Every problem's current revision, by name (hidden ones for admins only)."""
    return [problem_summary(rev) for rev in problems.list_current(session, include_hidden=problems.sees_hidden(viewer))]


@router.get("/{name}", response_model=ProblemPublic, summary="One problem",
            responses={404: {"description": "Unknown problem or revision"},
                       422: {"description": "Malformed or ambiguous revision"}})
def get_problem(name: str, session: SessionDep, viewer: Viewer, revision: RevisionQuery = None) -> ProblemPublic:
    """A revision of a problem (the current one by default): description, data contract, cases,
    budgets and templates."""
    rev = problems.get_revision(session, name, revision, include_hidden=problems.sees_hidden(viewer))
    return problem_public(rev)


@router.get("/{name}/revisions", response_model=list[RevisionPublic], summary="A problem's revisions",
            responses={404: {"description": "Unknown problem"}})
def list_revisions(name: str, session: SessionDep, viewer: Viewer) -> list[RevisionPublic]:
    """Every revision of a problem, oldest first; each keeps its own leaderboard
    (``GET /api/v1/leaderboards/{problem}/{device}?revision=...``)."""
    revs = problems.list_revisions(session, name, include_hidden=problems.sees_hidden(viewer))
    return [revision_public(i + 1, r) for i, r in enumerate(revs)]
