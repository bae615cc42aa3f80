"""What both sides of the shared slots agree on: the alignment of every tensor, the ``madvise``
advice used to fault slots in, the error of a layout that does not fit, and CUDA IPC
(:class:`CudaIpc`, GPU-only). The judge's side is :mod:`kernelrank.runner.judge.slots` (and
``device_slots``), the child's :mod:`kernelrank.runner.submission.mapping`; this module is the
only one of the slots the child imports.
"""

from __future__ import annotations

import mmap
from typing import Any

import torch

#: Every tensor starts on a multiple of this many bytes (cache line; also SIMD loads).
ALIGN = 128
#: ``madvise`` advice that faults a range in, writable, without touching it (Linux 5.14+).
MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)
#: ``madvise`` advice that lets transparent huge pages back a range (where the host's THP setting
#: is ``madvise`` or ``always``).
MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", 14)


class SlotError(ValueError):
    """A layout or output description that does not fit the memory file."""


def aligned(n: int) -> int:
    """``n`` rounded up to a multiple of :data:`ALIGN` (where the next slot may start)."""
    return (n + ALIGN - 1) // ALIGN * ALIGN


class CudaIpc:  # pragma: no cover - GPU-only: CUDA IPC through torch; tests/runner/test_device_slots.py uses a stand-in
    """CUDA IPC for :class:`~kernelrank.runner.judge.device_slots.DeviceSlots` (judge) and :class:`~kernelrank.runner.submission.mapping.Mapping` (child), as
    ``torch.multiprocessing`` shares CUDA tensors: ``UntypedStorage._share_cuda_`` on the judge's
    side, ``UntypedStorage._new_shared_cuda`` on the child's. Both processes see the same GPU
    (the runner's ``CUDA_VISIBLE_DEVICES``), so device index 0 names it on both sides.

    torch counts a shared block's consumers in a small shared-memory file; the child cannot reach
    it (its ``/dev/shm`` is private) and is killed rather than left to clean up, so
    :meth:`release` drops the child's count itself once the job is over, and torch frees the block.
    """

    def allocate(self, nbytes: int) -> torch.Tensor:
        return torch.empty(nbytes, dtype=torch.uint8, device="cuda")

    def share(self, buf: torch.Tensor) -> dict[str, Any]:
        (device, handle, size, offset, ref_counter, ref_offset, event, event_sync) = buf.untyped_storage()._share_cuda_()
        return {"device": int(device), "handle": bytes(handle).hex(), "size": int(size), "offset": int(offset),
                "ref_counter": bytes(ref_counter).hex(), "ref_offset": int(ref_offset),
                "event": bytes(event).hex() if event else "", "event_sync": bool(event_sync)}

    def open(self, h: dict[str, Any]) -> torch.Tensor:
        storage = torch.UntypedStorage._new_shared_cuda(
            int(h["device"]), bytes.fromhex(h["handle"]), int(h["size"]), int(h["offset"]),
            bytes.fromhex(h["ref_counter"]), int(h["ref_offset"]), bytes.fromhex(h["event"]) or None,
            bool(h["event_sync"]))
        return torch.empty(0, dtype=torch.uint8, device=f"cuda:{int(h['device'])}").set_(storage)

    def fence(self) -> None:
        torch.cuda.synchronize()

    def release(self, buf: torch.Tensor, h: dict[str, Any]) -> None:
        import ctypes

        try:  # the consumer's count, in the judge's own /dev/shm (torch's CUDA IPC reference counter)
            name = bytes.fromhex(h["ref_counter"]).decode().lstrip("/")
            with open(f"/dev/shm/{name}", "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
                counter = ctypes.c_int64.from_buffer(m, 8 * int(h["ref_offset"]))
                counter.value = max(0, counter.value - 1)
                del counter
        except (OSError, ValueError):
            pass
        del buf
        torch.cuda.ipc_collect()
