"""The private channel: round trips, and refusal of malformed or oversized messages."""

from __future__ import annotations

import gc
import json
import socket
import struct
import time

import pytest
import torch

from kernelrank.runner.wire import Link, LinkClosed, LinkTimeout, WireError, decode, encode


def _pair(limit: int = 1 << 30) -> tuple[Link, Link]:
    a, b = socket.socketpair()
    return Link(a, limit), Link(b, limit)


def test_round_trip_keeps_values_dtypes_and_structure() -> None:
    a, b = _pair()
    value = {
        "op": "call",
        "data": (torch.randn(3, 5).bfloat16(), torch.arange(7, dtype=torch.int32), 0.125, float("nan"), [1, None, True]),
        "empty": torch.empty(0, 4),
        "scalar": torch.tensor(2.5),
    }
    a.send(value)
    got = b.recv(deadline=time.monotonic() + 5)
    assert got["op"] == "call"
    x, idx, scale, nan, rest = got["data"]
    assert isinstance(got["data"], tuple)
    assert x.dtype == torch.bfloat16 and torch.equal(x, value["data"][0])
    assert idx.dtype == torch.int32 and torch.equal(idx, value["data"][1])
    assert scale == 0.125 and nan != nan and rest == [1, None, True]
    assert got["empty"].shape == (0, 4)
    assert got["scalar"].shape == () and float(got["scalar"]) == 2.5


def test_sent_tensor_is_a_snapshot() -> None:
    a, b = _pair()
    t = torch.zeros(4)
    a.send({"t": t})
    t.fill_(1.0)
    assert torch.equal(b.recv()["t"], torch.zeros(4))


def test_non_contiguous_tensor_is_sent_by_value() -> None:
    a, b = _pair()
    t = torch.arange(12.0).reshape(3, 4).t()
    a.send({"t": t})
    assert torch.equal(b.recv()["t"], t)


def test_unsupported_values_are_refused() -> None:
    with pytest.raises(WireError):
        encode(object())
    with pytest.raises(WireError):
        encode(torch.zeros(2, dtype=torch.complex64))


def test_decode_rejects_lying_tensor_headers() -> None:
    header = {"body": {"__tensor__": 0, "dtype": "float32", "shape": [4]}}
    with pytest.raises(WireError, match="needs 16 bytes"):
        decode(header, [b"\0" * 8])
    with pytest.raises(WireError, match="not allowed"):
        decode({"body": {"__tensor__": 0, "dtype": "object", "shape": [1]}}, [b"\0"])
    with pytest.raises(WireError, match="missing buffer"):
        decode({"body": {"__tensor__": 3, "dtype": "float32", "shape": [1]}}, [])
    with pytest.raises(WireError, match="shape"):
        decode({"body": {"__tensor__": 0, "dtype": "float32", "shape": [-1]}}, [b""])


def test_oversized_message_is_refused_before_allocation() -> None:
    raw_a, raw_b = socket.socketpair()
    receiver = Link(raw_b, max_message_bytes=1024)
    head = json.dumps({"body": None}).encode()
    # claims one buffer of 1 TB
    raw_a.sendall(struct.pack("<I", len(head)) + head + struct.pack("<Q", 1) + struct.pack("<Q", 10**12))
    with pytest.raises(WireError, match="refused"):
        receiver.recv(deadline=time.monotonic() + 5)


def test_garbage_header_is_a_wire_error() -> None:
    raw_a, raw_b = socket.socketpair()
    raw_a.sendall(struct.pack("<I", 5) + b"\xff\xfe{{{")
    with pytest.raises(WireError, match="not JSON"):
        Link(raw_b).recv(deadline=time.monotonic() + 5)


def test_timeout_and_close() -> None:
    a, b = _pair()
    with pytest.raises(LinkTimeout):
        b.recv(deadline=time.monotonic() + 0.05)
    a.close()
    with pytest.raises(LinkClosed):
        b.recv(deadline=time.monotonic() + 5)


def test_encoding_and_decoding_leave_no_reference_cycles() -> None:
    """What was sent or received is freed when its holder drops it, not at Python's next garbage
    collection: a cycle once kept every 16 MiB copy of the child's outputs alive until the collector
    ran (its heap grew by fresh pages, thousands of page faults inside timed calls)."""
    value = {"x": (torch.arange(1000.0), [torch.ones(3, dtype=torch.bfloat16)]), "n": 2, "s": "y"}
    gc.collect()
    gc.disable()
    try:
        header, buffers = encode(value)
        decoded = decode(json.loads(json.dumps(header)), [bytearray(b) for b in buffers])
        assert torch.equal(decoded["x"][0], value["x"][0])
        del header, buffers, decoded
        assert gc.collect() == 0
    finally:
        gc.enable()
