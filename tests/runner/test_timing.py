"""Pure timing statistics and the stopping rule, on recorded numbers (no device needed)."""

from __future__ import annotations

import math
import statistics

import pytest

from kernelrank.runner.timing import MIN_RUNS, CpuTimer, geometric_mean, make_timer, roofline, should_stop, summarize


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


def test_stops_only_after_min_runs_when_precise() -> None:
    assert not should_stop([100] * (MIN_RUNS - 1), rel_stderr=0.01, spent_s=0.0, budget_s=10)
    assert should_stop([100] * MIN_RUNS, rel_stderr=0.01, spent_s=0.0, budget_s=10)


def test_noisy_runs_continue_until_budget() -> None:
    noisy = [100, 200, 50, 300]
    assert not should_stop(noisy, rel_stderr=0.01, spent_s=1.0, budget_s=10)
    assert should_stop(noisy, rel_stderr=0.01, spent_s=10.0, budget_s=10)


def test_cuda_threshold_is_stricter_than_cpu() -> None:
    # stderr/mean = 0.5% : enough for the CPU's 1%, not for CUDA's 0.1%
    xs = [1000 + d for d in (-10, 10) * 6]
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


# -- judge-side timing (runner/harness.py), on recorded numbers -------------------------------------
def _case_timing(claims: list[int], windows: list[int]):
    from kernelrank.runner.harness import _CaseTiming
    from kernelrank.runner.results import CaseResult

    return _CaseTiming(CaseResult("benchmark", 0, {}, True, "ok"), list(claims), list(windows))


def test_judged_times_keep_honest_claims_and_replace_short_ones() -> None:
    from kernelrank.runner.harness import WALL_JITTER_NS, judged_times

    overhead = 80_000
    honest = judged_times([1_000_000, 1_010_000], [1_080_000, 1_095_000], overhead)
    assert honest == [1_000_000, 1_010_000]  # window - overhead within the jitter: the claim stands
    lying = judged_times([400_000], [1_080_000], overhead)
    assert lying == [1_080_000 - overhead - WALL_JITTER_NS]  # the judge's figure, less the allowance only
    # a batch of back-to-back calls in one request: its calls share the judge's figure by their claims
    batch = judged_times([100_000, 300_000], [1_110_000], overhead, sizes=[2])
    assert batch == pytest.approx([250_000, 750_000])
    assert judged_times([500_000, 500_000], [1_050_000], overhead, sizes=[2]) == [500_000, 500_000]


def test_wall_check_rejects_a_gross_lie_and_passes_honest_noise() -> None:
    from kernelrank.runner.harness import _wall_check
    from kernelrank.runner.refcache import ReferenceTiming

    ref = ReferenceTiming(mean_ns=1e6, overhead_ns=80_000)
    honest = [1_000_000 + 10_000 * (i % 3) for i in range(40)]
    windows = [c + 80_000 + (5_000_000 if i % 7 == 0 else 0) for i, c in enumerate(honest)]  # load bursts
    ok = _wall_check(_case_timing(honest, windows), ref)
    assert ok["passed"] and ok["replaced_requests"] == 6
    claims = [c // 1000 for c in honest]  # a clock running 1000x slow
    lying = _case_timing(claims, [c + 80_000 for c in honest])
    lying.main_cpu = [c + 50_000 for c in honest]  # the calling thread did the work, on CPU time
    bad = _wall_check(lying, ref)
    assert not bad["passed"] and "not supported" in bad["message"]
    # the same windows from a child that waited for a core (little CPU time): load, not a lie
    waiting = _case_timing(claims, [c + 80_000 for c in honest])
    waiting.main_cpu = [c + 50_000 for c in claims]
    assert _wall_check(waiting, ref)["passed"]


def test_wall_check_tolerates_sustained_load_that_stretches_the_calls() -> None:
    from kernelrank.runner.harness import _wall_check
    from kernelrank.runner.refcache import ReferenceTiming

    ref = ReferenceTiming(mean_ns=1e6, overhead_ns=80_000)
    claims = [3_000_000] * 20  # kernel slowed 3x by load, windows 1 ms longer still
    r = _wall_check(_case_timing(claims, [c + 1_000_000 for c in claims]), ref)
    assert r["passed"] and r["explained"] == pytest.approx(3_000_000 / (4_000_000 - 80_000 - 30_000))


# -- requests the machine took from the child ---------------------------------------------------
MS = 1_000_000


def test_a_request_whose_cpus_went_elsewhere_is_preempted() -> None:
    """A 10 ms window on 2 CPUs: the child's two threads ran 3 ms each and waited 6 ms each while
    neither they nor the judge used the other 13.7 ms of CPU (a host descheduling the VM's CPUs)."""
    from kernelrank.runner.harness import preempted

    before = {1: (10 * MS, 2 * MS), 2: (4 * MS, 1 * MS)}
    after = {1: (13 * MS, 8 * MS), 2: (7 * MS, 7 * MS)}
    assert preempted(10 * MS, before, after, MS // 3, cpus=2)


def test_waits_among_the_childs_own_threads_are_not_preemption() -> None:
    """Four threads of the child on 2 CPUs, each running half the window and waiting the other
    half: the CPUs were the child's all along (a submission cannot get its calls timed again by
    running more threads than CPUs)."""
    from kernelrank.runner.harness import preempted

    after = {t: (5 * MS, 5 * MS) for t in range(4)}
    assert not preempted(10 * MS, {}, after, MS // 3, cpus=2)


def test_an_ordinary_request_is_not_preempted() -> None:
    """Waits of a normal request (the judge's own ~1 ms at the window's ends) and an idle CPU
    beside a one-thread child are no reason to time a call again."""
    from kernelrank.runner.harness import preempted

    two_threads = {1: (9 * MS, MS), 2: (8 * MS, 2 * MS)}
    assert not preempted(10 * MS, {}, two_threads, MS // 3, cpus=2)
    one_thread = {1: (9 * MS, MS)}
    assert not preempted(10 * MS, {}, one_thread, MS // 3, cpus=2)


def test_preempted_requests_left_out_are_capped() -> None:
    from kernelrank.runner.harness import PREEMPTED_MAX_SHARE, PREEMPTED_MIN, _CaseTiming
    from kernelrank.runner.results import CaseResult

    timed = _CaseTiming(CaseResult("benchmark", 0, {}, True, "ok"))
    dropped = 0
    while timed.may_drop():
        timed.preempted += 1
        dropped += 1
    assert dropped == PREEMPTED_MIN
    timed.windows = [MS] * 40
    assert timed.may_drop() and timed.preempted < PREEMPTED_MAX_SHARE * 42
    while timed.may_drop():
        timed.preempted += 1
    assert timed.preempted <= PREEMPTED_MAX_SHARE * (40 + timed.preempted) + 1
