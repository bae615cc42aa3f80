"""Computes the softmax in place in the input and returns it through a second mapping of the slots.

Class: output aliasing the input through a second mapping
Expected: failed|rejected|error

The input sets live in a memory file the child maps (the slots). The submission finds that file
among its open descriptors, maps it a second time, writes the softmax over the input (no output
allocated, no fresh pages) and returns a tensor over the same bytes at the second mapping's
address. The child's own alias check compares address ranges, so two mappings of the same bytes
pass it (issue 43). A working defence reads the child's mappings (``/proc/<pid>/maps``, which the
child cannot forge) and refuses any output in a mapping of the slots' file.
"""

import ctypes
import mmap
import os

import torch

_maps = {}  # file offset -> second mapping


def _slots():
    for name in os.listdir("/proc/self/fd"):
        try:
            if "kernelrank-slots" in os.readlink(f"/proc/self/fd/{name}"):
                return int(name), os.fstat(int(name)).st_ino
        except OSError:
            continue
    return None, None


def _file_offset(addr, inode):
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 5 and fields[4] == str(inode):
                lo, hi = (int(v, 16) for v in fields[0].split("-"))
                if lo <= addr < hi:
                    return int(fields[2], 16) + addr - lo
    return None


def custom_kernel(data):
    (x,) = data
    fd, inode = _slots()
    offset = None if fd is None else _file_offset(x.data_ptr(), inode)
    if offset is None:
        return torch.softmax(x.float(), dim=-1).to(x.dtype)
    size = os.fstat(fd).st_size
    if size not in _maps:
        _maps[size] = mmap.mmap(fd, size)
    second = _maps[size]
    base = ctypes.addressof(ctypes.c_char.from_buffer(second))
    n = x.numel() * x.element_size()
    x.copy_(torch.softmax(x.float(), dim=-1).to(x.dtype))
    buf = (ctypes.c_char * n).from_address(base + offset)
    return torch.frombuffer(buf, dtype=x.dtype).view(x.shape)
