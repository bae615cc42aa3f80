"""[issue 16] The slots on a GPU (judge side): one device buffer shared with the child through CUDA
IPC (:class:`CudaIpc`, GPU-only), placed into and read by the same layouts and protocol as the
host's memory file (:mod:`kernelrank.runner.judge.slots`)."""

from __future__ import annotations

import mmap
from typing import Any

import torch

from kernelrank.runner.judge.slots import ALIGN, GROW_BYTES, SlotError, _align, _described, _place, nbytes


class DeviceSlots:
    """[issue 16] The judge's device slots: one device buffer shared with the child through CUDA
    IPC, grown (a new buffer, a new ``generation``) when an input set does not fit.

    Args:
        ipc: :class:`CudaIpc` (``allocate``, ``share``, ``fence``, ``release``); tests pass an
            in-process stand-in.

    The layout :meth:`place` returns is the host slots' tree plus ``"ipc": {"generation",
    "handle"}``; the child opens a handle once per generation. Every buffer shared stays allocated
    until :meth:`close` (the child may still map it), which releases them all.
    """

    def __init__(self, ipc: Any):
        self.ipc = ipc
        self.buf: torch.Tensor | None = None
        self.size = 0
        self.generation = 0
        self.handle: Any = None
        self.out_offset = 0
        self.out_bytes = 0
        self._shared: list[tuple[torch.Tensor, Any]] = []

    def place(self, data: Any, out_bytes: int) -> dict[str, Any]:
        """Copy ``data``'s tensors (already on the device: the judge generated them there and
        keeps them as its pristine copy) into the buffer, reserve ``out_bytes``, wait until the
        copies are done (the child reads them from another process); the ``go`` layout."""
        need = nbytes(data) + _align(out_bytes) + ALIGN
        if self.buf is None or need > self.size:
            size = max(GROW_BYTES, 1 << (need - 1).bit_length())
            self.buf = self.ipc.allocate(size)
            self.size = size
            self.generation += 1
            self.handle = self.ipc.share(self.buf)
            self._shared.append((self.buf, self.handle))
        assert self.buf is not None
        cursor = [0]
        tree = _place(data, self.buf, cursor)
        self.out_offset, self.out_bytes = cursor[0], _align(out_bytes)
        self.ipc.fence()
        return {"size": self.size, "data": tree, "out": [self.out_offset, self.out_bytes],
                "ipc": {"generation": self.generation, "handle": self.handle}}

    def read_output(self, desc: Any) -> torch.Tensor:
        """A device copy of the output the child wrote into its slot (after it answered: it waited
        for its device first), checked on the device by the judge.

        Raises:
            SlotError: as :meth:`~kernelrank.runner.judge.slots.Arena.read_output`.
        """
        return self.output_view(desc).clone()

    def output_view(self, desc: Any) -> torch.Tensor:
        """The output the child wrote into its slot, as a view of the device buffer (valid until
        the next :meth:`place`).

        Raises:
            SlotError: as :meth:`~kernelrank.runner.judge.slots.Arena.read_output`.
        """
        dtype, shape, numel, size = _described(desc, self.out_bytes)
        assert self.buf is not None
        if numel == 0:
            return torch.empty(shape, dtype=dtype, device=self.buf.device)
        return self.buf[self.out_offset:self.out_offset + size].view(dtype).view(shape)

    def close(self) -> None:
        for buf, handle in self._shared:
            self.ipc.release(buf, handle)
        self._shared.clear()
        self.buf = None


class CudaIpc:  # pragma: no cover - GPU-only: CUDA IPC through torch; tests/runner/test_device_slots.py uses a stand-in
    """CUDA IPC for :class:`DeviceSlots` (judge) and :class:`~kernelrank.runner.submission.mapping.Mapping` (child), as
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
