"""Requests left out as disturbed (runner/judge/disturbed.py): the GPU's clock watched around each
timed request against a simulated NVML (tests/runner/simnvml.py), and work overlapping the L2
flush seen by timing the flush on a simulated GPU (tests/runner/simgpu.py). No GPU needed."""

from __future__ import annotations

import os

import pytest

from kernelrank.runner.host import gpuinfo
from kernelrank.runner.judge import disturbed, harness
from kernelrank.runner.judge.harness import evaluate
from kernelrank.runner.judge.pairs import Call, PairedCase, Side
from kernelrank.runner.results import CaseResult
from kernelrank.runner.timing import CudaTimer, flush_bound
from kernelrank.vocab import Verdict
from tests.conftest import submission
from tests.runner.simgpu import SimGPU
from tests.runner.simnvml import SimNVML

#: A claim no honest call of ``double`` comes near: a throttled request's calls are given it, so
#: that one reaching a judged sample shows.
THROTTLED_CLAIM_NS = 10**12


# -- the rules -------------------------------------------------------------------------------------
def test_a_reading_is_throttled_below_three_quarters_of_the_default_clock_or_for_a_slowdown() -> None:
    default = 1755
    calm = disturbed.ClockReading(1755, 0)
    assert not disturbed.throttled(calm, default)
    assert not disturbed.throttled(disturbed.ClockReading(1317, 0), default)  # 75.04%
    assert disturbed.throttled(disturbed.ClockReading(1316, 0), default)  # 74.99%
    for mask in (0x4, 0x8, 0x20, 0x40, 0x80):  # power cap, slowdowns, thermal, power brake
        assert disturbed.throttled(disturbed.ClockReading(1755, mask), default), hex(mask)
    for mask in (0x1, 0x2, 0x100, 0x1 | 0x2):  # idle, and the clock settings: not an event
        assert not disturbed.throttled(disturbed.ClockReading(1755, mask), default), hex(mask)
    # what NVML does not say is not held against a request
    assert not disturbed.throttled(disturbed.ClockReading(None, None), default)
    assert not disturbed.throttled(disturbed.ClockReading(100, None), None)


def test_a_flush_past_the_idle_flushes_bound_marks_the_request() -> None:
    bound = flush_bound([80_000, 81_000, 79_000])
    assert bound == pytest.approx(1.25 * 80_000 + 2_000)
    assert disturbed.flush_overlapped([90_000, int(bound) + 1], bound)
    assert not disturbed.flush_overlapped([90_000, int(bound)], bound)
    assert not disturbed.flush_overlapped(None, bound) and not disturbed.flush_overlapped([10**9], None)
    with pytest.raises(ValueError):
        flush_bound([])


def test_a_case_with_too_many_disturbed_pairs_is_noisy() -> None:
    assert disturbed.too_disturbed(3, 8) and not disturbed.too_disturbed(2, 8)  # a quarter is allowed
    assert not disturbed.too_disturbed(7, 7)  # too few pairs to say
    assert disturbed.too_disturbed(26, 100) and not disturbed.too_disturbed(25, 100)


def test_the_watch_reads_around_each_request_pauses_after_a_throttled_one_and_records_the_run() -> None:
    now = [0]
    nvml = SimNVML(now=lambda: now[0])
    nvml.reasons = 0x1  # idle between requests: not throttling
    nvml.sm_mhz = 1755
    nvml.episodes = [(2, 4, 900, 0x0), (5, 6, 1755, 0x40)]  # a low clock, then hw thermal slowdown
    nvml.processes = [(os.getpid(), 1 << 30), (4242, 2 << 30)]
    watch = disturbed.nvml_watch(nvml, nvml.gpu)
    pauses: list[float] = []
    watch.sleep = pauses.append
    assert watch.default_mhz == 1755  # the default applications clock
    hits = []
    for k in range(7):
        now[0] = k
        before = watch.before()
        hits.append(watch.after(before))
    assert hits == [False, False, True, True, False, True, False]
    assert pauses == [disturbed.PAUSE_S] * 3
    watch.look({os.getpid()})
    nvml.processes = [(4242, 3 << 30), (777, None)]
    watch.look({os.getpid()})
    s = watch.summary()
    assert (s["requests"], s["throttled"]) == (7, 3) and s["throttled_share"] == pytest.approx(3 / 7)
    assert s["mean_sm_mhz"] == pytest.approx((5 * 1755 + 2 * 900) / 7)
    assert s["other_processes"] == [{"pid": 777, "used_bytes": None}, {"pid": 4242, "used_bytes": 3 << 30}]
    assert nvml.clock_reads == 14  # one reading before and one after each request


def test_no_watch_on_the_cpu() -> None:
    assert disturbed.open_watch("cpu") is None


# -- the flush on the simulated GPU ----------------------------------------------------------------
def test_side_work_that_does_not_wait_for_the_flush_lengthens_it_and_is_reported() -> None:
    """50 µs on a stream that does not wait for the current one runs while the flush does: the
    events see almost none of it, but the flush, which shares the device with it, lasts longer
    than the idle flushes allow, and the request is judged disturbed."""
    gpu = SimGPU(contend=True)
    timer = CudaTimer(gpu)
    side = gpu.stream()

    def unforked(_d: object) -> None:
        gpu.kernel(1_000)
        gpu.kernel(50_000, stream=side)  # no fork: runs while the flush still runs
        gpu.wait_stream(side)

    _, ns = timer.time_call(unforked, None)
    report = timer.flush_report()
    assert ns < 50_000 / 4  # hidden from the events
    assert disturbed.flush_overlapped(report["flush_ns"], report["flush_bound_ns"])
    assert timer.flush_report()["flush_ns"] == []  # reported once

    def forked(_d: object) -> None:
        gpu.kernel(1_000)
        gpu.wait_stream(gpu.current, waiter=side)
        gpu.kernel(50_000, stream=side)
        gpu.wait_stream(side)

    for honest in (lambda d: gpu.kernel(5_000), forked):
        _, ns = timer.time_call(honest, None)
        report = timer.flush_report()
        assert not disturbed.flush_overlapped(report["flush_ns"], report["flush_bound_ns"])
    assert ns >= 50_000


def test_reporting_the_flushes_leaves_the_tripwire_quiet() -> None:
    """The timer's record of flushes is one object for its life (the tripwire watches the timer's
    attributes by identity): timing and reporting re-bind nothing."""
    from kernelrank.runner.submission.integrity import Integrity

    gpu = SimGPU()
    timer = CudaTimer(gpu)
    wire = Integrity(timer)
    wire.record()
    for _ in range(3):
        timer.time_call(lambda d: gpu.kernel(5_000), None)
        assert len(timer.flush_report()["flush_ns"]) == 1
    assert wire.changed() == []


def test_graph_timing_reports_its_flush_too() -> None:
    gpu = SimGPU(contend=True)
    timer = CudaTimer(gpu)
    timer.time_graph(lambda d: gpu.kernel(2_000), None, 4)
    assert len(timer.flush_report()["flush_ns"]) == 1


# -- the judge leaves disturbed pairs out ----------------------------------------------------------
def _call(claim: int, kind: str | None = None) -> Call:
    return Call(claim, claim + 1_000, claim, [claim], 0, claim, kind)


def test_disturbed_pairs_are_counted_by_cause_apart_from_warm_up_pairs() -> None:
    paired = PairedCase(CaseResult("benchmark", 0, {}, True), Side("submission", []), Side("reference", []))
    paired.raw = [(_call(1), _call(1), True, 0, False),  # a warm-up pair
                  (_call(1, disturbed.THROTTLED), _call(1), True, 0, False),
                  (_call(1), _call(1, disturbed.FLUSH_OVERLAP), True, 0, False)]
    paired.raw += [(_call(1), _call(1), True, 0, True)] * 5
    assert paired.warmup_pairs == 1
    assert paired.disturbed_pairs() == {"throttled": 1, "flush_overlap": 1, "share": 2 / 8, "too_many": False}


class _Clock:
    """The simulated NVML's clock: the number of the judge's timed request under way."""

    def __init__(self) -> None:
        self.n = 0
        self.inside = False
        self.made: list[tuple[str, int]] = []  # (the case being timed, request number), in order


def _watched(monkeypatch: pytest.MonkeyPatch, nvml: SimNVML, clock: _Clock, throttled: set[int] | None,
             flushed: set[int]) -> disturbed.ClockWatch:
    """Give the evaluation a watch over ``nvml`` and count its timed requests on ``clock``; the
    requests numbered in ``throttled`` claim :data:`THROTTLED_CLAIM_NS` per call (a throttled
    GPU is slow), those in ``flushed`` answer with a flush past its bound (as a CUDA child's timer
    does when work overlapped it), the others with an idle one."""
    watch = disturbed.nvml_watch(nvml, nvml.gpu)
    monkeypatch.setattr(disturbed, "open_watch", lambda device: watch)
    timed, go = harness._Evaluation._timed_request, harness._Evaluation._side_go

    def counted_request(self, side, other, sets, deadline):
        clock.n += 1
        clock.made.append((self._where, clock.n))
        clock.inside = True
        try:
            call, replies = timed(self, side, other, sets, deadline)
        finally:
            clock.inside = False
        if throttled is None or clock.n in throttled:
            call.claims = [THROTTLED_CLAIM_NS] * len(call.claims)
            call.claim = sum(call.claims)
        return call, replies

    def flushing_go(self, side, layout, deadline, ref_s, read=True, calls=1):
        reply, out = go(self, side, layout, deadline, ref_s, read=read, calls=calls)
        if clock.inside:
            reply["flush_ns"] = [200_000 if clock.n in flushed else 90_000] * calls
            reply["flush_bound_ns"] = 127_000.0
        return reply, out

    monkeypatch.setattr(harness._Evaluation, "_timed_request", counted_request)
    monkeypatch.setattr(harness._Evaluation, "_side_go", flushing_go)
    return watch


def test_no_throttled_or_overlapped_request_reaches_a_score(double, options, monkeypatch) -> None:
    """Requests taken while the simulated GPU was throttled (a low clock, then a thermal slowdown)
    and requests whose flush ran long are timed and checked, then left out with their pairs: none
    of their times is among the judged samples the score comes from, the pairs event names why,
    the judge paused after each throttled request, and the run records the mean clock, the
    throttled share and the GPU's other processes."""
    clock = _Clock()
    nvml = SimNVML(now=lambda: clock.n)
    nvml.reasons = 0
    nvml.episodes = [(3, 6, 900, 0), (12, 14, 1755, 0x20)]
    nvml.processes = [(os.getpid(), 1 << 30), (424242, 2 << 30)]
    throttled = {3, 4, 5, 12, 13}
    flushed = {8, 17}
    watch = _watched(monkeypatch, nvml, clock, throttled, flushed)
    pauses: list[float] = []
    watch.sleep = pauses.append
    events: list[dict] = []
    r = evaluate(double.spec(), submission("double_ok.py"), "leaderboard", "cpu", options, events.append)
    assert r.status is Verdict.passed, r.message
    made = clock.made
    assert len(made) >= 18, "the run made too few requests to reach every episode"
    pairs = {e["case"]: e["pairs"] for e in events if e["event"] == "pairs"}
    samples = {e["case"]: e for e in events if e["event"] == "samples"}
    bench = [c for c in r.cases if c.kind == "benchmark"]
    codes = {0: None, 1: disturbed.THROTTLED, 2: disturbed.FLUSH_OVERLAP}
    for c in bench:
        mine = [n for where, n in made if where.startswith(f"benchmark case {c.index} ")]
        assert len(mine) == 2 * len(pairs[c.index])  # a pair: one request of each side
        for p, (a, b) in zip(pairs[c.index], zip(mine[::2], mine[1::2])):
            want = (disturbed.THROTTLED if {a, b} & throttled else disturbed.FLUSH_OVERLAP if {a, b} & flushed
                    else None)
            assert codes[p[14]] == want, (a, b, p)
            if want is not None:
                assert p[9] == 0  # not counted
        s = samples[c.index]
        assert len(s["submission_ns"]) == c.pairing["pairs"] == sum(p[9] for p in pairs[c.index])
        assert max(s["submission_ns"] + s["reference_ns"]) < THROTTLED_CLAIM_NS / 100  # none reached a score
        d = c.pairing["disturbed"]
        assert d["throttled"] == sum(1 for p in pairs[c.index] if p[14] == 1)
        assert d["flush_overlap"] == sum(1 for p in pairs[c.index] if p[14] == 2)
        assert c.claims_replaced is not None and c.claims_replaced >= 0
    assert sum(c.pairing["disturbed"]["throttled"] for c in bench) >= 4  # both episodes reached
    assert sum(c.pairing["disturbed"]["flush_overlap"] for c in bench) == 2
    assert r.score_ns is not None and 0.2 < r.speedup < 5
    assert r.noisy == any(c.pairing["disturbed"]["too_many"] for c in bench)  # noisy_above: 1000 in double
    record = r.device_info["clocks"]["watch"]
    hit = sum(1 for _w, n in made if n in throttled)
    assert (record["requests"], record["throttled"]) == (len(made), hit)
    assert record["throttled_share"] == pytest.approx(hit / len(made))
    assert 900 < record["mean_sm_mhz"] < 1755 and record["default_sm_mhz"] == 1755
    assert record["other_processes"] == [{"pid": 424242, "used_bytes": 2 << 30}]
    assert pauses == [disturbed.PAUSE_S] * hit
    assert gpuinfo.CLOCK_REASONS[0x20] == "sw_thermal_slowdown"


@pytest.mark.slow
def test_a_case_throttled_throughout_is_noisy_and_the_run_has_no_score(double, options, monkeypatch) -> None:
    """Every request throttled: no pair counts, each case stops at its extra time, noisy, with no
    speedup; the run is noisy, without a speedup or a score, and its message says why."""
    clock = _Clock()
    nvml = SimNVML(now=lambda: clock.n)
    nvml.reasons, nvml.sm_mhz = 0, 1000
    watch = _watched(monkeypatch, nvml, clock, None, set())
    watch.sleep = lambda s: None
    r = evaluate(double.spec(), submission("double_ok.py"), "leaderboard", "cpu", options)
    assert r.status is Verdict.passed, r.message
    bench = [c for c in r.cases if c.kind == "benchmark"]
    assert bench and all(c.noisy and c.speedup is None and c.pairing["pairs"] == 0 for c in bench)
    assert all(c.pairing["disturbed"]["throttled"] > 0 and c.pairing["disturbed"]["share"] == 1.0 for c in bench)
    assert r.noisy and r.score_ns is None and r.speedup is None
    assert "too noisy to rank" in r.message and "throttled" in r.message
    assert r.device_info["clocks"]["watch"]["throttled_share"] == 1.0
