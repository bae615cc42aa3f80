"""Shared slots: tensor data between the judge and the child without the socket.

One anonymous memory file (``memfd_create(2)``) per child, mapped by both. While the child is
frozen (:mod:`~kernelrank.runner.containment.cgroups`) the judge writes a call's inputs into it
(:meth:`Arena.place`) and reserves an output slot after them; the ``go`` request carries only
the layout (offsets, dtypes, shapes). Inside the window the child builds tensors that *are* that
memory (:meth:`~kernelrank.runner.submission.mapping.Mapping.build`: views, no copy), calls the kernel, and copies the output into the
output slot (:meth:`~kernelrank.runner.submission.mapping.Mapping.put_output`); after the child is frozen again the judge reads it from
there (:meth:`Arena.read_output`), so no code of the child runs while its inputs are placed or its
output is read. Inputs may be overwritten by the kernel: the judge keeps its own pristine copy and
places fresh ones for every input set.

On CUDA (:class:`~kernelrank.runner.judge.device_slots.DeviceSlots`) the slots are device memory: the judge generates the
inputs on the GPU, keeps its pristine copy there, and copies each input set into one device
buffer, an allocation of its own (``cuMemCreate``, zeroed), that it shares with the child as a
file descriptor (``cuMemExportToShareableHandle``; the descriptor crosses the socket as
``SCM_RIGHTS`` beside the layout). The child maps it once per buffer (:class:`~kernelrank.runner.submission.mapping.Mapping`), builds its input tensors as views of it, and copies its
output into the output slot on the device before it answers; the judge checks that output on the
device. No tensor data crosses the host: only control messages cross the socket. The IPC calls
themselves are :class:`~kernelrank.runner.slotformat.CudaDriver` (GPU-only); the layout, the
protocol and :class:`~kernelrank.runner.slotformat.CudaVmm` are the same code on the CPU, tested
with a stand-in driver over memory files.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import select
import threading
from typing import TYPE_CHECKING, Any, Callable

import torch

from kernelrank.runner.judge import procmaps
from kernelrank.runner.slotformat import ALIGN, SlotError, advise_huge, aligned
from kernelrank.runner.wire import DTYPES, dtype_name

if TYPE_CHECKING:
    from kernelrank.runner.judge.device_slots import DeviceSlots

#: The memory file grows in steps of at least this many bytes.
GROW_BYTES = 1 << 20
#: Largest copy :meth:`Arena.place_sets` hands its ``copy`` at once: 4 MiB, so that a request's
#: sets (16 MiB each for softmax's float32 case) split evenly over the judge's threads.
COPY_PIECE_BYTES = 4 << 20


def nbytes(value: Any) -> int:
    """Bytes the tensors of a nested value take once placed (aligned)."""
    if isinstance(value, torch.Tensor):
        return aligned(value.numel() * value.element_size())
    if isinstance(value, (list, tuple)):
        return sum(nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(nbytes(v) for v in value.values())
    return 0


class Arena:
    """The judge's side: owns the memory file (``fd``, inherited by the child), and on CUDA the
    device slots (``ipc``: a :class:`~kernelrank.runner.slotformat.CudaVmm`), which then hold every
    input set and output instead of the memory file."""

    def __init__(self, ipc: Any = None) -> None:
        # sealed against shrinking: a child that truncated the file would make the judge's next
        # write through its mapping past the end a SIGBUS in the judge (growing stays allowed)
        self.fd = os.memfd_create("kernelrank-slots", os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
        fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
        self.size = 0
        self._map: mmap.mmap | None = None
        self.out_offset = 0
        self.out_bytes = 0
        #: per input set of the last layout, its output slot ``(offset, bytes)``
        self.outs: list[tuple[int, int]] = []
        #: per input set of the last layout, its tree (:func:`place_tree`), and the output buffers
        #: placed with it (name: indices and keys), which an output may name (:func:`dest_slot`)
        self.trees: list[Any] = []
        self.dests: dict[str, list[Any]] = {}
        self.device: DeviceSlots | None = None
        if ipc is not None:  # GPU slots (their module imports this one's helpers)
            from kernelrank.runner.judge.device_slots import DeviceSlots

            self.device = DeviceSlots(ipc)

    def _ensure(self, size: int) -> None:
        if size <= self.size and self._map is not None:
            return
        new = max(GROW_BYTES, 1 << (max(size, 1) - 1).bit_length())
        if os.fstat(self.fd).st_size < new:  # the child may have grown it; shrinking is sealed
            os.ftruncate(self.fd, new)
        if self._map is not None:
            self._map.close()
        self._map = mmap.mmap(self.fd, new)
        advise_huge(self._map)
        self.size = new

    def grow(self, nbytes: int) -> int:
        """Make the memory file hold at least ``nbytes`` (input sets to come); its size, which
        the layouts placed next will give (the child prepares its mapping at it: ``reserve``).
        On device slots, 0: nothing to prepare."""
        if self.device is not None:
            return 0
        self._ensure(nbytes + ALIGN)
        return self.size

    def place(self, data: Any, out_bytes: int, direct: bool = False,
              dests: dict[str, list[Any]] | None = None) -> dict[str, Any]:
        """Write the tensors of ``data`` (any nesting of lists, tuples, string-keyed dicts) and
        reserve ``out_bytes`` for the output; returns the layout the ``go`` request carries.
        ``direct``: the output will be read from the child's own memory (``go``'s ``direct``), so
        ``out_bytes`` only bounds its size and takes no room in the file (:meth:`place_sets`).
        ``dests``: the set's output buffers (name: its indices and keys in ``data``), which the
        layout names for the child and an output may be (:func:`dest_slot`). Call only while the
        child is frozen."""
        if self.device is not None:
            return self.device.place(data, out_bytes, dests)
        return self.place_sets([data], out_bytes, direct, single=True, dests=dests)

    def place_sets(self, sets: list[Any], out_bytes: int, direct: bool = False,
                   single: bool = False, copy: Callable[[list[tuple[torch.Tensor, torch.Tensor]]], Any] | None = None,
                   dests: dict[str, list[Any]] | None = None) -> dict[str, Any]:
        """Several input sets for one request of one call per set (CPU slots only), each followed
        by an output slot of ``out_bytes``; the layout ``{"size", "sets": [{"data", "out"}, ...]}``
        that a ``go`` request carries (``single``: one set, as :meth:`place` lays it out). Call
        only while the child is frozen.

        With ``direct`` (CPU outputs read from the child's memory: ``go``'s ``direct``), the
        output slots take no room in the file: each one's size still bounds its output, and all of
        them start past the last input set, which the child never writes to (its outputs are
        where its kernel left them). Reserved, the rooms would be most of the file, which the
        child's first request of a larger layout maps in whole (215 MiB and 0.5 s of pages made and
        zeroed for five softmax sets of 16 MiB, in each process: docs/research/bench-history.md).

        ``copy``: does the copies, a list of ``(destination, source)`` byte tensors of at most
        :data:`COPY_PIECE_BYTES` each (the judge's threads: :func:`copy_pieces`); default: one
        after the other, in this thread.

        Raises:
            SlotError: several sets on device slots (a request there holds one input set).
        """
        if self.device is not None:
            raise SlotError("device slots take one input set per request")
        room = aligned(out_bytes)
        inputs = sum(nbytes(d) for d in sets)
        self._ensure(inputs + (0 if direct else room * len(sets)) + ALIGN)
        assert self._map is not None
        whole = torch.frombuffer(self._map, dtype=torch.uint8)
        cursor, trees, offsets, pending = [0], [], [], []
        for data in sets:
            trees.append(place_tree(data, whole, cursor, pending))
            offsets.append(inputs if direct else cursor[0])
            if not direct:
                cursor[0] += room
        (copy or copy_pieces)(pending)
        self.outs = [(offset, room) for offset in offsets]
        self.trees, self.dests = trees, dict(dests or {})
        self.out_offset, self.out_bytes = self.outs[0]
        named = {"dests": dests} if dests else {}
        if single:
            return {"size": self.size, "data": trees[0], "out": [offsets[0], room], **named}
        return {"size": self.size, "sets": [{"data": t, "out": [o, room]} for t, o in zip(trees, offsets)], **named}

    def _out_slot(self, index: int) -> tuple[int, int]:
        """``(offset, bytes)`` of the ``index``-th input set's output slot.

        Raises:
            SlotError: no such input set was placed.
        """
        if not 0 <= index < max(1, len(self.outs)):
            raise SlotError("an output for an input set that was not placed")
        return self.outs[index] if self.outs else (self.out_offset, self.out_bytes)

    def _leaf_slot(self, desc: Any, index: int) -> tuple[int, int, Any]:
        """``(offset, bytes, description)`` of the memory one output tensor is read from: an output
        buffer's own slot, as the judge laid it out (:func:`dest_slot`: its dtype and shape, not the
        child's word), else the ``index``-th set's output slot, ``"at"`` bytes in for a tensor of a
        tuple, list or dict (:func:`leaf_offset`)."""
        if isinstance(desc, dict) and "dest" in desc:
            if not 0 <= index < len(self.trees):
                raise SlotError("an output buffer of an input set that was not placed")
            offset, own = dest_slot(self.trees[index], self.dests, desc.get("dest"))
            return offset, checked_output(own, 1 << 62)[3], own
        out_offset, out_bytes = self._out_slot(index)
        at = leaf_offset(desc, out_bytes)
        return out_offset + at, out_bytes - at, desc

    def read_output(self, desc: Any, memory: ChildMemory | None = None, index: int = 0) -> torch.Tensor:
        """A copy of the output the child described (``{"dtype", "shape"}``) from its slot (the
        ``index``-th input set's, for a layout of several: :meth:`place_sets`), or, with
        ``"addr"``, read straight from the child's ``memory`` while it is frozen (no copy inside
        the window).

        Raises:
            SlotError: an unknown dtype, a malformed shape, or more bytes than the slot holds.
        """
        if self.device is not None:
            return self.device.read_output(desc)
        out_offset, out_bytes, desc = self._leaf_slot(desc, index)
        dtype, shape, numel, size = checked_output(desc, out_bytes)
        if numel == 0:
            return torch.empty(shape, dtype=dtype)
        if "addr" in desc:
            addr = _address(desc, memory, size)
            assert memory is not None  # _address says so
            # torch's allocator, not a bytearray: no zero-filling, and (with the judge's fixed malloc
            # thresholds, harness.evaluate) memory reused from its heap rather than fresh pages
            buf = torch.empty(size, dtype=torch.uint8)
            memory.read(buf, size, addr)
            return buf.view(dtype).view(shape)
        assert self._map is not None
        view = torch.frombuffer(self._map, dtype=torch.uint8, count=size, offset=out_offset)
        return view.clone().view(dtype).view(shape)

    def output_reader(self, desc: Any, memory: ChildMemory | None = None, index: int = 0,
                      scratch: int = 0) -> tuple[torch.dtype, list[int], Callable[[int, int], torch.Tensor]]:
        """The output the child described, as ``(dtype, shape, read)``, to be checked piece by
        piece (:func:`~kernelrank.runner.judge.checking.close_in_pieces`) rather than copied whole:
        ``read(start, stop)`` gives values ``start..stop-1`` (row-major) as a 1-D tensor of
        ``dtype``. From the slot (memory file), a view (no copy); with ``"addr"``, read from the
        child's ``memory`` into buffer ``scratch`` of the calling thread, which the
        next ``read`` into that buffer overwrites (pieces that stay in the cache, so the output is read
        once and never held whole; two outputs compared piece by piece use two buffers); from
        device slots, a view of the output there (no copy: it is read before the next input set is
        placed). Same arguments and errors as :meth:`read_output`.
        """
        if self.device is not None:
            whole = self.device.output_view(desc)
            flat = whole.view(-1)
            return whole.dtype, list(whole.shape), lambda a, b: flat[a:b]
        out_offset, out_bytes, desc = self._leaf_slot(desc, index)
        dtype, shape, numel, size = checked_output(desc, out_bytes)
        item = size // numel if numel else 1
        if "addr" in desc:
            addr = _address(desc, memory, size)
            assert memory is not None  # _address says so
            child_memory = memory

            def from_memory(a: int, b: int) -> torch.Tensor:
                n = (b - a) * item
                buf = _scratch(n, scratch)
                child_memory.read(buf, n, addr + a * item)
                return buf[:n].view(dtype)

            return dtype, shape, from_memory
        assert self._map is not None
        whole = (torch.frombuffer(self._map, dtype=torch.uint8, count=size, offset=out_offset).view(dtype)
                 if size else torch.empty(0, dtype=dtype))
        return dtype, shape, lambda a, b: whole[a:b]

    def close(self) -> None:
        if self.device is not None:
            self.device.close()
        if self._map is not None:
            self._map.close()
            self._map = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


_local = threading.local()


def _scratch(n: int, which: int = 0) -> torch.Tensor:
    """This thread's reusable buffer ``which`` of at least ``n`` bytes (:meth:`Arena.output_reader`)."""
    bufs = getattr(_local, "bufs", None)
    if bufs is None:
        bufs = _local.bufs = {}
    buf = bufs.get(which)
    if buf is None or buf.numel() < n:
        buf = bufs[which] = torch.empty(max(n, 1), dtype=torch.uint8)
    return buf


class AliasedOutput(SlotError):
    """An output the child holds in a mapping of the input slots (:meth:`ChildMemory.in_slots`)."""


def _address(desc: dict[str, Any], memory: ChildMemory | None, size: int = 0) -> int:
    """The address of an output the child holds in its own memory (``"addr"``), ``size`` bytes.

    Raises:
        SlotError: no ``memory`` to read it through, or not an address.
        AliasedOutput: bytes in a mapping of the slots' memory file (:meth:`ChildMemory.in_slots`).
    """
    addr = desc["addr"]
    if memory is None or type(addr) is not int or not 0 < addr < 1 << 64:
        raise SlotError("malformed output address")
    if memory.in_slots(addr, size):
        raise AliasedOutput("shares memory with an input (it lies in a mapping of the input slots): "
                            "return a new tensor, do not map, write into or return the inputs")
    return addr


class _Iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def _process_vm_readv() -> Any:
    """libc's ``process_vm_readv(2)`` through ctypes (which lets go of the GIL during the call), or
    ``None`` where libc has none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.process_vm_readv
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_ssize_t
    fn.argtypes = [ctypes.c_int, ctypes.POINTER(_Iovec), ctypes.c_ulong, ctypes.POINTER(_Iovec), ctypes.c_ulong,
                   ctypes.c_ulong]
    return fn


_VM_READV = _process_vm_readv()
#: the bytes at the child's ``memory_probe`` address (runner/submission/child.py): 0, 1, ..., 63
_PROBE = bytes(range(64))


class ChildMemory:
    """A child's memory, read by the judge while the child is frozen: outputs checked where the
    child left them (:meth:`Arena.output_reader`), never copied inside its timed window.

    Two ways in, the same bytes: ``process_vm_readv(2)`` (one copy, straight into the judge's
    buffer: a 16 MiB output in 1.7 ms, in 256 KiB pieces), and ``/proc/<pid>/mem`` (the kernel
    copies through a page of its own: 4.3 ms; docs/research/bench-history.md). The file, opened
    once the child proved it readable (:meth:`open`), is the fallback wherever the call is refused
    (a seccomp profile, a kernel without it, a child that made itself undumpable after its start).
    ``process_vm_readv`` names the process by its pid, which could name another process once the
    child has died and been reaped; so each read is
    followed by a look at the child's pidfd (``pidfd_open(2)``): a child that has exited by then
    may have been gone during the read, and the read fails (:class:`SlotError`). Without a pidfd
    (kernels before 5.3) only the file is used.
    """

    def __init__(self, pid: int, fd: int, pidfd: int | None) -> None:
        self.pid, self.fd, self.pidfd = pid, fd, pidfd
        self._fast = pidfd is not None and _VM_READV is not None
        self._polls = threading.local()  # a poll object per thread: one may not be polled by two at once
        #: the slots' memory file (``(st_dev, st_ino)``, :meth:`watch_slots`) and, since the child
        #: last ran, the address ranges it is mapped at in the child (``None``: not read yet)
        self._slots: tuple[int, int] | None = None
        self._slot_spans: list[tuple[int, int]] | None = None
        self._spans_lock = threading.Lock()

    def watch_slots(self, fd: int) -> None:
        """Refuse outputs in any mapping of the memory file ``fd`` (the slots): a second mapping
        of it would let an output alias an input at another address."""
        st = os.fstat(fd)
        self._slots = (st.st_dev, st.st_ino)

    def ran(self) -> None:
        """The child may have run (thawed): its mappings are read again before the next check."""
        self._slot_spans = None

    def in_slots(self, addr: int, size: int) -> bool:
        """Whether ``[addr, addr + size)`` touches a mapping of the slots' memory file in the
        child, by its ``/proc/<pid>/maps`` (the kernel's, which the child cannot forge): asked
        for that range (:func:`~kernelrank.runner.judge.procmaps.maps_file`), or, on kernels
        without the query, the table read once per stretch the child was frozen (0.5-1 ms for a
        torch process)."""
        if self._slots is None:
            return False
        end = addr + max(1, size)
        answer = procmaps.maps_file(self.pid, self._slots[1], addr, end)
        if answer is not None:
            return answer
        with self._spans_lock:
            if self._slot_spans is None:
                self._slot_spans = procmaps.file_spans(self.pid, self._slots[1])
            spans = self._slot_spans
        return any(lo < end and addr < hi for lo, hi in spans)

    @property
    def method(self) -> str:
        """How reads go: ``"process_vm_readv"``, or ``"/proc/<pid>/mem"`` (also after a refusal)."""
        return "process_vm_readv" if self._fast else "/proc/<pid>/mem"

    @classmethod
    def open(cls, pid: int, probe: Any) -> ChildMemory | None:
        """The child's memory, if the judge reads the 64 known bytes (0, 1, ..., 63) at the
        child's ``probe`` address through ``/proc/<pid>/mem``; ``None`` where it may not (its
        outputs then come through their slots)."""
        if type(probe) is not int or probe <= 0:
            return None
        try:
            fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            readable = os.pread(fd, 64, probe) == _PROBE
        except OSError:
            readable = False
        if not readable:
            os.close(fd)
            return None
        try:
            pidfd: int | None = os.pidfd_open(pid)
        except (OSError, AttributeError):
            pidfd = None
        memory = cls(pid, fd, pidfd)
        try:  # the fast way must give the probe's bytes too, or it is not used
            probe_buf = torch.empty(64, dtype=torch.uint8)
            if memory._vm_read(probe_buf, 64, probe) and bytes(probe_buf.numpy()) != _PROBE:
                memory._refused()
        except SlotError:
            memory.close()
            return None
        return memory

    def read(self, buf: torch.Tensor, n: int, addr: int) -> None:
        """Fill the first ``n`` bytes of ``buf`` (a contiguous CPU ``uint8`` tensor) from the
        child's memory at ``addr``.

        Raises:
            SlotError: the memory could not be read (unmapped, or the process is gone).
        """
        if n > buf.numel() or not buf.is_contiguous():
            raise SlotError("a read into a buffer too small")
        if self._vm_read(buf, n, addr):
            return
        view = memoryview(buf.numpy())[:n]  # type: ignore[arg-type]
        done = 0
        try:
            while done < n:
                got = os.preadv(self.fd, [view[done:]], addr + done)
                if got <= 0:
                    raise SlotError("the output's memory could not be read")
                done += got
        except OSError as e:
            raise SlotError(f"the output's memory could not be read: {e}") from None

    def _vm_read(self, buf: torch.Tensor, n: int, addr: int) -> bool:
        """``process_vm_readv`` of ``n`` bytes at ``addr`` into ``buf``: ``True`` when done, ``False``
        when the call is not used or was refused (the caller reads the file instead).

        Raises:
            SlotError: a short read (unmapped memory), or the child had exited by its end.
        """
        if not self._fast:
            return False
        local, remote = _Iovec(buf.data_ptr(), n), _Iovec(addr, n)
        got = _VM_READV(self.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got < 0:
            err = ctypes.get_errno()
            if err in (errno.EPERM, errno.ENOSYS, errno.EACCES):
                self._refused()
                return False
            if err != errno.ESRCH and not self._gone():
                raise SlotError(f"the output's memory could not be read: {os.strerror(err)}")
            raise SlotError("the output's memory could not be read: the process is gone")
        if self._gone():  # exited: the pid may have named another process during the read
            raise SlotError("the output's memory could not be read: the process is gone")
        if got != n:
            raise SlotError("the output's memory could not be read (a short read)")
        return True

    def _gone(self) -> bool:
        """Whether the child has exited (its pidfd is readable), this thread's poll object asked."""
        poll = getattr(self._polls, "poll", None)
        if poll is None:
            poll = self._polls.poll = select.poll()
            poll.register(self.pidfd, select.POLLIN)
        return bool(poll.poll(0))

    def _refused(self) -> None:
        self._fast = False

    def close(self) -> None:
        """Close the file and the pidfd (idempotent)."""
        for fd in (self.fd, self.pidfd):
            if fd is not None and fd >= 0:
                os.close(fd)
        self.fd, self.pidfd, self._fast = -1, None, False


def leaf_offset(desc: Any, room: int) -> int:
    """Bytes into the output slot (of ``room`` bytes) where a tensor of an output lies: its ``"at"``
    (a container's tensors follow one another), 0 for a plain tensor's.

    Raises:
        SlotError: an ``"at"`` that is not a multiple of the alignment within the slot."""
    at = desc.get("at", 0) if isinstance(desc, dict) else 0
    if type(at) is not int or at < 0 or at % ALIGN or (at and at >= room):
        raise SlotError("malformed output offset")
    return at


def dest_slot(tree: Any, dests: dict[str, list[Any]], name: Any) -> tuple[int, dict[str, Any]]:
    """``(offset, {"dtype", "shape"})`` of the output buffer ``name`` an output names
    (``{"dest": name}``) in the layout the judge placed (``tree``, :func:`place_tree`'s, and the
    ``dests`` it placed with it: name to indices and keys): the judge's own record of where it put
    that buffer, never the child's word.

    Raises:
        SlotError: a name the judge did not place, or a path that leads to no tensor slot."""
    if not isinstance(name, str) or name not in dests:
        raise SlotError("an output buffer the input set does not have")
    node = tree
    for key in dests[name]:
        if isinstance(node, dict) and "__tuple__" in node:
            node = node["__tuple__"]
        elif isinstance(node, dict) and "__dict__" in node:
            node = node["__dict__"]
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            raise SlotError(f"output buffer {name!r} is not in the input set") from None
    if not isinstance(node, dict) or "__slot__" not in node:
        raise SlotError(f"output buffer {name!r} is not a tensor of the input set")
    return int(node["__slot__"]), {"dtype": node["dtype"], "shape": node["shape"]}


def checked_output(desc: Any, room: int) -> tuple[torch.dtype, list[int], int, int]:
    """``(dtype, shape, elements, bytes)`` of an output the child described, checked against a slot
    of ``room`` bytes.

    Raises:
        SlotError: an unknown dtype, a malformed shape, or more bytes than the slot holds.
    """
    if not isinstance(desc, dict) or desc.get("dtype") not in DTYPES or not isinstance(desc.get("shape"), list):
        raise SlotError("malformed output description")
    shape = desc["shape"]
    if not all(type(d) is int and 0 <= d < 1 << 40 for d in shape):
        raise SlotError("malformed output shape")
    dtype = DTYPES[desc["dtype"]]
    numel = 1
    for d in shape:
        numel *= d
    size = numel * torch.empty((), dtype=dtype).element_size()
    if size > room:
        raise SlotError(f"output of {size} bytes is larger than its slot ({room} bytes)")
    return dtype, shape, numel, size


def copy_pieces(pending: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Do the copies :func:`place_tree` left in ``pending`` (``(destination, source)``), in order."""
    for dst, src in pending:
        dst.copy_(src)


def place_tree(v: Any, whole: torch.Tensor, cursor: list[int],
           pending: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> Any:
    """Copy the tensors of ``v`` into ``whole`` (a byte tensor over the slots: host memory or, on
    CUDA, the device buffer) from ``cursor[0]`` on; the layout tree. Given ``pending``, the
    copies are appended to it instead, in pieces of at most :data:`COPY_PIECE_BYTES`, for the
    caller to do (:meth:`Arena.place_sets`)."""
    if isinstance(v, torch.Tensor):
        t = v.detach()
        if t.device != whole.device:  # pragma: no cover - only a CUDA input into host slots (no IPC)
            t = t.to(whole.device)
        t = t.contiguous()
        n = t.numel() * t.element_size()
        if n and pending is None:
            whole[cursor[0]:cursor[0] + n].copy_(t.view(-1).view(torch.uint8))
        elif n:
            src = t.view(-1).view(torch.uint8)
            for a in range(0, n, COPY_PIECE_BYTES):
                b = min(n, a + COPY_PIECE_BYTES)
                pending.append((whole[cursor[0] + a:cursor[0] + b], src[a:b]))
        out = {"__slot__": cursor[0], "dtype": dtype_name(t.dtype), "shape": list(t.shape),
               "device": v.device.type}
        cursor[0] += aligned(n)
        return out
    if isinstance(v, (list, tuple)):
        items = [place_tree(x, whole, cursor, pending) for x in v]
        return {"__tuple__": items} if isinstance(v, tuple) else items
    if isinstance(v, dict):
        return {"__dict__": {str(k): place_tree(x, whole, cursor, pending) for k, x in v.items()}}
    return v
