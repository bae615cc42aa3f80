"""Where a process maps a file (runner/judge/procmaps.py): the ``PROCMAP_QUERY`` ioctl and the
table's text give the same answer, and the judge's aliasing test (``ChildMemory.in_slots``) holds
on both."""

from __future__ import annotations

import ctypes
import mmap
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from kernelrank.runner.judge import procmaps
from kernelrank.runner.judge.slots import ChildMemory

PAGE = mmap.PAGESIZE


@pytest.fixture
def mapped() -> Iterator[tuple[int, int, list[tuple[int, int]], int]]:
    """A memory file of 4 pages mapped twice in this process, and an anonymous mapping: ``(the
    file's descriptor, its inode, [(start, end) of each mapping of it], an address in the
    anonymous one)``."""
    fd = os.memfd_create("procmaps-test")
    os.ftruncate(fd, 4 * PAGE)
    maps = [mmap.mmap(fd, 4 * PAGE), mmap.mmap(fd, 2 * PAGE, offset=PAGE)]
    anon = mmap.mmap(-1, 8 * PAGE)
    spans = [(a, a + len(m)) for m in maps for a in [ctypes.addressof(ctypes.c_char.from_buffer(m))]]
    anon_at = ctypes.addressof(ctypes.c_char.from_buffer(anon))
    yield fd, os.fstat(fd).st_ino, spans, anon_at
    for m in (*maps, anon):
        m.close()
    os.close(fd)


@pytest.fixture(params=["query", "text"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each way of reading the table: the ioctl where the kernel has it, and the text."""
    if request.param == "query":
        if procmaps.maps_file(os.getpid(), 0, 0, 1) is None:
            pytest.skip("this kernel has no PROCMAP_QUERY (Linux < 6.11): only the text is read")
    else:
        monkeypatch.setattr(procmaps, "_query_works", False)
    return request.param


def test_both_ways_find_every_mapping_of_the_file_and_nothing_else(mapped, way) -> None:
    fd, inode, spans, anon_at = mapped
    pid = os.getpid()
    for lo, hi in spans:
        memory = ChildMemory(pid, -1, None)
        memory.watch_slots(fd)
        assert memory.in_slots(lo, 1) and memory.in_slots(hi - 1, 1)
        assert memory.in_slots(lo - PAGE, PAGE + 1)  # ends inside it
        assert memory.in_slots(anon_at, 1) is False and memory.in_slots(anon_at, 8 * PAGE) is False
    if way == "text":
        assert set(spans) <= set(procmaps.file_spans(pid, inode))


def test_the_query_agrees_with_the_text(mapped) -> None:
    _fd, inode, spans, anon_at = mapped
    pid = os.getpid()
    if procmaps.maps_file(pid, inode, 0, 1) is None:
        pytest.skip("this kernel has no PROCMAP_QUERY (Linux < 6.11): only the text is read")
    table = procmaps.file_spans(pid, inode)
    for lo, hi in [*spans, (anon_at, anon_at + PAGE), (0, 1 << 47)]:
        by_text = any(a < hi and lo < b for a, b in table)
        assert procmaps.maps_file(pid, inode, lo, hi) is by_text, (hex(lo), hex(hi))


def test_a_process_that_is_gone_has_every_address_refused() -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    pid = int(gone.stdout)
    assert procmaps.maps_file(pid, 1, 0, 1) is True
    assert procmaps.file_spans(pid, 1) == [(0, 1 << 64)]
