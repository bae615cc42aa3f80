"""Results as JSON: non-finite figures written as strings, read back as floats."""

from __future__ import annotations

import json
import math

from kernelrank.runner.results import CaseResult, EvalResult, Status, json_ready


def test_json_ready_writes_non_finite_floats_as_strings() -> None:
    value = {"a": [math.inf, -math.inf, math.nan, 1.5, None, "x"], "b": (2.0,)}
    assert json_ready(value) == {"a": ["Infinity", "-Infinity", "NaN", 1.5, None, "x"], "b": [2.0]}


def test_a_result_with_non_finite_figures_is_strict_json_and_round_trips() -> None:
    case = CaseResult("test", 0, {"N": 10}, False, "bad", checked=1, max_abs_error=math.inf,
                      max_rel_error=math.nan, mismatches=6, nan_mismatches=1, inf_mismatches=5)
    result = EvalResult(Status.failed, "test", "double", "abc", "cpu", cases=[case])
    text = json.dumps(result.to_dict(), allow_nan=False)  # raises on a bare inf or NaN
    d = json.loads(text)
    assert d["cases"][0]["max_abs_error"] == "Infinity" and d["cases"][0]["max_rel_error"] == "NaN"
    back = EvalResult.from_dict(d)
    assert back.cases[0].max_abs_error == math.inf and math.isnan(back.cases[0].max_rel_error)
    assert back.cases[0].inf_mismatches == 5 and back.status is Status.failed
