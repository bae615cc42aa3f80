"""Problems in the database: loading folders as revisions, looking them up, and their state.

A problem is *hidden* (listed, shown and accepting submissions for admins only; 404 to anyone
else) or not, and has an optional *deadline*: leaderboard submissions are taken and ranked only
before it (after it the problem is *closed*: leaderboard-mode submissions are refused with 409,
test/benchmark/profile runs are still taken). Each revision keeps its own leaderboard; only the
current revision takes new submissions.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from kernelrank.db.models import Problem as ProblemRow
from kernelrank.db.models import ProblemRevision, User, utcnow
from kernelrank.problems import Problem, ProblemDefinition, ProblemSpec
from kernelrank.services import Conflict, Invalid, NotFound

#: A revision may be named by a unique prefix of its hash this long or longer.
REVISION_PREFIX_MIN = 6
_HEX = re.compile(r"^[0-9a-f]+$")


def sync_problem(session: Session, problem: Problem, make_current: bool = True) -> ProblemRevision:
    """Store ``problem``'s content as a revision of its name, creating the problem or a new
    revision (with a fresh secret seed) when the content hash is new. Old revisions stay readable.

    Args:
        make_current: make this revision the current one even when it was stored before (an
            admin's push). ``False`` (``serve`` at start-up): only new content becomes current,
            so a restart does not undo a revision pushed over the API.
    """
    row = session.scalar(select(ProblemRow).where(ProblemRow.name == problem.name))
    if row is None:
        row = ProblemRow(name=problem.name)
        session.add(row)
        session.flush()
    rev = session.scalar(select(ProblemRevision).where(ProblemRevision.revision == problem.revision))
    if rev is not None and rev.problem_id != row.id:
        raise Conflict(f"revision {problem.revision[:12]} belongs to another problem")
    is_new = rev is None
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
    if is_new or make_current:
        session.execute(update(ProblemRevision).where(ProblemRevision.problem_id == row.id)
                        .values(is_current=ProblemRevision.id == rev.id))
        session.flush()
    session.refresh(rev)
    return rev


def sync_all(session: Session, problems: list[Problem], make_current: bool = True) -> list[ProblemRevision]:
    """:func:`sync_problem` for each problem."""
    return [sync_problem(session, p, make_current) for p in problems]


def sees_hidden(viewer: User | None) -> bool:
    """Admins see hidden problems; nobody else does."""
    return viewer is not None and viewer.is_admin


def _unknown(session: Session, name: str, include_hidden: bool) -> NotFound:
    q = select(ProblemRow.name).order_by(ProblemRow.name)
    if not include_hidden:
        q = q.where(ProblemRow.hidden.is_(False))
    known = ", ".join(session.scalars(q)) or "none"
    return NotFound(f"unknown problem {name!r} (known: {known})")


def get_problem(session: Session, name: str, include_hidden: bool = False) -> ProblemRow:
    """The problem row ``name`` (state: ``hidden``, ``deadline``).

    Raises:
        NotFound: unknown problem, or hidden and ``include_hidden`` is false.
    """
    row = session.scalar(select(ProblemRow).where(ProblemRow.name == name))
    if row is None or (row.hidden and not include_hidden):
        raise _unknown(session, name, include_hidden)
    return row


def current_revision(session: Session, name: str, include_hidden: bool = False) -> ProblemRevision:
    """The current revision of problem ``name``.

    Raises:
        NotFound: unknown problem, or hidden and ``include_hidden`` is false.
    """
    rev = session.scalar(
        select(ProblemRevision).join(ProblemRow).where(ProblemRow.name == name, ProblemRevision.is_current.is_(True))
    )
    if rev is None or (rev.problem.hidden and not include_hidden):
        raise _unknown(session, name, include_hidden)
    return rev


def get_revision(session: Session, name: str, revision: str | None = None,
                 include_hidden: bool = False) -> ProblemRevision:
    """A revision of problem ``name``: the current one when ``revision`` is ``None``, else the one
    whose hash is ``revision`` or starts with it (at least :data:`REVISION_PREFIX_MIN` hex digits).

    Raises:
        NotFound: unknown (or hidden) problem, or no such revision of it.
        Invalid: ``revision`` is not hex, too short, or a prefix of several revisions.
    """
    if revision is None:
        return current_revision(session, name, include_hidden)
    problem = get_problem(session, name, include_hidden)
    revision = revision.strip().lower()
    if len(revision) < REVISION_PREFIX_MIN or len(revision) > 64 or not _HEX.match(revision):
        raise Invalid(f"a revision is {REVISION_PREFIX_MIN} to 64 hex digits of its hash")
    found = list(session.scalars(select(ProblemRevision).where(
        ProblemRevision.problem_id == problem.id, ProblemRevision.revision.startswith(revision, autoescape=True)
    ).limit(2)))
    if not found:
        raise NotFound(f"problem {name!r} has no revision {revision!r}")
    if len(found) > 1:
        raise Invalid(f"revision prefix {revision!r} is ambiguous; give more digits")
    return found[0]


def list_revisions(session: Session, name: str, include_hidden: bool = False) -> list[ProblemRevision]:
    """Every revision of problem ``name``, oldest first (revision number = position + 1).

    Raises:
        NotFound: unknown (or hidden) problem.
    """
    problem = get_problem(session, name, include_hidden)
    return list(session.scalars(select(ProblemRevision).where(ProblemRevision.problem_id == problem.id)
                                .order_by(ProblemRevision.id)))


def list_current(session: Session, include_hidden: bool = False) -> list[ProblemRevision]:
    """Current revisions of every problem (hidden ones only when ``include_hidden``), by name."""
    q = select(ProblemRevision).join(ProblemRow).where(ProblemRevision.is_current.is_(True))
    if not include_hidden:
        q = q.where(ProblemRow.hidden.is_(False))
    return list(session.scalars(q.order_by(ProblemRow.name)))


# -- state: open, closed (deadline), hidden ----------------------------------------------------
def _aware(value: dt.datetime | None) -> dt.datetime | None:
    """SQLite hands times back naive; they are UTC."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=dt.timezone.utc)
    return value


def deadline_of(problem: ProblemRow) -> dt.datetime | None:
    """The problem's deadline as an aware UTC time, or ``None``."""
    return _aware(problem.deadline)


def takes_ranked(problem: ProblemRow, at: dt.datetime | None = None) -> bool:
    """Whether a leaderboard submission made at ``at`` (default now) may be ranked: before the
    deadline, or when there is none."""
    deadline = deadline_of(problem)
    at = _aware(at) or utcnow()
    return deadline is None or at < deadline


def state_of(problem: ProblemRow, at: dt.datetime | None = None) -> str:
    """``hidden``, ``closed`` (deadline passed) or ``open`` (``hidden`` wins)."""
    if problem.hidden:
        return "hidden"
    return "open" if takes_ranked(problem, at) else "closed"


def open_problem(session: Session, name: str) -> ProblemRow:
    """Open problem ``name``: visible, no deadline.

    Raises:
        NotFound: unknown problem.
    """
    row = get_problem(session, name, include_hidden=True)
    row.hidden, row.deadline = False, None
    session.flush()
    return row


def close_problem(session: Session, name: str, deadline: dt.datetime | None = None) -> ProblemRow:
    """Set problem ``name``'s deadline: ``deadline`` (a time zone is required), or now. Leaderboard
    submissions made from then on are refused; those made before are still ranked when judged.

    Raises:
        NotFound: unknown problem.
        Invalid: a deadline without a time zone.
    """
    if deadline is not None and deadline.tzinfo is None:
        raise Invalid("give the deadline with a time zone, e.g. 2026-12-01T12:00:00Z")
    row = get_problem(session, name, include_hidden=True)
    row.deadline = (deadline or utcnow()).astimezone(dt.timezone.utc)
    session.flush()
    return row


def hide_problem(session: Session, name: str, hidden: bool = True) -> ProblemRow:
    """Hide problem ``name`` (or show it again with ``hidden=False``): hidden problems are listed,
    shown and take submissions for admins only; their submissions stay readable by id.

    Raises:
        NotFound: unknown problem.
    """
    row = get_problem(session, name, include_hidden=True)
    row.hidden = hidden
    session.flush()
    return row


def definition(rev: ProblemRevision) -> ProblemDefinition:
    return ProblemDefinition.model_validate(rev.definition)


def spec_of(rev: ProblemRevision) -> ProblemSpec:
    """The folder-free spec a runner needs (secret seed excluded: it travels separately)."""
    return ProblemSpec(definition(rev), rev.reference_source, rev.revision)
