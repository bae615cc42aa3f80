"""The database schema (SQLAlchemy 2 declarative models); migrations live in ``migrations/``.

Tables: users (with an optional Argon2 password hash), their API tokens and web sign-in sessions
(both stored as SHA-256 of a random value), problems (hidden flag, ranking deadline) and their
revisions (definition, reference and a secret seed per revision), submissions (code, sha256,
language, revision, device, mode, status, attempt, disqualification, timestamps), runs (one per
submission, attempt and kind: ``public`` or ``secret``, each with its per-case results), runners
(device, versions, last heartbeat) and calibrations (the reference times per problem revision and
device queue that scores are based on).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
    func,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> dt.datetime:
    """Timezone-aware now in UTC (stored naive-UTC where the database has no time zones)."""
    return dt.datetime.now(dt.timezone.utc)


def as_utc(t: dt.datetime) -> dt.datetime:
    """A stored time made aware: SQLite hands times back naive; they are UTC."""
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.timezone.utc)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, dt.datetime: DateTime(timezone=True)}


def fold_name(name: str) -> str:
    """The form of a user name that must be unique: Unicode NFKC, then case-folded
    (``"Alice"``, ``"ALICE"`` and ``"ａｌｉｃｅ"`` are one name)."""
    import unicodedata

    return unicodedata.normalize("NFKC", name).casefold()


def _folded_default(context: Any) -> str:
    return fold_name(context.get_current_parameters()["name"])


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    #: :func:`fold_name` of ``name``, set on insert: one account per name regardless of case (migration 0008).
    name_folded: Mapped[str] = mapped_column(String(64), unique=True, index=True, default=_folded_default)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    #: Argon2id hash (PHC string) of the password; ``None``: no password sign-in.
    password_hash: Mapped[str | None] = mapped_column(String(255), default=None)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow, server_default=func.now())

    tokens: Mapped[list["ApiToken"]] = relationship(back_populates="user")


class ApiToken(Base):
    """An API token: only its SHA-256 is stored; ``prefix`` (first characters) identifies it to its owner."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(64), default="")
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow, server_default=func.now())
    revoked_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    #: Refused from then on; ``None``: never expires.
    expires_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    #: The last request it authenticated, to the minute (``kernelrank.services.users.LAST_USED_RESOLUTION``).
    last_used_at: Mapped[dt.datetime | None] = mapped_column(default=None)

    user: Mapped[User] = relationship(back_populates="tokens")


class WebSession(Base):
    """A browser's sign-in: the cookie holds a random value, only its SHA-256 is stored; it ends at
    ``expires_at`` or when revoked (sign-out)."""

    __tablename__ = "web_sessions"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow, server_default=func.now())
    expires_at: Mapped[dt.datetime] = mapped_column()
    revoked_at: Mapped[dt.datetime | None] = mapped_column(default=None)

    user: Mapped[User] = relationship()


class Problem(Base):
    """A problem name. ``hidden``: listed and shown to admins only; ``deadline``: leaderboard
    submissions are taken (and ranked) only before it (``None``: open); ``code_open``: its ranked
    submissions' code is published in exports (``kernelrank export``), which otherwise hold results
    only (not to be confused with a problem open to submissions, which is about the deadline)."""

    __tablename__ = "problems"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    hidden: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    deadline: Mapped[dt.datetime | None] = mapped_column(default=None)
    code_open: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow, server_default=func.now())

    revisions: Mapped[list["ProblemRevision"]] = relationship(back_populates="problem", order_by="ProblemRevision.id")


class ProblemRevision(Base):
    """One content revision of a problem. ``secret_seed`` never leaves the server except in job
    messages to runners' trusted side."""

    __tablename__ = "problem_revisions"

    id: Mapped[int] = mapped_column(primary_key=True)
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id", ondelete="CASCADE"), index=True)
    revision: Mapped[str] = mapped_column(String(64), unique=True)
    definition: Mapped[dict[str, Any]] = mapped_column(JSON)
    reference_source: Mapped[str] = mapped_column(Text)
    templates: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    secret_seed: Mapped[int] = mapped_column(BigInteger)
    is_current: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow, server_default=func.now())

    problem: Mapped[Problem] = relationship(back_populates="revisions")


class Submission(Base):
    """A submitted kernel and its verdict. ``score_ns`` and ``ranked`` are set by the control
    worker when every run of the submission's current ``attempt`` has arrived. A requeue starts a
    new attempt (older runs stay as history); a disqualified submission is never ranked."""

    __tablename__ = "submissions"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    problem_revision_id: Mapped[int] = mapped_column(ForeignKey("problem_revisions.id", ondelete="CASCADE"))
    device: Mapped[str] = mapped_column(String(64))
    mode: Mapped[str] = mapped_column(String(16))
    language: Mapped[str] = mapped_column(String(16))
    filename: Mapped[str] = mapped_column(String(255), default="submission.py")
    code: Mapped[str] = mapped_column(Text)
    code_sha256: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default="queued")
    message: Mapped[str] = mapped_column(Text, default="")
    score_ns: Mapped[float | None] = mapped_column(Float, default=None)
    speedup: Mapped[float | None] = mapped_column(Float, default=None)
    #: the 95% interval of the paired speedup over the submission's runs (public and secret), and of
    #: the score derived from it and the board's calibration (:mod:`kernelrank.services.calibration`);
    #: NULL for results without one
    speedup_low: Mapped[float | None] = mapped_column(Float, default=None)
    speedup_high: Mapped[float | None] = mapped_column(Float, default=None)
    score_low_ns: Mapped[float | None] = mapped_column(Float, default=None)
    score_high_ns: Mapped[float | None] = mapped_column(Float, default=None)
    #: how far its runs' speedups differ beyond their own errors (``stats.runs_spread``: tau^2 of the
    #: log speedup, may be negative), pooled over a board's recent submissions into the floor of the
    #: next ones' intervals (``calibration.board_spread``); NULL without two measured runs
    runs_spread: Mapped[float | None] = mapped_column(Float, default=None)
    #: achieved TFLOP/s and GB/s of the headline case (the first benchmark case) of the public run,
    #: copied from it when the verdict is written so a leaderboard page never parses run results
    tflops: Mapped[float | None] = mapped_column(Float, default=None)
    gbps: Mapped[float | None] = mapped_column(Float, default=None)
    ranked: Mapped[bool] = mapped_column(Boolean, default=False)
    runner: Mapped[str | None] = mapped_column(String(255), default=None)
    #: a speedup beyond the problem's ``review_speedup``: listed with a mark until an admin clears it
    needs_review: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")
    review_reason: Mapped[str | None] = mapped_column(Text, default=None)
    #: the static hack detector's advisory signal (:mod:`kernelrank.services.guard`), for admins
    #: beside the review mark; it never changes the verdict. ``None``: not scanned yet.
    guard: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    progress: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    #: 1 for the first evaluation, +1 per requeue or measurement made again; runs of attempts
    #: before ``measured_from`` are history.
    attempt: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    #: The first attempt whose runs count: a requeue moves it to the new attempt (judged afresh); a
    #: measurement made again by the service (its runs too noisy or disagreeing: settings'
    #: ``remeasures``) does not, and its runs are combined with the earlier ones
    #: (``judgement.over_measurements``).
    measured_from: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    disqualified_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    #: Shown to the author and admins.
    disqualified_reason: Mapped[str | None] = mapped_column(Text, default=None)
    disqualified_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), default=None)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow, server_default=func.now())
    started_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    finished_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    #: Times a runner started the job (the sweeper and redelivery bound it); not ``attempt``.
    starts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    #: When its job message was last sent to the device queue (creation or requeue); ``None``
    #: while a measurement made again waits out its back-off (``remeasure_at``).
    dispatched_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    #: When the job of a measurement made again is due to be sent (the sweeper sends it): the
    #: service backs off from a busy machine (:mod:`kernelrank.services.remeasure`); ``None`` once sent.
    remeasure_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    #: When the service stopped measuring it again, its runs still too noisy to rank (or
    #: disagreeing) after every measurement allowed, and told the admins; ``None``: not so (a
    #: requeue clears it).
    too_noisy_at: Mapped[dt.datetime | None] = mapped_column(default=None)

    user: Mapped[User] = relationship(foreign_keys=[user_id])
    disqualified_by: Mapped[User | None] = relationship(foreign_keys=[disqualified_by_id])
    problem_revision: Mapped[ProblemRevision] = relationship()
    #: Every run of every attempt (see :attr:`current_runs`).
    runs: Mapped[list["Run"]] = relationship(back_populates="submission", order_by="Run.id")

    @property
    def current_runs(self) -> list["Run"]:
        """Runs of the current attempt."""
        return [r for r in self.runs if r.attempt == self.attempt]

    @property
    def counted_runs(self) -> list["Run"]:
        """Runs of every attempt that counts (``measured_from`` on): the measurements the verdict
        and score are made of, in order."""
        return [r for r in self.runs if self.measured_from <= r.attempt <= self.attempt]

    @property
    def measurements(self) -> int:
        """Measurements the current judgement made or is making (1 + those made again)."""
        return self.attempt - self.measured_from + 1

    __table_args__ = (
        # the leaderboard: ranked entries of one revision and device, by score
        Index("ix_submissions_board", "problem_revision_id", "device", "ranked", "score_ns"),
        Index("ix_submissions_user", "user_id", "created_at"),
        Index("ix_submissions_status", "status", "device"),
        # each user's best ranked entry, in the leaderboard window's order (migration 0004)
        Index("ix_submissions_user_best", "problem_revision_id", "device", "user_id", "score_ns", "created_at", "id",
              postgresql_where=text("ranked"), sqlite_where=text("ranked = 1")),
    )


class Run(Base):
    """One evaluation of a submission: ``public`` (every mode) or ``secret`` (leaderboard mode,
    seeded from the revision's secret). Unique per submission, attempt and kind: a redelivered job
    cannot record a second result."""

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16))
    attempt: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    status: Mapped[str] = mapped_column(String(16))
    score_ns: Mapped[float | None] = mapped_column(Float, default=None)
    result: Mapped[dict[str, Any]] = mapped_column(JSON)
    logs: Mapped[str] = mapped_column(Text, default="")
    runner: Mapped[str | None] = mapped_column(String(255), default=None)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow, server_default=func.now())

    submission: Mapped[Submission] = relationship(back_populates="runs")

    __table_args__ = (UniqueConstraint("submission_id", "attempt", "kind", name="uq_runs_submission_attempt_kind"),)


class Runner(Base):
    """A runner worker as last seen through its heartbeat; ``stopped_at``: when it said it was
    shutting down (offline from then on, until a heartbeat of the same name comes again)."""

    __tablename__ = "runners"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    device: Mapped[str] = mapped_column(String(64), index=True)
    info: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    version: Mapped[str] = mapped_column(String(32), default="")
    jobs_done: Mapped[int] = mapped_column(Integer, default=0)
    last_heartbeat: Mapped[dt.datetime] = mapped_column(default=utcnow)
    stopped_at: Mapped[dt.datetime | None] = mapped_column(default=None)


class Calibration(Base):
    """The reference's time per benchmark case of one problem revision on one device queue: what
    every score of that board is based on (score = the geometric mean over cases of reference
    time / paired speedup; :mod:`kernelrank.services.calibration`).

    ``samples``: per case (benchmark cases of the device class, in order), the reference times (ns)
    that each calibration run measured; ``reference_ns``: per case, their median; ``runs``: how many
    runs contributed; ``final``: the calibration has its runs and no longer changes."""

    __tablename__ = "calibrations"

    id: Mapped[int] = mapped_column(primary_key=True)
    problem_revision_id: Mapped[int] = mapped_column(ForeignKey("problem_revisions.id", ondelete="CASCADE"))
    device: Mapped[str] = mapped_column(String(64))
    runs: Mapped[int] = mapped_column(Integer, default=0)
    samples: Mapped[list[Any]] = mapped_column(JSON, default=list)
    reference_ns: Mapped[list[Any]] = mapped_column(JSON, default=list)
    final: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    __table_args__ = (UniqueConstraint("problem_revision_id", "device", name="uq_calibrations_board"),)


class BoardLimit(Base):
    """An admin's limit on one board and mode: each user may make at most ``per_hour``
    submissions of ``mode`` to ``problem`` on ``device`` (a device queue) in any rolling hour
    (:func:`kernelrank.services.limits.check_submission`)."""

    __tablename__ = "board_limits"

    id: Mapped[int] = mapped_column(primary_key=True)
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id", ondelete="CASCADE"))
    device: Mapped[str] = mapped_column(String(64))
    mode: Mapped[str] = mapped_column(String(16))
    per_hour: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    problem: Mapped[Problem] = relationship()

    __table_args__ = (UniqueConstraint("problem_id", "device", "mode", name="uq_board_limits_board_mode"),)


class RunSamples(Base):
    """A run's judged samples, apart from its result so that pages and the API never load them:
    per timed case, each counted pair's submission and reference request times in ns and the pair
    of processes that timed it (``timed.samples_event``), as the runner sent them. Read only for a
    score's reproducibility bundle (:mod:`kernelrank.services.bundles`)."""

    __tablename__ = "run_samples"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    cases: Mapped[list[Any]] = mapped_column(JSON)


class Competition(Base):
    """A competition over boards (:class:`CompetitionBoard`) between ``starts_at`` and ``ends_at``:
    the ranked entries submitted in that window count (and the late ones an admin accepted,
    :class:`LateEntry`). ``finalized_at``: an admin finalized it (the window closed, the top
    ``final_top`` entries of each board sent to be judged again: :class:`Rejudging`);
    ``final_at``: every re-judging has its verdict. ``final_seed`` is the re-judging's secret seed,
    drawn at finalize; it never leaves the server except in the runners' job messages."""

    __tablename__ = "competitions"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str] = mapped_column(String(200))
    starts_at: Mapped[dt.datetime] = mapped_column()
    ends_at: Mapped[dt.datetime] = mapped_column()
    final_top: Mapped[int] = mapped_column(Integer)
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), default=None)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow, server_default=func.now())
    finalized_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    final_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    final_seed: Mapped[int | None] = mapped_column(BigInteger, default=None)

    boards: Mapped[list["CompetitionBoard"]] = relationship(order_by="CompetitionBoard.id",
                                                            cascade="all, delete-orphan")


class CompetitionBoard(Base):
    """One board of a competition: a problem revision (the current one when the competition was
    created) on one device queue."""

    __tablename__ = "competition_boards"

    id: Mapped[int] = mapped_column(primary_key=True)
    competition_id: Mapped[int] = mapped_column(ForeignKey("competitions.id", ondelete="CASCADE"))
    problem_revision_id: Mapped[int] = mapped_column(ForeignKey("problem_revisions.id", ondelete="CASCADE"))
    device: Mapped[str] = mapped_column(String(64))

    problem_revision: Mapped[ProblemRevision] = relationship()

    __table_args__ = (UniqueConstraint("competition_id", "problem_revision_id", "device",
                                       name="uq_competition_boards_board"),)


class LateEntry(Base):
    """A submission made after a competition's end that an admin accepted into it."""

    __tablename__ = "competition_late_entries"

    id: Mapped[int] = mapped_column(primary_key=True)
    competition_id: Mapped[int] = mapped_column(ForeignKey("competitions.id", ondelete="CASCADE"))
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    accepted_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), default=None)
    accepted_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    __table_args__ = (UniqueConstraint("competition_id", "submission_id", name="uq_competition_late_entries"),)


class Rejudging(Base):
    """A competition entry judged again at finalize: a job of the entry's code on its board's device
    queue, with the competition's ``final_seed`` (its message's ``attempt`` is minus this row's id,
    which routes the runner's reports here, not to the submission). ``place_before`` and
    ``score_before_ns``: the entry's place and score in the window's standings; ``results``: the
    runner's result per run kind; ``status``: ``queued``, ``running`` or the verdict; the final
    score (ns) and its 95% interval once passed."""

    __tablename__ = "competition_rejudgings"

    id: Mapped[int] = mapped_column(primary_key=True)
    competition_id: Mapped[int] = mapped_column(ForeignKey("competitions.id", ondelete="CASCADE"), index=True)
    board_id: Mapped[int] = mapped_column(ForeignKey("competition_boards.id", ondelete="CASCADE"))
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    place_before: Mapped[int] = mapped_column(Integer)
    score_before_ns: Mapped[float] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    message: Mapped[str] = mapped_column(Text, default="")
    results: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    final_score_ns: Mapped[float | None] = mapped_column(Float, default=None)
    final_score_low_ns: Mapped[float | None] = mapped_column(Float, default=None)
    final_score_high_ns: Mapped[float | None] = mapped_column(Float, default=None)
    runner: Mapped[str | None] = mapped_column(String(255), default=None)
    starts: Mapped[int] = mapped_column(Integer, default=0)
    dispatched_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    finished_at: Mapped[dt.datetime | None] = mapped_column(default=None)

    submission: Mapped[Submission] = relationship()
    board: Mapped[CompetitionBoard] = relationship()

    __table_args__ = (UniqueConstraint("board_id", "submission_id", name="uq_competition_rejudgings_entry"),)
