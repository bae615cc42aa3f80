"""A runner's ceilings that hold still: the best of its repeated probes, refreshed while it is idle,
stored with their spread and the time each was taken.

One probe (:func:`kernelrank.runner.host.ceilings.measure`, in a subprocess) reads low whenever
something else shares the machine: on this project's busy 2-core VMs, float32 matmul read 15.1
GFLOP/s in a service's runner against 42.7 in a quiet ``eval``, 2-3x apart, so roofline shares
were not comparable between runs and a physics floor (:data:`kernelrank.roofline.FLOOR_MARGIN`)
would hold honest kernels. A ceiling is what the machine *can* reach, so the estimate is the best
of the last :data:`KEEP` probes per figure (:func:`merge`); old probes age out, so a machine that
really got slower is followed after :data:`KEEP` refreshes. The record survives restarts (a file
in the runner's cache, per host, device queue and thread count).

Probes never overlap a job: every job holds a shared lock on the runner's busy file
(:func:`busy`); a refresh takes it exclusively without waiting (:func:`refresh_if_idle`), and a
job that arrives meanwhile waits the few seconds the probe takes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

log = logging.getLogger("kernelrank.runner")

#: Probes per figure whose best is the ceiling (older ones age out).
KEEP = 8
#: Seconds one probe may take (the start-up measurement's limit).
PROBE_TIMEOUT_S = 300


def merge(previous: dict[str, Any] | None, probe: dict[str, Any], at: str) -> dict[str, Any]:
    """The ceilings after one more probe: per figure (``copy_gbps``, each dtype of
    ``matmul_tflops``) the best of the last :data:`KEEP` probes' values, with ``spread`` (the
    relative range of those values, ``(best - worst) / best``: 0 when they agree), ``best_at`` (when
    the best was taken, ISO 8601) and ``history`` (``[[at, value], ...]``, oldest first); ``probes``
    counts every probe merged, ``measured_at`` is the latest. Pure: no clock, no I/O.

    Args:
        previous: the record so far (:func:`merge`'s result), or ``None``.
        probe: one measurement (:func:`~kernelrank.runner.host.ceilings.measure`'s result).
        at: when the probe was taken (ISO 8601, UTC).
    """
    prev_hist = (previous or {}).get("history") or {}

    def figure(old: list[Any] | None, value: Any) -> list[list[Any]]:
        kept = [list(x) for x in (old or []) if isinstance(x, (list, tuple)) and len(x) == 2]
        if isinstance(value, (int, float)) and value > 0:
            kept.append([at, float(value)])
        return kept[-KEEP:]

    history = {"copy_gbps": figure(prev_hist.get("copy_gbps"), probe.get("copy_gbps")), "matmul_tflops": {}}
    rates = dict(probe.get("matmul_tflops") or {})
    for dtype in sorted(set(rates) | set(prev_hist.get("matmul_tflops") or {})):
        history["matmul_tflops"][dtype] = figure((prev_hist.get("matmul_tflops") or {}).get(dtype), rates.get(dtype))

    def best(kept: list[list[Any]]) -> tuple[float | None, str | None, float | None]:
        if not kept:
            return None, None, None
        top = max(kept, key=lambda x: x[1])
        low = min(x[1] for x in kept)
        return top[1], top[0], (top[1] - low) / top[1]

    copy, copy_at, copy_spread = best(history["copy_gbps"])
    matmul = {d: best(k) for d, k in history["matmul_tflops"].items() if k}
    return {**{k: v for k, v in probe.items() if k not in ("copy_gbps", "matmul_tflops")},
            "copy_gbps": copy, "matmul_tflops": {d: b[0] for d, b in matmul.items()},
            "best_at": {"copy_gbps": copy_at, "matmul_tflops": {d: b[1] for d, b in matmul.items()}},
            "spread": {"copy_gbps": copy_spread, "matmul_tflops": {d: b[2] for d, b in matmul.items()}},
            "history": history, "probes": int((previous or {}).get("probes", 0)) + 1, "measured_at": at,
            "host": socket.gethostname()}


def probe_args(queue: str) -> tuple[str, int]:
    """``(device class, threads)`` a probe of ``queue``'s device takes: on the CPU the threads the
    judge gives a kernel (``settings.cpu_threads``), on a GPU 0."""
    from kernelrank.runner.host.devices import cpu_threads
    from kernelrank.settings import get_settings
    from kernelrank.vocab import DeviceClass, device_class

    cls = device_class(queue)
    return cls, cpu_threads(get_settings().cpu_threads) if cls == DeviceClass.cpu else 0


def record_path(queue: str, threads: int) -> Path:
    """The record's file in the runner's cache (:func:`~kernelrank.runner.host.selftest_cache.cache_dir`)."""
    from kernelrank.runner.host.selftest_cache import cache_dir

    return cache_dir() / f"ceilings-{queue}-{threads}.json"


def load(path: Path, device_name: str | None = None) -> dict[str, Any] | None:
    """The stored record, or ``None`` when absent, unreadable, of another host, or of another
    device (``device_name`` given and different: a GPU swapped)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("host") != socket.gethostname():
        return None
    if device_name is not None and record.get("name") != device_name:
        return None
    return record


def _store(path: Path, record: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:  # a read-only cache: the ceilings hold for this process only
        log.warning("ceilings not stored: %s", type(e).__name__)


def probe(device_class: str, threads: int) -> dict[str, Any] | None:
    """One measurement in a subprocess (no CUDA or OpenMP state reaches the runner), or ``None``
    when it failed (logged)."""
    argv = [sys.executable, "-m", "kernelrank.runner.host.ceilings", "--device", device_class, "--threads", str(threads)]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        log.warning("ceilings not measured: %s", type(e).__name__)
        return None


def probe_and_merge(queue: str, device_class: str, threads: int) -> dict[str, Any] | None:
    """Probe once, merge into the stored record and store it; the record, or the stored one
    (``None`` without any) when the probe failed."""
    path = record_path(queue, threads)
    measured = probe(device_class, threads)
    previous = load(path, (measured or {}).get("name"))
    if measured is None:
        return previous
    record = merge(previous, measured, dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    _store(path, record)
    return record


def busy_path(queue: str) -> Path:
    """The runner's busy file (one per device queue on a host)."""
    from kernelrank.runner.host.selftest_cache import cache_dir

    return cache_dir() / f"busy-{queue}.lock"


@contextlib.contextmanager
def busy(queue: str) -> Iterator[None]:
    """Hold the busy file's shared lock while a job runs (jobs of several runners on one queue
    do not wait for each other; a probe waits for all of them). Where the file cannot be opened
    the job runs unlocked (a refresh then cannot start: it needs the file too)."""
    try:
        busy_path(queue).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(busy_path(queue), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # waits while a probe holds it (seconds)
        yield
    finally:
        os.close(fd)


def refresh_if_idle(queue: str, device_class: str, threads: int) -> dict[str, Any] | None:
    """Probe and merge (:func:`probe_and_merge`) only while no job runs: the busy file's lock
    taken exclusively without waiting; ``None`` when a job runs (or the file cannot be opened)."""
    try:
        busy_path(queue).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(busy_path(queue), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return None  # a job runs: try at the next heartbeat
        return probe_and_merge(queue, device_class, threads)
    finally:
        os.close(fd)
