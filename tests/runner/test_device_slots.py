"""The CUDA half of the shared slots, on the CPU: the judge's device buffer shared through a
stand-in for CUDA IPC (the real one, runner.slotformat.CudaIpc, needs a GPU: tests/runner/test_cuda_device.py).

What is checked here is everything but the IPC calls: the layout, the handle crossing the
channel as JSON once per buffer, the child's tensors being views of the judge's buffer (no copy),
the output written into its slot and read back by the judge, growth, release."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from kernelrank.runner.submission.mapping import Mapping
from kernelrank.runner.judge.slots import ALIGN, COPY_PIECE_BYTES, Arena, SlotError, nbytes


class FakeIpc:
    """In-process CUDA IPC: buffers are CPU byte tensors, a handle is a JSON-able key."""

    def __init__(self) -> None:
        self.buffers: dict[int, torch.Tensor] = {}
        self.opened = 0
        self.fences = 0
        self.released: list[int] = []

    def allocate(self, nbytes: int) -> torch.Tensor:
        return torch.full((nbytes,), 0xAB, dtype=torch.uint8)

    def share(self, buf: torch.Tensor) -> dict[str, int]:
        key = len(self.buffers) + 1
        self.buffers[key] = buf
        return {"key": key, "size": buf.numel()}

    def open(self, handle: dict[str, int]) -> torch.Tensor:
        self.opened += 1
        return self.buffers[handle["key"]]

    def fence(self) -> None:
        self.fences += 1

    def release(self, buf: torch.Tensor, handle: dict[str, int]) -> None:
        assert self.buffers[handle["key"]] is buf
        self.released.append(handle["key"])


def _pair() -> tuple[Arena, Mapping, FakeIpc]:
    ipc = FakeIpc()
    arena = Arena(ipc=ipc)
    return arena, Mapping(arena.fd, ipc=ipc), ipc


def test_inputs_are_views_of_the_judges_buffer_and_only_the_layout_crosses() -> None:
    arena, child, ipc = _pair()
    a = torch.randn(33, 7)
    b = torch.arange(10, dtype=torch.int32)
    data = (a, {"b": b, "k": 3}, [torch.empty(0)])
    layout = arena.place(data, out_bytes=a.numel() * 4)
    wire = json.loads(json.dumps(layout))  # what the go request carries: control data only
    assert "ipc" in wire and wire["ipc"]["generation"] == 1
    assert ipc.fences == 1  # the judge waited for its copies before the child may run
    got = child.build(wire, device="cpu")
    assert torch.equal(got[0], a) and torch.equal(got[1]["b"], b) and got[1]["k"] == 3
    assert got[2][0].numel() == 0
    buf = ipc.buffers[1]
    lo, hi = buf.data_ptr(), buf.data_ptr() + buf.numel()
    assert lo <= got[0].data_ptr() < hi and lo <= got[1]["b"].data_ptr() < hi  # views, no copies
    assert all(x["__slot__"] % ALIGN == 0 for x in (wire["data"]["__tuple__"][0],))


def test_output_goes_to_its_slot_and_the_judge_reads_it() -> None:
    arena, child, ipc = _pair()
    a = torch.randn(64, 16)
    layout = json.loads(json.dumps(arena.place((a,), out_bytes=a.numel() * 4)))
    (x,) = child.build(layout)
    out = x * 2
    desc = child.put_output(out)
    assert desc["out_type"] == "torch.Tensor" and "addr" not in desc["out"]
    back = arena.read_output(json.loads(json.dumps(desc["out"])))
    assert torch.equal(back, a * 2)
    assert ipc.fences == 2  # placed, then the child's copy into the slot waited for


def test_the_handle_is_opened_once_per_buffer_and_a_bigger_set_grows_it() -> None:
    arena, child, ipc = _pair()
    small = (torch.randn(8),)
    for _ in range(3):
        child.build(json.loads(json.dumps(arena.place(small, 64))))
    assert ipc.opened == 1 and arena.device is not None and arena.device.generation == 1
    big = (torch.randn(1 << 19),)  # 2 MiB: beyond the first 1 MiB buffer
    (x,) = child.build(json.loads(json.dumps(arena.place(big, 64))))
    assert ipc.opened == 2 and arena.device.generation == 2
    assert torch.equal(x, big[0])
    arena.close()
    assert ipc.released == [1, 2]  # every shared buffer released once the job is over


def test_malformed_outputs_and_slots_are_refused() -> None:
    arena, child, _ = _pair()
    layout = json.loads(json.dumps(arena.place((torch.randn(4),), out_bytes=16)))
    child.build(layout)
    with pytest.raises(SlotError):
        arena.read_output({"dtype": "float32", "shape": [1000]})  # larger than its slot
    with pytest.raises(SlotError):
        arena.read_output({"dtype": "complex64", "shape": [1]})
    layout["data"]["__tuple__"][0]["__slot__"] = 1 << 40
    with pytest.raises(SlotError):
        child.build(layout)
    assert child.put_output(torch.randn(100))["out"] is None  # more than the reference's output allows


def test_a_child_without_ipc_refuses_device_slots() -> None:
    arena = Arena(ipc=FakeIpc())
    layout = arena.place((torch.randn(4),), 16)
    with pytest.raises(SlotError):
        Mapping(arena.fd).build(layout)


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
    ipc = FakeIpc() if device_slots else None
    arena = Arena(ipc=ipc)
    child = Mapping(arena.fd, ipc=ipc)
    first = (torch.randn(4, 6), {"n": torch.arange(5, dtype=torch.int32)})
    a, m = child.build(json.loads(json.dumps(arena.place(first, out_bytes=96))))
    assert torch.equal(a, first[0]) and torch.equal(m["n"], first[1]["n"])
    a.mul_(0).t_()  # what a kernel may do to its inputs: overwrite them, change their metadata
    second = (torch.randn(3, 11), {"n": torch.arange(9, dtype=torch.int32)})
    b, k = child.build(json.loads(json.dumps(arena.place(second, out_bytes=132))))
    assert b is a and k["n"] is m["n"] and k is not m  # containers are new, tensors are not
    assert b.shape == (3, 11) and b.is_contiguous() and torch.equal(b, second[0]) and torch.equal(k["n"], second[1]["n"])
    b.requires_grad_(True)
    third = (torch.randn(2, 2, dtype=torch.float64), {"n": torch.arange(2, dtype=torch.int32)})
    c, _ = child.build(json.loads(json.dumps(arena.place(third, out_bytes=32))))
    assert c is not b and torch.equal(c, third[0]) and not c.requires_grad
    again = (torch.randn(2, 2), {"n": torch.arange(2, dtype=torch.int32)})
    d, _ = child.build(json.loads(json.dumps(arena.place(again, out_bytes=32))))
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
        Arena(ipc=FakeIpc()).place_sets(sets, 16)  # device slots: one set per request


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
    assert Arena(ipc=FakeIpc()).grow(1 << 20) == 0  # device slots: nothing to prepare


def test_outputs_are_read_in_pieces_where_they_lie() -> None:
    """``Arena.output_reader``: any range of an output's values, row-major, from its slot (host
    memory file, a view) or the device slots (a view too), equal to what ``read_output`` copies
    whole; a
    description that does not fit its slot is refused alike."""
    for ipc in (None, FakeIpc()):
        arena = Arena(ipc=ipc)
        child = Mapping(arena.fd, ipc=ipc)
        a = torch.randn(6, 5)
        (x,) = child.build(arena.place((a,), out_bytes=4 * 30))
        desc = child.put_output(x * 2)["out"]
        dtype, shape, read = arena.output_reader(desc)
        assert (dtype, shape) == (torch.float32, [6, 5])
        whole = arena.read_output(desc).view(-1)
        for lo, hi in ((0, 30), (0, 7), (7, 30), (29, 30)):
            assert torch.equal(read(lo, hi), whole[lo:hi]), (ipc, lo, hi)
        if ipc is not None:  # device slots: a view of the shared buffer, not a copy of the output
            buffer = next(iter(ipc.buffers.values()))
            assert read(0, 30).untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr()
        with pytest.raises(SlotError):
            arena.output_reader({"dtype": "float32", "shape": [1000]})
