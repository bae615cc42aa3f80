"""Resource limits of the process that runs submitted code: what they are, setting them, reading them back.

The child sets them on itself (``resource.setrlimit``, soft = hard, so submitted code cannot raise
them) after dropping its privileges and before it imports the submission; the judge reads them back
from ``/proc/<pid>/limits`` to record what was in force. Every process the submission starts
inherits them; each process has its own CPU-time and address-space counters.

What holds where:

- ``RLIMIT_NPROC`` counts every task (process or thread) of the child's user, or of its user
  namespace. It is enforced only for a user that is not root: the dedicated sandbox user (a judge
  running as root) or a non-root judge's user inside a user namespace of its own. Without either
  (isolation ``none``) it is not set, since it would count the whole account's processes. Where it
  does not hold (``isolation["limits"]["processes_enforced"]`` is false) a fork bomb is ended by
  the wall-time kill only.
- ``RLIMIT_AS`` (address space) is set on the CPU device only: GPU drivers reserve far more virtual
  memory than they use and fail under it.
- ``RLIMIT_FSIZE`` bounds each file written (a flood raises ``OSError: File too large``; Python
  ignores ``SIGXFSZ``); pipes and sockets are not files, logs are bounded by the judge instead.
"""

from __future__ import annotations

import math
import os
import resource
from dataclasses import asdict, dataclass
from typing import Any

from kernelrank.vocab import DeviceClass

GiB = 1 << 30


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - every Linux has sched_getaffinity
        return os.cpu_count() or 1


def _ram_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover - Linux answers both
        return 16 * GiB


@dataclass(frozen=True)
class SandboxLimits:
    """Limits for the child; ``None`` leaves a limit as inherited.

    Args:
        processes: tasks (processes and threads) of the child's user (``RLIMIT_NPROC``); default
            ``128 + 8 * cores``: torch's and OpenBLAS's thread pools plus parallel C++ builds.
        file_bytes: largest file the child may write (``RLIMIT_FSIZE``); the precompiled header of
            ``torch/extension.h`` is about 0.8 GB but is pre-built by the judge, not written here.
        open_files: open file descriptors (``RLIMIT_NOFILE``).
        address_space_bytes: virtual memory per process on the CPU device (``RLIMIT_AS``); default
            half the machine's RAM, at least 4 GiB. Not applied on CUDA.
        cpu_seconds: CPU time per process (``RLIMIT_CPU``); default from the time budgets, see
            :meth:`for_budget`. A backstop: the judge's wall-time kill comes first.
        disk_bytes: the job's whole disk: its working folder is a ``tmpfs`` of this size where
            the judge runs as root (:mod:`~kernelrank.runner.containment.jobdisk`); 2 GiB by default (a C++
            build with its objects takes a few hundred MB). Not an rlimit.
    """

    processes: int | None = None
    file_bytes: int | None = 1 * GiB
    open_files: int | None = 4096
    address_space_bytes: int | None = None
    cpu_seconds: int | None = None
    disk_bytes: int | None = 2 * GiB

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ValueError(f"{name} must be a positive int or None, got {value!r}")

    def resolved(self, device: str, budget_s: float) -> dict[str, int | None]:
        """The values to apply for a child on ``device`` living at most ``budget_s`` seconds of
        wall time (defaults filled in; ``None``: not set)."""
        cpus = _cpus()
        return {
            "processes": self.processes if self.processes is not None else 128 + 8 * cpus,
            "file_bytes": self.file_bytes,
            "open_files": self.open_files,
            "address_space_bytes": None if device != DeviceClass.cpu else (
                self.address_space_bytes if self.address_space_bytes is not None else max(4 * GiB, _ram_bytes() // 2)),
            "cpu_seconds": self.cpu_seconds if self.cpu_seconds is not None else int(math.ceil(budget_s * cpus)) + 30,
            "core_bytes": 0,
            "disk_bytes": self.disk_bytes,
        }


_RLIMITS = {
    "processes": resource.RLIMIT_NPROC,
    "file_bytes": resource.RLIMIT_FSIZE,
    "open_files": resource.RLIMIT_NOFILE,
    "address_space_bytes": resource.RLIMIT_AS,
    "cpu_seconds": resource.RLIMIT_CPU,
    "core_bytes": resource.RLIMIT_CORE,
}

#: Row names in ``/proc/<pid>/limits``.
_PROC_ROWS = {
    "Max processes": "processes",
    "Max file size": "file_bytes",
    "Max open files": "open_files",
    "Max address space": "address_space_bytes",
    "Max cpu time": "cpu_seconds",
    "Max core file size": "core_bytes",
}


def apply(values: dict[str, int | None]) -> None:
    """Set each given limit as soft and hard limit on this process (child side).

    A hard limit is only lowered: where the inherited one is already lower, it is kept.
    """
    for name, value in values.items():
        if value is None or name not in _RLIMITS:  # disk_bytes: a mount, not an rlimit
            continue
        which = _RLIMITS[name]
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY and hard < value:
            value = hard
        resource.setrlimit(which, (value, value))


def read(pid: int) -> dict[str, int | None]:
    """The soft limits in force for ``pid``, from ``/proc/<pid>/limits`` (judge side);
    ``None`` for unlimited. Empty when the process is gone."""
    try:
        with open(f"/proc/{pid}/limits", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    out: dict[str, int | None] = {}
    for line in lines[1:]:
        for row, name in _PROC_ROWS.items():
            if line.startswith(row):
                soft = line[len(row):].split()[0]
                out[name] = None if soft == "unlimited" else int(soft)
    return out


def as_record(values: dict[str, Any]) -> dict[str, Any]:
    """JSON-ready copy of limits for a result (names as in :class:`SandboxLimits`)."""
    return {k: values.get(k) for k in _RLIMITS}
