"""Both sides advise the slots' memory file for huge pages (``slotformat.advise_huge``): where the
host's ``shmem_enabled`` allows it, a process's slots are 2 MiB pages and fault in ~9x faster
(bench/README.md, *A ranked verdict's wall time*); where it does not, the advice changes nothing."""

from __future__ import annotations

import ctypes
import mmap

from kernelrank.runner.containment.procfs import host_huge_pages
from kernelrank.runner.host.selftest_rows import SHARED_HUGE_PAGES, shared_huge_pages_check
from kernelrank.runner.judge.slots import Arena
from kernelrank.runner.submission.mapping import Mapping


def _vma(m: mmap.mmap) -> dict[str, str]:
    """This process's ``/proc/self/smaps`` entry for the mapping ``m`` (its fields by name)."""
    start = ctypes.addressof(ctypes.c_char.from_buffer(m))
    entry: dict[str, str] | None = None
    with open("/proc/self/smaps", encoding="ascii", errors="replace") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                if entry is not None:
                    break
                if lo <= start < hi:
                    entry = {"range": head}
            elif entry is not None:
                key, _, value = line.partition(":")
                entry[key] = value.strip()
    assert entry is not None, "the mapping is not in /proc/self/smaps"
    return entry


def test_the_judge_and_the_child_advise_the_slots_for_huge_pages() -> None:
    arena = Arena()
    try:
        size = arena.grow(16 << 20)
        judge = _vma(arena._map)
        child = Mapping(arena.fd)
        assert child.prepare(size)  # mapped at the judge's size, faulted in
        mine = _vma(child._map)
        assert "hg" in judge["VmFlags"].split() and "hg" in mine["VmFlags"].split(), (judge, mine)
        if host_huge_pages("shmem_enabled") in SHARED_HUGE_PAGES:
            # the child's populate made huge pages: its mapping maps them whole
            assert int(mine["ShmemPmdMapped"].split()[0]) > 0, mine
        else:
            assert int(mine["ShmemPmdMapped"].split()[0]) == 0, mine
    finally:
        arena.close()


def test_the_slot_huge_pages_row_passes_either_way_and_says_what_it_costs() -> None:
    assert shared_huge_pages_check("advise").got == "advise" and not shared_huge_pages_check("advise").detail
    off = shared_huge_pages_check("never")
    assert off.passed and "slower readying" in off.got and "shmem_enabled to advise" in off.detail
    assert shared_huge_pages_check(host_huge_pages("shmem_enabled")).passed
