"""The GPU device files a child may reach: which exist on this host, and which a job's child must
not reach (covered by ``/dev/null`` in its view, :func:`~kernelrank.runner.containment.isolation.enter`)."""

from __future__ import annotations

import functools
import os
import stat

from kernelrank.vocab import DeviceClass


def gpu_files_to_hide(device: str, files: list[str], keep_minor: int | None) -> tuple[str, ...]:
    """The GPU device files a child must not reach: for a CPU job every one (a CPU leaderboard is
    not run on a GPU); for a CUDA job the other GPUs' ``/dev/nvidia<N>`` (``keep_minor`` is the
    runner's GPU's minor number, from NVML; ``None``: it could not be told, nothing is hidden).
    The driver's shared files (``nvidiactl``, ``nvidia-uvm``, ``nvidia-modeset``, MIG capabilities
    under ``/dev/nvidia-caps``) stay: every CUDA process needs them."""
    if device == DeviceClass.cpu:
        return tuple(files)
    if keep_minor is None:
        return ()
    out = []
    for f in files:
        name = os.path.basename(f)
        if f.startswith("/dev/nvidia") and name[len("nvidia"):].isdigit() and int(name[len("nvidia"):]) != keep_minor:
            out.append(f)
    return tuple(out)


@functools.lru_cache(maxsize=1)
def runner_gpu_minor() -> int | None:
    """The minor number of the runner's GPU's device file (``/dev/nvidia<N>``), from NVML; ``None``
    without NVML (then no GPU device file is hidden from CUDA jobs)."""
    from kernelrank.runner.host import gpuinfo

    minor = gpuinfo.runner_gpu(os.environ.get("CUDA_VISIBLE_DEVICES")).get("minor_number")
    return int(minor) if isinstance(minor, int) else None


def gpu_devices() -> list[str]:
    """Character devices of GPUs (NVIDIA, AMD's ``kfd`` and render nodes) the child may need."""
    names = [os.path.join("/dev", d) for d in os.listdir("/dev") if d.startswith(("nvidia", "kfd"))]
    if os.path.isdir("/dev/dri"):
        names += [os.path.join("/dev/dri", d) for d in os.listdir("/dev/dri") if d.startswith("render")]
    found = []
    for name in sorted(names):
        try:
            if stat.S_ISCHR(os.stat(name).st_mode):
                found.append(name)
        except OSError:
            pass
    return found
