"""Long-polls on submissions: a read waits, holding no database connection, until the
submission's state tag (:mod:`kernelrank.services.submission_state`) differs from the one the
client has, or its wait is over.

One :class:`SubmissionWatch` per API process (``app.state.watch``). While anyone waits, one task
reads the tags of every waited submission in one query each time the database says something
was committed (:class:`kernelrank.db.changes.ChangeListener`: PostgreSQL's ``NOTIFY``, SQLite's
write-ahead log through inotify), and at least every :data:`FALLBACK_S` (a source missing or
lost). A client that polled every 20 ms saw a verdict ~20 ms after its record (bench/latency.py);
the CLI, polling every 0.5-1 s, up to a second after.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool

from kernelrank.db.changes import ChangeListener
from kernelrank.services.submission_state import state_tags

log = logging.getLogger("kernelrank.api.watch")

#: Seconds between reads of the waited tags when no word of a commit came (no source, or lost).
FALLBACK_S = 2.0
#: The longest wait a read may ask for (s): ``GET /api/v1/submissions/{id}?wait=``.
MAX_WAIT_S = 60.0


class SubmissionWatch:
    """Waits on submissions' state tags for the API's requests (their event loop).

    Args:
        session_factory: a callable returning a new SQLAlchemy session (the app's).
        database_url: the database's SQLAlchemy URL: where word of commits comes from.
    """

    def __init__(self, session_factory: Callable[[], Any], database_url: str) -> None:
        self._session_factory = session_factory
        self._url = database_url
        self._waiters: dict[int, list[tuple[str, asyncio.Future[str]]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._listener: ChangeListener | None = None
        self._lock = threading.Lock()

    async def changed(self, submission_id: int, tag: str, timeout_s: float) -> str:
        """The submission's tag once it differs from ``tag``, or ``tag`` after ``timeout_s``
        seconds (at most :data:`MAX_WAIT_S`). A submission that no longer exists reads ``""``."""
        self._bind()
        assert self._wake is not None
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        entry = (tag, future)
        self._waiters.setdefault(submission_id, []).append(entry)
        self._wake.set()  # read once now: it may have changed since the caller read it
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="submission-watch")
        try:
            return await asyncio.wait_for(asyncio.shield(future), min(timeout_s, MAX_WAIT_S))
        except TimeoutError:
            return tag
        finally:
            entries = self._waiters.get(submission_id, [])
            with contextlib.suppress(ValueError):
                entries.remove(entry)
            if not entries:
                self._waiters.pop(submission_id, None)

    def waiting(self) -> int:
        """How many reads wait now."""
        return sum(len(v) for v in self._waiters.values())

    def close(self) -> None:
        """Stop the listener thread (the app's shutdown)."""
        with self._lock:
            if self._listener is not None:
                self._listener.close()
                self._listener = None

    def _bind(self) -> None:
        """Use the running event loop (a test's new client runs a new one) and start the listener once."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._wake, self._task, self._waiters = loop, asyncio.Event(), None, {}
        with self._lock:
            if self._listener is None:
                self._listener = ChangeListener(self._url, self._on_commit)
                if not self._listener.start():
                    log.info("no word of commits from this database: long-polls read every %.0f s", FALLBACK_S)

    def _on_commit(self) -> None:
        """From the listener's thread: wake the task in its loop."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed (a test's client ended)
                loop.call_soon_threadsafe(wake.set)

    async def _run(self) -> None:
        """While anyone waits: read their tags after each word of a commit (or every :data:`FALLBACK_S`)
        and answer those whose tag changed."""
        wake = self._wake
        assert wake is not None
        while self._waiters:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), FALLBACK_S)
            wake.clear()
            try:
                tags = await run_in_threadpool(self._read, list(self._waiters))
            except Exception:  # noqa: BLE001 - the database may be away: the waits end by their time
                log.warning("reading waited submissions failed", exc_info=True)
                await asyncio.sleep(FALLBACK_S)
                continue
            for sid, entries in list(self._waiters.items()):
                now = tags.get(sid, "")
                for tag, future in entries:
                    if now != tag and not future.done():
                        future.set_result(now)

    def _read(self, ids: list[int]) -> dict[int, str]:
        session = self._session_factory()
        try:
            return state_tags(session, ids)
        finally:
            session.close()
