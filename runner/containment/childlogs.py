"""The child's stdout and stderr as the judge keeps them: drained in threads into bounded logs
(:class:`BoundedLog`), and the line of a crashed child's ``stderr`` its verdict quotes
(:func:`fatal_report`). Used by :class:`~kernelrank.runner.containment.sandbox.SubmissionProcess`.
"""

from __future__ import annotations

import threading
from typing import IO


class BoundedLog:
    """Drains a pipe in a thread, keeping the first and last ``limit // 2`` bytes.

    A flood is cut, not buffered whole: memory stays at ``limit`` bytes whatever is written.
    """

    def __init__(self, pipe: IO[bytes], limit: int):
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._thread = threading.Thread(target=self._drain, args=(pipe,), daemon=True)
        self._thread.start()

    def _drain(self, pipe: IO[bytes]) -> None:
        try:
            while chunk := pipe.read1(65536):  # type: ignore[attr-defined]
                self.total += len(chunk)
                room = self.half - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail += chunk
                    if len(self.tail) > self.half:
                        del self.tail[: len(self.tail) - self.half]
        except (OSError, ValueError):
            pass
        finally:
            pipe.close()

    def text(self, timeout: float = 2.0) -> str:
        """The kept bytes as text, with a marker where bytes were cut."""
        self._thread.join(timeout)
        cut = self.total - len(self.head) - len(self.tail)
        middle = f"\n[... {cut} bytes cut ...]\n" if cut > 0 else ""
        return (bytes(self.head) + middle.encode() + bytes(self.tail)).decode("utf-8", "replace")


#: What Python's ``faulthandler`` writes first when a process crashes (the child enables it:
#: ``child.serve``), and how much of the rest of that line a verdict quotes.
FATAL_PREFIX, FATAL_QUOTE = "Fatal Python error: ", 80


def fatal_report(stderr: str) -> str | None:
    """The first ``Fatal Python error: ...`` line of a dead child's ``stderr`` (``faulthandler``'s:
    ``Aborted``, ``Segmentation fault``, ``Floating-point exception``...), printable characters
    only and at most :data:`FATAL_QUOTE` of them after the prefix; ``None`` without one. These are
    the child's own words (the child could write anything there), quoted as such in its verdict,
    which is an error either way: the child is PID 1 of its namespace, so ``abort()`` ends in a
    SIGSEGV and only this line says it was an abort."""
    start = stderr.find(FATAL_PREFIX)
    if start < 0:
        return None
    line = stderr[start + len(FATAL_PREFIX):].split("\n", 1)[0]
    text = "".join(ch for ch in line if ch.isprintable() and ch != '"').strip()[:FATAL_QUOTE]
    return FATAL_PREFIX + text if text else None
