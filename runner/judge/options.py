"""How to run an evaluation (:class:`EvalOptions`): what a caller of
:func:`~kernelrank.runner.judge.harness.evaluate` may set besides the problem, source, mode and device."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelrank.runner.containment.rlimits import SandboxLimits


@dataclass(frozen=True)
class EvalOptions:
    """How to run an evaluation (not what: that is the problem, the source, the mode, the device).

    Args:
        threads: intra-op threads on the CPU device (0: every core this process may use).
        scratch_dir: parent of the child's private working folder (default: system temp).
        log_limit: bytes kept of the submission's stdout and of its stderr.
        secret: secret mixed into leaderboard seeds; ``None`` draws a fresh random one.
        trace_dir: where profile mode copies the Chrome trace (``None``: not kept).
        isolation: ``"auto"`` (the strongest method that works here), ``"setuid"``, ``"userns"``
            or ``"none"``; see :mod:`kernelrank.runner.containment.isolation`.
        require_network_isolation: refuse (status ``rejected``, nothing of the submission run)
            when the child's network cannot be cut; runners set it for leaderboard jobs.
        limits: resource limits of the child (:class:`~kernelrank.runner.containment.rlimits.SandboxLimits`).
        hidden_paths: folders covered in the child's view besides the judge's home and the job
            folders' parent (e.g. the service's data folder).
        zygote: a :class:`~kernelrank.runner.submission.zygote.Zygote` to fork children from (warm start:
            torch already imported); ``None`` or one for another device starts each child cold.
        require_containment: refuse (status ``rejected``, nothing of the submission run) when
            the child cannot be put in a cgroup frozen outside its calls
            (:mod:`~kernelrank.runner.containment.cgroups`); runners set it for leaderboard jobs.
        calibration_ns: per benchmark case of the device, the reference time (ns) the scores of
            this problem revision and device queue are based on (the service's calibration,
            ``kernelrank.services.calibration``); ``None``: this run's own reference times.
        processes: pairs of processes timing each benchmark case, overriding the problem's
            ``timing.<device>.processes`` and the device's default; checks of verdicts rather
            than of timing statistics (the test suite) use 1: one process of each side.
        device_memory: how the judge reads the device's memory to hold each child to the
            problem's ``device_memory_mib`` (a :class:`~kernelrank.runner.judge.devmem.DeviceMemoryMeter`);
            ``None``: NVML on ``cuda``, nothing on the CPU (which has no device memory).
        spare: where the evaluation's first process may have been started ahead
            (:class:`~kernelrank.runner.containment.spare.Spare`, :func:`start_spare`); ``None``:
            every process starts when the evaluation needs it.
        builds: where the submission's C++/CUDA build is kept for its later processes
            (:class:`~kernelrank.runner.containment.buildcache.BuildCache`); a runner passes one per
            job, so that the secret run starts from the public run's build; ``None``: one for this
            evaluation only (its further timed processes still start from its first one's).
    """

    threads: int = 0
    scratch_dir: Path | None = None
    log_limit: int = 64 * 1024
    secret: int | None = None
    trace_dir: Path | None = None
    isolation: str = "auto"
    require_network_isolation: bool = False
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    hidden_paths: tuple[Path, ...] = ()
    zygote: Any = None
    require_containment: bool = False
    calibration_ns: tuple[float, ...] | None = None
    processes: int | None = None
    device_memory: Any = None
    spare: Any = None
    builds: Any = None
