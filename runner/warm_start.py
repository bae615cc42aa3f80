"""The runner's warm start: one zygote (:mod:`kernelrank.runner.submission.zygote`) per pool process
and device, started as soon as the runner's start-up is over rather than by its first job, and
the next evaluation's first process started ahead (:func:`spare`).

Started by the first job, the zygote's import of torch (1.5 s on a 2-core VM), the pool process's
own import of the judge (torch again) and the first child's start made a test verdict right after
``kernelrank serve`` said "ready" 3.5 s, not 0.15 s. It starts once the self-test is over, and
the runner's first heartbeat (which probes its ceilings and tells the server it is ready) waits
for it: its imports beside the self-test or the probes would disturb their figures.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import threading
from typing import Any

log = logging.getLogger("kernelrank.runner")

_zygotes: dict[tuple[str, int], Any] = {}
_spares: dict[str, Any] = {}
_zygote_lock = threading.Lock()
#: Set by the worker's main process once its start-up is over (:func:`started`); made before the
#: pool forks (:func:`prepare`), so its pool processes wait on the same event.
_ready: Any = None
#: Set by a pool process that will warm up (``_warming``), and once it has (``_warm``): the main
#: process says "ready" only then (:func:`wait_warm`).
_warming: Any = None
_warm: Any = None


def prepare() -> None:
    """Main process, before the pool forks: make the events."""
    global _ready, _warming, _warm
    if _ready is None:
        _ready, _warming, _warm = multiprocessing.Event(), multiprocessing.Event(), multiprocessing.Event()


def wait_warm(timeout_s: float) -> bool:
    """Main process, after :func:`started`: wait (at most ``timeout_s`` seconds) until a pool
    process that began to warm up has its zygote ready and the judge imported; ``True`` at once
    where none began (warm starts off, or a pool without such processes)."""
    if _warming is None or not _warming.is_set():
        return True
    return bool(_warm.wait(timeout_s))


def started() -> None:
    """Main process: the start-up (self-test, ceilings) is over; pool processes may start their zygote."""
    if _ready is not None:
        _ready.set()


def start_when_ready(device: str, settings: Any, timeout_s: float = 3600.0) -> threading.Thread | None:
    """Pool process: start this process's zygote for ``device`` in a thread once the start-up is
    over (:func:`started`; at most ``timeout_s`` seconds later); ``None`` when warm starts are off
    or no start-up event was made."""
    if not settings.runner_warm_start or _ready is None:
        return None
    _warming.set()

    def start() -> None:
        try:
            if _ready.wait(timeout_s):
                zygote = warm_zygote(device, settings)
                # and the judge's own imports (torch among them), which the first job made otherwise
                import kernelrank.runner.judge.harness  # noqa: F401

                if zygote is not None:
                    zygote.wait_ready(120.0)
        finally:
            _warm.set()

    thread = threading.Thread(target=start, name="kernelrank-warm-start", daemon=True)
    thread.start()
    return thread


def warm_zygote(device: str, settings: Any) -> Any:
    """This process's zygote for ``device`` (started on first use, again if it died), or
    ``None`` when warm starts are off or the zygote cannot start (the run then starts cold)."""
    if not settings.runner_warm_start:
        return None
    from kernelrank.runner.host.devices import cpu_threads
    from kernelrank.runner.submission.zygote import Zygote
    from kernelrank.vocab import DeviceClass

    threads = cpu_threads(settings.cpu_threads) if device == DeviceClass.cpu else 0
    with _zygote_lock:
        zygote = _zygotes.get((device, threads))
        if zygote is not None and zygote.matches(device, threads):
            return zygote
        if zygote is not None:
            zygote.close()
        try:
            zygote = _zygotes[(device, threads)] = Zygote.start(device, threads)
        except OSError as e:  # pragma: no cover - the interpreter itself could not start
            log.warning("warm start unavailable (%s): children start cold", type(e).__name__)
            return None
        return zygote


def spare(device: str, settings: Any) -> Any:
    """This process's :class:`~kernelrank.runner.containment.spare.Spare` for ``device`` (made on
    first use, closed when the process exits), or ``None`` when warm starts are off."""
    if not settings.runner_warm_start:
        return None
    from kernelrank.runner.containment.spare import Spare

    with _zygote_lock:
        held = _spares.get(device)
        if held is None:
            if not _spares:
                atexit.register(close_spares)
            held = _spares[device] = Spare()
        return held


def close_spares() -> None:
    """Close every process started ahead in this process (at its exit: their folders and groups
    would otherwise wait for the next runner's sweep)."""
    with _zygote_lock:
        held = list(_spares.values())
        _spares.clear()
    for s in held:
        s.close()
