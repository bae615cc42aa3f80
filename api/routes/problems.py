"""``/api/v1/problems``: the problems and their current revisions (public)."""

from __future__ import annotations

from fastapi import APIRouter

from kernelrank.api.deps import SessionDep
from kernelrank.api.schemas import ProblemPublic, ProblemSummary
from kernelrank.services import problems

router = APIRouter(prefix="/api/v1/problems", tags=["problems"])


@router.get("", response_model=list[ProblemSummary], summary="List problems")
def list_problems(session: SessionDep) -> list[ProblemSummary]:
    """Every problem's current revision, by name."""
    out = []
    for rev in problems.list_current(session):
        d = problems.definition(rev)
        out.append(ProblemSummary(name=d.name, title=d.title, revision=rev.revision, tests=len(d.tests),
                                  benchmarks={dev: len(cases) for dev, cases in d.benchmarks.items()}))
    return out


@router.get("/{name}", response_model=ProblemPublic, summary="One problem",
            responses={404: {"description": "Unknown problem"}})
def get_problem(name: str, session: SessionDep) -> ProblemPublic:
    """The current revision of a problem: description, data contract, cases, budgets and templates."""
    rev = problems.current_revision(session, name)
    d = problems.definition(rev)
    return ProblemPublic(
        name=d.name, title=d.title, revision=rev.revision, description=d.description, contract=d.contract,
        tolerances=d.tolerances, tests=[c.params for c in d.tests],
        benchmarks={dev: [c.params for c in cases] for dev, cases in d.benchmarks.items()},
        budgets=d.budgets, timing=d.timing, ranking=d.ranking, templates=dict(rev.templates or {}),
    )
