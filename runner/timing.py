"""Timing: one timer interface with a CPU and a CUDA implementation.

The method is the field's (``triton.testing.do_bench``; GPU MODE's eval; KernelBench):

- warm-up calls before measuring (compilation, caches, allocator): 25 ms on CUDA, 100 ms on
  the CPU (:data:`WARMUP_SECONDS`);
- each timed call measured on its own: on CUDA in the field's order (an asynchronous L2 flush,
  the start event, the call, the end event, one synchronize), then a whole-device synchronize
  timed on the host, so work the submission left on other streams counts (:class:`CudaTimer`);
  or, where the problem allows, many calls captured in one CUDA graph (``do_bench_cudagraph``);
  on the CPU, ``time.perf_counter_ns`` brackets the call (CPU work is synchronous).

How many calls, and what they add up to, is decided by the judge from the pairs it times
(:mod:`kernelrank.runner.stats`: torch-free, tested on recorded timings). :class:`CudaTimer` takes
the device as a parameter (:class:`DeviceAPI`): CI drives it with a simulated GPU timeline
(``tests/runner/simgpu.py``); only :class:`TorchCuda`, which binds ``torch.cuda`` to that
interface, needs a GPU. The judge's cross-check of claims at kernel scale
(:func:`~kernelrank.runner.judge.judging.runner_overhead`, :func:`~kernelrank.runner.judge.judging.judge_batches`)
is in the statistics module with the rest.
"""

from __future__ import annotations

import collections
import statistics
import time
from typing import Any, Callable, Protocol

from kernelrank.vocab import DeviceClass

#: Bytes zeroed before each timed call on CUDA to flush L2 (do_bench and GPU MODE use 256 MiB).
L2_FLUSH_BYTES = 256 * 1024 * 1024
#: Minimum warm-up per device class, in seconds of calls, and in calls. CUDA: do_bench's 25 ms.
#: CPU: 20 ms. A fresh process pays page faults until its heap has grown to the size the calls
#: need; the judge goes on warming while the last call faulted (:data:`WARM_FAULTS_PER_CALL`) and
#: counts a pair only once both processes are warm, so a longer fixed warm-up only costs time
#: (100 ms cost 0.8 s of each case's opening, speedups unchanged: docs/research/bench-history.md).
WARMUP_SECONDS = {"cpu": 0.02, "cuda": 0.025}
WARMUP_MIN_CALLS = 1
#: Upper bound on warm-up calls (a fast kernel reaches the seconds only after many calls).
WARMUP_MAX_CALLS = 200
#: A process is warm (in its steady state) once one of its requests page-faulted at most this
#: many times per call (the judge counts the child's faults, ``/proc/<pid>/stat``, around each
#: request). A fault costs ~6 µs on a VM: a 16 MiB softmax output grown into fresh
#: pages took 24 ms against 1.3 ms for the same call in reused ones. Fresh processes, and every
#: process when a case's timed requests first hold several input sets (their outputs held
#: together: a larger heap, a larger slot mapping), fault for one to three requests, at moments
#: that differ from process to process; counted, those requests were most of what looked like
#: lasting speed differences between processes (``docs/research/bench-history.md``).
WARM_FAULTS_PER_CALL = 16
#: Most requests of one process in a case that may stay uncounted while it faults: a kernel that
#: allocates fresh memory on every call (its steady state) is timed so after this many.
WARMUP_MAX_REQUESTS = 4


def roofline(flops: float, nbytes: float, mean_ns: float) -> tuple[float, float]:
    """Achieved ``(TFLOP/s, GB/s)`` for one call of ``mean_ns`` nanoseconds.

    TFLOP/s = flops / (mean_ns * 1e-9) / 1e12; GB/s = bytes / (mean_ns * 1e-9) / 1e9.
    """
    seconds = mean_ns * 1e-9
    return flops / seconds / 1e12, nbytes / seconds / 1e9


class Timer(Protocol):
    """Measures one call of a kernel; the loop and statistics around it are shared."""

    device: str

    def time_call(self, fn: Callable[[Any], Any], data: Any) -> tuple[Any, int]:
        """Run ``fn(data)`` once, return ``(output, elapsed_ns)`` with all its work finished."""
        ...

    def synchronize(self) -> None:
        """Wait for all outstanding work on the device."""
        ...

    def flush_report(self) -> dict[str, Any]:
        """What a request's answer carries about its calls' cache flushes, if anything; clears it."""
        ...


class CpuTimer:
    """``time.perf_counter_ns`` around the call; CPU kernels are synchronous, so nothing to wait for.

    No cache flush: the CPU's caches are a property of the machine the CPU leaderboard ranks on,
    and every entry, the reference included, is timed the same way.
    """

    device = "cpu"

    def __init__(self) -> None:
        self._clock = time.perf_counter_ns

    def time_call(self, fn: Callable[[Any], Any], data: Any) -> tuple[Any, int]:
        clock = self._clock
        t0 = clock()
        out = fn(data)
        t1 = clock()
        return out, t1 - t0

    def synchronize(self) -> None:
        return None

    def flush_report(self) -> dict[str, Any]:
        """Nothing: the CPU has no flush (:meth:`CudaTimer.flush_report`)."""
        return {}


# -- CUDA ---------------------------------------------------------------------------------------
#: Slack added to twice the slowest idle synchronize when deciding whether work was left on other
#: streams after the end event (see :func:`tail_bound`): events' 0.5 µs resolution and host jitter.
TAIL_SLACK_NS = 2_000
#: Idle synchronizes measured when a :class:`CudaTimer` starts (for :func:`tail_bound`), and idle
#: flushes (for :func:`flush_bound`).
IDLE_SYNC_SAMPLES = 20
#: A flush longer than this many times the median idle flush, plus :data:`TAIL_SLACK_NS`, shared
#: the device with other work (:func:`flush_bound`): 256 MiB zeroed in ~80 µs on an H100, and
#: 50 µs of work beside it lengthens it by up to that much.
FLUSH_FACTOR = 1.25
#: Most per-call flush times a :class:`CudaTimer` keeps until they are reported (a request's).
FLUSH_RECORDS = 256


class DeviceEvent(Protocol):
    """A device event with timing enabled (``torch.cuda.Event(enable_timing=True)``)."""

    def record(self) -> None:
        """Enqueue the event on the current stream: it completes when all earlier work there has."""
        ...

    def synchronize(self) -> None:
        """Wait on the host until the event has completed."""
        ...

    def elapsed_time(self, end: Any) -> float:
        """Milliseconds between this event's completion and ``end``'s (both recorded, completed)."""
        ...


class DeviceGraph(Protocol):
    """Work captured once and launched again as one unit (``torch.cuda.CUDAGraph``)."""

    def replay(self) -> None:
        """Enqueue the captured work on the current stream."""
        ...


class DeviceAPI(Protocol):
    """What :class:`CudaTimer` needs of a device, passed in so that its logic runs on a simulated
    device in CI (``tests/runner/simgpu.py``) and on ``torch.cuda`` (:class:`TorchCuda`) on a GPU."""

    def event(self) -> DeviceEvent:
        """A new event with timing enabled."""
        ...

    def synchronize(self) -> None:
        """Wait on the host until every stream of this process's context is idle
        (``cudaDeviceSynchronize``): work on streams the kernel made itself included."""
        ...

    def flush_l2(self) -> None:
        """Enqueue an L2 flush on the current stream and return at once (zeroing
        :data:`L2_FLUSH_BYTES`): the device stays busy while the host launches what follows."""
        ...

    def capture(self, fn: Callable[[], Any]) -> tuple[DeviceGraph, Any]:
        """Capture the work ``fn()`` enqueues into a graph without running it; ``(graph, fn's result)``."""
        ...

    def clock_ns(self) -> int:
        """The host's clock (ns): ``time.perf_counter_ns`` on a real device."""
        ...


def tail_bound(idle_sync_ns: list[int] | list[float]) -> float:
    """Largest host wait (ns) of the whole-device synchronize after the end event that still means
    "nothing was left on other streams": twice the slowest of ``idle_sync_ns`` (synchronizes of the
    idle device measured when the timer started) plus :data:`TAIL_SLACK_NS`.

    Raises:
        ValueError: no samples.
    """
    if not idle_sync_ns:
        raise ValueError("no idle synchronize samples")
    return 2.0 * max(float(x) for x in idle_sync_ns) + TAIL_SLACK_NS


def flush_bound(idle_flush_ns: list[int] | list[float]) -> float:
    """Longest L2 flush (ns) that still means "the flush had the device to itself":
    :data:`FLUSH_FACTOR` times the median of ``idle_flush_ns`` (flushes of the idle device timed
    by events when the timer started) plus :data:`TAIL_SLACK_NS`. Work another stream starts
    while the flush runs ends before the start event, where the events cannot see it, but it
    shares the device with the flush and lengthens it; the judge leaves such a request out
    (:func:`~kernelrank.runner.judge.disturbed.flush_overlapped`).

    Raises:
        ValueError: no samples.
    """
    if not idle_flush_ns:
        raise ValueError("no idle flush samples")
    return FLUSH_FACTOR * float(statistics.median(idle_flush_ns)) + TAIL_SLACK_NS


def cuda_call_ns(elapsed_ms: float, tail_ns: int | float, bound_ns: float) -> int:
    """The time one call on CUDA counts for (ns).

    ``elapsed_ms`` is the event pair's time on the current stream (``Event.elapsed_time``, ms);
    ``tail_ns`` the host's wait, after the end event completed, for every other stream of the
    context (the whole-device synchronize). A tail within ``bound_ns`` (:func:`tail_bound`) is the
    cost of synchronizing an idle device and adds nothing; a longer tail means the call left work on
    another stream, and all of it counts, measured, nothing subtracted. Events alone cannot see
    other streams (they complete in their own stream's order), which is how side-stream work
    escaped the field's timers.
    """
    ns = int(round(elapsed_ms * 1e6))
    return ns + (int(tail_ns) if tail_ns > bound_ns else 0)


class CudaTimer:
    """The field's order on CUDA (``triton.testing.do_bench``; GPU MODE's ``eval.py``), plus work
    left on other streams.

    Per call: enqueue the L2 flush (asynchronous: the device is busy flushing while the host
    launches, so launch latency is hidden); record ``start``; ``fn(data)``; record ``end``; wait
    for ``end`` (the field's one synchronize); then wait for the whole device, timing that wait on
    the host (:func:`cuda_call_ns`). An honest call's claim is the event pair alone: no host
    latency, nothing subtracted; the second wait only finds an idle device, after the claim's end.

    ``time_graph`` times ``calls`` calls captured in one graph and launched once
    (``do_bench_cudagraph``): per call, no launch cost at all, for problems whose kernels are too
    short for per-call events (the problem's ``timing.cuda.cuda_graph``).

    Args:
        api: the device (:class:`TorchCuda` by default; a simulated one in tests).

    Each flush is timed too, by an event recorded before it: work another stream starts *while
    the flush still runs* ends before ``start``, where the events cannot see it, but lengthens the
    flush; the flushes' times since the last :meth:`flush_report`, and the bound the idle
    device's flushes give (:func:`flush_bound`), go to the judge with the request's claims, and
    it leaves a request whose flush ran past the bound out
    (:func:`~kernelrank.runner.judge.disturbed.flush_overlapped`).
    """

    device = "cuda"

    def __init__(self, api: DeviceAPI | None = None):
        self.api: DeviceAPI = api if api is not None else TorchCuda()
        idle = []
        for _ in range(IDLE_SYNC_SAMPLES):
            self.api.synchronize()
            t0 = self.api.clock_ns()
            self.api.synchronize()
            idle.append(self.api.clock_ns() - t0)
        self.tail_bound_ns = tail_bound(idle)
        flushes = []
        for _ in range(IDLE_SYNC_SAMPLES):
            before, after = self.api.event(), self.api.event()
            before.record()
            self.api.flush_l2()
            after.record()
            after.synchronize()
            flushes.append(int(round(before.elapsed_time(after) * 1e6)))
        self.api.synchronize()
        self.flush_bound_ns = flush_bound(flushes)
        #: per timed call, its flush's time (ns), until :meth:`flush_report`; mutated, never
        #: re-bound (the tripwire watches the timer's attributes by identity)
        self.flushes: collections.deque[int] = collections.deque(maxlen=FLUSH_RECORDS)

    def flush_report(self) -> dict[str, Any]:
        """What a request's answer carries about its calls' flushes, and forgets them:
        ``{"flush_ns": [ns per call], "flush_bound_ns": ns}`` (:func:`flush_bound`)."""
        report = {"flush_ns": list(self.flushes), "flush_bound_ns": self.flush_bound_ns}
        self.flushes.clear()
        return report

    def _flush(self) -> DeviceEvent:
        """Record an event, enqueue the flush; the event, to time the flush up to ``start``."""
        before = self.api.event()
        before.record()
        self.api.flush_l2()
        return before

    def _flushed(self, before: DeviceEvent, start: DeviceEvent) -> None:
        self.flushes.append(int(round(before.elapsed_time(start) * 1e6)))

    def _wait(self, start: DeviceEvent, end: DeviceEvent) -> int:
        end.synchronize()
        t_end = self.api.clock_ns()
        self.api.synchronize()
        return cuda_call_ns(start.elapsed_time(end), self.api.clock_ns() - t_end, self.tail_bound_ns)

    def time_call(self, fn: Callable[[Any], Any], data: Any) -> tuple[Any, int]:
        api = self.api
        start, end = api.event(), api.event()
        flush = self._flush()
        start.record()
        out = fn(data)
        end.record()
        ns = self._wait(start, end)
        self._flushed(flush, start)
        return out, ns

    def time_graph(self, fn: Callable[[Any], Any], data: Any, calls: int) -> tuple[Any, list[int]]:
        """``calls`` calls of ``fn(data)`` captured in one graph, launched once between the events
        (after the flush, which hides the graph's launch); each call counts for an equal share.
        Returns the last call's output (it is the graph's, written by the launch)."""
        calls = max(1, int(calls))

        def many() -> Any:
            out = None
            for _ in range(calls):
                out = fn(data)
            return out

        graph, out = self.api.capture(many)
        self.api.synchronize()
        start, end = self.api.event(), self.api.event()
        flush = self._flush()
        start.record()
        graph.replay()
        end.record()
        total = self._wait(start, end)
        self._flushed(flush, start)
        share = total // calls
        return out, [share] * (calls - 1) + [total - share * (calls - 1)]

    def synchronize(self) -> None:
        self.api.synchronize()


class TorchCuda:  # pragma: no cover - GPU-only: torch.cuda behind DeviceAPI; CI drives CudaTimer with tests/runner/simgpu.py
    """:class:`DeviceAPI` over ``torch.cuda``. Each attribute the timer uses is bound once here,
    so the child's tripwire (:mod:`~kernelrank.runner.submission.integrity`) sees a replaced one."""

    def __init__(self) -> None:
        import torch

        self.Event = torch.cuda.Event
        self.CUDAGraph = torch.cuda.CUDAGraph
        self.graph = torch.cuda.graph
        self._sync = torch.cuda.synchronize
        self.clock_ns = time.perf_counter_ns  # type: ignore[method-assign]
        self._flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")

    def event(self) -> Any:
        return self.Event(enable_timing=True)

    def synchronize(self) -> None:
        self._sync()

    def flush_l2(self) -> None:
        self._flush.zero_()

    def capture(self, fn: Callable[[], Any]) -> tuple[Any, Any]:
        g = self.CUDAGraph()
        with self.graph(g):  # torch captures on a side stream of its own and joins it back
            out = fn()
        return g, out


def make_timer(device: str) -> Timer:
    """The timer for a device class: :class:`CpuTimer` for ``"cpu"``, :class:`CudaTimer` for ``"cuda"``.

    Raises:
        ValueError: an unknown device class.
    """
    if device == DeviceClass.cpu:
        return CpuTimer()
    if device == DeviceClass.cuda:  # pragma: no cover - GPU-only
        return CudaTimer(TorchCuda())
    raise ValueError(f"unknown device {device!r}")
