"""NVML facts for the heartbeat and every run, mapped from a fake NVML (no GPU here)."""

from __future__ import annotations

from typing import Any

import pytest

from kernelrank.runner.host import gpuinfo


from tests.runner.simnvml import NVMLError_NotSupported, SimNVML as FakeNVML


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


def test_other_processes_leave_out_the_runners_own() -> None:
    nvml = FakeNVML()
    nvml.processes = [(100, 1 << 30), (200, 2 << 30), (300, None)]  # type: ignore[list-item]
    others = gpuinfo.other_processes(nvml, nvml.gpu, {100})
    assert others == [{"pid": 200, "used_bytes": 2 << 30}, {"pid": 300, "used_bytes": None}]


def test_health_reads_ecc_retired_pages_and_compute_mode() -> None:
    nvml = FakeNVML()
    assert gpuinfo.health(nvml, nvml.gpu) == {
        "ecc_uncorrected_volatile": 0, "ecc_uncorrected_aggregate": 0, "retired_pages": 0,
        "retired_pending": False, "compute_mode": "default", "persistence_mode": True}
    nvml.ecc, nvml.retired, nvml.retired_pending, nvml.compute_mode = {"volatile": 2, "aggregate": 5}, 3, True, 3
    h = gpuinfo.health(nvml, nvml.gpu)
    assert (h["ecc_uncorrected_volatile"], h["ecc_uncorrected_aggregate"], h["retired_pages"]) == (2, 5, 3)
    assert h["retired_pending"] and h["compute_mode"] == "exclusive_process"
