"""Pure timing statistics and the stopping rule, on recorded numbers (no device needed)."""

from __future__ import annotations

import math
import statistics

import pytest

from kernelrank.runner.timing import CpuTimer, geometric_mean, make_timer, roofline, should_stop, summarize


def test_summarize_matches_textbook_formulas() -> None:
    xs = [100, 110, 90, 105, 95]
    s = summarize(xs)
    assert s.runs == 5
    assert s.mean_ns == pytest.approx(100.0)
    assert s.std_ns == pytest.approx(statistics.stdev(xs))
    assert s.stderr_ns == pytest.approx(statistics.stdev(xs) / math.sqrt(5))
    assert (s.min_ns, s.median_ns, s.max_ns) == (90, 100, 110)


def test_summarize_single_run_and_empty() -> None:
    s = summarize([42])
    assert (s.runs, s.mean_ns, s.std_ns, s.stderr_ns) == (1, 42, 0, 0)
    with pytest.raises(ValueError):
        summarize([])


def test_stops_only_after_three_runs_when_precise() -> None:
    assert not should_stop([100, 100], rel_stderr=0.01, spent_s=0.0, budget_s=10)
    assert should_stop([100, 100, 100], rel_stderr=0.01, spent_s=0.0, budget_s=10)


def test_noisy_runs_continue_until_budget() -> None:
    noisy = [100, 200, 50, 300]
    assert not should_stop(noisy, rel_stderr=0.01, spent_s=1.0, budget_s=10)
    assert should_stop(noisy, rel_stderr=0.01, spent_s=10.0, budget_s=10)


def test_cuda_threshold_is_stricter_than_cpu() -> None:
    # stderr/mean = 0.5% : enough for the CPU's 1%, not for CUDA's 0.1%
    xs = [1000 + d for d in (-10, 10, -10, 10, -10, 10, -10, 10)]
    s = summarize(xs)
    assert 0.001 < s.stderr_ns / s.mean_ns < 0.01
    assert should_stop(xs, 0.01, 0, 100)
    assert not should_stop(xs, 0.001, 0, 100)


def test_max_runs_caps() -> None:
    assert should_stop([1, 1000] * 5, rel_stderr=0.0, spent_s=0, budget_s=100, max_runs=10)


def test_budget_spent_before_any_run_does_not_stop() -> None:
    assert not should_stop([], rel_stderr=0.01, spent_s=99, budget_s=1)


def test_geometric_mean_and_roofline() -> None:
    assert geometric_mean([1.0, 100.0]) == pytest.approx(10.0)
    assert geometric_mean([5.0]) == pytest.approx(5.0)
    with pytest.raises(ValueError):
        geometric_mean([1.0, 0.0])
    tflops, gbps = roofline(flops=2e12, nbytes=1e9, mean_ns=1e9)
    assert tflops == pytest.approx(2.0) and gbps == pytest.approx(1.0)


def test_cpu_timer_measures_the_call() -> None:
    import time

    timer = make_timer("cpu")
    assert isinstance(timer, CpuTimer)
    out, ns = timer.time_call(lambda d: (time.sleep(0.01), d)[1], 7)
    assert out == 7 and 10_000_000 <= ns < 1_000_000_000
    with pytest.raises(ValueError):
        make_timer("tpu")
