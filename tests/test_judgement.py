"""The one decision over a submission's runs (kernelrank/judgement.py): verdict, speedup, rank,
measuring again and score, on run results built by hand. The service's path through it is in
tests/api/test_calibration.py; here it is judged alone, without a database or torch."""

from __future__ import annotations

import math
import subprocess
import sys
from typing import Any

import pytest

from kernelrank.judgement import RunRecord, judge
from kernelrank.runner.stats import time_from_speedup
from tests.conftest import ROOT


def _run(kind: str, speedup: float | None = 2.0, half_width: float = 0.02, status: str = "passed",
         **extra: Any) -> RunRecord:
    """A run of ``kind`` as the runner reports it: one benchmark case with a 1,000 ns reference."""
    result: dict[str, Any] = {"status": status, "message": f"{kind} {status}", "cases": [
        {"kind": "benchmark", "index": 0, "pairing": {"reference_run_ns": 1000.0}}], **extra}
    score = None
    if speedup is not None:
        result.update(speedup=speedup, speedup_ci=[speedup * (1 - half_width), speedup * (1 + half_width)])
        score = 1000.0 / speedup
    return RunRecord(kind, status, result, score)


def test_two_agreeing_passing_runs_rank_with_a_score_on_their_own_basis() -> None:
    j = judge([[_run("public"), _run("secret")]], mode="leaderboard", noisy_above=0.25)
    assert j.status == "passed" and j.message == "public passed" and not j.failed
    assert j.ranked and not j.again and j.speedup == pytest.approx(2.0)
    assert j.score_ns == pytest.approx(500.0)
    assert j.score_low_ns < 500.0 < j.score_high_ns
    assert j.spread is not None  # both runs passed and were timed: the board's pool gets it


def test_a_failing_secret_run_gives_the_verdict_and_says_which_run() -> None:
    j = judge([[_run("secret", None, status="failed"), _run("public")]], mode="leaderboard", noisy_above=0.25)
    assert j.status == "failed" and j.message == "secret-seed run: secret failed"
    assert not j.ranked and not j.again and j.score_ns is None and j.spread is None


def test_not_ranked_when_it_may_not_rank_or_was_interpreted_or_is_not_leaderboard() -> None:
    runs = [[_run("public"), _run("secret")]]
    assert not judge(runs, mode="leaderboard", noisy_above=0.25, may_rank=False).ranked
    interpreted = [[_run("public", interpreted=True), _run("secret", interpreted=True)]]
    j = judge(interpreted, mode="leaderboard", noisy_above=0.25, remeasures=2)
    assert j.interpreted and j.noisy and not j.ranked and not j.again
    assert not judge([[_run("public")]], mode="benchmark", noisy_above=0.25).ranked


def test_disagreeing_runs_are_measured_again_then_left_unranked_with_the_reason() -> None:
    first = [_run("public", 2.0, 0.01), _run("secret", 3.0, 0.01)]
    j = judge([first], mode="leaderboard", noisy_above=0.05, remeasures=1)
    assert j.measured.disagree and j.again and not j.ranked
    j = judge([first, first], mode="leaderboard", noisy_above=0.05, remeasures=1)
    assert not j.again and not j.ranked
    assert "its runs disagree after 2 measurements (speedups 2.00×, 3.00×, 2.00× and 3.00×)" in j.message


def test_a_noisy_latest_measurement_is_measured_again_and_noise_before_it_does_not_count() -> None:
    noisy = [_run("public", noisy=True), _run("secret")]
    assert judge([noisy], mode="leaderboard", noisy_above=0.25, remeasures=1).again
    j = judge([noisy, [_run("public"), _run("secret")]], mode="leaderboard", noisy_above=0.25, remeasures=1)
    assert j.ranked and len(j.measured.runs) == 4


def test_a_run_left_unmeasured_is_measured_again_and_gives_up_only_after_the_last_measurement() -> None:
    """A run the judge could not time (the machine too busy: passed, noisy, no speedup) is measured
    again even when no run has a speedup; once every measurement allowed is made the judgement
    gives up (the service tells the admins), saying why."""
    unmeasured = [_run("public", None, noisy=True), _run("secret", None, noisy=True)]
    j = judge([unmeasured], mode="leaderboard", noisy_above=0.25, remeasures=1)
    assert j.status == "passed" and j.again and not j.gave_up and not j.ranked
    assert j.unquiet == "a run could not be measured (the machine was too busy)"
    j = judge([unmeasured, unmeasured], mode="leaderboard", noisy_above=0.25, remeasures=1)
    assert not j.again and j.gave_up and not j.ranked and "a run still not measured after 2 measurements" in j.message
    noisy = [_run("public", noisy=True), _run("secret")]
    j = judge([noisy, noisy], mode="leaderboard", noisy_above=0.25, remeasures=1)
    assert j.gave_up and j.unquiet == "a run was too noisy to rank"
    # ranked, failed, interpreted, or not a leaderboard submission: nothing to give up on
    assert not judge([[_run("public"), _run("secret")]], mode="leaderboard", noisy_above=0.25).gave_up
    assert not judge([[_run("public", status="failed"), _run("secret")]], mode="leaderboard", noisy_above=0.25).gave_up
    assert not judge([[_run("public", None, noisy=True)]], mode="benchmark", noisy_above=0.25).gave_up
    interpreted = [_run("public", None, interpreted=True), _run("secret", None, interpreted=True)]
    assert not judge([interpreted], mode="leaderboard", noisy_above=0.25, remeasures=2).gave_up


def test_a_measurement_lacking_a_run_is_refused() -> None:
    with pytest.raises(ValueError, match="takes runs public, secret"):
        judge([[_run("public")]], mode="leaderboard", noisy_above=0.25)
    with pytest.raises(ValueError, match="at least one measurement"):
        judge([], mode="test", noisy_above=0.25)


def test_a_time_from_a_speedup_swaps_the_interval_and_handles_open_bounds() -> None:
    assert time_from_speedup(1000.0, 2.0, 1.0, 4.0) == (500.0, 250.0, 1000.0)
    assert time_from_speedup(1000.0, 2.0, 0.0, math.inf) == (500.0, 0.0, math.inf)
    assert time_from_speedup(1000.0, 2.0) == (500.0, None, None)


def test_the_judgement_imports_no_torch_nor_database_code() -> None:
    code = ("import sys; import kernelrank.judgement; "
            "print(sorted(m for m in ('torch', 'sqlalchemy', 'fastapi') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"
