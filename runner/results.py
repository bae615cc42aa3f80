"""Typed results of an evaluation: verdicts, per-case results, the whole run; JSON-ready."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any


class Status(str, enum.Enum):
    """The verdict of an evaluation.

    - ``passed``: every checked output matched the reference (and, when timed, timing succeeded);
    - ``failed``: an output was wrong (values, shape, dtype, device or type);
    - ``error``: the submission raised, exited or crashed (runtime error);
    - ``timeout``: it ran past its time budget and was killed;
    - ``compile_error``: it failed to load or build (Python syntax, C++/CUDA or Triton compile);
    - ``rejected``: it broke the protocol or the trust rules (e.g. timing claims the judge's wall
      clock cannot support, malformed answers, threads or processes left running after a call,
      functions of the harness or torch replaced), or it was not run because the isolation the
      evaluation requires is not available.

    An output that shares memory with an input or with the previous call's output ``failed``.
    """

    passed = "passed"
    failed = "failed"
    error = "error"
    timeout = "timeout"
    compile_error = "compile_error"
    rejected = "rejected"


@dataclass
class CaseResult:
    """One test or benchmark case.

    ``timing`` (benchmark cases in timed modes) holds :class:`~kernelrank.runner.timing.TimingStats`
    as a dict in ns; ``tflops`` and ``gbps`` are achieved TFLOP/s and GB/s at the mean time;
    ``ref_mean_ns`` is the reference's mean on the same case, device and mode, and
    ``speedup = ref_mean_ns / mean_ns``. ``checked`` counts outputs compared to the reference.
    """

    kind: str
    index: int
    spec: dict[str, Any]
    passed: bool
    message: str = ""
    checked: int = 0
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatches: int = 0
    first_mismatch: list[int] | None = None
    timing: dict[str, Any] | None = None
    tflops: float | None = None
    gbps: float | None = None
    ref_mean_ns: float | None = None
    speedup: float | None = None
    wall_check: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        params = " ".join(f"{k}={v}" for k, v in self.spec.items())
        return f"{self.kind} case {self.index} ({params})"


@dataclass
class EvalResult:
    """A whole evaluation, as printed by ``kernelrank eval --json`` and stored by the service.

    ``score_ns`` (leaderboard mode only) is the geometric mean over benchmark cases of each case's
    mean time, in ns, lower is better; ``speedup`` is the reference's geometric mean over the
    submission's. ``logs`` holds the submission's stdout and stderr, bounded.

    ``isolation`` is what held around the submission, measured by the judge from ``/proc`` once
    the child had set itself up: ``method`` (``setuid``, ``userns`` or ``none``), ``network``
    (``netns``: a namespace with no reachable network, or ``none``), ``filesystem`` (``read-only``:
    only the working folder and private temporary folders writable, or ``private-cwd``), ``user``
    (``sandbox-uid`` or ``same-uid`` as the judge), ``uid``, ``capabilities`` (hex), ``hidden``
    and ``private_tmp`` folders, ``limits`` (named as in
    :class:`~kernelrank.runner.limits.SandboxLimits`, plus ``processes_enforced``) and ``cleanup``. ``needs_review`` marks a passing result whose speedup
    is beyond the problem's ``review_speedup`` (``review_reason`` says which), for an
    administrator to look at; the verdict itself is unchanged.
    """

    status: Status
    mode: str
    problem: str
    revision: str
    device: str
    message: str = ""
    cases: list[CaseResult] = field(default_factory=list)
    score_ns: float | None = None
    speedup: float | None = None
    device_info: dict[str, Any] | None = None
    logs: dict[str, str] = field(default_factory=lambda: {"stdout": "", "stderr": ""})
    profile: dict[str, Any] | None = None
    duration_s: float = 0.0
    isolation: dict[str, Any] | None = None
    needs_review: bool = False
    review_reason: str | None = None

    @property
    def passed(self) -> bool:
        return self.status is Status.passed

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvalResult":
        """Inverse of :meth:`to_dict` (for results that crossed a queue)."""
        d = dict(d)
        d["status"] = Status(d["status"])
        d["cases"] = [CaseResult(**c) for c in d.get("cases", [])]
        return cls(**d)
