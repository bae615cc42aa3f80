"""The self-test's rows about the GPU: what a CUDA runner must find before it judges.

On CUDA the self-test (:mod:`~kernelrank.runner.host.selftest`) also requires:

- a kernel identical to the reference reads 1.00 ± :data:`IDENTICAL_TOLERANCE` in leaderboard mode,
  for each problem (:func:`identical_kernel_reads_one`; on the CPU the rule stays 1 inside the
  speedup's 95% interval: :func:`~kernelrank.runner.host.selftest.pair_reads_one`);
- a ``torch.cuda._sleep`` of known length (cycles of the SM clock NVML reports) reads within
  :data:`SLEEP_TOLERANCE` on the judge's CUDA timer (:func:`sleep_check`);
- no other compute process on the device, uncorrected ECC and retired-page counters clean, the
  compute mode Default (:func:`nvml_rows`, from :func:`~kernelrank.runner.host.gpuinfo.health`
  and :func:`~kernelrank.runner.host.gpuinfo.other_processes`).

Each row is a pure function of NVML's answers and measured numbers (tested on the CPU with a
simulated NVML and recorded figures); only :func:`gpu_rows`' NVML handle and the sleep's
measurement (:func:`measure_sleep`) need a GPU. Each failed row says what failed and what to do.
Sources: NVML API reference (``nvmlDeviceGetComputeRunningProcesses``,
``nvmlDeviceGetTotalEccErrors``, ``nvmlDeviceGetRetiredPages``, ``nvmlDeviceGetComputeMode``).
"""

from __future__ import annotations

import os
import statistics
from typing import Any, Callable

from kernelrank.runner.host import gpuinfo
from kernelrank.vocab import Verdict
from kernelrank.runner.host.selftest_rows import Check

#: A kernel identical to the reference reads 1.00 within this fraction in leaderboard mode (CUDA).
IDENTICAL_TOLERANCE = 0.03
#: A ``torch.cuda._sleep`` of known length reads within this fraction of it on the judge's timer.
SLEEP_TOLERANCE = 0.02
#: Length of the sleep (ns): long against the events' resolution (0.5 µs) and a launch.
SLEEP_NS = 1_000_000
#: Timed sleeps; their median is compared (a stray preemption moves one, not the median).
SLEEP_CALLS = 21
#: Most uncorrected ECC errors (volatile, aggregate) and retired pages a runner's GPU may have.
ECC_ERRORS_MAX = 0
RETIRED_PAGES_MAX = 0
#: The only compute mode in which the judge and its children may each hold a context on the GPU.
COMPUTE_MODE = "default"

GROUP = "GPU"


def identical_kernel_reads_one(result: Any, tolerance: float = IDENTICAL_TOLERANCE) -> tuple[bool, str]:
    """Whether a leaderboard run of a kernel identical to the reference passed with its speedup
    (``result.speedup``, a ratio) within ``1 ± tolerance``: ``(ok, what it read)``."""
    from kernelrank import format as fmt

    if str(result.status) != Verdict.passed or result.speedup is None:
        return False, f"{result.status}: {str(result.message)[:200]}"
    got = fmt.speedup(result.speedup)
    if result.speedup_ci:
        got += f" ({fmt.interval(result.speedup_ci, kind='speedup')})"
    return abs(float(result.speedup) - 1.0) <= tolerance + 1e-12, got  # inclusive, past float rounding


def identical_kernel_detail(problem: str) -> str:
    """What a failed identical-kernel row tells the operator."""
    return (f"two leaderboard runs of {problem}'s reference against itself read outside 1.00 ± "
            f"{IDENTICAL_TOLERANCE:.0%}: the pairing or the device's clocks move times here; lock the clocks "
            "(KERNELRANK_RUNNER_LOCK_CLOCKS), stop other work on this GPU, and run the self-test again")


def sleep_check(cycles: int, readings: list[tuple[int, int]], tolerance: float = SLEEP_TOLERANCE) -> Check:
    """The row for ``torch.cuda._sleep(cycles)`` timed by the judge's CUDA timer: ``readings`` are
    ``(measured_ns, sm_mhz)`` per call, the SM clock NVML reported around it (the sleep spins for
    ``cycles`` ticks of that clock, so it lasts ``cycles / sm_mhz`` µs). Passes when the median of
    measured / expected is within ``1 ± tolerance``; fails on no readings."""
    expected = f"within {tolerance:.0%} of its length"
    ratios = [ns / (cycles * 1e3 / mhz) for ns, mhz in readings if mhz > 0 and ns > 0]
    if not ratios:
        return Check(GROUP, "timer against a known sleep", "-", expected, "not measured", False, 0.0,
                     "no sleep was timed (or NVML gave no SM clock): check the driver and run the self-test again")
    ratio = statistics.median(ratios)
    length_us = cycles / statistics.median(mhz for _ns, mhz in readings if mhz > 0)
    ok = abs(ratio - 1.0) <= tolerance + 1e-12
    return Check(GROUP, "timer against a known sleep", "-", expected,
                 f"{length_us:.0f} µs sleep read {ratio:.3f}× its length", ok, 0.0,
                 "" if ok else "the judge's CUDA events do not read a kernel of known length correctly: the SM clock "
                               "changes under the sleep (lock the clocks: KERNELRANK_RUNNER_LOCK_CLOCKS) or the timer "
                               "is broken here; do not judge on this GPU until this row passes")


def other_processes_check(others: list[dict[str, Any]] | None) -> Check:
    """The row for compute processes on the GPU that are not the runner's
    (:func:`~kernelrank.runner.host.gpuinfo.other_processes`; ``None``: NVML could not say)."""
    if others is None:
        return Check(GROUP, "other compute processes", "-", "none", "unknown", False, 0.0,
                     "NVML could not list the GPU's processes: run the runner where NVML works (the driver's "
                     "libnvidia-ml and nvidia-ml-py), then run the self-test again")
    shown = ", ".join(f"pid {p['pid']}" + (f" ({p['used_bytes'] >> 20} MiB)" if p.get("used_bytes") else "")
                      for p in others[:5])
    return Check(GROUP, "other compute processes", "-", "none", shown or "none", not others, 0.0,
                 "" if not others else "another process computes on this GPU and would share its time with every "
                                       "timed call: stop it, or give this runner a GPU of its own (one runner per GPU)")


def ecc_check(facts: dict[str, Any]) -> Check:
    """The row for uncorrected ECC errors (:func:`~kernelrank.runner.host.gpuinfo.health`'s
    ``ecc_uncorrected_volatile`` and ``_aggregate``); a GPU without ECC reporting passes, saying so."""
    volatile, aggregate = facts.get("ecc_uncorrected_volatile"), facts.get("ecc_uncorrected_aggregate")
    if volatile is None and aggregate is None:
        return Check(GROUP, "uncorrected ECC errors", "-", f"<= {ECC_ERRORS_MAX}", "not reported", True, 0.0,
                     "this GPU reports no ECC counters (ECC off or not supported)")
    got = f"{volatile if volatile is not None else '?'} since the driver loaded, " \
          f"{aggregate if aggregate is not None else '?'} in its life"
    if (volatile or 0) > ECC_ERRORS_MAX:
        why = ("uncorrected memory errors since the driver loaded: outputs on this GPU may be wrong; drain it, reset "
               "it (nvidia-smi -r -i <index>) and run the self-test again; if they come back, have it replaced")
    elif (aggregate or 0) > ECC_ERRORS_MAX:
        why = ("this GPU has had uncorrected memory errors: check it (nvidia-smi -q -d ECC,PAGE_RETIREMENT,"
               "ROW_REMAPPER); once it is known good, clear the counters (nvidia-smi -p 1 -i <index>)")
    else:
        why = ""
    return Check(GROUP, "uncorrected ECC errors", "-", f"<= {ECC_ERRORS_MAX}", got, not why, 0.0, why)


def retired_pages_check(facts: dict[str, Any]) -> Check:
    """The row for pages retired for double-bit errors and a retirement pending
    (``retired_pages``, ``retired_pending``; GPUs that remap rows instead report neither)."""
    pages, pending = facts.get("retired_pages"), facts.get("retired_pending")
    if pages is None and pending is None:
        return Check(GROUP, "retired pages", "-", "none, none pending", "not reported", True, 0.0,
                     "this GPU does not retire pages (it remaps rows, or reports neither)")
    got = f"{pages if pages is not None else '?'} retired" + (", a retirement pending" if pending else "")
    if pending:
        why = "a page retirement is pending: it takes effect only after a reset (nvidia-smi -r -i <index>) or reboot"
    elif (pages or 0) > RETIRED_PAGES_MAX:
        why = ("pages were retired for double-bit errors: this GPU's memory is failing; check it (nvidia-smi -q -d "
               "PAGE_RETIREMENT) and have it replaced")
    else:
        why = ""
    return Check(GROUP, "retired pages", "-", "none, none pending", got, not why, 0.0, why)


def compute_mode_check(facts: dict[str, Any]) -> Check:
    """The row for the compute mode (``compute_mode``: :data:`~kernelrank.runner.host.gpuinfo.COMPUTE_MODES`)."""
    mode = facts.get("compute_mode")
    ok = mode == COMPUTE_MODE
    return Check(GROUP, "compute mode", "-", COMPUTE_MODE, str(mode or "unknown"), ok, 0.0,
                 "" if ok else "the judge and its children each open a context on this GPU, which "
                               f"{mode or 'this'} mode refuses or cannot be checked: set it as root with "
                               "nvidia-smi -c DEFAULT -i <index>")


def nvml_rows(nvml: Any, handle: Any, own_pids: set[int] | frozenset[int]) -> list[Check]:
    """Every NVML row for the GPU ``handle``: other compute processes than ``own_pids``, ECC,
    retired pages, compute mode. ``nvml`` is ``pynvml`` (or a simulated one); ``None``: NVML could
    not be loaded, one failed row saying so."""
    if nvml is None or handle is None:
        return [Check(GROUP, "NVML", "-", "available", "unavailable", False, 0.0,
                      "a CUDA runner reads the GPU's health through NVML: install the driver's libnvidia-ml (the "
                      "container toolkit's `utility` capability in Docker) and nvidia-ml-py")]
    try:
        others: list[dict[str, Any]] | None = gpuinfo.other_processes(nvml, handle, own_pids)
    except Exception:  # noqa: BLE001 - NVML errors of every kind mean "could not say"
        others = None
    facts = gpuinfo.health(nvml, handle)
    return [other_processes_check(others), ecc_check(facts), retired_pages_check(facts), compute_mode_check(facts)]


def gpu_rows(nvml: Any, handle: Any, sleep: Callable[[], tuple[int, list[tuple[int, int]]]] | None,
             own_pids: set[int] | frozenset[int] | None = None) -> list[Check]:
    """The NVML rows (:func:`nvml_rows`), then the sleep's (``sleep()`` gives ``(cycles, readings)``,
    :func:`measure_sleep` on a GPU; a sleep that raises is a failed row). Run before the self-test
    process opens a CUDA context: any compute process on the device then is another's."""
    own = own_pids if own_pids is not None else {os.getpid(), os.getppid()}
    rows = nvml_rows(nvml, handle, own)
    if sleep is not None:
        try:
            rows.append(sleep_check(*sleep()))
        except Exception as e:  # noqa: BLE001 - a failed measurement is a failed row
            rows.append(Check(GROUP, "timer against a known sleep", "-", f"within {SLEEP_TOLERANCE:.0%} of its length",
                              "failed", False, 0.0, f"{type(e).__name__}: {e}"[:500]))
    return rows


def measure_sleep(nvml: Any, handle: Any, length_ns: int = SLEEP_NS,
                  calls: int = SLEEP_CALLS) -> tuple[int, list[tuple[int, int]]]:  # pragma: no cover - GPU-only
    """``(cycles, [(measured_ns, sm_mhz)])``: ``torch.cuda._sleep(cycles)``, ``cycles`` worth
    ``length_ns`` at the SM clock NVML reports now, timed ``calls`` times (after one warm-up) by the
    judge's CUDA timer (:class:`~kernelrank.runner.timing.CudaTimer`), each with the SM clock read
    right after it."""
    import torch

    from kernelrank.runner.timing import make_timer

    mhz = gpuinfo.clock_now(nvml, handle)[0]
    if not mhz:
        raise RuntimeError("NVML gave no SM clock for this GPU")
    cycles = int(length_ns * mhz / 1e3)
    timer = make_timer("cuda")
    timer.time_call(lambda _d: torch.cuda._sleep(cycles), None)
    readings = []
    for _ in range(calls):
        _out, ns = timer.time_call(lambda _d: torch.cuda._sleep(cycles), None)
        readings.append((int(ns), gpuinfo.clock_now(nvml, handle)[0] or 0))
    return cycles, readings


def run_gpu_rows() -> list[Check]:  # pragma: no cover - GPU-only: NVML and torch.cuda on a real GPU
    """:func:`gpu_rows` for this runner's GPU (``CUDA_VISIBLE_DEVICES``)."""
    nvml = gpuinfo.load_nvml()
    handle = gpuinfo.handle_for(nvml, os.environ.get("CUDA_VISIBLE_DEVICES")) if nvml is not None else None
    return gpu_rows(nvml, handle, (lambda: measure_sleep(nvml, handle)) if handle is not None else None)
