"""The shared slots as the child sees them (the submission's process): the memory file mapped, or the
judge's device buffer mapped from the descriptor it passed (:class:`~kernelrank.runner.slotformat.CudaVmm`),
and layouts turned into tensors; outputs described for the judge (read in place, or copied into
the output slot).

The judge's side of the same memory, the layouts and the protocol: :mod:`kernelrank.runner.judge.slots`.
"""

from __future__ import annotations

import mmap
from typing import Any

import torch

from kernelrank.runner.slotformat import ALIGN, MADV_POPULATE_WRITE, SlotError, advise_huge, aligned, output_leaves
from kernelrank.runner.wire import DTYPES, Fd, dtype_name
from kernelrank.vocab import DeviceClass


class Mapping:
    """The child's side: maps the memory file (or, on CUDA, the judge's device buffer through
    ``ipc``, a :class:`~kernelrank.runner.slotformat.CudaVmm`) and turns layouts into tensors."""

    def __init__(self, fd: int, ipc: Any = None):
        self.fd = fd
        self.size = 0
        self._map: mmap.mmap | None = None
        #: outputs of this request the judge reads from this process's memory (``direct``), kept
        #: alive until the next request
        self.held: list[Any] = []
        self.ipc = ipc
        self.device_buf: torch.Tensor | None = None
        self.generation = 0
        #: the input tensor objects, one per place in the input set's tree, re-pointed at each
        #: call's slots (:meth:`_slot_tensor`)
        self._tensors: dict[tuple[Any, ...], torch.Tensor] = {}
        #: the last built input set's output buffers (the problem's ``output_buffers``), by name
        self.dests: dict[str, torch.Tensor] = {}

    def prepare(self, size: int) -> bool:
        """Map the memory file at ``size`` bytes (the size the judge's next layouts give) with its
        pages faulted in, writable (``MADV_POPULATE_WRITE``), so a kernel's first touches of its
        slots do not fault in a timed call; whether they could be (Linux 5.14+; else they fault
        on first touch, in a request the judge does not count)."""
        self._remap(size)
        assert self._map is not None
        try:
            self._map.madvise(MADV_POPULATE_WRITE)
        except (OSError, ValueError):
            return False
        return True

    def _remap(self, size: int) -> None:
        if size != self.size:
            # the old mapping stays alive as long as tensors of earlier calls hold it. Not populated
            # here: a kernel's first touches of its slots fault, in requests the judge does not
            # count (pairs.Side.settle), unless the judge prepared them (prepare)
            self._map = mmap.mmap(self.fd, size, flags=mmap.MAP_SHARED)
            advise_huge(self._map)
            self.size = size

    def build(self, layout: dict[str, Any], device: str = DeviceClass.cpu) -> Any:
        """The input set described by ``layout``, as tensors over the shared memory: the memory
        file's (CPU), or the device buffer's when the layout names one (``vmm``), mapped once per
        generation from the descriptor that came with the message (closed here either way).

        Each tensor is the same Python object on every call (per place in the set's tree and
        dtype), re-pointed at this call's slot: which objects a kernel receives depends only on
        the calls the judge made, never on when CPython happens to reuse a freed object's
        address. So a cache keyed by ``id()`` of an input hits on the second call, on every
        path, and its stale output fails; with fresh objects it hit only now and then, and a
        warm runner and ``kernelrank eval`` judged it differently."""
        self.out = layout["out"]
        data = self._build_data(layout, device)
        self.dests = _find_dests(data, layout.get("dests"))
        return data

    def _build_data(self, layout: dict[str, Any], device: str) -> Any:
        shared = layout.get("vmm")
        if shared is not None:
            handle = shared.get("handle") if isinstance(shared, dict) else None
            try:
                if self.ipc is None:
                    raise SlotError("device slots offered, and this process has no device memory sharing")
                if not isinstance(handle, dict):
                    raise SlotError("device slots without a handle")
                if shared.get("generation") != self.generation:
                    # the judge's new device buffer; the old one stays mapped while tensors hold it
                    self.device_buf = self.ipc.open(handle)
                    self.generation = shared["generation"]
            finally:  # mapped (the mapping holds the memory) or already mapped: the descriptor is done
                fd = handle.get("fd") if isinstance(handle, dict) else None
                if isinstance(fd, Fd):
                    fd.close()
            assert self.device_buf is not None
            return self._build(layout["data"], self.device_buf, device, ())
        self._remap(int(layout["size"]))
        return self._build(layout["data"], torch.frombuffer(self._map, dtype=torch.uint8) if self._map is not None
                           else None, device, ())

    def _build(self, v: Any, whole: torch.Tensor | None, device: str, path: tuple[Any, ...]) -> Any:
        """Tensors over ``whole`` (the slots as bytes: host memory, or the judge's device buffer)
        for the layout ``v``; ``path`` is where ``v`` lies in the input set's tree."""
        if isinstance(v, dict):
            if "__slot__" in v:
                dtype = DTYPES[v["dtype"]]
                shape = [int(d) for d in v["shape"]]
                numel = 1
                for d in shape:
                    numel *= d
                if numel == 0 or whole is None:
                    t = torch.empty(shape, dtype=dtype, device=whole.device if whole is not None else "cpu")
                else:
                    off = int(v["__slot__"])
                    n = numel * torch.empty((), dtype=dtype).element_size()
                    if off < 0 or off + n > whole.numel() or off % ALIGN:
                        raise SlotError("a slot outside the shared memory")
                    t = self._slot_tensor(path, whole, off, dtype, shape)
                if device != DeviceClass.cpu and t.device.type == "cpu" and v.get("device") != DeviceClass.cpu:  # pragma: no cover - GPU-only
                    t = t.to(device)
                return t
            if "__tuple__" in v:
                return tuple(self._build(x, whole, device, (*path, i)) for i, x in enumerate(v["__tuple__"]))
            items = v["__dict__"] if "__dict__" in v else v
            return {k: self._build(x, whole, device, (*path, k)) for k, x in items.items()}
        if isinstance(v, list):
            return [self._build(x, whole, device, (*path, i)) for i, x in enumerate(v)]
        return v

    def _slot_tensor(self, path: tuple[Any, ...], whole: torch.Tensor, off: int, dtype: torch.dtype,
                     shape: list[int]) -> torch.Tensor:
        """The input tensor object kept for ``path``, re-pointed (``Tensor.set_``) at ``shape``
        contiguous ``dtype`` values from byte ``off`` of ``whole``; a new object the first time,
        after a change of dtype or device, or when the kernel made the old one require grad or
        changed its class (``set_`` refuses or keeps those).

        Raises :class:`SlotError` when ``off`` is not a multiple of the dtype's size."""
        key = (*path, dtype)
        t = self._tensors.get(key)
        if type(t) is not torch.Tensor or t.device != whole.device or t.requires_grad:  # noqa: E721
            t = torch.empty(0, dtype=dtype, device=whole.device)
            self._tensors[key] = t
        first = whole.storage_offset() + off
        if first % t.element_size():
            raise SlotError("a slot not aligned to its dtype")
        t.set_(whole.untyped_storage(), first // t.element_size(), shape)  # no stride given: contiguous
        return t

    def put_output(self, out: Any, direct: bool = False) -> dict[str, Any]:
        """Describe an output for the judge (or the reason it cannot be checked): a plain tensor, or a
        tuple, list or dict of them (:func:`~kernelrank.runner.slotformat.output_leaves`), each
        tensor: the input set's output buffer it is, by name (``{"dest": name}``: the judge reads
        its own slot); with ``direct`` and on the CPU, its address, for the judge to read from this
        process's memory once it is frozen (kept alive in ``held`` until the next request);
        otherwise copied into the output slot (a container's tensors one after the other, each at
        ``"at"`` bytes into it)."""
        leaves = output_leaves(out)
        if leaves is None:
            return {"out": None, "out_type": f"{type(out).__module__}.{type(out).__qualname__}"}
        if type(out) is torch.Tensor:  # noqa: E721 - the plain form, at the slot's start
            desc = self._put_leaf(out, direct, [0], tree=False)
            if isinstance(desc, str):
                return {"out": None, "out_type": desc}
            return {"out": desc, "out_type": "torch.Tensor", "out_device": str(out.device)}
        cursor = [0]
        failed: list[str] = []
        tree = self._put_tree(out, direct, cursor, failed)
        if failed:
            return {"out": None, "out_type": failed[0]}
        return {"out": {"tree": tree}, "out_type": type(out).__name__, "out_device": str(leaves[0].device)}

    def _put_tree(self, v: Any, direct: bool, cursor: list[int], failed: list[str]) -> Any:
        if type(v) is torch.Tensor:  # noqa: E721
            desc = self._put_leaf(v, direct, cursor, tree=True)
            if isinstance(desc, str):
                failed.append(desc)
                return None
            return desc
        if type(v) is dict:
            return {"__dict__": {k: self._put_tree(x, direct, cursor, failed) for k, x in v.items()}}
        items = [self._put_tree(x, direct, cursor, failed) for x in v]
        return items if type(v) is list else {"__tuple__": items}  # torch's named tuples as tuples

    def _put_leaf(self, out: torch.Tensor, direct: bool, cursor: list[int], tree: bool) -> dict[str, Any] | str:
        """One tensor of an output described (:meth:`put_output`); a string: why it cannot be checked."""
        for name, buf in self.dests.items():
            if same_buffer(out, buf):
                return {"dest": name, "device": str(out.device)}
        host = out.detach()
        device = str(host.device)
        whole = self.device_buf
        if whole is not None and host.device != whole.device:  # the judge checks on its device
            whole = None
        if whole is None and host.device.type != "cpu":  # pragma: no cover - GPU-only (no device slots)
            host = host.cpu()
        host = host.contiguous()
        if host.dtype not in _WIRE_DTYPES:
            return f"torch.Tensor of dtype {host.dtype}"
        n = host.numel() * host.element_size()
        at = cursor[0]
        offset, room = int(self.out[0]) + at, int(self.out[1]) - at
        desc: dict[str, Any] = {"dtype": dtype_name(host.dtype), "shape": list(host.shape)}
        if tree:
            desc.update(at=at, device=device)
        if n > room:
            return f"torch.Tensor of {n} bytes, more than the reference's output allows"
        if whole is not None:
            if n:  # device to device, into the judge's buffer; waited for before answering
                whole[offset:offset + n].copy_(host.view(-1).view(torch.uint8))
                self.ipc.fence()
        elif direct and device == DeviceClass.cpu and n:
            self.held.append(host)
            desc["addr"] = host.data_ptr()
            return desc  # read where it is: takes no room in the slot
        elif n:
            assert self._map is not None
            torch.frombuffer(self._map, dtype=torch.uint8, count=n, offset=offset).copy_(host.view(-1).view(torch.uint8))
        cursor[0] = at + aligned(n)
        return desc


def same_buffer(out: torch.Tensor, buf: torch.Tensor) -> bool:
    """Whether ``out`` is the output buffer ``buf`` itself (its memory, dtype and shape; contiguous)."""
    return (out.device == buf.device and out.dtype == buf.dtype and out.shape == buf.shape and out.is_contiguous()
            and (out.numel() == 0 or out.data_ptr() == buf.data_ptr()))


def _find_dests(data: Any, dests: Any) -> dict[str, torch.Tensor]:
    """The tensors of an input set at the judge's ``dests`` (name: list of indices and keys)."""
    found: dict[str, torch.Tensor] = {}
    if not isinstance(dests, dict):
        return found
    for name, keys in dests.items():
        v = data
        try:
            for k in keys:
                v = v[k]
        except (KeyError, IndexError, TypeError):
            continue
        if type(v) is torch.Tensor:  # noqa: E721
            found[str(name)] = v
    return found


_WIRE_DTYPES = frozenset(DTYPES.values())
