"""What a runner remembers of its self-tests: the last pass per runner version, host and device,
and how long each step took here.

A restarted runner whose runner version, host and device are unchanged since a quick or full
self-test passed runs only the probes (``selftest`` scope ``probes``: the device initialises in
the sandbox and the host rows), seconds instead of minutes. What "unchanged" means is
:func:`fingerprint`: the runner's code and problems (a digest of every file of the ``kernelrank``
package, its runner included, of the problems and of the reference kernels), the Python, PyTorch and Triton versions, the host (its
name, kernel, CPU model and count, memory) and the device (on CUDA, the GPU's model, UUID and
driver). Any change is a new fingerprint, so the quick self-test runs again. A pass is kept for
``KERNELRANK_RUNNER_SELF_TEST_CACHE_HOURS`` (0: never kept).

Files (JSON) under ``KERNELRANK_RUNNER_CACHE_DIR`` (default ``$XDG_CACHE_HOME/kernelrank``,
else ``~/.cache/kernelrank``): ``self-test-<device>.json`` (the pass and its fingerprint) and
``self-test-seconds-<device>.json`` (each step's last seconds, by label, for estimates). A
file that cannot be read or written is treated as absent: the cache never stops a runner.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

import kernelrank
from kernelrank import vocab
from kernelrank.runner.host.devices import cpu_model


def cache_dir() -> Path:
    """Where the runner's cache lives (see the module docstring)."""
    from kernelrank.settings import get_settings

    configured = get_settings().runner_cache_dir
    if configured is not None:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernelrank"


def _code_digest() -> str:
    """SHA-256 over the path and bytes of every file of the ``kernelrank`` package (its runner
    included), of the problems and of the reference kernels (compiled caches left out), in path order."""
    import kernelrank.runner
    from kernelrank.settings import get_settings

    settings = get_settings()
    digest = hashlib.sha256()
    roots = (Path(kernelrank.__file__).resolve().parent, Path(kernelrank.runner.__file__).resolve().parent,
             settings.problems_dir.resolve(), settings.reference_kernels_dir.resolve())
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                digest.update(str(path.relative_to(root)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def _package_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "absent"


def fingerprint(device: str) -> dict[str, Any]:
    """The facts a cached pass stands on (see the module docstring); cheap (no torch import, no
    device initialised: NVML on CUDA)."""
    facts: dict[str, Any] = {
        "kernelrank": kernelrank.__version__, "code": _code_digest(), "python": sys.version.split()[0],
        "torch": _package_version("torch"), "triton": _package_version("triton"), "host": platform.node(),
        "kernel": platform.release(), "cpu": cpu_model(), "cpus": os.cpu_count(),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "device": device,
    }
    if device == vocab.DeviceClass.cuda:  # pragma: no cover - GPU-only: the GPU's identity from NVML
        from kernelrank.runner.host.gpuinfo import runner_gpu

        gpu = runner_gpu(os.environ.get("CUDA_VISIBLE_DEVICES"))
        facts["gpu"] = {k: gpu.get(k) for k in ("name", "uuid", "driver_version")}
    return facts


def _read(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _write(path: Path, value: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(value, indent=1), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # an unwritable cache only costs the next start its quick self-test


def _pass_file(device: str) -> Path:
    return cache_dir() / f"self-test-{device}.json"


def load_pass(device: str, now: dt.datetime | None = None) -> dict[str, Any] | None:
    """The cached passing summary for ``device`` when its fingerprint is this host's now and it
    is younger than the configured hours; else ``None``."""
    from kernelrank.settings import get_settings

    hours = get_settings().runner_self_test_cache_hours
    found = _read(_pass_file(device))
    if hours <= 0 or found is None or found.get("fingerprint") != fingerprint(device):
        return None
    summary = found.get("summary")
    try:
        at = dt.datetime.fromisoformat(str(summary["at"]))
    except (TypeError, KeyError, ValueError):
        return None
    age_s = ((now or dt.datetime.now(dt.timezone.utc)) - at).total_seconds()
    return summary if summary.get("status") == vocab.Verdict.passed and 0 <= age_s <= hours * 3600 else None


def store_pass(device: str, summary: dict[str, Any]) -> None:
    """Keep a passing summary for ``device`` with this host's fingerprint (a failed one is not kept)."""
    if summary.get("status") == vocab.Verdict.passed:
        _write(_pass_file(device), {"fingerprint": fingerprint(device), "summary": summary})


def drop_pass(device: str) -> None:
    """Forget the cached pass for ``device`` (after a failed self-test)."""
    try:
        _pass_file(device).unlink()
    except OSError:
        pass


def _seconds_file(device: str) -> Path:
    return cache_dir() / f"self-test-seconds-{device}.json"


def recorded_seconds(device: str) -> dict[str, float]:
    """Each step's last recorded seconds on this host, by step label."""
    found = _read(_seconds_file(device)) or {}
    return {k: float(v) for k, v in found.items() if isinstance(v, (int, float))}


def record_seconds(device: str, seconds: dict[str, float]) -> None:
    """Merge the seconds of a run's steps into the record (a step's latest time wins)."""
    if seconds:
        _write(_seconds_file(device), {**recorded_seconds(device), **{k: round(v, 2) for k, v in seconds.items()}})
