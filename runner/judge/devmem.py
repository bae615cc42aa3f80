"""Device memory per child, measured by the judge: each child's budget (the problem's
``device_memory_mib``) and what it holds, read from outside while it is frozen.

The child caps torch's allocator at its budget before the submission is imported
(``child.ChildLoop.op_hello``), so an honest kernel that asks for too much meets
``torch.cuda.OutOfMemoryError`` (verdict ``out_of_memory``, :func:`~kernelrank.runner.judge.answers.raise_on_error`).
A hostile one can lift that cap or allocate around torch, so the judge also measures: after every
request, once the child is frozen again (:meth:`~kernelrank.runner.containment.sandbox.SubmissionProcess.request`),
it reads what the child holds, and more than the budget ends the run with ``out_of_memory``
naming the case and kills the child (:func:`~kernelrank.runner.judge.answers.raise_on_device_memory`),
before the reference or the judge allocate again. A frozen child cannot allocate, and only memory
held while it is frozen can starve the others (the two sides are never thawed at once).

What a child holds (:meth:`DeviceMemoryWatch.held`), in order of trust:

1. the driver's count for the job's processes (NVML ``nvmlDeviceGetComputeRunningProcesses``,
   :class:`NvmlMeter`), where NVML lists them (not inside a container with its own PID namespace,
   which NVML's host PIDs do not match);
2. otherwise the *ledger*: the growth of the whole device's used memory (NVML
   ``nvmlDeviceGetMemoryInfo``) across the child's windows, summed since it started. Nothing else
   changes the device's memory in a child's window: every other process of the job is frozen and
   the judge waits for the answer.

Tested on the CPU with a simulated device (``tests/runner/simgpu.SimDeviceMemory``); only
:class:`NvmlMeter` needs a GPU.
"""

from __future__ import annotations

from typing import Any, Protocol

MIB = 1 << 20


class DeviceMemoryMeter(Protocol):
    """Reads the device's memory from outside the children (NVML, or a simulation)."""

    def device_used(self) -> int | None:
        """Bytes in use on the whole device now; ``None`` where it cannot be read."""

    def process_used(self, child: Any) -> int | None:
        """Bytes the processes of ``child``'s job (a :class:`~kernelrank.runner.containment.sandbox.SubmissionProcess`)
        hold on the device; ``None`` where they cannot be told apart (then the ledger counts)."""


class DeviceMemoryWatch:
    """One child's device memory: its ``budget`` (bytes) and what it holds, by ``meter``.

    :meth:`opened` and :meth:`closed` bracket each of the child's windows (the sandbox calls them
    while every process of the job is frozen); :meth:`held` is read after each request."""

    def __init__(self, meter: DeviceMemoryMeter, budget: int, child: Any = None):
        self.meter = meter
        self.budget = int(budget)
        self.child = child
        #: growth of the device's used memory over the child's windows so far (bytes), or ``None``
        #: once a reading failed (the ledger is then unknown)
        self.grown: int | None = 0
        self._before: int | None = None

    def opened(self) -> None:
        """Before the child is thawed: the device's used memory now."""
        self._before = self.meter.device_used()

    def closed(self) -> None:
        """After the child is frozen again: its window's growth joins the ledger."""
        after = self.meter.device_used()
        if self.grown is None or self._before is None or after is None:
            self.grown = None
        else:
            self.grown += after - self._before
        self._before = None

    def held(self) -> int | None:
        """Bytes the child holds on the device: the driver's count for its processes, else the
        ledger (never below 0); ``None`` where neither is known."""
        own = self.meter.process_used(self.child) if self.child is not None else None
        if own is not None:
            return own
        return None if self.grown is None else max(0, self.grown)

    def over(self) -> int | None:
        """What the child holds when that is more than its budget (bytes), else ``None``."""
        held = self.held()
        return held if held is not None and held > self.budget else None


def mib(n: int) -> str:
    """Bytes as MiB for a verdict's message (``"1536 MiB"``)."""
    return f"{n / MIB:.0f} MiB"


def job_pids(child: Any) -> set[int]:
    """Host pids of every process of ``child``'s job, as the judge's PID namespace numbers them: its
    cgroup's members when contained, else its sandbox's processes and the child itself."""
    group = getattr(child, "group", None)
    pids = set(group.pids()) if group is not None else set(child.watch.members())
    return pids | {int(child.pid)}


class NvmlMeter:  # pragma: no cover - GPU-only: the NVIDIA driver's NVML
    """:class:`DeviceMemoryMeter` of the runner's GPU through ``pynvml`` (``nvml``, initialised,
    and the GPU's ``handle``: :func:`kernelrank.runner.host.gpuinfo.handle_for`).
    Source: NVML API reference (``nvmlDeviceGetMemoryInfo``, ``nvmlDeviceGetComputeRunningProcesses``)."""

    def __init__(self, nvml: Any, handle: Any):
        self.nvml, self.handle = nvml, handle

    def device_used(self) -> int | None:
        try:
            return int(self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used)
        except Exception:  # noqa: BLE001 - pynvml raises NVMLError subclasses per code
            return None

    def process_used(self, child: Any) -> int | None:
        try:
            procs = self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle)
        except Exception:  # noqa: BLE001 - as above
            return None
        pids = job_pids(child)
        mine = [getattr(p, "usedGpuMemory", None) for p in procs if int(p.pid) in pids]
        if not mine or any(m is None for m in mine):
            return None  # NVML's PIDs are the host's: none match inside a container's namespace
        return sum(int(m) for m in mine)


def nvml_meter(visible: str | None) -> NvmlMeter | None:  # pragma: no cover - GPU-only
    """The meter of the GPU ``CUDA_VISIBLE_DEVICES`` (``visible``) names, or ``None`` without NVML."""
    from kernelrank.runner.host import gpuinfo

    nvml = gpuinfo.load_nvml()
    if nvml is None:
        return None
    try:
        return NvmlMeter(nvml, gpuinfo.handle_for(nvml, visible))
    except Exception:  # noqa: BLE001 - no such GPU in NVML: the budget is then the allocator's only
        return None
