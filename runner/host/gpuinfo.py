"""Facts about a runner's GPU from NVML (``nvidia-ml-py``): for the heartbeat, its queue, and every run.

NVML answers without creating a CUDA context, so the runner's main process may ask it before the
worker's pool forks (torch's CUDA may not be initialised there). Every function takes the NVML
module as a parameter (``pynvml``, as :func:`load_nvml` returns it) so that the mapping from NVML's
answers to facts is tested with a fake NVML on machines without a GPU; only :func:`load_nvml`
and :func:`lock_clocks`'s effect need real hardware.

Which GPU: the runner's ``CUDA_VISIBLE_DEVICES`` (one runner per GPU) names it by index (with
``CUDA_DEVICE_ORDER=PCI_BUS_ID``, which the runner sets, CUDA's index is NVML's) or by UUID
(``GPU-...``, or ``MIG-...`` for a MIG slice) (:func:`nvml_target`).

Facts (:func:`gpu_facts`): name, UUID, compute capability, driver version and the CUDA version
the driver supports, memory, current and maximum SM and memory clocks, the power limit, MIG mode
(and the slice's profile for a MIG device), the device file's minor number, PCI bus id, and the
device queue the name maps to (:func:`kernelrank.vocab.gpu_queue_name`). :func:`clock_snapshot`
is what every run records (clocks and the reasons they are held down, at the run's start and
end); :func:`lock_clocks` locks the SM clock where the operator allows it
(``KERNELRANK_RUNNER_LOCK_CLOCKS``).

Source: NVML API reference (``nvmlDeviceGetClockInfo``, ``nvmlDeviceGetMigMode``,
``nvmlDeviceSetGpuLockedClocks``, ``nvmlDeviceGetCurrentClocksEventReasons``).
"""

from __future__ import annotations

from typing import Any

from kernelrank import vocab

#: ``nvmlClockType_t``: NVML_CLOCK_SM, NVML_CLOCK_MEM.
CLOCK_SM, CLOCK_MEM = 1, 2
#: Bits of ``nvmlDeviceGetCurrentClocksEventReasons`` (nvml.h ``nvmlClocksEventReason*``).
CLOCK_REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}
#: ``nvmlMemoryErrorType_t`` uncorrected; ``nvmlEccCounterType_t`` volatile (since the last
#: driver load) and aggregate (the GPU's life); ``nvmlPageRetirementCause_t`` double-bit ECC.
ECC_UNCORRECTED, ECC_VOLATILE, ECC_AGGREGATE, RETIRED_DOUBLE_BIT = 1, 0, 1, 1
#: ``nvmlComputeMode_t``: only Default lets the runner's judge and its children share the GPU.
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}


def nvml_target(visible: str | None) -> tuple[str, Any]:
    """How to find the runner's GPU in NVML from ``CUDA_VISIBLE_DEVICES``: ``("index", n)`` or
    ``("uuid", "GPU-..."/"MIG-...")``; the first entry of a list; index 0 when unset.

    Raises:
        ValueError: an entry that is neither an index nor a UUID (or an empty list: no GPU).
    """
    if visible is None:
        return ("index", 0)
    first = visible.split(",")[0].strip()
    if first.isdigit():
        return ("index", int(first))
    if first.startswith(("GPU-", "MIG-")):
        return ("uuid", first)
    raise ValueError(f"CUDA_VISIBLE_DEVICES={visible!r} names no GPU")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _maybe(nvml: Any, fn: str, *args: Any) -> Any:
    """``nvml.fn(*args)``, or ``None`` where the GPU does not support it (NVMLError)."""
    try:
        return getattr(nvml, fn)(*args)
    except Exception as e:  # noqa: BLE001 - pynvml raises NVMLError subclasses per code
        if type(e).__name__.startswith("NVMLError") or isinstance(e, (AttributeError, NotImplementedError)):
            return None
        raise


def handle_for(nvml: Any, visible: str | None) -> Any:
    """The NVML handle of the runner's GPU (see :func:`nvml_target`)."""
    kind, key = nvml_target(visible)
    if kind == "index":
        return nvml.nvmlDeviceGetHandleByIndex(key)
    return nvml.nvmlDeviceGetHandleByUUID(key)


def gpu_facts(nvml: Any, handle: Any) -> dict[str, Any]:
    """The heartbeat's GPU facts for ``handle`` (see the module docstring); a fact the GPU does not
    report is ``None``. Clocks in MHz, memory in bytes, power in W."""
    is_mig = bool(_maybe(nvml, "nvmlDeviceIsMigDeviceHandle", handle))
    parent = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle) if is_mig else handle
    name = _text(nvml.nvmlDeviceGetName(handle))
    cc = _maybe(nvml, "nvmlDeviceGetCudaComputeCapability", parent)
    memory = _maybe(nvml, "nvmlDeviceGetMemoryInfo", handle)
    mig = _maybe(nvml, "nvmlDeviceGetMigMode", parent)
    power_mw = _maybe(nvml, "nvmlDeviceGetPowerManagementLimit", parent)
    cuda_driver = _maybe(nvml, "nvmlSystemGetCudaDriverVersion")
    pci = _maybe(nvml, "nvmlDeviceGetPciInfo", parent)
    facts: dict[str, Any] = {
        "name": name,
        "uuid": _text(nvml.nvmlDeviceGetUUID(handle)),
        "compute_capability": f"{cc[0]}.{cc[1]}" if cc else None,
        "driver_version": _text(nvml.nvmlSystemGetDriverVersion()),
        "cuda_driver_version": f"{cuda_driver // 1000}.{cuda_driver % 1000 // 10}" if cuda_driver else None,
        "memory_bytes": int(memory.total) if memory is not None else None,
        "sm_clock_mhz": _maybe(nvml, "nvmlDeviceGetClockInfo", parent, CLOCK_SM),
        "mem_clock_mhz": _maybe(nvml, "nvmlDeviceGetClockInfo", parent, CLOCK_MEM),
        "sm_clock_max_mhz": _maybe(nvml, "nvmlDeviceGetMaxClockInfo", parent, CLOCK_SM),
        "mem_clock_max_mhz": _maybe(nvml, "nvmlDeviceGetMaxClockInfo", parent, CLOCK_MEM),
        "power_limit_w": power_mw / 1000 if power_mw is not None else None,
        "mig_mode": ("unsupported" if mig is None else "enabled" if mig[0] else "disabled"),
        "mig_device": is_mig,
        "minor_number": _maybe(nvml, "nvmlDeviceGetMinorNumber", parent),
        "pci_bus_id": _text(pci.busId) if pci is not None else None,
    }
    if mig is not None and mig[0] != mig[1]:
        facts["mig_mode_pending"] = "enabled" if mig[1] else "disabled"
    facts["queue"] = vocab.gpu_queue_name(name)
    return facts


def clock_reasons(mask: int | None) -> list[str] | None:
    """Names of the bits set in a clocks-event-reasons mask (unknown bits as hex)."""
    if mask is None:
        return None
    names = [n for bit, n in CLOCK_REASONS.items() if mask & bit]
    rest = mask & ~sum(CLOCK_REASONS)
    return names + ([hex(rest)] if rest else [])


def clock_now(nvml: Any, handle: Any) -> tuple[int | None, int | None]:
    """``(SM clock in MHz, clocks-event-reasons mask)`` now (:data:`CLOCK_REASONS`); ``None`` for
    what NVML does not report. The mask comes from ``nvmlDeviceGetCurrentClocksEventReasons``, or
    from its older name ``...ThrottleReasons`` on drivers without it."""
    mask = _maybe(nvml, "nvmlDeviceGetCurrentClocksEventReasons", handle)
    if mask is None:
        mask = _maybe(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", handle)
    return _maybe(nvml, "nvmlDeviceGetClockInfo", handle, CLOCK_SM), mask


def clock_snapshot(nvml: Any, handle: Any) -> dict[str, Any]:
    """SM and memory clocks now (MHz) and why they are held down, for a run's record."""
    sm, mask = clock_now(nvml, handle)
    return {"sm_mhz": sm, "mem_mhz": _maybe(nvml, "nvmlDeviceGetClockInfo", handle, CLOCK_MEM),
            "reasons": clock_reasons(mask)}


def lock_target_mhz(nvml: Any, handle: Any, requested: int = 0) -> int | None:
    """The SM clock to lock at (MHz): ``requested`` when given, else the GPU's default
    applications clock (its base clock, sustainable at its power limit, so runs are not at the
    mercy of boost), capped by its maximum; ``None`` when NVML gives neither."""
    top = _maybe(nvml, "nvmlDeviceGetMaxClockInfo", handle, CLOCK_SM)
    target = requested or _maybe(nvml, "nvmlDeviceGetDefaultApplicationsClock", handle, CLOCK_SM)
    if not target:
        return None
    return min(int(target), int(top)) if top else int(target)


def lock_clocks(nvml: Any, handle: Any, requested: int = 0) -> dict[str, Any]:
    """Lock the SM clock (``nvmlDeviceSetGpuLockedClocks``, min = max): ``{"locked_sm_mhz": n}``,
    or ``{"locked_sm_mhz": None, "lock_error": why}`` (not root, not supported)."""
    target = lock_target_mhz(nvml, handle, requested)
    if target is None:
        return {"locked_sm_mhz": None, "lock_error": "NVML reports no clock to lock at"}
    try:
        nvml.nvmlDeviceSetGpuLockedClocks(handle, target, target)
    except Exception as e:  # noqa: BLE001 - NVMLError_NoPermission, NotSupported: reported, not fatal
        return {"locked_sm_mhz": None, "lock_error": f"{type(e).__name__}: {e}"[:300]}
    return {"locked_sm_mhz": target}


def other_processes(nvml: Any, handle: Any, own_pids: set[int] | frozenset[int]) -> list[dict[str, Any]]:
    """Compute processes on the GPU that are not the runner's (``own_pids``: the runner, its judge
    and the job's children, as the host's PID namespace numbers them): ``[{"pid", "used_bytes"}]``
    (``used_bytes`` ``None`` where NVML cannot say, e.g. inside a container); ``[]`` where NVML
    does not list processes (``nvmlDeviceGetComputeRunningProcesses``)."""
    procs = _maybe(nvml, "nvmlDeviceGetComputeRunningProcesses", handle) or []
    return [{"pid": int(p.pid), "used_bytes": getattr(p, "usedGpuMemory", None)}
            for p in procs if int(p.pid) not in own_pids]


def health(nvml: Any, handle: Any) -> dict[str, Any]:
    """The GPU's health for the self-test: uncorrected ECC errors (volatile, aggregate), pages
    retired for double-bit errors and whether a retirement is pending (a reset is due), the compute
    mode (:data:`COMPUTE_MODES`) and persistence mode; a fact the GPU does not report is ``None``
    (e.g. ECC on a GPU without it). Source: NVML API reference (``nvmlDeviceGetTotalEccErrors``,
    ``nvmlDeviceGetRetiredPages``, ``nvmlDeviceGetComputeMode``)."""
    retired = _maybe(nvml, "nvmlDeviceGetRetiredPages", handle, RETIRED_DOUBLE_BIT)
    pending = _maybe(nvml, "nvmlDeviceGetRetiredPagesPendingStatus", handle)
    mode = _maybe(nvml, "nvmlDeviceGetComputeMode", handle)
    persistence = _maybe(nvml, "nvmlDeviceGetPersistenceMode", handle)
    return {
        "ecc_uncorrected_volatile": _maybe(nvml, "nvmlDeviceGetTotalEccErrors", handle, ECC_UNCORRECTED, ECC_VOLATILE),
        "ecc_uncorrected_aggregate": _maybe(nvml, "nvmlDeviceGetTotalEccErrors", handle, ECC_UNCORRECTED, ECC_AGGREGATE),
        "retired_pages": len(retired) if retired is not None else None,
        "retired_pending": bool(pending) if pending is not None else None,
        "compute_mode": COMPUTE_MODES.get(mode, str(mode)) if mode is not None else None,
        "persistence_mode": bool(persistence) if persistence is not None else None,
    }


def lock_runner_clocks(visible: str | None, requested_mhz: int = 0) -> dict[str, Any]:  # pragma: no cover - GPU-only
    """:func:`lock_clocks` on the runner's GPU, unlocked again when the process exits."""
    import atexit

    nvml = load_nvml()
    if nvml is None:
        return {"locked_sm_mhz": None, "lock_error": "NVML unavailable"}
    handle = handle_for(nvml, visible)
    outcome = lock_clocks(nvml, handle, requested_mhz)
    if outcome.get("locked_sm_mhz"):
        atexit.register(lambda: nvml.nvmlDeviceResetGpuLockedClocks(handle))
    return outcome


def load_nvml() -> Any:  # pragma: no cover - GPU-only: needs the NVIDIA driver's libnvidia-ml
    """``pynvml`` initialised, or ``None`` where NVML cannot be loaded (no NVIDIA driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # noqa: BLE001 - ImportError, NVMLError_LibraryNotFound, DriverNotLoaded
        return None


def runner_gpu(visible: str | None) -> dict[str, Any]:
    """:func:`gpu_facts` of the runner's GPU, or ``{"error": why}`` where NVML cannot say."""
    nvml = load_nvml()
    if nvml is None:
        return {"error": "NVML unavailable (no NVIDIA driver, or nvidia-ml-py missing)"}
    try:  # pragma: no cover - GPU-only
        return gpu_facts(nvml, handle_for(nvml, visible))
    except Exception as e:  # noqa: BLE001 # pragma: no cover - GPU-only
        return {"error": f"{type(e).__name__}: {e}"[:300]}


def run_clocks(visible: str | None) -> dict[str, Any] | None:
    """:func:`clock_snapshot` of the runner's GPU, or ``None`` without NVML."""
    nvml = load_nvml()
    if nvml is None:
        return None
    try:  # pragma: no cover - GPU-only
        return clock_snapshot(nvml, handle_for(nvml, visible))
    except Exception:  # noqa: BLE001 # pragma: no cover - GPU-only
        return None
