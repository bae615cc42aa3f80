"""Word that something in the database changed, for the API's long-polls (:mod:`kernelrank.api.watch`).

A :class:`ChangeListener` runs one thread that calls ``wake()`` soon after a commit:

- PostgreSQL: every statement that changes ``submissions`` sends ``NOTIFY`` on :data:`CHANNEL`
  (a trigger, migration 0018; delivered at commit); the thread ``LISTEN``\\ s on a connection of
  its own (psycopg) and reconnects, backing off, when the server goes away;
- SQLite: every commit writes the database's write-ahead log (``-wal``; the file itself where
  WAL is off); the thread watches its folder with inotify, and wakes the waiters again a little
  later (:data:`SETTLE_S`: the write comes before the commit can be read).

Where neither can be had (no inotify, another database, the server unreachable) nothing wakes
the waiters and they look again on their own (:data:`kernelrank.api.watch.FALLBACK_S`). The word
says only that *something* was committed: the waiters read what they wait on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kernelrank.db.session import sqlite_path

log = logging.getLogger("kernelrank.db.changes")

#: The PostgreSQL channel the ``submissions_changed`` trigger notifies (migration 0018).
CHANNEL = "kernelrank_submissions"
#: Seconds each blocking read waits before the thread looks whether it is to stop.
READ_S = 1.0
#: Seconds after a write of SQLite's log at which the waiters are woken again: a commit's frames
#: are written (the inotify event) before the log is synced and its index updated, and a reader
#: woken at once may not see it yet (a long-poll test missed one this way under load).
SETTLE_S = (0.02, 0.2, 1.0)
#: Seconds before the PostgreSQL listener reconnects, doubled up to :data:`RECONNECT_MAX_S`.
RECONNECT_S, RECONNECT_MAX_S = 0.5, 30.0


class ChangeListener:
    """A daemon thread calling ``wake()`` (from that thread) after each commit to the database
    at ``url`` (a SQLAlchemy URL); :meth:`start` says whether it has a source."""

    def __init__(self, url: str, wake: Callable[[], None]) -> None:
        self._url, self._wake = url, wake
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        """Start the thread; ``False`` where this database has no source of word (waiters poll)."""
        if self._url.startswith("postgresql"):
            target = self._postgres
        elif sqlite_path(self._url) is not None:
            target = self._sqlite
        else:
            return False
        self._thread = threading.Thread(target=self._guarded, args=(target,), name="db-changes", daemon=True)
        self._thread.start()
        return True

    def close(self, timeout_s: float = 0.1) -> None:
        """Stop the thread: it ends within :data:`READ_S` (waited for up to ``timeout_s``)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _guarded(self, target: Callable[[], None]) -> None:
        try:
            target()
        except Exception:  # noqa: BLE001 - the waiters go on polling; said once
            log.warning("database change listener stopped; long-polls look every few seconds instead",
                        exc_info=True)

    def _sqlite(self) -> None:
        from inotify_simple import INotify, flags

        path = sqlite_path(self._url)
        assert path is not None
        names = {path.name, f"{path.name}-wal"}
        follow: list[float] = []  # monotonic times of the wakes still due after the last write
        with INotify() as inotify:
            inotify.add_watch(path.parent, flags.MODIFY | flags.CLOSE_WRITE | flags.MOVED_TO | flags.CREATE)
            while not self._stop.is_set():
                wait_s = min([READ_S, *(t - time.monotonic() for t in follow)])
                events = inotify.read(timeout=max(0, int(wait_s * 1000)))
                now = time.monotonic()
                if any(e.name in names for e in events):
                    self._wake()
                    follow = [now + d for d in SETTLE_S]
                elif follow and follow[0] <= now:
                    self._wake()
                    follow = [t for t in follow if t > now]

    def _postgres(self) -> None:
        import psycopg
        from sqlalchemy.engine import make_url

        conninfo = make_url(self._url).set(drivername="postgresql").render_as_string(hide_password=False)
        backoff = RECONNECT_S
        while not self._stop.is_set():
            try:
                with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    backoff = RECONNECT_S
                    self._wake()  # anything committed while it was not listening
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=READ_S, stop_after=1):
                            self._wake()
            except psycopg.OperationalError as e:  # the server went away: reconnect, backing off
                log.info("database change listener: %s; again in %.1f s", type(e).__name__, backoff)
                self._stop.wait(backoff)
                backoff = min(2 * backoff, RECONNECT_MAX_S)

