"""``/api/v1/problems``: the problems, their revisions and state (public; hidden problems are
listed and shown to admins only, 404 to anyone else)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from kernelrank.api.deps import Viewer, SessionDep
from kernelrank.api.schemas import ProblemPublic, ProblemSummary, RevisionPublic
from kernelrank.services import problems

router = APIRouter(prefix="/api/v1/problems", tags=["problems"])

RevisionQuery = Annotated[str | None, Query(
    max_length=64, description="A revision hash (or a unique prefix of 6+ hex digits); default: the current one.")]


@router.get("", response_model=list[ProblemSummary], summary="List problems")
def list_problems(session: SessionDep, viewer: Viewer) -> list[ProblemSummary]:
    """Every problem's current revision, by name (hidden ones for admins only)."""
    out = []
    for rev in problems.list_current(session, include_hidden=problems.sees_hidden(viewer)):
        d = problems.definition(rev)
        out.append(ProblemSummary(name=d.name, title=d.title, revision=rev.revision, tests=len(d.tests),
                                  benchmarks={dev: len(cases) for dev, cases in d.benchmarks.items()},
                                  state=problems.state_of(rev.problem), deadline=rev.problem.deadline))
    return out


@router.get("/{name}", response_model=ProblemPublic, summary="One problem",
            responses={404: {"description": "Unknown problem or revision"},
                       422: {"description": "Malformed or ambiguous revision"}})
def get_problem(name: str, session: SessionDep, viewer: Viewer, revision: RevisionQuery = None) -> ProblemPublic:
    """A revision of a problem (the current one by default): description, data contract, cases,
    budgets and templates."""
    rev = problems.get_revision(session, name, revision, include_hidden=problems.sees_hidden(viewer))
    d = problems.definition(rev)
    return ProblemPublic(
        name=d.name, title=d.title, revision=rev.revision, is_current=rev.is_current,
        state=problems.state_of(rev.problem), deadline=rev.problem.deadline, description=d.description,
        contract=d.contract, tolerances=d.tolerances, tests=[c.params for c in d.tests],
        benchmarks={dev: [c.params for c in cases] for dev, cases in d.benchmarks.items()},
        budgets=d.budgets, timing=d.timing, ranking=d.ranking, templates=dict(rev.templates or {}),
    )


@router.get("/{name}/revisions", response_model=list[RevisionPublic], summary="A problem's revisions",
            responses={404: {"description": "Unknown problem"}})
def list_revisions(name: str, session: SessionDep, viewer: Viewer) -> list[RevisionPublic]:
    """Every revision of a problem, oldest first; each keeps its own leaderboard
    (``GET /api/v1/leaderboards/{problem}/{device}?revision=...``)."""
    revs = problems.list_revisions(session, name, include_hidden=problems.sees_hidden(viewer))
    return [RevisionPublic(number=i + 1, revision=r.revision, is_current=r.is_current, created_at=r.created_at)
            for i, r in enumerate(revs)]
