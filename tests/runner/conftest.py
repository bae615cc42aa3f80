"""Fixtures of the runner's tests: a warm zygote per module, and the processes it forked."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from kernelrank.runner.host.devices import cpu_threads
from kernelrank.runner.submission.zygote import Zygote


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    """A CPU zygote (warm starts), shared by a module's tests."""
    z = Zygote.start("cpu", cpu_threads(0))
    yield z
    z.close()


def zygote_children(zygote: Zygote, live: bool = False) -> list[int]:
    """Pids of the processes ``zygote`` forked and has not reaped (``live``: zombies left out)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == zygote.proc.pid and not (live and fields[0] in (b"Z", b"X")):
                found.append(int(entry))
    return found
