"""A child started ahead of its evaluation: the runner starts the next evaluation's first process
while it is idle, so that a verdict does not wait for it.

A contained child's start (job disk, cgroups, namespaces, the fork into PID 1, the read-only view)
was a quarter of a test verdict's time (figures: bench/README.md, *The service*). A
:class:`Spare` holds one such child, started with no
submission in it: its folder has no ``submission.py`` until an evaluation takes it
(:meth:`~kernelrank.runner.containment.sandbox.SubmissionProcess.assign`), and it runs nothing but
the judge's own code until that evaluation's ``hello`` and ``load``, as a child started then would.
It is one process per evaluation still: a child is taken once, and never serves two.

A child is taken only by an evaluation whose child settings (device, threads, isolation, limits,
folders, zygote) are the ones it was started with; otherwise it is closed, and the evaluation
starts its own. One that has died, or fails its ``hello`` once taken, is closed too and the
evaluation starts its own (``harness._Evaluation._started_ahead``): no submitted code ran in it.
Only the evaluation's first process comes from here (the timed phase's further processes start
together, beside nothing timed).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Hashable

log = logging.getLogger(__name__)


class Spare:
    """At most one child started ahead (:mod:`module docstring <kernelrank.runner.containment.spare>`),
    for settings named by a key the harness makes (:func:`~kernelrank.runner.judge.harness.start_spare`).
    Thread-safe; :meth:`prepare` starts the child in a thread of its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: Hashable = None
        self._child: Any = None
        self._thread: threading.Thread | None = None
        self._closed = False

    def take(self, key: Hashable) -> Any:
        """The child started for settings ``key`` (a
        :class:`~kernelrank.runner.containment.sandbox.SubmissionProcess` with no source yet; no
        longer held here), or ``None``: none was started, it was started for other settings or
        has died (it is closed then). Waits for a start under way."""
        self._join()
        with self._lock:
            child, held, self._child, self._key = self._child, self._key, None, None
        if child is None:
            return None
        if held != key or child.gone():  # its exit may not be reported yet: the socket says
            # closed beside the evaluation's start (a kill's teardown: ~15 ms, long before any timed call)
            self._thread = threading.Thread(target=child.close, kwargs={"graceful": False},
                                            name="kernelrank-spare-close", daemon=True)
            self._thread.start()
            return None
        return child

    def prepare(self, key: Hashable, start: Callable[[], Any]) -> None:
        """Start a child for settings ``key`` with ``start()`` in a thread (a held one for other
        settings is closed first); a failed start is logged, and the next evaluation starts its
        own child."""
        self._join()
        with self._lock:
            if self._closed or (self._child is not None and self._key == key):
                return
            old, self._child, self._key = self._child, None, None
        if old is not None:
            old.close(graceful=False)

        def run() -> None:
            try:
                child = start()
            except Exception:  # noqa: BLE001 - the next evaluation starts its own child
                log.warning("a child could not be started ahead", exc_info=True)
                return
            with self._lock:
                if not self._closed:
                    self._child, self._key = child, key
                    return
            child.close(graceful=False)

        self._thread = threading.Thread(target=run, name="kernelrank-spare", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Close the held child, if any; later :meth:`prepare` calls start none."""
        self._join()
        with self._lock:
            self._closed = True
            child, self._child, self._key = self._child, None, None
        if child is not None:
            child.close(graceful=False)

    def _join(self) -> None:
        thread = self._thread
        if thread is not None:
            thread.join()
