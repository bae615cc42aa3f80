"""Device classes (``cpu``, ``cuda``) and a description of the machine a result was measured on."""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

from kernelrank.vocab import DeviceClass


@dataclass(frozen=True)
class DeviceInfo:
    """What a timing was measured on; part of every result.

    ``name`` is the CPU model or the GPU's name; ``memory_bytes`` the host or device memory;
    ``threads`` the intra-op threads used on the CPU (0 on CUDA); on CUDA ``driver`` is the NVIDIA
    driver's version (from NVML) and ``cuda_runtime`` the CUDA version torch was built with (it
    was reported as the driver before).
    """

    device: str
    name: str
    memory_bytes: int
    threads: int
    torch: str
    triton: str | None
    driver: str | None = None
    cuda_runtime: str | None = None
    #: the interpreter's version (``platform.python_version``)
    python: str = field(default_factory=platform.python_version)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def detect_device() -> str:
    """``"cuda"`` when a CUDA device is usable, else ``"cpu"`` (what ``--device auto`` picks).

    Does not initialise CUDA in a way that breaks later forks: it asks ``torch.cuda.is_available``,
    which uses NVML where it can.
    """
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def cpu_threads(requested: int = 0) -> int:
    """Intra-op threads for the CPU device: ``requested``, or every core this process may use."""
    if requested > 0:
        return requested
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@lru_cache
def device_info(device: str, threads: int = 0) -> DeviceInfo:
    """Describe ``device`` on this machine.

    Raises:
        RuntimeError: ``device`` is ``"cuda"`` and no CUDA device is usable.
    """
    import torch

    try:
        import triton

        triton_version: str | None = triton.__version__
    except ImportError:  # pragma: no cover - triton is a dependency
        triton_version = None
    if device == DeviceClass.cpu:
        return DeviceInfo("cpu", cpu_model(), _host_memory(), cpu_threads(threads), torch.__version__, triton_version)
    if device == DeviceClass.cuda:  # pragma: no cover - GPU-only
        if not torch.cuda.is_available():
            raise RuntimeError("device cuda requested but torch sees no CUDA device")
        from kernelrank.runner.host import gpuinfo

        props = torch.cuda.get_device_properties(0)
        facts = gpuinfo.runner_gpu(os.environ.get("CUDA_VISIBLE_DEVICES"))
        return DeviceInfo("cuda", props.name, int(props.total_memory), 0, torch.__version__, triton_version,
                          driver=facts.get("driver_version"), cuda_runtime=torch.version.cuda)
    raise ValueError(f"unknown device {device!r}")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # pragma: no cover - not Linux
        pass
    return platform.processor() or platform.machine()


def _host_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return 0
