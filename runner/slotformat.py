"""What both sides of the shared slots agree on: the alignment of every tensor, the ``madvise``
advice used to fault slots in, the error of a layout that does not fit, and the device slots'
memory (:class:`CudaVmm`: dedicated CUDA virtual-memory allocations shared as file descriptors;
its driver calls, :class:`CudaDriver`, are GPU-only). The judge's side is :mod:`kernelrank.runner.judge.slots` (and
``device_slots``), the child's :mod:`kernelrank.runner.submission.mapping`; this module is the
only one of the slots the child imports.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from typing import Any

import torch

from kernelrank.runner.wire import Fd

#: Every tensor starts on a multiple of this many bytes (cache line; also SIMD loads).
ALIGN = 128
#: ``madvise`` advice that faults a range in, writable, without touching it (Linux 5.14+).
MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)
#: ``madvise`` advice that lets transparent huge pages back a range (where the host's THP setting
#: is ``madvise`` or ``always``).
MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", 14)


def advise_huge(mapping: mmap.mmap) -> None:
    """Advise the memory file's mapping ``MADV_HUGEPAGE``: where the host's shared-memory huge page
    setting allows it (``/sys/kernel/mm/transparent_hugepage/shmem_enabled``: ``advise``), its pages
    are then 2 MiB, and a process's slots fault in ~9x faster (128 MiB: 15 against 140 ms here,
    bench/README.md); elsewhere nothing changes. Both sides advise their own mapping."""
    try:
        mapping.madvise(MADV_HUGEPAGE)
    except (OSError, ValueError):
        pass  # no THP in this kernel: small pages, as before


class SlotError(ValueError):
    """A layout or output description that does not fit the memory file."""


def aligned(n: int) -> int:
    """``n`` rounded up to a multiple of :data:`ALIGN` (where the next slot may start)."""
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass
class _Slot:
    handle: Any
    ptr: int
    size: int
    fd: int | None = None


class CudaVmm:
    """The device slots' memory for :class:`~kernelrank.runner.judge.device_slots.DeviceSlots`
    (judge: ``allocate``, ``share``, ``fence``, ``release``) and
    :class:`~kernelrank.runner.submission.mapping.Mapping` (child: ``open``, ``fence``).

    Each slot buffer is an allocation of its own (``cuMemCreate``), zeroed when made, mapped in
    the judge and exported as a POSIX file descriptor (``cuMemExportToShareableHandle``); the
    descriptor crosses the judge-child socket as ``SCM_RIGHTS`` (:class:`~kernelrank.runner.wire.Fd`
    in the layout), and the child imports and maps it (``cuMemImportFromShareableHandle``,
    ``cuMemAddressReserve``, ``cuMemMap``, ``cuMemSetAccess``), the scheme NCCL and UCX use across
    containers. The child can map that allocation and nothing else: never a segment of torch's
    caching allocator, which holds the judge's other tensors (legacy CUDA IPC shared a whole
    segment, and does not open across PID namespaces: ``docs/research/gpu-slots.md``).

    Args:
        driver: the driver calls (:class:`CudaDriver`, made at first use); tests pass a stand-in
            with the same methods over memory files.
    """

    def __init__(self, driver: Any = None):
        self._driver = driver
        #: the judge's slots by the address of their buffer: only these are ever exported
        self._made: dict[int, _Slot] = {}

    @property
    def driver(self) -> Any:
        if self._driver is None:  # pragma: no cover - GPU-only
            self._driver = CudaDriver()
        return self._driver

    def allocate(self, nbytes: int) -> torch.Tensor:
        """A new slot buffer of at least ``nbytes`` bytes (rounded up to the allocation
        granularity), zeroed: a 1-D ``uint8`` tensor over it, on the device.

        Raises:
            SlotError: ``nbytes`` is not positive. The driver's errors pass through.
        """
        if nbytes <= 0:
            raise SlotError(f"a slot buffer of {nbytes} bytes")
        handle, size = self.driver.create(nbytes)
        try:
            ptr = self.driver.map(handle, size)
        except BaseException:
            self.driver.release(handle)
            raise
        self.driver.zero(ptr, size)  # fresh physical memory holds whatever its last owner left there
        buf = self.driver.tensor(ptr, size)
        self._made[buf.data_ptr()] = _Slot(handle, ptr, size)
        return buf

    def share(self, buf: torch.Tensor) -> dict[str, Any]:
        """The handle that lets the child map ``buf``: ``{"fd": Fd, "size": bytes}``, the
        descriptor exported once per buffer and kept by this object until :meth:`release`.

        Raises:
            SlotError: ``buf`` is not a whole buffer made by :meth:`allocate` (nothing else is
                ever exported).
        """
        slot = self._made.get(buf.data_ptr())
        if slot is None or buf.numel() * buf.element_size() != slot.size:
            raise SlotError("only a whole slot buffer made for sharing is shared")
        if slot.fd is None:
            slot.fd = self.driver.export(slot.handle)
        return {"fd": Fd(slot.fd), "size": slot.size}

    def open(self, handle: dict[str, Any]) -> torch.Tensor:
        """The child's view of a shared buffer, from the handle :meth:`share` gave (its ``fd``
        received beside the message): a 1-D ``uint8`` tensor of ``size`` bytes on the device. The
        descriptor is not closed here (the caller owns it).

        Raises:
            SlotError: a malformed handle. The driver's errors pass through.
        """
        fd, size = handle.get("fd"), handle.get("size")
        if not isinstance(fd, Fd) or fd.fd < 0 or not isinstance(size, int) or size <= 0:
            raise SlotError("a device slot handle without its descriptor or size")
        return self.driver.tensor(self.driver.map(self.driver.import_fd(fd.fd), size), size)

    def fence(self) -> None:
        """Wait until the device finished the work queued so far (the other process reads it next)."""
        self.driver.synchronize()

    def release(self, buf: torch.Tensor, handle: dict[str, Any]) -> None:
        """Unmap and free a buffer :meth:`allocate` made, and close its exported descriptor (its
        memory is freed once the child's mapping is gone too: the child is killed first)."""
        slot = self._made.pop(buf.data_ptr(), None)
        if slot is None:
            return
        self.driver.synchronize()  # no copy of the judge's may still be reading or writing it
        self.driver.unmap(slot.ptr, slot.size)
        self.driver.release(slot.handle)
        if slot.fd is not None:
            os.close(slot.fd)


class _DeviceMemory:  # pragma: no cover - GPU-only
    """Device memory as ``__cuda_array_interface__`` (v3) for ``torch.as_tensor``: ``size`` bytes at ``ptr``."""

    def __init__(self, ptr: int, size: int):
        self.__cuda_array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (ptr, False),
                                         "strides": None, "version": 3}


class CudaDriver:  # pragma: no cover - GPU-only: tests/runner/test_device_slots.py stands in with memory files
    """The driver calls of :class:`CudaVmm`, through NVIDIA's ``cuda-bindings``
    (``cuda.bindings.driver``, the ``gpu`` extra; imported here only), on the device torch uses
    (``torch.cuda.current_device()``, in its primary context).

    Raises:
        RuntimeError: a driver call failed (its error name), or the device cannot export POSIX
            file descriptors.
    """

    def __init__(self) -> None:
        from cuda.bindings import driver

        self.cu = driver
        self.ordinal = torch.cuda.current_device()
        self._check(driver.cuInit(0))
        (dev,) = self._check(driver.cuDeviceGet(self.ordinal))
        (self.ctx,) = self._check(driver.cuDevicePrimaryCtxRetain(dev))  # the context torch uses
        attr = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
        (fd_ok,) = self._check(driver.cuDeviceGetAttribute(attr, dev))
        if not fd_ok:
            raise RuntimeError("this device cannot share memory as POSIX file descriptors")
        self.kind = driver.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        self.prop = driver.CUmemAllocationProp()
        self.prop.type = driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        self.prop.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        self.prop.location.id = self.ordinal
        self.prop.requestedHandleTypes = self.kind
        (self.granularity,) = self._check(driver.cuMemGetAllocationGranularity(
            self.prop, driver.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM))
        self.access = driver.CUmemAccessDesc()
        self.access.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        self.access.location.id = self.ordinal
        self.access.flags = driver.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE

    def _check(self, result: tuple[Any, ...]) -> tuple[Any, ...]:
        err, *rest = result
        if err != self.cu.CUresult.CUDA_SUCCESS:
            _, name = self.cu.cuGetErrorName(err)
            raise RuntimeError(f"CUDA driver: {name.decode() if name else int(err)}")
        return tuple(rest)

    def _current(self) -> None:
        self._check(self.cu.cuCtxSetCurrent(self.ctx))  # per thread; the judge places from several

    def create(self, nbytes: int) -> tuple[Any, int]:
        """A new physical allocation (``cuMemCreate``), exportable as a descriptor; its handle and size."""
        self._current()
        size = -(-nbytes // self.granularity) * self.granularity
        (handle,) = self._check(self.cu.cuMemCreate(size, self.prop, 0))
        return handle, size

    def export(self, handle: Any) -> int:
        """A POSIX file descriptor for the allocation (``cuMemExportToShareableHandle``)."""
        (fd,) = self._check(self.cu.cuMemExportToShareableHandle(handle, self.kind, 0))
        return int(fd)

    def import_fd(self, fd: int) -> Any:
        """The allocation a descriptor refers to (``cuMemImportFromShareableHandle``; the descriptor stays open)."""
        self._current()
        (handle,) = self._check(self.cu.cuMemImportFromShareableHandle(fd, self.kind))
        return handle

    def map(self, handle: Any, size: int) -> int:
        """Reserve an address range, map the allocation there, readable and writable by this device."""
        self._current()
        (ptr,) = self._check(self.cu.cuMemAddressReserve(size, 0, 0, 0))
        self._check(self.cu.cuMemMap(ptr, size, 0, handle, 0))
        self._check(self.cu.cuMemSetAccess(ptr, size, [self.access], 1))
        return int(ptr)

    def zero(self, ptr: int, size: int) -> None:
        self._current()
        self._check(self.cu.cuMemsetD8(self.cu.CUdeviceptr(ptr), 0, size))
        self._check(self.cu.cuCtxSynchronize())

    def tensor(self, ptr: int, size: int) -> torch.Tensor:
        return torch.as_tensor(_DeviceMemory(ptr, size), device=f"cuda:{self.ordinal}")

    def synchronize(self) -> None:
        torch.cuda.synchronize()

    def unmap(self, ptr: int, size: int) -> None:
        self._current()
        self._check(self.cu.cuMemUnmap(self.cu.CUdeviceptr(ptr), size))
        self._check(self.cu.cuMemAddressFree(self.cu.CUdeviceptr(ptr), size))

    def release(self, handle: Any) -> None:
        self._check(self.cu.cuMemRelease(handle))


#: Most tensors one output may hold (a tuple, list or dict of tensors: GPU MODE's ``(out, lse)``,
#: ``(Q, L)``), and how deeply its containers may nest.
MAX_OUTPUT_LEAVES = 64
MAX_OUTPUT_DEPTH = 4


def output_leaves(out: Any, depth: int = 0) -> list[Any] | None:
    """The tensors of an output, in order: ``[out]`` for a plain tensor; every leaf of a tuple,
    list or string-keyed dict of them (exact types, or torch's own named tuples such as
    ``torch.linalg.cholesky_ex``'s, read as tuples: no other subclass); ``None`` for anything else
    or more than :data:`MAX_OUTPUT_LEAVES` leaves or :data:`MAX_OUTPUT_DEPTH` levels (the judge
    fails such an output by its type). Nothing of the value's own code runs: only built-in
    containers are walked."""
    if type(out) is torch.Tensor:  # noqa: E721 - exact type: subclasses can defer work into the checker
        return [out]
    if depth >= MAX_OUTPUT_DEPTH or not (type(out) in (tuple, list, dict) or torch_named_tuple(out)):
        return None
    items = list(out.values()) if type(out) is dict else list(out)
    if type(out) is dict and not all(type(k) is str for k in out):
        return None
    found: list[Any] = []
    for item in items:
        more = output_leaves(item, depth + 1)
        if more is None or len(found) + len(more) > MAX_OUTPUT_LEAVES:
            return None
        found += more
    return found


def torch_named_tuple(v: Any) -> bool:
    """Whether ``v`` is one of torch's own named tuples (``torch.return_types``: C structseqs, no
    Python code of anyone's), which an output may be as a plain tuple is."""
    return isinstance(v, tuple) and type(v).__module__ == "torch.return_types"
