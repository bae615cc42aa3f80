"""A simulated NVML (``pynvml``'s functions that :mod:`kernelrank.runner.host.gpuinfo` calls), for CI.

It answers as an H100 SXM does (or a MIG slice of one), and its state is the test's to set:

- ``sm_mhz``: the SM clock now (MHz; the default applications clock is 1,755);
- ``reasons``: the clocks-event-reasons mask now (``gpuinfo.CLOCK_REASONS``; 0 = none);
- ``episodes``: optional ``[(start_ns, end_ns, sm_mhz, reasons)]`` on the clock given by
  ``now`` (a callable, e.g. a :class:`tests.runner.simgpu.SimGPU`'s ``clock_ns``): while ``now()``
  falls in an episode the GPU is throttled to ``sm_mhz`` with ``reasons``;
- ``processes``: the compute processes on the GPU, ``[(pid, used_bytes)]``;
- ``ecc``: ``{"volatile": n, "aggregate": n}`` uncorrected ECC errors; ``retired``: pages
  retired (double-bit) and ``retired_pending``; ``compute_mode`` (0 Default, 2 Prohibited,
  3 Exclusive Process); ``persistence`` (1 on).

Errors are raised as pynvml raises them: classes whose names start ``NVMLError``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

from kernelrank.runner.host import gpuinfo


class NVMLError_NotSupported(Exception):  # noqa: N801 - pynvml's naming, which gpuinfo recognises
    pass


class NVMLError_NoPermission(Exception):  # noqa: N801
    pass


class SimNVML:
    """The simulated NVML (see the module docstring)."""

    def __init__(self, mig: bool = False, root: bool = False, now: Callable[[], int] | None = None):
        self.mig, self.root = mig, root
        self.locked: tuple[int, int] | None = None
        self.gpu, self.slice = object(), object()
        self.sm_mhz = 1755
        self.reasons = 0x4 | 0x20 | 0x10000
        self.now = now
        self.episodes: list[tuple[int, int, int, int]] = []
        self.processes: list[tuple[int, int]] = []
        self.ecc = {"volatile": 0, "aggregate": 0}
        self.retired = 0
        self.retired_pending = False
        self.compute_mode = 0
        self.persistence = 1
        #: how many times the SM clock was read (tests check sampling happened)
        self.clock_reads = 0

    def _episode(self) -> tuple[int, int] | None:
        if self.now is None:
            return None
        t = self.now()
        for start, end, mhz, reasons in self.episodes:
            if start <= t < end:
                return mhz, reasons
        return None

    # -- handles and facts ------------------------------------------------------------------------
    def nvmlDeviceGetHandleByIndex(self, i: int) -> Any:
        assert i == 3
        return self.gpu

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> Any:
        return self.slice if uuid.startswith("MIG-") else self.gpu

    def nvmlDeviceIsMigDeviceHandle(self, h: Any) -> bool:
        return h is self.slice

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, h: Any) -> Any:
        return self.gpu

    def nvmlDeviceGetName(self, h: Any) -> bytes:
        return b"NVIDIA H100 80GB HBM3 MIG 1g.10gb" if h is self.slice else b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUUID(self, h: Any) -> str:
        return "MIG-1234" if h is self.slice else "GPU-abcd"

    def nvmlDeviceGetCudaComputeCapability(self, h: Any) -> tuple[int, int]:
        assert h is self.gpu
        return (9, 0)

    def nvmlSystemGetDriverVersion(self) -> str:
        return "570.86.15"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12080

    def nvmlDeviceGetMemoryInfo(self, h: Any) -> Any:
        return SimpleNamespace(total=10 << 30 if h is self.slice else 80 << 30)

    def nvmlDeviceGetMaxClockInfo(self, h: Any, kind: int) -> int:
        return {gpuinfo.CLOCK_SM: 1980, gpuinfo.CLOCK_MEM: 2619}[kind]

    def nvmlDeviceGetDefaultApplicationsClock(self, h: Any, kind: int) -> int:
        return 1755

    def nvmlDeviceGetPowerManagementLimit(self, h: Any) -> int:
        return 700_000

    def nvmlDeviceGetMigMode(self, h: Any) -> tuple[int, int]:
        return (1, 1) if self.mig else (0, 1)

    def nvmlDeviceGetMinorNumber(self, h: Any) -> int:
        return 3

    def nvmlDeviceGetPciInfo(self, h: Any) -> Any:
        return SimpleNamespace(busId=b"00000000:9B:00.0")

    # -- clocks -----------------------------------------------------------------------------------
    def nvmlDeviceGetClockInfo(self, h: Any, kind: int) -> int:
        if kind == gpuinfo.CLOCK_SM:
            self.clock_reads += 1
            ep = self._episode()
            return ep[0] if ep else self.sm_mhz
        return 2619

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: Any) -> int:
        raise NVMLError_NotSupported()

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: Any) -> int:
        ep = self._episode()
        return ep[1] if ep else self.reasons

    def nvmlDeviceSetGpuLockedClocks(self, h: Any, lo: int, hi: int) -> None:
        if not self.root:
            raise NVMLError_NoPermission("Insufficient Permissions")
        self.locked = (lo, hi)

    # -- health -----------------------------------------------------------------------------------
    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[Any]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in self.processes]

    def nvmlDeviceGetTotalEccErrors(self, h: Any, error_type: int, counter_type: int) -> int:
        assert error_type == gpuinfo.ECC_UNCORRECTED
        return self.ecc["volatile" if counter_type == gpuinfo.ECC_VOLATILE else "aggregate"]

    def nvmlDeviceGetRetiredPages(self, h: Any, cause: int) -> list[int]:
        return list(range(self.retired)) if cause == gpuinfo.RETIRED_DOUBLE_BIT else []

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: Any) -> int:
        return int(self.retired_pending)

    def nvmlDeviceGetComputeMode(self, h: Any) -> int:
        return self.compute_mode

    def nvmlDeviceGetPersistenceMode(self, h: Any) -> int:
        return self.persistence
