"""Requests the judge leaves out as disturbed (CUDA): taken while the GPU's clock was held down,
or with work overlapping the L2 flush, where the child's events cannot see it.

A disturbed request is judged as one that page-faulted is (:meth:`~kernelrank.runner.judge.pairs.Side.settle`):
its pair is timed and checked all the same and not counted, and the case goes on with fresh
input sets, so the pair is in effect timed again (:meth:`~kernelrank.runner.judge.timed.TimedPhase._slice`).
A case with more than :data:`NOISY_SHARE` of its pairs disturbed is noisy, and its run with it:
not ranked (:func:`too_disturbed`).

- **Clocks**, by nvbench's throttle detection (``--throttle-threshold``, default 75% of the
  default clock; ``--throttle-recovery-delay``, default 0.05 s: a sample taken below the
  threshold is discarded and the benchmark sleeps to let the GPU recover). Around each timed
  request the judge reads NVML's SM clock and clocks-event reasons, in its own process (the child
  is hostile, and frozen outside its window): the request is throttled when a reading is below
  :data:`THROTTLE_FRACTION` of the GPU's default applications clock or names a reason in
  :data:`SLOWDOWN_REASONS`, and the judge pauses :data:`PAUSE_S` before the next request
  (:class:`ClockWatch`). Each run records the mean SM clock read, the throttled share of its
  requests and the GPU's compute processes other than the runner's (:meth:`ClockWatch.summary`).
- **The flush**: the child's timer records an event before each call's flush and reports each
  flush's time and the bound its idle flushes give (:class:`~kernelrank.runner.timing.CudaTimer`);
  work another stream starts while the flush still runs ends before the start event, and
  lengthens the flush it shares the device with: a flush past the bound marks the request
  (:func:`flush_overlapped`).

The rules are pure functions over readings; only :func:`open_watch` needs a GPU.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from kernelrank.runner.host import gpuinfo
from kernelrank.vocab import DeviceClass

#: A reading of the SM clock below this fraction of the GPU's default applications clock is
#: throttled (nvbench's ``--throttle-threshold`` default, 75%).
THROTTLE_FRACTION = 0.75
#: Clocks-event reasons (:data:`~kernelrank.runner.host.gpuinfo.CLOCK_REASONS`) that mean the GPU
#: is slowed: every bit but gpu_idle (a GPU between requests is idle), and the two that state a
#: configuration rather than an event (applications_clocks_setting, display_clock_setting).
SLOWDOWN_REASONS = sum(gpuinfo.CLOCK_REASONS) & ~(0x1 | 0x2 | 0x100)
#: Seconds the judge waits after a throttled request before the next (nvbench's
#: ``--throttle-recovery-delay`` default): time for the GPU to recover its clock.
PAUSE_S = 0.05
#: Most share of a case's timed pairs that may be disturbed before the case is noisy (its
#: counted pairs would then be a selection of the run's moments, not a sample of them).
NOISY_SHARE = 0.25
#: Pairs a case must have timed before :data:`NOISY_SHARE` is held against it.
MIN_PAIRS_FOR_SHARE = 8
#: What disturbed a request, as the case's figures and the ``pairs`` event name it (the event's
#: code is 1 + the index; 0: not disturbed).
THROTTLED, FLUSH_OVERLAP = "throttled", "flush_overlap"
KINDS = (THROTTLED, FLUSH_OVERLAP)


@dataclass(frozen=True)
class ClockReading:
    """One NVML reading: the SM clock (MHz) and the clocks-event-reasons mask (``None``: not
    reported)."""

    sm_mhz: int | None
    reasons: int | None


def throttled(reading: ClockReading, default_mhz: int | None) -> bool:
    """Whether ``reading`` says the GPU was slowed: its SM clock below :data:`THROTTLE_FRACTION`
    of ``default_mhz`` (MHz; unknown: not held against it), or a reason in
    :data:`SLOWDOWN_REASONS`. A reading NVML could not give is not throttled."""
    if reading.reasons is not None and reading.reasons & SLOWDOWN_REASONS:
        return True
    return bool(default_mhz and reading.sm_mhz is not None and reading.sm_mhz < THROTTLE_FRACTION * default_mhz)


def flush_overlapped(flush_ns: Sequence[int] | None, bound_ns: float | None) -> bool:
    """Whether a request's calls' L2 flushes (ns each, as the child's timer measured them) say
    that work overlapped one: any past ``bound_ns`` (:func:`~kernelrank.runner.timing.flush_bound`
    of the idle flushes). Without figures (the CPU, a timer that reports none): ``False``."""
    if not flush_ns or not bound_ns:
        return False
    return max(flush_ns) > bound_ns


def too_disturbed(disturbed: int, pairs: int) -> bool:
    """Whether a case with ``disturbed`` of its ``pairs`` timed pairs left out as disturbed is
    noisy: more than :data:`NOISY_SHARE` of them, once it has :data:`MIN_PAIRS_FOR_SHARE`."""
    return pairs >= MIN_PAIRS_FOR_SHARE and disturbed > NOISY_SHARE * pairs


def pair_code(kind: str | None) -> int:
    """The ``pairs`` event's code of what disturbed a pair: 0 nothing, else 1 + its index in
    :data:`KINDS`."""
    return 0 if kind is None else 1 + KINDS.index(kind)


def case_note(label: str, pairing: dict[str, Any] | None) -> str | None:
    """Words for the run's message about a case that is noisy for its disturbed pairs
    (:meth:`~kernelrank.runner.judge.pairs.PairedCase.disturbed_pairs` in its ``pairing``), or
    ``None`` where that is not why."""
    d = (pairing or {}).get("disturbed") or {}
    if not d.get("share") or not (d.get("too_many") or (pairing or {}).get("pairs") == 0):
        return None  # none disturbed: not why
    return (f"{label} had {d['share']:.0%} of its pairs left out as disturbed ({d[THROTTLED]} taken while the GPU "
            f"was throttled, {d[FLUSH_OVERLAP]} with work overlapping the cache flush)")


@dataclass
class ClockWatch:
    """The judge's watch over the GPU's clock around each timed request, for one run.

    Args:
        read: a reading now (:func:`nvml_reader`; a simulated NVML in tests).
        default_mhz: the GPU's default applications clock (MHz;
            :func:`~kernelrank.runner.host.gpuinfo.lock_target_mhz`), ``None`` when NVML gives none.
        processes: the GPU's compute processes now, other than the ``own`` PIDs given
            (:func:`~kernelrank.runner.host.gpuinfo.other_processes`).
        sleep: the pause after a throttled request (``time.sleep``).
    """

    read: Callable[[], ClockReading]
    default_mhz: int | None
    processes: Callable[[set[int]], list[dict[str, Any]]] = lambda own: []
    sleep: Callable[[float], None] = time.sleep
    requests: int = 0
    throttled: int = 0
    clocks: list[int] = field(default_factory=list)
    others: dict[int, dict[str, Any]] = field(default_factory=dict)

    def before(self) -> ClockReading:
        """The reading before a request (taken while every process of the job is frozen)."""
        return self.read()

    def after(self, before: ClockReading) -> bool:
        """After the request that ``before`` preceded: whether it was throttled (either reading);
        if so the judge pauses :data:`PAUSE_S` here, before its next request."""
        after = self.read()
        self.requests += 1
        self.clocks.extend(r.sm_mhz for r in (before, after) if r.sm_mhz is not None)
        hit = throttled(before, self.default_mhz) or throttled(after, self.default_mhz)
        if hit:
            self.throttled += 1
            self.sleep(PAUSE_S)  # let the GPU recover before the next request
        return hit

    def look(self, own: Iterable[int]) -> None:
        """Note the GPU's compute processes other than ``own`` (PIDs), kept over the run with the
        most memory each was seen with (bytes)."""
        for p in self.processes(set(own)):
            seen = self.others.setdefault(p["pid"], dict(p))
            if (p.get("used_bytes") or 0) > (seen.get("used_bytes") or 0):
                seen["used_bytes"] = p["used_bytes"]

    def summary(self) -> dict[str, Any]:
        """The run's record: requests watched, throttled ones and their share, the mean SM clock
        read (MHz), the default clock (MHz), the thresholds, and the other processes seen."""
        return {"requests": self.requests, "throttled": self.throttled,
                "throttled_share": self.throttled / self.requests if self.requests else 0.0,
                "mean_sm_mhz": statistics.fmean(self.clocks) if self.clocks else None,
                "default_sm_mhz": self.default_mhz, "threshold": THROTTLE_FRACTION, "pause_s": PAUSE_S,
                "other_processes": sorted(self.others.values(), key=lambda p: p["pid"])}


def nvml_watch(nvml: Any, handle: Any) -> ClockWatch:
    """A :class:`ClockWatch` reading ``handle``'s GPU through ``nvml`` (``pynvml``, or a simulated
    one): :func:`~kernelrank.runner.host.gpuinfo.clock_now`, the default clock from
    :func:`~kernelrank.runner.host.gpuinfo.lock_target_mhz`."""
    return ClockWatch(lambda: ClockReading(*gpuinfo.clock_now(nvml, handle)), gpuinfo.lock_target_mhz(nvml, handle),
                      lambda own: gpuinfo.other_processes(nvml, handle, own))


def own_pids(children: Iterable[Any]) -> set[int]:
    """PIDs that are the runner's: the judge, its parent (the worker) and each child (its PID in
    the judge's namespace and, where it differs, its launcher's)."""
    pids = {os.getpid(), os.getppid()}
    for c in children:
        pids.add(int(c.pid))
        proc = getattr(c, "proc", None)
        if proc is not None:
            pids.add(int(proc.pid))
    return pids


def open_watch(device: str) -> ClockWatch | None:
    """The run's :class:`ClockWatch`: ``None`` on the CPU, or where NVML cannot be loaded."""
    if device != DeviceClass.cuda:
        return None
    nvml = gpuinfo.load_nvml()  # pragma: no cover - GPU-only
    if nvml is None:  # pragma: no cover - GPU-only
        return None
    try:  # pragma: no cover - GPU-only
        return nvml_watch(nvml, gpuinfo.handle_for(nvml, os.environ.get("CUDA_VISIBLE_DEVICES")))
    except Exception:  # noqa: BLE001 # pragma: no cover - GPU-only: no watch rather than no run
        return None
