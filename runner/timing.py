"""Timing: one timer interface with a CPU and a CUDA implementation.

The method is the field's (``triton.testing.do_bench``; GPU MODE's eval; KernelBench):

- warm-up calls before measuring (compilation, caches, allocator): 25 ms on CUDA, 100 ms on
  the CPU (:data:`WARMUP_SECONDS`);
- each timed call measured on its own: on CUDA the L2 cache is flushed first by zeroing a
  256 MiB buffer, then an event pair brackets the call with a *whole-device* synchronize before
  the end event, so work the submission puts on side streams is counted; on the CPU,
  ``time.perf_counter_ns`` brackets the call (CPU work is synchronous).

How many calls, and what they add up to, is decided by the judge from the pairs it times
(:mod:`kernelrank.runner.stats`: torch-free, tested on recorded timings). Everything here that
only a GPU can execute is inside :class:`CudaTimer`.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Protocol

# moved to the statistics module; re-exported for callers of this module
from kernelrank.runner.stats import TimingStats, geometric_mean, summarize  # noqa: F401

#: Bytes zeroed before each timed call on CUDA to flush L2 (do_bench and GPU MODE use 256 MiB).
L2_FLUSH_BYTES = 256 * 1024 * 1024
#: Minimum warm-up per device class, in seconds of calls, and in calls. CUDA: do_bench's 25 ms.
#: CPU: 100 ms, because a fresh process pays page faults until its heap has grown to the size the
#: calls need (measured: the first 5-30 calls of a 16 MiB softmax output at 2-3x the steady time).
WARMUP_SECONDS = {"cpu": 0.1, "cuda": 0.025}
WARMUP_MIN_CALLS = 1
#: Upper bound on warm-up calls (a fast kernel reaches the seconds only after many calls).
WARMUP_MAX_CALLS = 200


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


class CudaTimer:  # pragma: no cover - GPU-only: no CUDA device on this project's machines or CI
    """CUDA events around the call, L2 flushed before it, whole device synchronized before the end event.

    Sequence per call (do_bench and GPU MODE, plus the whole-device sync of KernelBench's fix for
    side-stream escapes): zero a 256 MiB buffer; ``torch.cuda.synchronize()``; record start;
    ``fn(data)``; ``torch.cuda.synchronize()``; record end; wait for end; elapsed in ns.
    """

    device = "cuda"

    def __init__(self) -> None:
        import torch

        self._torch = torch
        self._sync = torch.cuda.synchronize
        self._event = torch.cuda.Event
        self._flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")

    def time_call(self, fn: Callable[[Any], Any], data: Any) -> tuple[Any, int]:
        start, end = self._event(enable_timing=True), self._event(enable_timing=True)
        self._flush.zero_()
        self._sync()
        start.record()
        out = fn(data)
        self._sync()
        end.record()
        end.synchronize()
        return out, int(start.elapsed_time(end) * 1e6)

    def synchronize(self) -> None:
        self._sync()


def make_timer(device: str) -> Timer:
    """The timer for a device class: :class:`CpuTimer` for ``"cpu"``, :class:`CudaTimer` for ``"cuda"``.

    Raises:
        ValueError: an unknown device class.
    """
    if device == "cpu":
        return CpuTimer()
    if device == "cuda":  # pragma: no cover - GPU-only
        return CudaTimer()
    raise ValueError(f"unknown device {device!r}")
