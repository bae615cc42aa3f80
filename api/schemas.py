"""Request and response bodies of the HTTP API, named by role (``XCreate`` in, ``XPublic`` out).

Responses are built from these models only, never from database rows directly, so a column that
must stay on the server (a problem revision's ``secret_seed``, a token's hash) has no field to
leave through. Times are UTC; durations and scores are in nanoseconds (``score_ns``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, Field, field_validator

from kernelrank.problems import Budgets, CaseTiming, DataContract, Tolerance
from kernelrank.vocab import CPU_QUEUE, MODES, STATUSES, Mode, RunKind, SubmissionStatus, Verdict


def _as_utc(value: dt.datetime | None) -> dt.datetime | None:
    """Times are stored as UTC; SQLite hands them back naive, so mark them as UTC."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=dt.timezone.utc)
    return value


class _UtcTimes(BaseModel):
    @field_validator("*", mode="after")
    @classmethod
    def _utc(cls, value: Any) -> Any:
        return _as_utc(value) if isinstance(value, dt.datetime) else value


# -- problems -------------------------------------------------------------------------------------
class ProblemSummary(_UtcTimes):
    """A problem in the list: its current revision and how many cases it has."""

    name: str
    title: str
    revision: str = Field(description="SHA-256 of the problem's definition and reference folder.")
    tests: int = Field(description="Number of test cases.")
    benchmarks: dict[str, int] = Field(description="Number of benchmark cases per device class (cpu, cuda).")
    state: str = Field(default="open", description="open, closed (deadline passed) or hidden (admins only).")
    deadline: dt.datetime | None = Field(default=None, description="Leaderboard submissions are taken before it.")


class ProblemPublic(_UtcTimes):
    """Everything an author needs to write a kernel for a revision (the current one unless another
    was asked for; no secret seed)."""

    name: str
    title: str
    revision: str
    is_current: bool = Field(default=True, description="Whether this is the revision taking submissions.")
    state: str = Field(default="open", description="open, closed (deadline passed) or hidden (admins only).")
    deadline: dt.datetime | None = None
    description: str = Field(description="Markdown.")
    contract: DataContract
    tolerances: dict[str, Tolerance] = Field(description="Per output dtype: |out - ref| <= atol + rtol * |ref|.")
    tests: list[dict[str, Any]] = Field(description="Test cases: generate_input parameters, seed included.")
    benchmarks: dict[str, list[dict[str, Any]]] = Field(description="Benchmark cases per device class.")
    budgets: Budgets = Field(description="Wall-clock budgets in seconds: compile, and one per mode.")
    timing: dict[str, CaseTiming] = Field(description="Seconds spent timing each benchmark case, per device class.")
    ranking: str
    templates: dict[str, str] = Field(description="Starting points: file name -> source.")


class RevisionPublic(_UtcTimes):
    """One revision of a problem; each keeps its own leaderboard."""

    number: int = Field(description="1 for the first revision, in order of creation.")
    revision: str
    is_current: bool
    created_at: dt.datetime


class ProblemStatePublic(_UtcTimes):
    """A problem's state after an admin action."""

    name: str
    state: str = Field(description="open, closed or hidden.")
    hidden: bool
    deadline: dt.datetime | None


class ProblemCloseRequest(BaseModel):
    """Close a problem: ``deadline`` with a time zone (ISO 8601), or now when absent."""

    deadline: dt.datetime | None = Field(default=None, examples=["2026-12-01T12:00:00Z"])


class ProblemPushed(BaseModel):
    """The result of pushing a problem: its now-current revision."""

    name: str
    revision: str
    new_problem: bool
    new_revision: bool
    state: str


# -- submissions ----------------------------------------------------------------------------------
class SubmissionCreate(BaseModel):
    """A submission as a JSON body (the multipart form has the same fields, with ``file`` for ``code``)."""

    problem: str = Field(max_length=64, examples=["softmax"])
    device: str = Field(default=CPU_QUEUE, max_length=64, description="Device queue: cpu or cuda-<model>.",
                        examples=["cpu"])
    mode: str = Field(default=Mode.leaderboard.value, max_length=16, description=", ".join(MODES) + ".",
                      examples=["leaderboard"])
    code: str = Field(description="The kernel's Python source (UTF-8).")
    filename: str | None = Field(default=None, max_length=255, examples=["kernel.py"])


class SubmissionAccepted(BaseModel):
    """A submission was stored and its job queued; poll ``GET /api/v1/submissions/{id}``."""

    id: int
    status: SubmissionStatus = SubmissionStatus.queued
    #: Set where the job waits for a runner of its device to come back online.
    message: str = ""


class RunPublic(BaseModel):
    """One evaluation of a submission: ``public`` (every mode) or ``secret`` (leaderboard mode)."""

    kind: RunKind
    attempt: int = Field(default=1, description="The evaluation attempt it belongs to (a requeue starts a new one).")
    status: Verdict
    score_ns: float | None = Field(description=(
        "Geometric mean over benchmark cases of each case's time (ns): this run's reference time over the paired "
        "speedup. The submission's ``score_ns`` is the same re-based on the board's calibration."))
    result: dict[str, Any] = Field(description="The harness's result (cases, timings); details for the owner only.")


class SubmissionPublic(_UtcTimes):
    """A submission and its verdict. ``code`` and ``logs`` are null unless the viewer owns the
    submission or is an admin; so are the details of error messages (which can quote the code)
    and the reason of a disqualification."""

    id: int
    user: str
    problem: str
    revision: str
    device: str
    mode: str
    language: str
    status: SubmissionStatus = Field(description=", ".join(STATUSES) + ".")
    message: str
    score_ns: float | None = Field(description=(
        "Ranked submissions: the board's calibrated reference time over the paired speedup, as a geometric mean "
        "over benchmark cases (ns), lower is better; in leaderboard mode the speedup is over both runs."))
    score_ci_ns: list[float] | None = Field(default=None, description="The score's 95% interval [low, high] (ns).")
    speedup: float | None = Field(description=(
        "Geometric mean over cases of the paired speedup over the reference; in leaderboard mode the geometric mean "
        "of the public and secret runs' speedups."))
    speedup_ci: list[float] | None = Field(default=None, description=(
        "The speedup's 95% interval [low, high]; in leaderboard mode it holds how far the two runs differ, and is "
        "never narrower than the spread between runs of the board's recent submissions."))
    ranked: bool
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    progress: dict[str, Any]
    queue_position: int | None = Field(default=None, description=(
        "While queued: jobs ahead of it in its device queue (0: next); null once running or done."))
    estimated_start: dt.datetime | None = Field(default=None, description=(
        "While queued: when it may start, from the recent median job time of each job ahead's mode on its device "
        "queue and the runners serving it now; null when the queue has no history or no runner."))
    attempt: int = Field(default=1, description="1, plus one per requeue or measurement made again.")
    measurements: int = Field(default=1, description=(
        "Measurements its verdict and score are made of: 1, plus one per time the service measured it again "
        "(a leaderboard submission whose runs were too noisy to rank or disagree: both runs again, all "
        "combined). ``runs`` are those measurements' runs, by ``attempt``."))
    remeasure_at: dt.datetime | None = Field(default=None, description=(
        "Queued to be measured again, backing off from a busy machine: when its job is sent to its queue "
        "(its message says why, and which measurement of how many); null otherwise."))
    too_noisy: bool = Field(default=False, description=(
        "The service stopped measuring it again: still too noisy to rank (or its runs disagree, or could not be "
        "measured) after every measurement allowed. Passed, not ranked; the admins are told "
        "(GET /api/v1/admin/submissions/too-noisy) until one requeues it."))
    disqualified: bool = False
    needs_review: bool = False
    review_reason: str | None = None
    guard: dict[str, Any] | None = Field(default=None, description=(
        "Admins only: the static hack detector kernelguard's advisory scan (classification, matched patterns); "
        "it never changes the verdict. Absent until the job starts (or its verdict is recorded)."))
    disqualified_reason: str | None = Field(default=None, description="For the author and admins only.")
    runs: list[RunPublic]
    code: str | None
    logs: str | None


# -- leaderboards ---------------------------------------------------------------------------------
class LeaderboardRowPublic(_UtcTimes):
    """One user's best ranked submission."""

    rank: int
    user: str
    submission_id: int
    score_ns: float = Field(description=(
        "Lower is better: the geometric mean over benchmark cases of the board's calibrated reference time over the "
        "case's speedup, measured side by side with the reference, over the submission's public and secret runs "
        "(ns)."))
    score_ci_ns: list[float] | None = Field(default=None, description=(
        "The score's 95% interval [low, high] (ns); null for results measured before intervals were kept."))
    tied: bool = Field(default=False, description=(
        "Cannot be told apart from the entry above: their intervals overlap."))
    speedup: float | None = Field(description=(
        "Geometric mean over cases of the paired speedup over the reference, over the public and secret runs."))
    language: str
    submitted_at: dt.datetime
    needs_review: bool = Field(default=False, description="Marked for an admin's review: a speedup beyond the "
                                                          "problem's review bound. Shown until an admin clears it.")
    tflops: float | None = Field(default=None, description="Achieved TFLOP/s on the headline (first benchmark) case.")
    gbps: float | None = Field(default=None, description="Achieved GB/s on the headline (first benchmark) case.")


class LeaderboardPublic(BaseModel):
    """The ranking of a revision of a problem (the current one unless asked) on one device queue."""

    problem: str
    device: str
    revision: str
    rows: list[LeaderboardRowPublic]


# -- runners --------------------------------------------------------------------------------------
class RunnerPublic(_UtcTimes):
    """A runner as last seen through its heartbeat."""

    name: str
    device: str
    info: dict[str, Any]
    version: str
    last_heartbeat: dt.datetime
    jobs_done: int
    online: bool = Field(description="Heartbeat within settings.runner_online_seconds, and no stop message since.")
    stopped_at: dt.datetime | None = Field(default=None, description=(
        "When the runner said it was shutting down (its last message); null while it runs."))


class RunnersPublic(BaseModel):
    """Every runner ever seen, and the queued submissions per device queue."""

    runners: list[RunnerPublic]
    queues: dict[str, int] = Field(description="Device queue -> submissions waiting (status queued).")
    oldest_wait_s: dict[str, float] = Field(default_factory=dict, description=(
        "Device queue -> seconds its oldest waiting submission has waited (queues with submissions waiting)."))


# -- users ----------------------------------------------------------------------------------------
class UserCreate(BaseModel):
    name: str = Field(min_length=1, max_length=64, examples=["alice"])
    admin: bool = False


class UserCreated(BaseModel):
    """A new user and its first API token, shown this once (only its hash is kept)."""

    name: str
    is_admin: bool
    token: str


class Me(BaseModel):
    name: str
    is_admin: bool
    has_password: bool = False


class PasswordChange(BaseModel):
    """``current`` is required when a password is set already."""

    current: str | None = Field(default=None, max_length=1024)
    new: str = Field(min_length=1, max_length=1024)


class PasswordSet(BaseModel):
    """An admin sets a user's password."""

    password: str = Field(min_length=1, max_length=1024)


class PasswordLogin(BaseModel):
    """Sign in with a password to get a new API token."""

    name: str = Field(min_length=1, max_length=64)
    password: str = Field(min_length=1, max_length=1024)
    token_name: str = Field(default="password sign-in", max_length=64)


class TokenCreate(BaseModel):
    name: str = Field(default="", max_length=64, examples=["laptop"])
    expires_at: dt.datetime | None = Field(default=None, examples=["2027-01-01T00:00:00Z"], description=(
        "When the token stops working (ISO 8601; without a time zone, UTC); it must be in the future. "
        "Absent: it never expires."))


class TokenPublic(_UtcTimes):
    """An API token as its owner sees it later: never the token itself, only its first characters."""

    id: int
    name: str
    prefix: str = Field(description="The token's first characters, to recognise it.")
    created_at: dt.datetime
    revoked_at: dt.datetime | None
    expires_at: dt.datetime | None = Field(default=None, description="Refused from then on; null: never expires.")
    last_used_at: dt.datetime | None = Field(default=None, description=(
        "The last request it authenticated, to the minute; null: never used."))
    state: str = Field(default="active", description="active, expired or revoked.")


class TokenCreated(TokenPublic):
    """A new API token, shown in this answer only (only its hash is kept)."""

    token: str


# -- limits ---------------------------------------------------------------------------------------
class BoardLimitSet(BaseModel):
    """An admin's limit on one board and mode."""

    problem: str = Field(min_length=1, max_length=64)
    device: str = Field(min_length=1, max_length=64, description="A device queue: cpu or cuda-<model>.")
    mode: str = Field(min_length=1, max_length=16, description=", ".join(MODES) + ".")
    per_hour: int = Field(ge=0, le=100_000, description=(
        "Submissions of this mode each user may make to this board in any rolling hour; 0 removes the limit."))


class BoardLimitPublic(BaseModel):
    """A board's limit: each user may make ``per_hour`` submissions of ``mode`` to ``problem`` on
    ``device`` in any rolling hour (over it: 429 naming when the next is allowed)."""

    problem: str
    device: str
    mode: str
    per_hour: int


# -- moderation -----------------------------------------------------------------------------------
class DisqualifyRequest(BaseModel):
    reason: str = Field(min_length=1, max_length=2000, description="Shown to the submission's author.")
