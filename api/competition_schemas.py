"""The competitions' public schemas (``CompetitionCreate``, ``CompetitionPublic``, ...) and their
presenters: the service's rows and standings turned into what the JSON API and the page show. The
re-judging's secret seed has no field here: it can never leave through a response."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field

from kernelrank.db.models import Competition, LateEntry, as_utc
from kernelrank.services import competitions
from kernelrank.services.competitions import BoardStanding, Entry, Standing, Standings


class CompetitionBoardSpec(BaseModel):
    """A board of a competition: a problem (its current revision) on a device queue."""

    problem: str = Field(max_length=64)
    device: str = Field(max_length=64, examples=["cpu", "cuda-h100-sxm"])


class CompetitionCreate(BaseModel):
    """A new competition: entries count when submitted from ``starts_at`` to ``ends_at`` (times
    with a time zone); at finalize each board's top ``final_top`` entries are judged again."""

    name: str = Field(max_length=64, examples=["winter-2026"])
    title: str = Field(max_length=200)
    boards: list[CompetitionBoardSpec] = Field(min_length=1, max_length=competitions.MAX_BOARDS)
    starts_at: dt.datetime = Field(examples=["2026-12-01T00:00:00Z"])
    ends_at: dt.datetime = Field(examples=["2026-12-15T00:00:00Z"])
    final_top: int = Field(default=10, ge=0, le=competitions.MAX_FINAL_TOP)


class LateEntryCreate(BaseModel):
    """A submission made after the end that an admin accepts into the competition."""

    submission_id: int = Field(ge=1, le=2**62)


class LateEntryPublic(BaseModel):
    """A late entry as recorded: the submission and when it was accepted."""

    competition: str
    submission_id: int
    accepted_at: dt.datetime


class EntryPublic(BaseModel):
    """An entry on a competition board: its place and score (ns) in the window's standings; its
    re-judging's status (``null``: not among the top entries re-judged); once final, its final
    place (``null`` when its re-judging failed), re-judged score (ns) and 95% interval, whether it
    is tied with the entry above, and its move (place before minus final place: positive is up)."""

    place: int
    user: str
    submission_id: int
    score_ns: float
    score_ci_ns: list[float] | None
    tied: bool
    late: bool
    rejudging: str | None = None
    rejudging_message: str = ""
    final_place: int | None = None
    final_score_ns: float | None = None
    final_score_ci_ns: list[float] | None = None
    final_tied: bool = False
    move: int | None = None


class CompetitionBoardPublic(BaseModel):
    """A competition board and its entries; ``tau``: Kendall's tau-b between the re-judged
    entries' places before and after (``null`` until final, or under two re-judged entries)."""

    problem: str
    revision: str
    device: str
    entries: list[EntryPublic]
    tau: float | None = None


class StandingPublic(BaseModel):
    """A user's overall standing: rank (shared by equal totals), total, place per board
    (``problem/device``; ``null``: no entry there)."""

    rank: int
    user: str
    total: int
    places: dict[str, int | None]


class FailurePublic(BaseModel):
    """A re-judging that did not pass: which entry, and why."""

    board: str
    user: str
    submission_id: int
    status: str
    message: str


class StabilityPublic(BaseModel):
    """How the standings moved when re-judged: Kendall's tau-b between the overall ranks before
    and after (over the users in both), and each user's move (rank before minus after)."""

    tau: float | None
    moves: dict[str, int]


class CompetitionSummary(BaseModel):
    """A competition in the list."""

    name: str
    title: str
    starts_at: dt.datetime
    ends_at: dt.datetime
    state: str = Field(description="upcoming, open, ended, finalizing or final")
    final: bool
    boards: list[str] = Field(description="problem/device of each board")


class CompetitionPublic(CompetitionSummary):
    """A competition with its standings: each board's entries, the overall standing by ``rule``
    on the window's places (``standings``) and, once final, on the re-judged ones
    (``final_standings``, with the rank-stability figure); re-judgings that failed."""

    final_top: int
    finalized_at: dt.datetime | None
    final_at: dt.datetime | None
    rule: str
    competition_boards: list[CompetitionBoardPublic]
    standings: list[StandingPublic]
    final_standings: list[StandingPublic] | None
    stability: StabilityPublic | None
    failures: list[FailurePublic]


def _ci(low: float | None, high: float | None) -> list[float] | None:
    return None if low is None or high is None else [low, high]


def entry_public(e: Entry) -> EntryPublic:
    """An entry as the API shows it."""
    return EntryPublic(place=e.place, user=e.user, submission_id=e.submission_id, score_ns=e.score_ns,
                       score_ci_ns=_ci(e.score_low_ns, e.score_high_ns), tied=e.tied, late=e.late,
                       rejudging=e.rejudging, rejudging_message=e.rejudging_message, final_place=e.final_place,
                       final_score_ns=e.final_score_ns,
                       final_score_ci_ns=_ci(e.final_score_low_ns, e.final_score_high_ns), final_tied=e.final_tied,
                       move=e.move)


def board_public(b: BoardStanding) -> CompetitionBoardPublic:
    """A competition board as the API shows it."""
    return CompetitionBoardPublic(problem=b.problem, revision=b.revision, device=b.device,
                                  entries=[entry_public(e) for e in b.entries], tau=b.tau)


def standing_public(s: Standing) -> StandingPublic:
    """A user's overall standing as the API shows it."""
    return StandingPublic(rank=s.rank, user=s.user, total=s.total, places=dict(s.places))


def competition_summary(comp: Competition) -> CompetitionSummary:
    """A competition in the list."""
    return CompetitionSummary(**_summary_fields(comp))


def _summary_fields(comp: Competition) -> dict:
    return {"name": comp.name, "title": comp.title, "starts_at": as_utc(comp.starts_at),
            "ends_at": as_utc(comp.ends_at), "state": competitions.state_of(comp), "final": comp.final_at is not None,
            "boards": [f"{b.problem_revision.problem.name}/{b.device}" for b in comp.boards]}


def competition_public(comp: Competition, standings: Standings) -> CompetitionPublic:
    """A competition with its standings."""
    stability = (StabilityPublic(tau=standings.tau, moves=standings.moves)
                 if standings.after is not None else None)
    return CompetitionPublic(
        **_summary_fields(comp), final_top=comp.final_top,
        finalized_at=as_utc(comp.finalized_at) if comp.finalized_at else None,
        final_at=as_utc(comp.final_at) if comp.final_at else None, rule=competitions.STANDING_RULE,
        competition_boards=[board_public(b) for b in standings.boards],
        standings=[standing_public(s) for s in standings.before],
        final_standings=None if standings.after is None else [standing_public(s) for s in standings.after],
        stability=stability,
        failures=[FailurePublic(board=f.board, user=f.user, submission_id=f.submission_id, status=f.status,
                                message=f.message) for f in standings.failures])


def late_entry_public(comp: Competition, late: LateEntry) -> LateEntryPublic:
    """A late entry as recorded."""
    return LateEntryPublic(competition=comp.name, submission_id=late.submission_id,
                           accepted_at=as_utc(late.accepted_at))
