"""Typed results of an evaluation: verdicts, per-case results, the whole run; JSON-ready.

JSON has no infinity or NaN: in every result that leaves the judge (``kernelrank eval --json``,
the runner's report to the server, the API) a non-finite float is written as the string
``"Infinity"``, ``"-Infinity"`` or ``"NaN"`` (:func:`json_ready`), which Python's ``float()`` and
JavaScript's ``Number()`` both read back; :meth:`EvalResult.from_dict` does.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelrank.vocab import Verdict, device_class

#: How a non-finite float is written in JSON (see the module docstring).
NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}
NAN = "NaN"



def json_ready(value: Any) -> Any:
    """``value`` with every non-finite float (also inside dicts, lists and tuples, which become
    lists) replaced by ``"Infinity"``, ``"-Infinity"`` or ``"NaN"``, so that
    ``json.dumps(..., allow_nan=False)`` accepts it; other values unchanged."""
    if isinstance(value, float) and not math.isfinite(value):
        return NAN if math.isnan(value) else NON_FINITE[value]
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


def float_from_json(value: Any) -> Any:
    """Inverse of :func:`json_ready` for one figure: ``"Infinity"``, ``"-Infinity"`` and ``"NaN"``
    become floats; anything else is returned unchanged."""
    if value == NAN:
        return math.nan
    if value in ("Infinity", "-Infinity"):
        return float(value)
    return value


@dataclass
class CaseResult:
    """One test or benchmark case.

    Benchmark cases in timed modes are timed in pairs with the reference (same run, same path,
    alternating call by call on the same fresh inputs): ``timing`` and ``ref_timing`` hold each
    side's :class:`~kernelrank.runner.stats.TimingStats` as a dict in ns (the raw times, as judged:
    :func:`~kernelrank.runner.judge.judging.judged_times`); ``ref_mean_ns`` is ``ref_timing``'s mean;
    ``speedup`` is the paired estimate (:func:`~kernelrank.runner.stats.paired_speedup`) and
    ``speedup_ci`` its 95% interval ``[low, high]``; ``reference_ns`` the reference time the case's
    time is based on (the service's calibration, or this run's reference) and ``time_ns =
    reference_ns / speedup``, with ``time_ci_ns`` its interval. ``pairing`` says how the pairs
    went (pairs, pairs left out, the interval's half width, the share of the case's wall time
    inside timed calls, where the rest went, and the CPU time each side's cgroup used while the
    other was timed). ``noisy``: the interval was still wider than the problem allows after the
    case's extra time, or more than a share of its pairs was left out as disturbed (the GPU
    throttled, work overlapping the flush: ``pairing["disturbed"]``). ``interpreted``: the submission's Triton kernels ran under Triton's
    interpreter (``timing`` then holds its claimed times, and there is no speedup).
    ``claims_replaced``: the submission's counted calls whose claim the judge's clock did not
    support, counted for its figure instead (:meth:`~kernelrank.runner.judge.pairs.PairedCase.claims_replaced`).
    ``tflops`` and ``gbps`` are achieved TFLOP/s and GB/s at the mean time (``timing``).
    ``checked`` counts outputs compared to the reference.
    ``roofline`` is the share of the runner's roofline the case reached
    (:func:`kernelrank.roofline.case_roofline`), set where the runner's ceilings are known.
    Error figures are as in :class:`~kernelrank.runner.judge.checking.CheckResult` (``inf`` or ``nan``
    where a mismatch is non-finite; ``nan_mismatches`` and ``inf_mismatches`` count those).
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
    nan_mismatches: int = 0
    inf_mismatches: int = 0
    first_mismatch: list[int] | None = None
    timing: dict[str, Any] | None = None
    tflops: float | None = None
    gbps: float | None = None
    ref_mean_ns: float | None = None
    speedup: float | None = None
    wall_check: dict[str, Any] | None = None
    roofline: dict[str, Any] | None = None
    ref_timing: dict[str, Any] | None = None
    speedup_ci: list[float] | None = None
    reference_ns: float | None = None
    time_ns: float | None = None
    time_ci_ns: list[float] | None = None
    pairing: dict[str, Any] | None = None
    noisy: bool = False
    interpreted: bool = False
    claims_replaced: int | None = None

    @property
    def label(self) -> str:
        params = " ".join(f"{k}={v}" for k, v in self.spec.items())
        return f"{self.kind} case {self.index} ({params})"


@dataclass
class EvalResult:
    """A whole evaluation, as printed by ``kernelrank eval --json`` and stored by the service.

    ``speedup`` is the geometric mean over benchmark cases of the cases' paired speedups, with its
    95% interval ``speedup_ci``; ``score_ns`` (leaderboard mode only) is the geometric mean over
    benchmark cases of each case's ``time_ns`` (its reference time divided by its speedup), in ns,
    lower is better, with its 95% interval ``score_ci_ns``; ``speedup_interval`` is the speedup's
    :class:`~kernelrank.runner.stats.Interval` whole (its log standard error and degrees of freedom
    among it: the service combines a leaderboard submission's runs from it,
    :func:`~kernelrank.runner.stats.combine_runs`); ``basis`` says what the reference times
    were: ``"calibration"`` (the service's, per problem revision and device queue) or ``"run"``
    (this run's own reference; what ``kernelrank eval`` reports). ``noisy``: the speedup's interval over
    the cases is still too wide after their extra time (``stats.run_noisy``; the run is not
    ranked). A case may be flagged ``noisy`` in a run that is not. ``interpreted``: the submission's Triton
    kernels ran under Triton's interpreter: outputs checked, no speedup, no score.
    ``logs`` holds the submission's stdout and stderr, bounded.

    ``isolation`` is what held around the submission, measured by the judge from ``/proc`` once
    the child had set itself up: ``method`` (``setuid``, ``userns`` or ``none``), ``network``
    (``netns``: a namespace with no reachable network, or ``none``), ``filesystem`` (``read-only``:
    only the working folder and private temporary folders writable, or ``private-cwd``), ``user``
    (``sandbox-uid`` or ``same-uid`` as the judge), ``uid``, ``capabilities`` (hex), ``hidden``
    and ``private_tmp`` folders, ``limits`` (named as in
    :class:`~kernelrank.runner.containment.rlimits.SandboxLimits`, plus ``processes_enforced``), ``priority``
    (``nice`` of the child's thread and of its ``autogroup``: :func:`~kernelrank.runner.containment.procfs.priority`),
    ``huge_pages``, ``output_reads`` and ``cleanup``. ``needs_review`` marks a passing result whose speedup
    is beyond the problem's ``review_speedup`` (``review_reason`` says which), for an
    administrator to look at; the verdict itself is unchanged. ``ceilings`` are the measured
    ceilings of the machine that ran it (:mod:`kernelrank.runner.host.ceilings`), from which each
    case's ``roofline`` share comes (:func:`kernelrank.roofline.attach`); ``None`` when unknown.
    """

    status: Verdict
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
    ceilings: dict[str, Any] | None = None
    speedup_ci: list[float] | None = None
    score_ci_ns: list[float] | None = None
    basis: str | None = None
    noisy: bool = False
    interpreted: bool = False
    speedup_interval: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        return self.status is Verdict.passed

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready values (non-finite floats as strings: :func:`json_ready`)."""
        d = asdict(self)
        d["status"] = self.status.value
        return json_ready(d)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvalResult":
        """Inverse of :meth:`to_dict` (for results that crossed a queue)."""
        d = dict(d)
        d["status"] = Verdict(d["status"])
        d["cases"] = [CaseResult(**{k: _figure(v) if k in _CASE_FIGURES else v for k, v in c.items()})
                      for c in d.get("cases", [])]
        for k in ("score_ns", "speedup", "speedup_ci", "score_ci_ns"):
            d[k] = _figure(d.get(k))
        return cls(**d)


_CASE_FIGURES = ("max_abs_error", "max_rel_error", "tflops", "gbps", "ref_mean_ns", "speedup", "speedup_ci",
                 "reference_ns", "time_ns", "time_ci_ns")


def _figure(value: Any) -> Any:
    """:func:`float_from_json` for a figure or an interval ``[low, high]``."""
    if isinstance(value, list):
        return [float_from_json(v) for v in value]
    return float_from_json(value)


def error_result(job: dict[str, Any], message: str, status: str = Verdict.error.value) -> dict[str, Any]:
    """A result of the harness's shape (JSON-ready) for a run of the job message ``job`` that the
    harness did not finish."""
    problem = job.get("problem") or {}
    try:
        cls = device_class(str(job.get("device")))
    except ValueError:
        cls = str(job.get("device"))
    result = EvalResult(Verdict(status), str(job.get("mode")), job_problem_name(job), str(problem.get("revision", "")),
                        cls, message=message)
    return json_result(result.to_dict())


def job_problem_name(job: dict[str, Any]) -> str:
    """The problem's name in a runner's job message (``"?"`` where it has none)."""
    try:
        return str(job["problem"]["definition"]["name"])
    except (KeyError, TypeError):
        return "?"


def json_result(value: Any) -> Any:
    """``value`` as JSON values: non-finite floats as ``"Infinity"``, ``"-Infinity"`` or ``"NaN"``
    (:func:`json_ready`; JSON and Postgres have no NaN), other values
    that JSON lacks as their ``str``."""
    return json.loads(json.dumps(json_ready(value), default=str, allow_nan=False))
