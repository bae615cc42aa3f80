"""CudaTimer on a simulated GPU timeline (tests/runner/simgpu.py), the tripwire over the timing
API's methods, and the judge's batch cross-check of claims on simulated data. No GPU needed."""

from __future__ import annotations

import random

import pytest

from kernelrank.runner.submission.integrity import Integrity
from kernelrank.runner.judge.judging import BATCH_FLOOR_NS, judge_batches, runner_overhead
from kernelrank.runner.timing import CpuTimer, CudaTimer, cuda_call_ns, tail_bound
from tests.runner.simgpu import SimGPU, SimStream


def _old_order(gpu: SimGPU, fn, data) -> int:
    """The previous CudaTimer: flush, synchronize, start, call, synchronize, end, wait."""
    start, end = gpu.event(), gpu.event()
    gpu.flush_l2()
    gpu.synchronize()
    start.record()
    fn(data)
    gpu.synchronize()
    end.record()
    end.synchronize()
    return int(start.elapsed_time(end) * 1e6)


def test_a_5us_kernel_with_20us_launch_reads_5us() -> None:
    gpu = SimGPU(launch_ns=20_000)
    timer = CudaTimer(gpu)
    times = [timer.time_call(lambda d: gpu.kernel(5_000), None)[1] for _ in range(20)]
    assert all(abs(t - 5_000) <= 500 for t in times), times
    # the order it replaces paid the launch and the synchronize's return on every call
    assert _old_order(gpu, lambda d: gpu.kernel(5_000), None) >= 20_000


def test_host_work_inside_the_call_hidden_by_the_flush_but_not_beyond_it() -> None:
    gpu = SimGPU(launch_ns=20_000)
    timer = CudaTimer(gpu)

    def slow_host(_d: object) -> None:
        gpu.host_work(200_000)  # longer than the flush (about 80 µs): the device idles, and that counts
        gpu.kernel(5_000)

    _, ns = timer.time_call(slow_host, None)
    assert ns > 100_000


def test_side_stream_work_left_after_the_call_counts() -> None:
    gpu = SimGPU()
    timer = CudaTimer(gpu)
    side = gpu.stream()

    def escape(_d: object) -> None:
        gpu.kernel(300_000, stream=side)  # the real work, never joined to the current stream
        gpu.kernel(1_000)  # a token kernel where the events look

    start_host = gpu.host
    _, ns = timer.time_call(escape, None)
    start = next(b for b in gpu.busy if b[0] == "default" and b[1] >= start_host and b[2] - b[1] == gpu.flush_ns)[2]
    side_end = max(e for name, _, e in gpu.busy if name == "side")
    assert ns >= side_end - start  # all of it after the start event
    assert ns > 100_000


def test_side_stream_joined_before_returning_is_timed_by_events_alone() -> None:
    gpu = SimGPU()
    timer = CudaTimer(gpu)
    side = gpu.stream()

    def joined(_d: object) -> None:
        gpu.kernel(1_000)
        gpu.wait_stream(gpu.current, waiter=side)  # fork: the side stream starts after the current one's work
        gpu.kernel(50_000, stream=side)
        gpu.wait_stream(side)  # join

    _, ns = timer.time_call(joined, None)
    assert 51_000 <= ns <= 52_000


def test_limit_side_work_during_the_flush_is_seen_from_the_start_event_on() -> None:
    """Documented in README's Security model: a stream that does not wait for the current one
    starts at once and overlaps the flush (about 80 µs on an H100); events see it from ``start``."""
    gpu = SimGPU()
    timer = CudaTimer(gpu)
    side = gpu.stream()

    def unforked(_d: object) -> None:
        gpu.kernel(1_000)
        gpu.kernel(50_000, stream=side)  # no fork: runs while the flush still runs
        gpu.wait_stream(side)

    _, ns = timer.time_call(unforked, None)
    assert ns < 50_000 and ns >= 50_000 - gpu.flush_ns


def test_tail_rule() -> None:
    bound = tail_bound([2_000, 3_000])
    assert bound == 2 * 3_000 + 2_000
    assert cuda_call_ns(0.005, 3_000, bound) == 5_000  # an idle device's synchronize adds nothing
    assert cuda_call_ns(0.005, 50_000, bound) == 55_000  # work left elsewhere counts, all of it
    with pytest.raises(ValueError):
        tail_bound([])


def test_graph_timing_reads_the_kernel_without_launch_cost() -> None:
    gpu = SimGPU(launch_ns=20_000)
    timer = CudaTimer(gpu)
    out, times = timer.time_graph(lambda d: gpu.kernel(5_000) and "out", None, 50)
    assert len(times) == 50 and out == "out"
    assert all(abs(t - 5_000) <= 500 for t in times), times[:3]
    assert abs(sum(times) - 250_000) <= 1_000


def test_patched_event_elapsed_time_or_synchronize_is_caught() -> None:
    gpu = SimGPU()
    timer = CudaTimer(gpu)
    integrity = Integrity(timer)
    integrity.record()
    assert integrity.check()[0] == []
    base = integrity.check()[1]

    original = gpu.Event.elapsed_time
    gpu.Event.elapsed_time = lambda self, end: 0.000001  # type: ignore[method-assign]
    try:
        changed, fp = integrity.check()
        assert any("elapsed_time" in n for n in changed), changed
        assert fp != base
    finally:
        gpu.Event.elapsed_time = original  # type: ignore[method-assign]
    assert integrity.check() == ([], base)

    original_sync = type(gpu).synchronize
    type(gpu).synchronize = lambda self: None  # type: ignore[method-assign]
    try:
        changed, fp = integrity.check()
        assert any(n.endswith(".synchronize") for n in changed), changed
        assert fp != base
    finally:
        type(gpu).synchronize = original_sync  # type: ignore[method-assign]

    gpu.synchronize = lambda: None  # type: ignore[method-assign] - on the instance
    changed, _ = integrity.check()
    assert "timer.api.synchronize" in changed or any("synchronize" in n for n in changed)


def test_patched_torch_cuda_event_methods_are_caught() -> None:
    import torch

    integrity = Integrity(CpuTimer())
    integrity.record()
    for cls, name in ((torch.cuda.Event, "elapsed_time"), (torch.cuda.Event, "synchronize"),
                      (torch.cuda.Event, "record")):
        original = cls.__dict__[name]
        setattr(cls, name, lambda *a, **k: 0.0)
        try:
            changed, _ = integrity.check()
            assert f"torch.cuda.Event.{name}" in changed, changed
        finally:
            setattr(cls, name, original)
    assert integrity.check()[0] == []


# -- the judge's cross-check in batches, on simulated windows ------------------------------------
def _windows(claims: list[int], hidden: int, overhead: float, spread: float, seed: int = 0) -> list[int]:
    rng = random.Random(seed)
    return [int(c + hidden + overhead + rng.gauss(0, spread)) for c in claims]


def test_runner_overhead_is_robust_to_a_few_slow_requests() -> None:
    rng = random.Random(1)
    samples = [80_000 + rng.gauss(0, 5_000) for _ in range(200)] + [2_000_000] * 5
    o = runner_overhead(samples)
    assert 78_000 < o.median_ns < 82_000
    assert 3_500 < o.spread_ns < 6_500
    with pytest.raises(ValueError):
        runner_overhead([1, 2, 3])


def test_honest_claims_at_kernel_scale_stand() -> None:
    rng = random.Random(2)
    overhead = runner_overhead([80_000 + rng.gauss(0, 10_000) for _ in range(200)])
    claims = [12_000] * 640
    windows = _windows(claims, 0, 80_000, 10_000, seed=3)
    j = judge_batches(claims, windows, overhead)
    assert j.batches == 10 and j.replaced <= 1
    assert sum(j.judged_ns) / len(claims) < 12_000 + j.allowance_ns


def test_a_lie_of_a_few_us_per_call_is_replaced_by_the_judges_figure() -> None:
    rng = random.Random(4)
    overhead = runner_overhead([80_000 + rng.gauss(0, 10_000) for _ in range(200)])
    # the kernel takes 12 µs, the child claims 2 µs: 10 µs per call hidden in a 80 ± 10 µs overhead
    claims = [2_000] * 640
    windows = _windows([12_000] * 640, 0, 80_000, 10_000, seed=5)
    j = judge_batches(claims, windows, overhead)
    assert j.replaced == j.batches
    per_call = sum(j.judged_ns) / len(claims)
    assert 12_000 - j.allowance_ns - 1_000 <= per_call <= 12_000 + 1_000
    assert j.allowance_ns < 6_000  # 4 sigma over 64 requests, plus the floor: kernel scale
    # one request at a time the same lie hides under a ~35 µs allowance
    single = judge_batches(claims, windows, overhead, batch_calls=1)
    assert single.allowance_ns > 30_000 and single.replaced < single.batches // 10


def test_batches_follow_request_sizes_and_remainder_joins_the_last() -> None:
    overhead = runner_overhead([1_000] * 10)
    claims = [100] * 10
    sizes = [4, 4, 2]
    windows = [4 * 100 + 1_000] * 2 + [2 * 100 + 1_000]
    j = judge_batches(claims, windows, overhead, sizes=sizes, batch_calls=4)
    assert j.batches == 2 and j.replaced == 0
    assert j.judged_ns == [100.0] * 10
    assert j.allowance_ns <= 2 * BATCH_FLOOR_NS / 4 + 1
    with pytest.raises(ValueError):
        judge_batches(claims, windows, overhead, sizes=[4, 4])


def test_cuda_graph_is_a_cuda_timing_flag_only() -> None:
    from kernelrank.problems import load_problem

    d = load_problem("softmax").definition
    assert d.timing["cuda"].cuda_graph is False  # per-call events unless the problem asks
    graphs = d.model_copy(update={"timing": {**d.timing, "cuda": d.timing["cuda"].model_copy(update={"cuda_graph": True})}})
    assert type(d).model_validate(graphs.model_dump()).timing["cuda"].cuda_graph
    bad = graphs.model_dump()
    bad["timing"]["cpu"]["cuda_graph"] = True
    with pytest.raises(ValueError, match="cuda_graph"):
        type(d).model_validate(bad)


def test_the_paired_judge_judges_both_sides_in_batches() -> None:
    """The harness judges a case's claims in batches against the overhead of the reference's own
    requests (same path), on every device: a side whose claims hide 20 µs per call counts for
    what the judge's clock saw (a per-request allowance of the reference's path at its 90th
    percentile would pass 11-21 ms at load)."""
    from kernelrank.runner.judge.pairs import PairedCase, Side
    from kernelrank.runner.results import CaseResult

    rng = random.Random(7)
    n = 256
    ref_claims = [50_000] * n
    ref_windows = [c + 80_000 + int(rng.gauss(0, 5_000)) for c in ref_claims]
    sub_claims = [10_000] * n  # claims 10 µs, really 30 µs: 20 µs per call hidden
    sub_windows = [30_000 + 80_000 + int(rng.gauss(0, 5_000)) for _ in range(n)]

    p = PairedCase(CaseResult("benchmark", 0, {}, True, "ok"), Side("submission", []), Side("reference", []))
    p.sub.claims, p.sub.windows = list(sub_claims), list(sub_windows)
    p.ref.claims, p.ref.windows = list(ref_claims), list(ref_windows)
    sub, ref, _ = p.judged()
    assert 24_000 < sum(sub) / n < 31_000  # the hidden 20 µs counted, less the batch allowance (~4 µs)
    assert 49_000 < sum(ref) / n <= 51_000  # an honest side keeps its claims
