"""Problems in the database: loading folders as revisions, and looking them up."""

from __future__ import annotations

import secrets

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from kernelrank.db.models import Problem as ProblemRow
from kernelrank.db.models import ProblemRevision
from kernelrank.problems import Problem, ProblemDefinition, ProblemSpec
from kernelrank.services import NotFound


def sync_problem(session: Session, problem: Problem) -> ProblemRevision:
    """Make ``problem``'s content the current revision of its name, creating the problem or a new
    revision (with a fresh secret seed) when the content hash is new. Old revisions stay readable."""
    row = session.scalar(select(ProblemRow).where(ProblemRow.name == problem.name))
    if row is None:
        row = ProblemRow(name=problem.name)
        session.add(row)
        session.flush()
    rev = session.scalar(select(ProblemRevision).where(ProblemRevision.revision == problem.revision))
    if rev is None:
        rev = ProblemRevision(
            problem_id=row.id,
            revision=problem.revision,
            definition=problem.definition.model_dump(mode="json"),
            reference_source=problem.reference_source,
            templates=problem.files("templates"),
            secret_seed=secrets.randbits(62),
        )
        session.add(rev)
        session.flush()
    session.execute(update(ProblemRevision).where(ProblemRevision.problem_id == row.id)
                    .values(is_current=ProblemRevision.id == rev.id))
    session.flush()
    session.refresh(rev)
    return rev


def sync_all(session: Session, problems: list[Problem]) -> list[ProblemRevision]:
    """:func:`sync_problem` for each problem."""
    return [sync_problem(session, p) for p in problems]


def current_revision(session: Session, name: str) -> ProblemRevision:
    """The current revision of problem ``name``.

    Raises:
        NotFound: unknown problem.
    """
    rev = session.scalar(
        select(ProblemRevision).join(ProblemRow).where(ProblemRow.name == name, ProblemRevision.is_current.is_(True))
    )
    if rev is None:
        known = ", ".join(session.scalars(select(ProblemRow.name).order_by(ProblemRow.name))) or "none"
        raise NotFound(f"unknown problem {name!r} (known: {known})")
    return rev


def list_current(session: Session) -> list[ProblemRevision]:
    """Current revisions of every problem, by name."""
    return list(session.scalars(
        select(ProblemRevision).join(ProblemRow).where(ProblemRevision.is_current.is_(True)).order_by(ProblemRow.name)
    ))


def definition(rev: ProblemRevision) -> ProblemDefinition:
    return ProblemDefinition.model_validate(rev.definition)


def spec_of(rev: ProblemRevision) -> ProblemSpec:
    """The folder-free spec a runner needs (secret seed excluded: it travels separately)."""
    return ProblemSpec(definition(rev), rev.reference_source, rev.revision)
