"""The slots' memory file cannot be broken by the child that maps it: it is sealed against
shrinking (a truncated file would turn the judge's next placement into a SIGBUS in the judge) and
against further seals (a child sealing it against growth would fail the judge's next ``grow``)."""

from __future__ import annotations

import os
import subprocess
import sys

import torch

from kernelrank.runner.judge.slots import Arena

# what a hostile child does with the slots' descriptor: shrink it, seal it, grow it
_CHILD = """
import fcntl, os, sys
fd = int(sys.argv[1])
for name, act in (("shrink", lambda: os.ftruncate(fd, 0)),
                  ("seal", lambda: fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_GROW)),
                  ("grow", lambda: os.ftruncate(fd, os.fstat(fd).st_size * 4))):
    try:
        act()
        print(name, "done")
    except OSError as e:
        print(name, "refused", e.errno)
"""


def test_a_child_cannot_shrink_or_seal_the_slots_and_the_judge_places_on() -> None:
    arena = Arena()
    try:
        arena.grow(3 << 20)
        size = arena.size
        out = subprocess.run([sys.executable, "-c", _CHILD, str(arena.fd)], pass_fds=(arena.fd,),
                             capture_output=True, text=True, timeout=60, check=True).stdout.split("\n")
        assert out[0].startswith("shrink refused") and out[1].startswith("seal refused"), out
        assert out[2] == "grow done", out  # harmless: the judge maps what it placed
        assert os.fstat(arena.fd).st_size == 4 * size
        # the judge places a whole set at the end of its size and reads it back: no SIGBUS
        x = torch.arange((size - (1 << 20)) // 4, dtype=torch.float32)
        layout = arena.place([x], out_bytes=1 << 19)
        assert layout and arena.size >= size
        assert arena.grow(size) == arena.size  # growing again needs no truncation
    finally:
        arena.close()
