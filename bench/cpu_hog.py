"""A bounded load generator: one process spinning on one CPU for a set time, then exiting.

It stands for the other tenant of a shared machine in ``bench/scores.py``'s loaded figures: one
busy thread (pure Python arithmetic, no memory traffic to speak of), pinned to one CPU (the last
one this process may use, unless ``--cpu`` names another), at normal priority. It stops by itself
after ``--seconds`` (and with the process that started it, through :func:`hog`), so a bench that
dies leaves no hog behind.

Usage: ``python bench/cpu_hog.py --seconds 60 [--cpu N]``; from Python, ``with hog(): ...``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator


def spin(seconds: float, cpu: int | None) -> int:
    """Spin until ``seconds`` have passed (pinned to ``cpu`` when given); returns loop rounds."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    end = time.monotonic() + seconds
    rounds, x = 0, 1
    while time.monotonic() < end:
        for _ in range(10_000):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        rounds += 1
    return rounds


@contextlib.contextmanager
def hog(seconds: float = 3600.0, cpu: int | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """A hog process for the ``with`` block (killed at its end, or after ``seconds`` anyway);
    ``cpu`` defaults to the last CPU this process may use."""
    cpu = max(os.sched_getaffinity(0)) if cpu is None else cpu
    proc = subprocess.Popen([sys.executable, __file__, "--seconds", str(seconds), "--cpu", str(cpu)])
    try:
        time.sleep(0.2)  # let it start spinning
        yield proc
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to spin (the bound)")
    parser.add_argument("--cpu", type=int, default=None, help="the CPU to pin to (default: not pinned)")
    args = parser.parse_args()
    spin(args.seconds, args.cpu)


if __name__ == "__main__":
    main()
