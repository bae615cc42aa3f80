"""A stand-in for the CUDA driver calls of :class:`kernelrank.runner.slotformat.CudaVmm`
(:class:`~kernelrank.runner.slotformat.CudaDriver`'s methods) over memory files, so the judge's
and the child's sides of the device slots run on the CPU, in one process or two.

An allocation is a ``memfd`` of the size rounded up to :data:`GRANULARITY`, filled with
:data:`STALE` (as ``cuMemCreate``'s memory holds whatever its last owner left); its handle is
that descriptor; exporting it is ``dup``; importing a descriptor is ``dup`` too (a handle of the
importer's own, as ``cuMemImportFromShareableHandle`` gives); mapping is ``mmap`` and the tensor
over it ``torch.frombuffer`` (CPU bytes standing for device bytes).
"""

from __future__ import annotations

import mmap
import os

import torch

#: Allocation granularity of the stand-in (a real GPU's is 2 MiB).
GRANULARITY = 4096
#: The byte a new allocation is filled with before anyone zeroes it.
STALE = 0xAB


class MemfdDriver:
    """The driver calls over memory files; counts what was called, for tests to check."""

    def __init__(self) -> None:
        self.created: list[int] = []
        self.exported: list[int] = []
        self.imported: list[int] = []
        self.released: list[int] = []
        self.unmapped: list[int] = []
        self.syncs = 0
        self._maps: dict[int, tuple[mmap.mmap, torch.Tensor]] = {}

    def create(self, nbytes: int) -> tuple[int, int]:
        size = -(-nbytes // GRANULARITY) * GRANULARITY
        fd = os.memfd_create("simvmm", os.MFD_CLOEXEC)
        os.ftruncate(fd, size)
        os.pwrite(fd, bytes([STALE]) * size, 0)
        self.created.append(fd)
        return fd, size

    def export(self, handle: int) -> int:
        fd = os.dup(handle)
        self.exported.append(fd)
        return fd

    def import_fd(self, fd: int) -> int:
        handle = os.dup(fd)
        self.imported.append(handle)
        return handle

    def map(self, handle: int, size: int) -> int:
        m = mmap.mmap(handle, size, flags=mmap.MAP_SHARED)
        t = torch.frombuffer(m, dtype=torch.uint8)
        self._maps[t.data_ptr()] = (m, t)
        return t.data_ptr()

    def zero(self, ptr: int, size: int) -> None:
        self._maps[ptr][1][:size].zero_()

    def tensor(self, ptr: int, size: int) -> torch.Tensor:
        return self._maps[ptr][1][:size]

    def synchronize(self) -> None:
        self.syncs += 1

    def unmap(self, ptr: int, size: int) -> None:
        self._maps.pop(ptr)  # the mapping goes with the last tensor over it
        self.unmapped.append(ptr)

    def release(self, handle: int) -> None:
        os.close(handle)
        self.released.append(handle)
