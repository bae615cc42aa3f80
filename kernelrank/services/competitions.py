"""Competitions: boards (a problem revision on a device queue) over a time window, their entries
and their standings.

An admin creates a competition (:func:`create_competition`) over one or more boards, each the
problem's current revision on a device queue, from ``starts_at`` to ``ends_at``. A board's
**entries** are each user's best ranked leaderboard submission to it made in the window
(``starts_at <= created_at < ends_at``), or accepted late by an admin (:func:`accept_late_entry`,
recorded as such); a submission made after the end still runs and is shown on the leaderboard,
but is no entry. Entries are placed as the leaderboard places them (score, then the earlier
submission, then the lower id) and an entry whose 95% interval overlaps the one above it is
marked tied (:func:`kernelrank.services.leaderboard.mark_ties`).

**Overall standing** (:data:`STANDING_RULE`): the sum of a user's places over the boards, a board
without an entry of theirs counting as its number of entries + 1; the lower sum is better, equal
sums share a rank. At finalize (:mod:`kernelrank.services.competition_final`) the top entries of
each board are judged again and the final standings use the re-judged scores.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field, replace

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from kernelrank.db.models import (Competition, CompetitionBoard, LateEntry, Rejudging, Submission, User, as_utc,
                                  utcnow)
from kernelrank.services import Conflict, Invalid, NotFound
from kernelrank.services.leaderboard import LeaderboardRow, mark_ties
from kernelrank.services.problems import current_revision, sees_hidden
from kernelrank.vocab import ACTIVE_STATUSES, Mode, Verdict, device_class

#: The overall standing's rule, as the API states it.
STANDING_RULE = ("sum of the user's places over the boards (a board without an entry of theirs counts as its "
                 "number of entries + 1); lower is better; equal sums share a rank")
#: Most boards in one competition; most entries re-judged per board.
MAX_BOARDS = 32
MAX_FINAL_TOP = 100
#: A re-judging's statuses before its verdict.
PENDING = ACTIVE_STATUSES
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


@dataclass(frozen=True)
class BoardSpec:
    """A board asked for at creation: a problem (its current revision) on a device queue."""

    problem: str
    device: str


@dataclass(frozen=True)
class Entry:
    """An entry on a competition board. ``place`` and ``score_ns`` (ns, with its 95% interval)
    are the window's standings; ``late``: accepted after the end by an admin. Once re-judged:
    ``rejudging`` (its status: ``queued``, ``running`` or the verdict; ``None``: not among the
    top entries re-judged) with its message; once the competition is final, ``final_place``
    (``None``: its re-judging failed, it has no final place), ``final_score_ns`` and its interval
    (``None`` for an entry not re-judged: it keeps ``score_ns``), ``final_tied`` and ``move``
    (``place - final_place``: positive is up)."""

    place: int
    user: str
    submission_id: int
    score_ns: float
    score_low_ns: float | None
    score_high_ns: float | None
    tied: bool
    late: bool
    submitted_at: dt.datetime
    rejudging: str | None = None
    rejudging_message: str = ""
    final_place: int | None = None
    final_score_ns: float | None = None
    final_score_low_ns: float | None = None
    final_score_high_ns: float | None = None
    final_tied: bool = False
    move: int | None = None


@dataclass(frozen=True)
class BoardStanding:
    """One board's entries in place order; ``tau``: Kendall's tau-b between the re-judged entries'
    places before and after (``None`` until final, or with fewer than two re-judged entries)."""

    board_id: int
    problem: str
    revision: str
    device: str
    entries: list[Entry]
    tau: float | None = None


@dataclass(frozen=True)
class Standing:
    """A user's overall standing: ``rank`` (shared by equal totals), ``total`` (the sum of
    places, :data:`STANDING_RULE`) and their place per board (``"problem/device"``; ``None``: no
    entry there)."""

    rank: int
    user: str
    total: int
    places: dict[str, int | None] = field(default_factory=dict)


def board_key(board: BoardStanding) -> str:
    """A board's name in standings: ``problem/device``."""
    return f"{board.problem}/{board.device}"


def _aware(value: dt.datetime | None) -> dt.datetime | None:
    return None if value is None else as_utc(value)


def create_competition(session: Session, admin: User, name: str, title: str, boards: list[BoardSpec],
                       starts_at: dt.datetime, ends_at: dt.datetime, final_top: int) -> Competition:
    """Create a competition over ``boards`` (each problem's current revision, hidden ones
    included) from ``starts_at`` to ``ends_at`` (aware times), re-judging each board's top
    ``final_top`` entries at finalize.

    Raises:
        Invalid: a malformed name, an empty title, no boards or more than :data:`MAX_BOARDS`, a
            board twice, a time without a time zone, an end not after the start, ``final_top``
            outside 0..:data:`MAX_FINAL_TOP`, a device that is not a device queue.
        NotFound: an unknown problem.
        Conflict: a competition of that name exists.
    """
    if not _NAME.match(name or ""):
        raise Invalid("a competition's name is 1 to 64 lower-case letters, digits, '-' or '_', "
                      "starting with a letter or digit")
    title = (title or "").strip()
    if not title or len(title) > 200:
        raise Invalid("give a title of 1 to 200 characters")
    if not boards or len(boards) > MAX_BOARDS:
        raise Invalid(f"give 1 to {MAX_BOARDS} boards (problem and device queue)")
    if starts_at.tzinfo is None or ends_at.tzinfo is None:
        raise Invalid("give the start and end with a time zone, e.g. 2026-12-01T12:00:00Z")
    if ends_at <= starts_at:
        raise Invalid("the end must be after the start")
    if not 0 <= final_top <= MAX_FINAL_TOP:
        raise Invalid(f"final_top is 0 to {MAX_FINAL_TOP} entries per board")
    if session.scalar(select(Competition.id).where(Competition.name == name)) is not None:
        raise Conflict(f"a competition named {name!r} exists")
    comp = Competition(name=name, title=title, starts_at=starts_at.astimezone(dt.timezone.utc),
                       ends_at=ends_at.astimezone(dt.timezone.utc), final_top=final_top, created_by_id=admin.id)
    seen: set[tuple[int, str]] = set()
    for spec in boards:
        try:
            device_class(spec.device)
        except ValueError as e:
            raise Invalid(str(e)) from None
        rev = current_revision(session, spec.problem, include_hidden=True)
        if (rev.id, spec.device) in seen:
            raise Invalid(f"board {spec.problem}/{spec.device} is given twice")
        seen.add((rev.id, spec.device))
        comp.boards.append(CompetitionBoard(problem_revision_id=rev.id, device=spec.device))
    session.add(comp)
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError:
        raise Conflict(f"a competition named {name!r} exists") from None
    return comp


def _hidden(comp: Competition) -> bool:
    return any(b.problem_revision.problem.hidden for b in comp.boards)


def list_competitions(session: Session, viewer: User | None = None) -> list[Competition]:
    """Every competition, the latest start first; those with a board on a hidden problem for
    admins only."""
    rows = session.scalars(select(Competition).order_by(Competition.starts_at.desc(), Competition.id.desc()))
    return [c for c in rows if sees_hidden(viewer) or not _hidden(c)]


def get_competition(session: Session, name: str, viewer: User | None = None) -> Competition:
    """The competition ``name``.

    Raises:
        NotFound: no such competition, or one with a board on a hidden problem and ``viewer`` is
            not an admin.
    """
    comp = session.scalar(select(Competition).where(Competition.name == name))
    if comp is None or (_hidden(comp) and not sees_hidden(viewer)):
        raise NotFound(f"no competition {name!r}")
    return comp


def state_of(comp: Competition, at: dt.datetime | None = None) -> str:
    """``upcoming`` (before the start), ``open``, ``ended`` (past the end, not finalized),
    ``finalizing`` (re-judging under way) or ``final``."""
    at = _aware(at) or utcnow()
    if comp.final_at is not None:
        return "final"
    if comp.finalized_at is not None:
        return "finalizing"
    if at < as_utc(comp.starts_at):
        return "upcoming"
    return "open" if at < as_utc(comp.ends_at) else "ended"


def in_window(comp: Competition, created_at: dt.datetime) -> bool:
    """Whether a submission made at ``created_at`` counts: ``starts_at <= created_at < ends_at``."""
    return as_utc(comp.starts_at) <= as_utc(created_at) < as_utc(comp.ends_at)


def accept_late_entry(session: Session, admin: User, name: str, submission_id: int) -> LateEntry:
    """Accept a submission made after the competition's end into it, recorded as late with the
    admin and the time. It counts like an entry made in the window (when ranked).

    Raises:
        NotFound: no such competition or submission.
        Invalid: the submission is not a leaderboard submission to one of the competition's boards.
        Conflict: it was made in the window or before the start (not late), it was accepted
            already, or the competition was finalized.
    """
    comp = get_competition(session, name, admin)
    sub = session.get(Submission, submission_id)
    if sub is None:
        raise NotFound(f"no submission {submission_id}")
    if comp.finalized_at is not None:
        raise Conflict(f"competition {name!r} was finalized; no entry can be added")
    if sub.mode != Mode.leaderboard or not any(b.problem_revision_id == sub.problem_revision_id
                                               and b.device == sub.device for b in comp.boards):
        raise Invalid(f"submission {submission_id} is not a leaderboard submission to a board of {name!r}")
    if as_utc(sub.created_at) < as_utc(comp.ends_at):
        raise Conflict(f"submission {submission_id} was not made after the end: "
                       + ("it counts already" if in_window(comp, sub.created_at) else "it was made before the start"))
    if session.scalar(select(LateEntry.id).where(LateEntry.competition_id == comp.id,
                                                 LateEntry.submission_id == submission_id)) is not None:
        raise Conflict(f"submission {submission_id} was accepted already")
    late = LateEntry(competition_id=comp.id, submission_id=submission_id, accepted_by_id=admin.id)
    session.add(late)
    session.flush()
    return late


def late_ids(session: Session, comp: Competition) -> set[int]:
    """Ids of the submissions accepted late into ``comp``."""
    return set(session.scalars(select(LateEntry.submission_id).where(LateEntry.competition_id == comp.id)))


def board_entries(session: Session, comp: Competition, board: CompetitionBoard,
                  late: set[int] | None = None, pins: dict[int, int] | None = None) -> list[Entry]:
    """The board's entries in the window's standings (see the module's docstring), ties marked.
    ``pins`` (``{user id: submission id}``, the entries re-judged at finalize): a pinned user's
    entry is that submission, even when one of theirs made in the window and judged after the
    finalize scored better."""
    late = late_ids(session, comp) if late is None else late
    pins = pins or {}
    rows = session.execute(
        select(Submission, User.name).join(User, User.id == Submission.user_id)
        .where(Submission.problem_revision_id == board.problem_revision_id, Submission.device == board.device,
               Submission.ranked.is_(True), Submission.score_ns.is_not(None))).all()
    counted = [(s, u) for s, u in rows if (in_window(comp, s.created_at) or s.id in late)
               and pins.get(s.user_id, s.id) == s.id]
    counted.sort(key=lambda su: (su[0].score_ns, as_utc(su[0].created_at), su[0].id))
    best: dict[str, Submission] = {}
    for sub, user in counted:
        best.setdefault(user, sub)
    ordered = sorted(best.items(), key=lambda us: (us[1].score_ns, as_utc(us[1].created_at), us[1].id))
    placed = mark_ties([LeaderboardRow(i + 1, user, s.id, s.score_ns, s.speedup, s.language, as_utc(s.created_at),
                                      score_low_ns=s.score_low_ns, score_high_ns=s.score_high_ns)
                       for i, (user, s) in enumerate(ordered)])
    return [Entry(r.rank, r.user, r.submission_id, r.score_ns, r.score_low_ns, r.score_high_ns, r.tied,
                  r.submission_id in late, r.submitted_at) for r in placed]


def overall(boards: list[BoardStanding], final: bool = False) -> list[Standing]:
    """Every user's overall standing over ``boards`` by :data:`STANDING_RULE`, on the window's
    places, or with ``final`` on the final places (an entry without a final place counts as
    absent from that board)."""
    users: dict[str, dict[str, int | None]] = {}
    absent: dict[str, int] = {}
    for b in boards:
        placed = [(e.user, e.final_place if final else e.place) for e in b.entries]
        placed = [(u, p) for u, p in placed if p is not None]
        absent[board_key(b)] = len(placed) + 1
        for user, place in placed:
            users.setdefault(user, {})[board_key(b)] = place
    totals = []
    for user, places in users.items():
        full = {board_key(b): places.get(board_key(b)) for b in boards}
        totals.append((sum(p if p is not None else absent[k] for k, p in full.items()), user, full))
    totals.sort(key=lambda t: (t[0], t[1]))
    out: list[Standing] = []
    for i, (total, user, full) in enumerate(totals):
        rank = out[-1].rank if out and out[-1].total == total else i + 1
        out.append(Standing(rank, user, total, full))
    return out


def window_standings(session: Session, comp: Competition,
                     rejudgings: list[Rejudging] | None = None) -> list[BoardStanding]:
    """Each board's entries in the window's standings (no re-judging applied; the users of
    ``rejudgings`` pinned to their re-judged entries, :func:`board_entries`)."""
    late = late_ids(session, comp)
    pins: dict[int, dict[int, int]] = {}
    for r in rejudgings or []:
        pins.setdefault(r.board_id, {})[r.submission.user_id] = r.submission_id
    return [BoardStanding(b.id, b.problem_revision.problem.name, b.problem_revision.revision, b.device,
                          board_entries(session, comp, b, late, pins.get(b.id))) for b in comp.boards]


def with_rejudgings(board: BoardStanding, rejudgings: list[Rejudging], final: bool) -> BoardStanding:
    """``board`` with each re-judged entry's status and, when ``final``, the final standings:
    the entries re-judged that passed by their re-judged score (then their place before), then
    the entries not re-judged in their order; an entry whose re-judging failed has no final place.
    Ties are declared over the final scores' intervals (:func:`mark_ties`); ``tau`` compares the
    re-judged entries' places before and after (:func:`kernelrank.rank_stability.kendall_tau_b`)."""
    from kernelrank.rank_stability import kendall_tau_b

    by_sub = {r.submission_id: r for r in rejudgings if r.board_id == board.board_id}
    entries = [replace(e, rejudging=by_sub[e.submission_id].status, rejudging_message=by_sub[e.submission_id].message)
               if e.submission_id in by_sub else e for e in board.entries]
    if not final:
        return replace(board, entries=entries)
    passed = [e for e in entries if e.submission_id in by_sub and by_sub[e.submission_id].final_score_ns is not None]
    passed.sort(key=lambda e: (by_sub[e.submission_id].final_score_ns, e.place))
    rest = [e for e in entries if e.submission_id not in by_sub]
    order = passed + rest
    def scored(i: int, e: Entry) -> LeaderboardRow:
        rj = by_sub.get(e.submission_id) if e in passed else None
        score, low, high = ((rj.final_score_ns, rj.final_score_low_ns, rj.final_score_high_ns) if rj is not None
                            else (e.score_ns, e.score_low_ns, e.score_high_ns))
        return LeaderboardRow(i + 1, e.user, e.submission_id, score, None, "", e.submitted_at,
                              score_low_ns=low, score_high_ns=high)

    rows = mark_ties([scored(i, e) for i, e in enumerate(order)])
    final_of = {r.submission_id: r for r in rows}
    out = []
    for e in entries:
        r = final_of.get(e.submission_id)
        rj = by_sub.get(e.submission_id)
        if r is None:  # its re-judging failed
            out.append(e)
            continue
        out.append(replace(e, final_place=r.rank, final_tied=r.tied, move=e.place - r.rank,
                           final_score_ns=rj.final_score_ns if rj else None,
                           final_score_low_ns=rj.final_score_low_ns if rj else None,
                           final_score_high_ns=rj.final_score_high_ns if rj else None))
    tau = kendall_tau_b([by_sub[e.submission_id].place_before for e in passed],
                        [final_of[e.submission_id].rank for e in passed])
    return replace(board, entries=out, tau=tau)


@dataclass(frozen=True)
class Failure:
    """A re-judging that did not pass: the entry (board, user, submission) and why."""

    board: str
    user: str
    submission_id: int
    status: str
    message: str


@dataclass(frozen=True)
class Standings:
    """A competition's standings: its boards, the overall standing on the window's places
    (``before``) and, once final, on the final places (``after``) with Kendall's tau-b between
    the two (``tau``, over the users in both) and each user's move (``moves``: rank before minus
    rank after, positive is up); ``failures``: re-judgings that did not pass."""

    boards: list[BoardStanding]
    before: list[Standing]
    after: list[Standing] | None
    tau: float | None
    moves: dict[str, int]
    failures: list[Failure]


def standings(session: Session, comp: Competition) -> Standings:
    """The competition's standings now (see :class:`Standings`); the window's entries are read
    live, the re-judged ones from their :class:`~kernelrank.db.models.Rejudging` rows."""
    from kernelrank.rank_stability import kendall_tau_b

    rejudgings = list(session.scalars(select(Rejudging).where(Rejudging.competition_id == comp.id)))
    final = comp.final_at is not None
    boards = [with_rejudgings(b, rejudgings, final) for b in window_standings(session, comp, rejudgings)]
    before = overall(boards)
    after = overall(boards, final=True) if final else None
    tau, moves = None, {}
    if after is not None:
        rank_after = {s.user: s.rank for s in after}
        common = [s for s in before if s.user in rank_after]
        tau = kendall_tau_b([s.rank for s in common], [rank_after[s.user] for s in common])
        moves = {s.user: s.rank - rank_after[s.user] for s in common}
    names = {b.board_id: board_key(b) for b in boards}
    failures = [Failure(names.get(r.board_id, "?"), r.submission.user.name, r.submission_id, r.status, r.message)
                for r in sorted(rejudgings, key=lambda r: r.id)
                if r.status not in PENDING and r.status != Verdict.passed]
    return Standings(boards, before, after, tau, moves, failures)
