"""The CUDA half of the shared slots, on the CPU: :class:`~kernelrank.runner.slotformat.CudaVmm`
over a stand-in for the driver calls (:mod:`tests.runner.simvmm`: memory files for device
allocations); the real calls need a GPU (tests/runner/test_cuda_device.py).

What is checked here is everything but the driver: every slot buffer a fresh allocation of its
own, zeroed, and nothing else ever exported; its descriptor crossing the channel as
``SCM_RIGHTS`` beside a layout that carries no legacy IPC handle, mapped once per buffer, in
another process in its own user and PID namespaces too; the child's tensors being the shared
memory (no copy); the output written into its slot and read back by the judge; growth; release."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelrank.runner.judge.slots import ALIGN, COPY_PIECE_BYTES, Arena, SlotError, nbytes
from kernelrank.runner.slotformat import CudaVmm
from kernelrank.runner.submission.mapping import Mapping
from kernelrank.runner.wire import MAX_FDS, Fd, Link, encode
from tests.runner.simvmm import GRANULARITY, MemfdDriver


class Wire:
    """The judge's and the child's ends of a channel in one process: a layout sent as the judge
    sends a ``go`` request (its descriptor beside it), received as the child receives it."""

    def __init__(self) -> None:
        a, b = socket.socketpair()
        self.judge, self.child = Link(a), Link(b, max_fds=MAX_FDS)

    def __call__(self, layout: dict[str, Any]) -> dict[str, Any]:
        self.judge.send({"op": "go", "inputs": layout}, time.monotonic() + 5)
        return self.child.recv(time.monotonic() + 5)["inputs"]


def _pair() -> tuple[Arena, Mapping, MemfdDriver, MemfdDriver, Wire]:
    """The judge's slots and the child's view, each with its own driver (as two processes)."""
    judge, child = MemfdDriver(), MemfdDriver()
    arena = Arena(ipc=CudaVmm(judge))
    return arena, Mapping(arena.fd, ipc=CudaVmm(child)), judge, child, Wire()


def test_a_slot_buffer_is_a_fresh_allocation_zeroed_and_only_it_is_exported() -> None:
    driver = MemfdDriver()
    vmm = CudaVmm(driver)
    buf = vmm.allocate(5000)
    assert buf.numel() == 2 * GRANULARITY and len(driver.created) == 1  # its own allocation, rounded up
    assert os.pread(driver.created[0], 2 * GRANULARITY, 0) == bytes(2 * GRANULARITY)  # made STALE, zeroed
    for other in (torch.zeros(2 * GRANULARITY, dtype=torch.uint8), buf[GRANULARITY:], buf[:GRANULARITY]):
        with pytest.raises(SlotError):
            vmm.share(other)  # never memory of torch's allocator, never part of a buffer
    assert driver.exported == []
    handle = vmm.share(buf)
    assert set(handle) == {"fd", "size"} and handle["size"] == 2 * GRANULARITY
    assert vmm.share(buf)["fd"].fd == handle["fd"].fd and len(driver.exported) == 1  # exported once
    assert os.fstat(handle["fd"].fd).st_ino == os.fstat(driver.created[0]).st_ino  # that allocation
    with pytest.raises(SlotError):
        vmm.allocate(0)


def test_the_layout_carries_a_descriptor_and_no_legacy_ipc_handle() -> None:
    arena, _, judge, _, _ = _pair()
    layout = arena.place((torch.randn(33, 7),), out_bytes=64)
    fds: list[int] = []
    header, _ = encode({"op": "go", "inputs": layout}, fds)
    shared = header["body"]["__dict__"]["inputs"]["__dict__"]["vmm"]["__dict__"]
    assert shared["generation"] == 1
    assert shared["handle"] == {"__dict__": {"fd": {"__fd__": 0}, "size": arena.device.size}}
    assert fds == judge.exported  # the exported descriptor, passed beside the JSON
    text = json.dumps(header)
    assert "ipc" not in text and "ref_counter" not in text and "event" not in text


def test_a_slot_holds_the_placed_set_its_output_room_and_zeros() -> None:
    """What the child can map is the slot buffer; after placing a set it holds that set's bytes
    and zeros, nothing of the judge's other memory (its pristine copies stay its own)."""
    arena, _, judge, _, _ = _pair()
    a, b = torch.randn(100), torch.arange(7, dtype=torch.int32)
    layout = arena.place((a, b), out_bytes=400)
    seen = bytearray(os.pread(judge.exported[0], arena.device.size, 0))  # what an importer maps
    for slot, t in zip(layout["data"]["__tuple__"], (a, b)):
        n = t.numel() * t.element_size()
        assert bytes(seen[slot["__slot__"]:slot["__slot__"] + n]) == t.numpy().tobytes()
        seen[slot["__slot__"]:slot["__slot__"] + n] = bytes(n)
    assert seen == bytes(len(seen))
    assert a.data_ptr() != arena.device.buf.data_ptr()


def test_inputs_are_the_shared_memory_and_only_the_layout_and_a_descriptor_cross() -> None:
    arena, child, judge, mapped, wire = _pair()
    a = torch.randn(33, 7)
    b = torch.arange(10, dtype=torch.int32)
    data = (a, {"b": b, "k": 3}, [torch.empty(0)])
    layout = wire(arena.place(data, out_bytes=a.numel() * 4))
    assert layout["vmm"]["generation"] == 1 and isinstance(layout["vmm"]["handle"]["fd"], Fd)
    assert judge.syncs == 1  # the judge waited for its copies before the child may run
    got = child.build(layout, device="cpu")
    assert torch.equal(got[0], a) and torch.equal(got[1]["b"], b) and got[1]["k"] == 3
    assert got[2][0].numel() == 0
    assert len(mapped.imported) == 1 and layout["vmm"]["handle"]["fd"].fd == -1  # mapped, then closed
    arena.device.buf.zero_()  # the judge's writes are the child's tensors' values: one memory, no copy
    assert not got[0].any() and not got[1]["b"].any()
    assert layout["data"]["__tuple__"][0]["__slot__"] % ALIGN == 0


def test_output_goes_to_its_slot_and_the_judge_reads_it() -> None:
    arena, child, judge, mapped, wire = _pair()
    a = torch.randn(64, 16)
    (x,) = child.build(wire(arena.place((a,), out_bytes=a.numel() * 4)))
    out = x * 2
    desc = child.put_output(out)
    assert desc["out_type"] == "torch.Tensor" and "addr" not in desc["out"]
    back = arena.read_output(json.loads(json.dumps(desc["out"])))
    assert torch.equal(back, a * 2)
    assert (judge.syncs, mapped.syncs) == (1, 1)  # placed; the child's copy into the slot waited for


def test_the_buffer_is_mapped_once_per_generation_and_a_bigger_set_grows_it() -> None:
    arena, child, judge, mapped, wire = _pair()
    small = (torch.randn(8),)
    for _ in range(3):
        layout = wire(arena.place(small, 64))
        child.build(layout)
        assert layout["vmm"]["handle"]["fd"].fd == -1  # each request's descriptor closed by the child
    assert len(mapped.imported) == 1 and arena.device is not None and arena.device.generation == 1
    big = (torch.randn(1 << 19),)  # 2 MiB: beyond the first 1 MiB buffer
    (x,) = child.build(wire(arena.place(big, 64)))
    assert len(mapped.imported) == 2 and arena.device.generation == 2 and len(judge.created) == 2
    assert torch.equal(x, big[0])
    arena.close()
    assert judge.released == judge.created and len(judge.unmapped) == 2  # every buffer released
    for fd in judge.exported:
        with pytest.raises(OSError):
            os.fstat(fd)  # the exported descriptors closed too


def test_malformed_outputs_and_slots_are_refused() -> None:
    arena, child, _, _, wire = _pair()
    layout = wire(arena.place((torch.randn(4),), out_bytes=16))
    child.build(layout)
    with pytest.raises(SlotError):
        arena.read_output({"dtype": "float32", "shape": [1000]})  # larger than its slot
    with pytest.raises(SlotError):
        arena.read_output({"dtype": "complex64", "shape": [1]})
    layout["data"]["__tuple__"][0]["__slot__"] = 1 << 40
    with pytest.raises(SlotError):
        child.build(layout)
    assert child.put_output(torch.randn(100))["out"] is None  # more than the reference's output allows
    fresh = Mapping(arena.fd, ipc=CudaVmm(MemfdDriver()))
    for handle in ({"size": 4096}, {"fd": 3, "size": 4096}, None):
        with pytest.raises(SlotError):
            fresh.build({**layout, "vmm": {"generation": 9, "handle": handle}})


def test_a_child_without_device_slots_refuses_them_and_closes_the_descriptor() -> None:
    arena, _, _, _, wire = _pair()
    layout = wire(arena.place((torch.randn(4),), 16))
    with pytest.raises(SlotError):
        Mapping(arena.fd).build(layout)
    assert layout["vmm"]["handle"]["fd"].fd == -1


_CHILD = """
import json, os, socket, sys, time
from kernelrank.runner.slotformat import CudaVmm
from kernelrank.runner.submission.mapping import Mapping
from kernelrank.runner.wire import MAX_FDS, Link
from tests.runner.simvmm import MemfdDriver

link = Link(socket.socket(fileno=int(sys.argv[1])), max_fds=MAX_FDS)
slots = Mapping(-1, ipc=CudaVmm(MemfdDriver()))
(x,) = slots.build(link.recv(time.monotonic() + 60)["inputs"])
link.send({"pid": os.getpid(), "uid": os.getuid(), **slots.put_output(x * 3)})
"""


@pytest.mark.timeout(120)
def test_a_child_in_its_own_user_and_pid_namespaces_maps_the_slot_from_its_descriptor() -> None:
    """The mechanism needs nothing the namespaces take away: a process that is PID 1 of a new
    PID namespace, root of a new user namespace, maps the judge's slot from the descriptor it
    received, and the judge reads the output it wrote there (memory files standing in for the
    device's allocations; the GPU's own run is in tests/runner/test_cuda_device.py)."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-Urp", "--fork", "true"], capture_output=True).returncode:
        pytest.skip("unprivileged user and PID namespaces are not available here")
    arena = Arena(ipc=CudaVmm(MemfdDriver()))
    ours, theirs = socket.socketpair()
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([unshare, "-Urp", "--fork", sys.executable, "-c", _CHILD, str(theirs.fileno())],
                            pass_fds=(theirs.fileno(),), cwd=root, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(root)})
    theirs.close()
    link = Link(ours)
    a = torch.randn(300, 5)
    link.send({"op": "go", "inputs": arena.place((a,), out_bytes=a.numel() * 4)}, time.monotonic() + 60)
    reply = link.recv(time.monotonic() + 60)
    assert proc.wait(60) == 0, proc.stderr.read()[-2000:]
    assert (reply["pid"], reply["uid"]) == (1, 0)  # its own PID and user namespaces
    assert torch.equal(arena.read_output(reply["out"]), a * 3)


def test_host_slots_unchanged() -> None:
    arena = Arena()
    child = Mapping(arena.fd)
    a = torch.randn(5, 5)
    (x,) = child.build(arena.place((a,), out_bytes=100))
    assert torch.equal(x, a)
    desc = child.put_output(x + 1)
    assert torch.equal(arena.read_output(desc["out"]), a + 1)


@pytest.mark.parametrize("device_slots", [False, True], ids=["memory file", "device slots"])
def test_each_input_is_the_same_object_on_every_call_repointed_at_its_slot(device_slots: bool) -> None:
    """Input objects depend on the calls alone (an ``id()``-keyed cache hits on the second call
    on every path): per place in the set's tree, one tensor object re-pointed at each call's
    slot with that call's values; a new one when the dtype changes or the kernel made the old
    one require grad."""
    arena = Arena(ipc=CudaVmm(MemfdDriver()) if device_slots else None)
    child = Mapping(arena.fd, ipc=CudaVmm(MemfdDriver()) if device_slots else None)
    wire = Wire()
    first = (torch.randn(4, 6), {"n": torch.arange(5, dtype=torch.int32)})
    a, m = child.build(wire(arena.place(first, out_bytes=96)))
    assert torch.equal(a, first[0]) and torch.equal(m["n"], first[1]["n"])
    a.mul_(0).t_()  # what a kernel may do to its inputs: overwrite them, change their metadata
    second = (torch.randn(3, 11), {"n": torch.arange(9, dtype=torch.int32)})
    b, k = child.build(wire(arena.place(second, out_bytes=132)))
    assert b is a and k["n"] is m["n"] and k is not m  # containers are new, tensors are not
    assert b.shape == (3, 11) and b.is_contiguous() and torch.equal(b, second[0]) and torch.equal(k["n"], second[1]["n"])
    b.requires_grad_(True)
    third = (torch.randn(2, 2, dtype=torch.float64), {"n": torch.arange(2, dtype=torch.int32)})
    c, _ = child.build(wire(arena.place(third, out_bytes=32)))
    assert c is not b and torch.equal(c, third[0]) and not c.requires_grad
    again = (torch.randn(2, 2), {"n": torch.arange(2, dtype=torch.int32)})
    d, _ = child.build(wire(arena.place(again, out_bytes=32)))
    assert d is not b and torch.equal(d, again[0])  # float32 again: the grad-requiring one was replaced


def test_several_input_sets_in_one_request_each_with_its_output_slot() -> None:
    """The CPU's requests of several sets (``Arena.place_sets``): each set's tensors are the
    memory the judge wrote, each output lands in its own slot and is read back by its index."""
    arena = Arena()
    child = Mapping(arena.fd)
    sets = [(torch.randn(7, 3),), (torch.randn(2, 9),), (torch.randn(11),)]
    layout = arena.place_sets(sets, out_bytes=4 * 27)
    assert len(layout["sets"]) == 3
    descs = []
    for (a,), one in zip(sets, layout["sets"]):
        (x,) = child.build({"size": layout["size"], "data": one["data"], "out": one["out"]})
        assert torch.equal(x, a)
        descs.append(child.put_output(x * 3)["out"])
    for j, ((a,), desc) in enumerate(zip(sets, descs)):
        assert torch.equal(arena.read_output(desc, index=j), a * 3)
    with pytest.raises(SlotError):
        arena.read_output(descs[0], index=3)
    with pytest.raises(SlotError):
        Arena(ipc=CudaVmm(MemfdDriver())).place_sets(sets, 16)  # device slots: one set per request


def test_a_requests_copies_can_be_done_by_the_caller_in_pieces() -> None:
    """``Arena.place_sets(copy=...)``: the copies are handed over in pieces of at most
    ``COPY_PIECE_BYTES`` that cover every input byte once (so the judge's threads can share them);
    done in any order, the child finds each set as the judge gave it."""
    arena = Arena()
    child = Mapping(arena.fd)
    big = torch.randn(COPY_PIECE_BYTES // 4 * 2 + 1000)  # two whole pieces and a part
    sets = [(big,), (torch.randn(7, 3), torch.arange(5, dtype=torch.int32))]
    handed: list[list[tuple[torch.Tensor, torch.Tensor]]] = []

    def copy(pending: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        handed.append(pending)
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda item: item[0].copy_(item[1]), reversed(pending)))

    layout = arena.place_sets(sets, out_bytes=64, direct=True, copy=copy)
    (pending,) = handed
    sizes = [dst.numel() for dst, _src in pending]
    assert max(sizes) <= COPY_PIECE_BYTES and sum(sizes) == big.numel() * 4 + 7 * 3 * 4 + 5 * 4
    assert len(pending) == 3 + 2  # the large tensor in three pieces, each small one whole
    for data, one in zip(sets, layout["sets"]):
        built = child.build({"size": layout["size"], "data": one["data"], "out": one["out"]})
        assert all(torch.equal(a, b) for a, b in zip(built, data))


def test_outputs_read_from_the_childs_memory_take_no_room_in_the_file() -> None:
    """With ``direct`` (the CPU's outputs read where the kernel left them), the memory file holds
    the input sets only: each output slot still bounds its output's size, and none is reserved;
    the child describes its outputs by address, and the judge reads them from its memory."""
    arena, reserved = Arena(), Arena()
    child = Mapping(arena.fd)
    sets = [(torch.randn(512, 256),) for _ in range(6)]
    out_bytes = 2 * 512 * 256 * 4
    layout = arena.place_sets(sets, out_bytes, direct=True)
    room = reserved.place_sets(sets, out_bytes)
    inputs = sum(a.numel() * 4 for (a,) in sets)
    assert arena.size < inputs + 6 * out_bytes <= reserved.size  # the rooms took most of the file
    assert all(one["out"] == [inputs, out_bytes] for one in layout["sets"])  # bounds, past the inputs
    assert [one["out"][1] for one in room["sets"]] == [out_bytes] * 6
    for one, (a,) in zip(layout["sets"], sets):  # each input the same object, re-pointed: compare at once
        assert torch.equal(child.build({"size": layout["size"], "data": one["data"], "out": one["out"]})[0], a)
    single = arena.place(sets[0], out_bytes, direct=True)
    assert single["out"] == [512 * 256 * 4, out_bytes]


def test_a_prepared_mapping_is_the_size_of_the_layouts_to_come() -> None:
    """``Arena.grow`` sizes the memory file for a case's requests before the first; the child's
    ``Mapping.prepare`` maps it at that size with its pages faulted in, and the next layout of
    that size is built on the same mapping (no new one, so no new faults in the timed call)."""
    arena = Arena()
    child = Mapping(arena.fd)
    sets = [(torch.randn(1024, 1024),)]
    size = arena.grow(5 * nbytes(sets[0]))
    assert size >= 5 * 4 * 1024 * 1024 and size == arena.size
    child.prepare(size)
    mapped = child._map
    layout = arena.place_sets(sets * 5, 4 * 1024 * 1024, direct=True)
    assert layout["size"] == size
    (x,) = child.build({"size": layout["size"], "data": layout["sets"][4]["data"], "out": layout["sets"][4]["out"]})
    assert child._map is mapped and torch.equal(x, sets[0][0])
    assert Arena(ipc=CudaVmm(MemfdDriver())).grow(1 << 20) == 0  # device slots: nothing to prepare


def test_outputs_are_read_in_pieces_where_they_lie() -> None:
    """``Arena.output_reader``: any range of an output's values, row-major, from its slot (host
    memory file, a view) or the device slots (a view too), equal to what ``read_output`` copies
    whole; a
    description that does not fit its slot is refused alike."""
    for device_slots in (False, True):
        arena = Arena(ipc=CudaVmm(MemfdDriver()) if device_slots else None)
        child = Mapping(arena.fd, ipc=CudaVmm(MemfdDriver()) if device_slots else None)
        a = torch.randn(6, 5)
        (x,) = child.build(Wire()(arena.place((a,), out_bytes=4 * 30)))
        desc = child.put_output(x * 2)["out"]
        dtype, shape, read = arena.output_reader(desc)
        assert (dtype, shape) == (torch.float32, [6, 5])
        whole = arena.read_output(desc).view(-1)
        for lo, hi in ((0, 30), (0, 7), (7, 30), (29, 30)):
            assert torch.equal(read(lo, hi), whole[lo:hi]), (device_slots, lo, hi)
        if device_slots:  # a view of the judge's slot buffer, not a copy of the output
            assert arena.device is not None
            assert read(0, 30).untyped_storage().data_ptr() == arena.device.buf.untyped_storage().data_ptr()
        with pytest.raises(SlotError):
            arena.output_reader({"dtype": "float32", "shape": [1000]})
