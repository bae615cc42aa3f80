"""The slots on a GPU (judge side): one device buffer, an allocation of its own shared with the
child as a file descriptor (:class:`~kernelrank.runner.slotformat.CudaVmm`), placed into and read
by the same layouts and protocol as the host's memory file (:mod:`kernelrank.runner.judge.slots`)."""

from __future__ import annotations

from typing import Any

import torch

from kernelrank.runner.judge.slots import (ALIGN, GROW_BYTES, aligned, checked_output, dest_slot, leaf_offset, nbytes,
                                           place_tree)


class DeviceSlots:
    """The judge's device slots: one device buffer shared with the child, grown (a new buffer,
    a new ``generation``) when an input set does not fit. The buffer holds only what the child
    may see: the input set placed last and its output room (zeroed when made); the judge's own
    copies, expected outputs and other sets stay in its own memory, which the child cannot map.

    Args:
        ipc: :class:`~kernelrank.runner.slotformat.CudaVmm` (``allocate``, ``share``, ``fence``,
            ``release``); tests pass one over a stand-in driver.

    The layout :meth:`place` returns is the host slots' tree plus ``"vmm": {"generation",
    "handle": {"fd", "size"}}``, the ``fd`` a :class:`~kernelrank.runner.wire.Fd` that crosses
    the socket as ``SCM_RIGHTS``; the child maps a handle once per generation. Every buffer shared
    stays allocated until :meth:`close` (the child may still map it), which releases them all.
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
        self.tree: Any = None
        self.dests: dict[str, list[Any]] = {}

    def place(self, data: Any, out_bytes: int, dests: dict[str, list[Any]] | None = None) -> dict[str, Any]:
        """Copy ``data``'s tensors (already on the device: the judge generated them there and
        keeps them as its pristine copy) into the buffer, reserve ``out_bytes``, wait until the
        copies are done (the child reads them from another process); the ``go`` layout."""
        need = nbytes(data) + aligned(out_bytes) + ALIGN
        if self.buf is None or need > self.size:
            size = max(GROW_BYTES, 1 << (need - 1).bit_length())
            self.buf = self.ipc.allocate(size)
            self.size = size
            self.generation += 1
            self.handle = self.ipc.share(self.buf)
            self._shared.append((self.buf, self.handle))
        assert self.buf is not None
        cursor = [0]
        tree = place_tree(data, self.buf, cursor)
        self.out_offset, self.out_bytes = cursor[0], aligned(out_bytes)
        self.tree, self.dests = tree, dict(dests or {})
        self.ipc.fence()
        return {"size": self.size, "data": tree, "out": [self.out_offset, self.out_bytes],
                "vmm": {"generation": self.generation, "handle": self.handle},
                **({"dests": self.dests} if self.dests else {})}

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
        assert self.buf is not None
        if isinstance(desc, dict) and "dest" in desc:  # an output buffer: its slot as the judge placed it
            offset, desc = dest_slot(self.tree, self.dests, desc.get("dest"))
            room = 1 << 62
        else:
            at = leaf_offset(desc, self.out_bytes)
            offset, room = self.out_offset + at, self.out_bytes - at
        dtype, shape, numel, size = checked_output(desc, room)
        if numel == 0:
            return torch.empty(shape, dtype=dtype, device=self.buf.device)
        return self.buf[offset:offset + size].view(dtype).view(shape)

    def close(self) -> None:
        """Release every buffer shared (the child is gone: its mappings with it)."""
        for buf, handle in self._shared:
            self.ipc.release(buf, handle)
        self._shared.clear()
        self.buf = None
