"""The judge reading a child's memory where the child left its output (runner.slots.ChildMemory):
``process_vm_readv`` and ``/proc/<pid>/mem`` give the same bytes, a refused call falls back to
the file, and a child that is gone (its pid perhaps another process's) is never read."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from kernelrank.runner.judge.slots import Arena, ChildMemory, SlotError

# a child holding a probe (bytes 0..63) and 3 MiB of known float32 values (i * 0.5), then waiting
_CHILD = """
import sys, torch
probe = torch.arange(64, dtype=torch.uint8)
x = torch.arange(3 << 18, dtype=torch.float32) * 0.5
print(probe.data_ptr(), x.data_ptr(), flush=True)
sys.stdin.read()
"""
VALUES = 3 << 18


@pytest.fixture
def child():
    proc = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        probe, addr = (int(v) for v in proc.stdout.readline().split())
        yield proc, probe, addr
    finally:
        proc.kill()
        proc.wait()


def _read_all(memory: ChildMemory, addr: int) -> torch.Tensor:
    buf = torch.empty(VALUES * 4, dtype=torch.uint8)
    memory.read(buf, buf.numel(), addr)
    return buf.view(torch.float32)


def test_both_ways_in_read_the_childs_bytes(child) -> None:
    proc, probe, addr = child
    memory = ChildMemory.open(proc.pid, probe)
    assert memory is not None
    try:
        expected = torch.arange(VALUES, dtype=torch.float32) * 0.5
        # where pidfds exist (Linux 5.3+, every kernel this project runs on), the fast way is used
        assert memory.method == ("process_vm_readv" if hasattr(os, "pidfd_open") else "/proc/<pid>/mem")
        assert torch.equal(_read_all(memory, addr), expected)
        # a piece at an odd offset, into a larger buffer
        buf = torch.full((4096,), 7, dtype=torch.uint8)
        memory.read(buf, 1000, addr + 4 * 12345)
        assert torch.equal(buf[:1000].view(torch.float32), expected[12345:12595])
        assert bool((buf[1000:] == 7).all())
        memory._refused()  # as after an EPERM: the file from then on
        assert memory.method == "/proc/<pid>/mem"
        assert torch.equal(_read_all(memory, addr), expected)
        with pytest.raises(SlotError):
            memory.read(torch.empty(10, dtype=torch.uint8), 11, addr)  # never past the buffer
    finally:
        memory.close()


def test_an_output_reader_reads_the_childs_output_in_pieces(child) -> None:
    proc, probe, addr = child
    memory = ChildMemory.open(proc.pid, probe)
    assert memory is not None
    arena = Arena()
    try:
        arena.place((torch.zeros(4),), VALUES * 4, direct=True)  # an output read from the child: no room taken
        dtype, shape, read = arena.output_reader({"dtype": "float32", "shape": [VALUES], "addr": addr}, memory)
        assert (dtype, shape) == (torch.float32, [VALUES])
        expected = torch.arange(VALUES, dtype=torch.float32) * 0.5
        for a, b in ((0, 65536), (65536, 70000), (VALUES - 3, VALUES)):
            assert torch.equal(read(a, b), expected[a:b])
        whole = arena.read_output({"dtype": "float32", "shape": [VALUES], "addr": addr}, memory)
        assert torch.equal(whole, expected)
    finally:
        arena.close()
        memory.close()


def test_a_wrong_probe_or_a_gone_child_is_never_read(child) -> None:
    proc, probe, addr = child
    assert ChildMemory.open(proc.pid, probe + 1) is None  # not the 64 known bytes: not the child's memory
    memory = ChildMemory.open(proc.pid, probe)
    assert memory is not None
    try:
        with pytest.raises(SlotError):
            memory.read(torch.empty(64, dtype=torch.uint8), 64, 4096)  # unmapped
        proc.kill()
        proc.wait()  # reaped: its pid may now be given to another process
        for method in ("fast", "file"):
            if method == "file":
                memory._refused()
            with pytest.raises(SlotError, match="could not be read"):
                memory.read(torch.empty(64, dtype=torch.uint8), 64, probe)
    finally:
        memory.close()
