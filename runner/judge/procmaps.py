"""Where a child maps a file, read from the kernel's table of its mappings (``/proc/<pid>/maps``),
which the child cannot forge: the judge's test that an output does not lie in a mapping of the
input slots' memory file (:meth:`~kernelrank.runner.judge.slots.ChildMemory.in_slots`).

Two ways, the same answer: the table's ``PROCMAP_QUERY`` ioctl (Linux 6.11+, ``struct
procmap_query`` of ``include/uapi/linux/fs.h``; the kernel's ``Documentation/filesystems/proc.rst``),
which asks for the mappings of one address range only, and the table's text, read whole where the
ioctl is missing. The text of a torch process (~2,000 mappings) took 0.5-1 ms of the judge's CPU
to read, once per request: 14% of the judge's CPU in a test-mode job (bench/README.md); a query,
a few µs.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import re

#: ``_IOWR('f', 17, struct procmap_query)``, the struct 104 bytes (``include/uapi/linux/fs.h``).
PROCMAP_QUERY = 0xC0686611
#: ``PROCMAP_QUERY_COVERING_OR_NEXT_VMA`` | ``PROCMAP_QUERY_FILE_BACKED_VMA``: the first
#: file-backed mapping at or after the address asked.
_NEXT_FILE_MAPPING = 0x10 | 0x20


class _ProcmapQuery(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint64), ("query_flags", ctypes.c_uint64), ("query_addr", ctypes.c_uint64),
                ("vma_start", ctypes.c_uint64), ("vma_end", ctypes.c_uint64), ("vma_flags", ctypes.c_uint64),
                ("vma_page_size", ctypes.c_uint64), ("vma_offset", ctypes.c_uint64), ("inode", ctypes.c_uint64),
                ("dev_major", ctypes.c_uint32), ("dev_minor", ctypes.c_uint32), ("vma_name_size", ctypes.c_uint32),
                ("build_id_size", ctypes.c_uint32), ("vma_name_addr", ctypes.c_uint64),
                ("build_id_addr", ctypes.c_uint64)]


#: Whether this kernel answers ``PROCMAP_QUERY`` (``None``: not tried yet).
_query_works: bool | None = None


def maps_file(pid: int, inode: int, lo: int, hi: int) -> bool | None:
    """Whether a mapping of the file with inode ``inode`` overlaps ``[lo, hi)`` in process ``pid``,
    by ``PROCMAP_QUERY`` (the file-backed mappings from ``lo`` on, one query each, until one starts
    at or past ``hi``); ``True`` when the table cannot be opened or the process is gone (nothing
    of it is trusted then); ``None`` where the kernel lacks the ioctl (:func:`file_spans` then).

    A memory file's device reads ``00:01`` in the table whatever ``fstat`` says, so the inode alone
    names it (a mapping of another file with the same inode only makes the output refused)."""
    global _query_works
    if _query_works is False:
        return None
    try:
        fd = os.open(f"/proc/{pid}/maps", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return True
    try:
        q = _ProcmapQuery()
        addr = lo
        while addr < hi:
            q.size, q.query_flags, q.query_addr = ctypes.sizeof(q), _NEXT_FILE_MAPPING, addr
            try:
                fcntl.ioctl(fd, PROCMAP_QUERY, q)
            except OSError as e:
                if e.errno == errno.ENOENT:  # no file-backed mapping at or after addr
                    return False
                if e.errno in (errno.ENOTTY, errno.EINVAL, errno.EOPNOTSUPP):
                    _query_works = False
                    return None
                return True  # ESRCH (the process is gone) and the like
            _query_works = True
            if q.vma_start >= hi:
                return False
            if q.inode == inode or q.vma_end <= addr:  # the file's, or an answer that does not move on
                return True
            addr = q.vma_end
        return False
    finally:
        os.close(fd)


def file_spans(pid: int, inode: int) -> list[tuple[int, int]]:
    """Address ranges of ``pid``'s mappings of the file with inode ``inode``, from the table's text
    (start-end, perms, offset, device, inode, path); every address when the table is unreadable
    (nothing in the child's memory is trusted then)."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            table = f.read()
    except OSError:
        return [(0, 1 << 64)]
    name = str(inode).encode()
    pattern = re.compile(rb"([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ " + name + rb"(?: |$)")
    spans = []
    # only the lines holding the number are matched: a torch process has ~2,000 mappings, and the
    # pattern tried at every line start took 0.5 ms of each output read
    at = table.find(b" " + name)
    while at >= 0:
        start, end = table.rfind(b"\n", 0, at) + 1, table.find(b"\n", at)
        end = len(table) if end < 0 else end
        m = pattern.match(table, start, end)
        if m is not None:
            spans.append((int(m.group(1), 16), int(m.group(2), 16)))
        at = table.find(b" " + name, end)
    return spans
