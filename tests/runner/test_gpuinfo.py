"""NVML facts for the heartbeat and every run, mapped from a fake NVML (no GPU here)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kernelrank.runner.host import gpuinfo


class NVMLError_NotSupported(Exception):  # noqa: N801 - pynvml's naming, which gpuinfo recognises
    pass


class NVMLError_NoPermission(Exception):  # noqa: N801
    pass


class FakeNVML:
    """The pynvml functions gpuinfo calls, answering as an H100 SXM (or a MIG slice of one) does."""

    def __init__(self, mig: bool = False, root: bool = False):
        self.mig, self.root = mig, root
        self.locked: tuple[int, int] | None = None
        self.gpu, self.slice = object(), object()

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

    def nvmlDeviceGetClockInfo(self, h: Any, kind: int) -> int:
        return {gpuinfo.CLOCK_SM: 1755, gpuinfo.CLOCK_MEM: 2619}[kind]

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

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: Any) -> int:
        raise NVMLError_NotSupported()

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: Any) -> int:
        return 0x4 | 0x20 | 0x10000

    def nvmlDeviceSetGpuLockedClocks(self, h: Any, lo: int, hi: int) -> None:
        if not self.root:
            raise NVMLError_NoPermission("Insufficient Permissions")
        self.locked = (lo, hi)


def test_facts_of_a_whole_gpu() -> None:
    nvml = FakeNVML()
    f = gpuinfo.gpu_facts(nvml, gpuinfo.handle_for(nvml, "3"))
    assert f == {
        "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-abcd", "compute_capability": "9.0",
        "driver_version": "570.86.15", "cuda_driver_version": "12.8", "memory_bytes": 80 << 30,
        "sm_clock_mhz": 1755, "mem_clock_mhz": 2619, "sm_clock_max_mhz": 1980, "mem_clock_max_mhz": 2619,
        "power_limit_w": 700.0, "mig_mode": "disabled", "mig_mode_pending": "enabled", "mig_device": False,
        "minor_number": 3, "pci_bus_id": "00000000:9B:00.0", "queue": "cuda-h100-sxm",
    }


def test_facts_of_a_mig_slice_come_from_its_parent_and_its_own_queue() -> None:
    nvml = FakeNVML(mig=True)
    f = gpuinfo.gpu_facts(nvml, gpuinfo.handle_for(nvml, "MIG-1234,MIG-5678"))
    assert f["mig_device"] and f["mig_mode"] == "enabled" and "mig_mode_pending" not in f
    assert f["memory_bytes"] == 10 << 30 and f["compute_capability"] == "9.0" and f["minor_number"] == 3
    assert f["queue"] == "cuda-h100-sxm-mig-1g10gb"


def test_unsupported_facts_are_none() -> None:
    nvml = FakeNVML()

    def unsupported(*_a: Any) -> Any:
        raise NVMLError_NotSupported()

    nvml.nvmlDeviceGetMigMode = unsupported  # type: ignore[method-assign]
    nvml.nvmlDeviceGetPowerManagementLimit = unsupported  # type: ignore[method-assign]
    f = gpuinfo.gpu_facts(nvml, nvml.gpu)
    assert f["mig_mode"] == "unsupported" and f["power_limit_w"] is None


def test_visible_devices_name_the_gpu() -> None:
    assert gpuinfo.nvml_target(None) == ("index", 0)
    assert gpuinfo.nvml_target("2,3") == ("index", 2)
    assert gpuinfo.nvml_target("GPU-abc") == ("uuid", "GPU-abc")
    for bad in ("", "-1", "nope"):
        with pytest.raises(ValueError):
            gpuinfo.nvml_target(bad)


def test_clock_snapshot_names_the_reasons() -> None:
    nvml = FakeNVML()
    snap = gpuinfo.clock_snapshot(nvml, nvml.gpu)
    assert snap == {"sm_mhz": 1755, "mem_mhz": 2619, "reasons": ["sw_power_cap", "sw_thermal_slowdown", "0x10000"]}
    assert gpuinfo.clock_reasons(None) is None and gpuinfo.clock_reasons(0) == []


def test_clock_lock_where_allowed_and_reported_where_not() -> None:
    nvml = FakeNVML(root=False)
    assert gpuinfo.lock_target_mhz(nvml, nvml.gpu) == 1755
    assert gpuinfo.lock_target_mhz(nvml, nvml.gpu, 2500) == 1980  # never above the maximum
    refused = gpuinfo.lock_clocks(nvml, nvml.gpu)
    assert refused["locked_sm_mhz"] is None and "NoPermission" in refused["lock_error"]
    nvml.root = True
    assert gpuinfo.lock_clocks(nvml, nvml.gpu, 1500) == {"locked_sm_mhz": 1500} and nvml.locked == (1500, 1500)


def test_no_nvml_here_is_an_answer_not_a_failure() -> None:
    import torch

    if torch.cuda.is_available():  # pragma: no cover - GPU machines
        pytest.skip("a GPU is present")
    assert "error" in gpuinfo.runner_gpu(None)
    assert gpuinfo.run_clocks(None) is None
