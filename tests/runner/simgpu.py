"""A simulated GPU: a small model of one device's timeline that stands in for ``torch.cuda`` in CI.

It implements :class:`kernelrank.runner.timing.DeviceAPI`, so :class:`~kernelrank.runner.timing.CudaTimer`
runs on it unchanged. The model (times in ns):

- a **host clock** that advances by what the host does: each kernel launch costs ``launch_ns``,
  an event record ``record_ns``, a wait returns ``wake_ns`` after what it waited for;
- **streams**, each a queue: a kernel launched at host time ``h`` on stream ``s`` runs from
  ``max(h, s.free_at)`` for its duration (streams run side by side: the device has room for
  all); an event recorded on a stream completes when the work queued before it has
  (``max(h, s.free_at)``), and ``elapsed_time`` is the difference of two completions, in ms;
- ``synchronize`` waits for every stream; ``Event.synchronize`` for one event;
- the **L2 flush** is a kernel of ``flush_bytes / bandwidth`` on the current stream; with
  ``contend=True`` a kernel on another stream that runs while the flush does shares the device
  with it: the flush lasts as much longer as they overlap, and what was queued after it on its
  stream (the start event) waits as long;
- **graphs**: while capturing, launches on the current stream are recorded instead of run; a
  replay costs one launch and queues them all.

Kernels are Python callables that call :meth:`SimGPU.kernel` (what a real kernel's launch does),
so a test writes a "submission" as it would for torch: ``lambda data: gpu.kernel(5_000)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

#: Bytes the simulated flush zeroes and the simulated memory bandwidth (an H100 SXM: 3.35 TB/s).
FLUSH_BYTES = 256 * 1024 * 1024
BANDWIDTH_BYTES_PER_S = 3.35e12


@dataclass
class SimStream:
    """One stream: the host time at which all work queued on it is done."""

    name: str
    free_at: int = 0


@dataclass
class SimGraph:
    """Kernels captured on the current stream (durations, ns); :meth:`replay` queues them again."""

    gpu: "SimGPU"
    kernels: list[int] = field(default_factory=list)

    def replay(self) -> None:
        self.gpu.host += self.gpu.launch_ns
        s = self.gpu.current
        for d in self.kernels:
            s.free_at = max(self.gpu.host, s.free_at) + d
            self.gpu.busy.append((s.name, s.free_at - d, s.free_at))


class SimEvent:
    """An event with timing enabled; ``time`` is when it completed on the device (ns)."""

    def __init__(self, gpu: "SimGPU"):
        self.gpu = gpu
        self.time: int | None = None

    def record(self) -> None:
        gpu = self.gpu
        gpu.host += gpu.record_ns
        s = gpu.current
        self.time = max(gpu.host, s.free_at)
        s.free_at = self.time
        if gpu.flush_window is not None and s is gpu.flush_window[0]:
            gpu.after_flush.append(self)  # moved if work beside the flush lengthens it

    def synchronize(self) -> None:
        if self.time is None:
            raise RuntimeError("event not recorded")
        self.gpu.host = max(self.gpu.host, self.time) + self.gpu.wake_ns

    def elapsed_time(self, end: "SimEvent") -> float:
        if self.time is None or end.time is None:
            raise RuntimeError("event not recorded")
        if self.gpu.host < end.time:
            raise RuntimeError("end event not completed")
        return (end.time - self.time) / 1e6


class SimGPU:
    """The simulated device (see the module docstring); the API :class:`CudaTimer` uses.

    Args:
        launch_ns: host time one kernel launch costs.
        record_ns: host time an event record costs.
        wake_ns: host time from what a wait waited for to the wait's return.
        flush_bytes, bandwidth: size and speed of the L2 flush kernel.
        contend: whether work on another stream lengthens a flush it overlaps (module docstring).
    """

    def __init__(self, launch_ns: int = 20_000, record_ns: int = 1_000, wake_ns: int = 2_000,
                 flush_bytes: int = FLUSH_BYTES, bandwidth: float = BANDWIDTH_BYTES_PER_S, contend: bool = False):
        self.launch_ns, self.record_ns, self.wake_ns = launch_ns, record_ns, wake_ns
        self.contend = contend
        #: the last flush, where contend: (its stream, start, end, its index in busy)
        self.flush_window: tuple[SimStream, int, int, int] | None = None
        #: events recorded on the flush's stream since it was queued
        self.after_flush: list[SimEvent] = []
        #: the event class, bound once as TorchCuda binds torch.cuda.Event (the tripwire watches it)
        self.Event = SimEvent
        self.flush_ns = int(flush_bytes / bandwidth * 1e9)
        self.host = 0
        self.default = SimStream("default")
        self.current = self.default
        self.streams = [self.default]
        self.capturing: SimGraph | None = None
        #: every kernel run: (stream, start, end)
        self.busy: list[tuple[str, int, int]] = []

    # -- what a submission's launches do ----------------------------------------------------------
    def stream(self, name: str = "side") -> SimStream:
        """A new stream (``torch.cuda.Stream()``)."""
        s = SimStream(name)
        self.streams.append(s)
        return s

    def kernel(self, duration_ns: int, stream: SimStream | None = None) -> int:
        """Launch a kernel of ``duration_ns``; returns when it will end on the device (ns)."""
        s = stream or self.current
        self.host += self.launch_ns
        if self.capturing is not None and s is self.current:
            self.capturing.kernels.append(duration_ns)
            return -1
        start = max(self.host, s.free_at)
        s.free_at = start + duration_ns
        self.busy.append((s.name, start, s.free_at))
        if self.flush_window is not None and s is not self.flush_window[0]:
            self._contend(start, s.free_at)
        return s.free_at

    def _contend(self, start: int, end: int) -> None:
        """A kernel on another stream ran ``start``-``end``: the flush is lengthened by their
        overlap, and what was queued after it on its stream moves as much."""
        stream, f0, f1, i = self.flush_window  # type: ignore[misc]
        overlap = min(end, f1) - max(start, f0)
        if overlap <= 0:
            return
        for e in self.after_flush:
            if e.time is not None and e.time >= f1:
                e.time += overlap
        for j in range(i + 1, len(self.busy)):
            name, b0, b1 = self.busy[j]
            if name == stream.name and b0 >= f1:
                self.busy[j] = (name, b0 + overlap, b1 + overlap)
        if stream.free_at >= f1:
            stream.free_at += overlap
        self.busy[i] = (self.busy[i][0], f0, f1 + overlap)
        self.flush_window = (stream, f0, f1 + overlap, i)

    def wait_stream(self, other: SimStream, waiter: SimStream | None = None) -> None:
        """``waiter`` (default: the current stream) waits for the work queued on ``other`` so far
        (``waiter.wait_stream(other)``)."""
        w = waiter or self.current
        w.free_at = max(w.free_at, other.free_at)

    def host_work(self, ns: int) -> None:
        """The host spends ``ns`` (Python, argument checks) without the device."""
        self.host += ns

    # -- DeviceAPI --------------------------------------------------------------------------------
    def event(self) -> SimEvent:
        return self.Event(self)

    def synchronize(self) -> None:
        self.host = max(self.host, *(s.free_at for s in self.streams)) + self.wake_ns

    def flush_l2(self) -> None:
        end = self.kernel(self.flush_ns)
        if self.contend and self.capturing is None:
            self.flush_window, self.after_flush = (self.current, end - self.flush_ns, end, len(self.busy) - 1), []

    def capture(self, fn: Callable[[], Any]) -> tuple[SimGraph, Any]:
        graph = SimGraph(self)
        self.capturing = graph
        try:
            out = fn()
        finally:
            self.capturing = None
        return graph, out

    def clock_ns(self) -> int:
        return self.host


class SimOutOfMemory(RuntimeError):
    """An allocation the simulated allocator refused (``torch.cuda.OutOfMemoryError``'s part)."""


class SimDeviceMemory:
    """The simulated device's memory, as the driver keeps it: a pool per process (bytes held, by
    pid), the whole device's use, and a cap per process on its allocator (what
    ``torch.cuda.set_per_process_memory_fraction`` sets). It is also a
    :class:`~kernelrank.runner.judge.devmem.DeviceMemoryMeter`, as NVML answers one:
    ``device_used`` (``nvmlDeviceGetMemoryInfo``'s ``used``) and ``process_used`` of a child's
    pid (``nvmlDeviceGetComputeRunningProcesses``), which is ``None`` with ``lists_processes``
    off (a container whose PID namespace NVML's host pids do not match).

    Args:
        total: the device's memory (bytes; an H100's 80 GB by default).
        lists_processes: whether per-process use is reported (see above).
    """

    def __init__(self, total: int = 80 * 10**9, lists_processes: bool = True):
        self.total, self.lists_processes = total, lists_processes
        self.held: dict[int, int] = {}
        self.caps: dict[int, int] = {}

    def cap(self, pid: int, fraction: float) -> None:
        """``set_per_process_memory_fraction(fraction)`` in process ``pid``."""
        self.caps[pid] = int(fraction * self.total)

    def allocate(self, pid: int, n: int, through_allocator: bool = True) -> None:
        """Process ``pid`` allocates ``n`` bytes; ``through_allocator=False`` goes around torch's
        allocator (``cudaMalloc`` from an extension), which its cap does not see.

        Raises:
            SimOutOfMemory: past the process's cap (through the allocator) or the device's memory.
        """
        held = self.held.get(pid, 0)
        if through_allocator and pid in self.caps and held + n > self.caps[pid]:
            raise SimOutOfMemory(f"CUDA out of memory: tried to allocate {n} bytes past the process's cap")
        if sum(self.held.values()) + n > self.total:
            raise SimOutOfMemory(f"CUDA out of memory: tried to allocate {n} bytes, the device is full")
        self.held[pid] = held + n

    def free(self, pid: int, n: int | None = None) -> None:
        """Process ``pid`` frees ``n`` bytes (``None``: all it holds, as when it exits)."""
        left = 0 if n is None else max(0, self.held.get(pid, 0) - n)
        self.held[pid] = left

    # -- the meter --------------------------------------------------------------------------------
    def device_used(self) -> int | None:
        return sum(self.held.values())

    def process_used(self, child: Any) -> int | None:
        if not self.lists_processes:
            return None
        return self.held.get(int(child.pid), 0)
