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
class ProblemSummary(BaseModel):
    """A problem in the list: its current revision and how many cases it has."""

    name: str
    title: str
    revision: str = Field(description="SHA-256 of the problem's definition and reference folder.")
    tests: int = Field(description="Number of test cases.")
    benchmarks: dict[str, int] = Field(description="Number of benchmark cases per device class (cpu, cuda).")


class ProblemPublic(BaseModel):
    """Everything an author needs to write a kernel for the current revision (no secret seed)."""

    name: str
    title: str
    revision: str
    description: str = Field(description="Markdown.")
    contract: DataContract
    tolerances: dict[str, Tolerance] = Field(description="Per output dtype: |out - ref| <= atol + rtol * |ref|.")
    tests: list[dict[str, Any]] = Field(description="Test cases: generate_input parameters, seed included.")
    benchmarks: dict[str, list[dict[str, Any]]] = Field(description="Benchmark cases per device class.")
    budgets: Budgets = Field(description="Wall-clock budgets in seconds: compile, and one per mode.")
    timing: dict[str, CaseTiming] = Field(description="Seconds spent timing each benchmark case, per device class.")
    ranking: str
    templates: dict[str, str] = Field(description="Starting points: file name -> source.")


# -- submissions ----------------------------------------------------------------------------------
class SubmissionCreate(BaseModel):
    """A submission as a JSON body (the multipart form has the same fields, with ``file`` for ``code``)."""

    problem: str = Field(max_length=64, examples=["softmax"])
    device: str = Field(default="cpu", max_length=64, description="Device queue: cpu or cuda-<model>.",
                        examples=["cpu"])
    mode: str = Field(default="leaderboard", max_length=16, description="test, benchmark, leaderboard or profile.",
                      examples=["leaderboard"])
    code: str = Field(description="The kernel's Python source (UTF-8).")
    filename: str | None = Field(default=None, max_length=255, examples=["kernel.py"])


class SubmissionAccepted(BaseModel):
    """A submission was stored and its job queued; poll ``GET /api/v1/submissions/{id}``."""

    id: int
    status: str = "queued"


class RunPublic(BaseModel):
    """One evaluation of a submission: ``public`` (every mode) or ``secret`` (leaderboard mode)."""

    kind: str
    status: str
    score_ns: float | None = Field(description="Geometric mean over benchmark cases of the mean time (ns).")
    result: dict[str, Any] = Field(description="The harness's result (cases, timings); details for the owner only.")


class SubmissionPublic(_UtcTimes):
    """A submission and its verdict. ``code`` and ``logs`` are null unless the viewer owns the
    submission or is an admin; so are the details of error messages (which can quote the code)."""

    id: int
    user: str
    problem: str
    revision: str
    device: str
    mode: str
    language: str
    status: str = Field(description="queued, running, passed, failed, error, timeout, compile_error, rejected or cancelled.")
    message: str
    score_ns: float | None
    speedup: float | None
    ranked: bool
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    progress: dict[str, Any]
    runs: list[RunPublic]
    code: str | None
    logs: str | None


# -- leaderboards ---------------------------------------------------------------------------------
class LeaderboardRowPublic(_UtcTimes):
    """One user's best ranked submission."""

    rank: int
    user: str
    submission_id: int
    score_ns: float = Field(description="Lower is better.")
    speedup: float | None = Field(description="Reference time over submission time (geometric means).")
    language: str
    submitted_at: dt.datetime


class LeaderboardPublic(BaseModel):
    """The ranking of the current revision of a problem on one device queue."""

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
    online: bool = Field(description="Heartbeat within settings.runner_online_seconds.")


class RunnersPublic(BaseModel):
    """Every runner ever seen, and the queued submissions per device queue."""

    runners: list[RunnerPublic]
    queues: dict[str, int] = Field(description="Device queue -> submissions waiting (status queued).")


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
