"""Results as JSON: non-finite figures written as strings, read back as floats."""

from __future__ import annotations

import json
import math

from kernelrank.runner.results import CaseResult, EvalResult, json_ready
from kernelrank.vocab import Verdict


def test_json_ready_writes_non_finite_floats_as_strings() -> None:
    value = {"a": [math.inf, -math.inf, math.nan, 1.5, None, "x"], "b": (2.0,)}
    assert json_ready(value) == {"a": ["Infinity", "-Infinity", "NaN", 1.5, None, "x"], "b": [2.0]}


def test_a_result_with_non_finite_figures_is_strict_json_and_round_trips() -> None:
    case = CaseResult("test", 0, {"N": 10}, False, "bad", checked=1, max_abs_error=math.inf,
                      max_rel_error=math.nan, mismatches=6, nan_mismatches=1, inf_mismatches=5)
    result = EvalResult(Verdict.failed, "test", "double", "abc", "cpu", cases=[case])
    text = json.dumps(result.to_dict(), allow_nan=False)  # raises on a bare inf or NaN
    d = json.loads(text)
    assert d["cases"][0]["max_abs_error"] == "Infinity" and d["cases"][0]["max_rel_error"] == "NaN"
    back = EvalResult.from_dict(d)
    assert back.cases[0].max_abs_error == math.inf and math.isnan(back.cases[0].max_rel_error)
    assert back.cases[0].inf_mismatches == 5 and back.status is Verdict.failed


def test_unbounded_intervals_round_trip() -> None:
    """A case timed once has an interval with no upper end: written as "Infinity", read back."""
    case = CaseResult("benchmark", 0, {"N": 10}, True, "ok", speedup=1.2, speedup_ci=[0.0, math.inf],
                      time_ns=500.0, time_ci_ns=[0.0, math.inf], reference_ns=600.0, noisy=True)
    result = EvalResult(Verdict.passed, "leaderboard", "double", "abc", "cpu", cases=[case], score_ns=500.0,
                        score_ci_ns=[0.0, math.inf], speedup=1.2, speedup_ci=[0.0, math.inf], noisy=True, basis="run")
    d = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert d["score_ci_ns"] == [0.0, "Infinity"] and d["cases"][0]["speedup_ci"] == [0.0, "Infinity"]
    back = EvalResult.from_dict(d)
    assert back.score_ci_ns == [0.0, math.inf] and back.speedup_ci == [0.0, math.inf]
    assert back.cases[0].time_ci_ns == [0.0, math.inf] and back.cases[0].noisy and back.noisy and back.basis == "run"
