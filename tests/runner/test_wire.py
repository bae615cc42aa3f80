"""The private channel: round trips, file descriptors passed beside a message (``SCM_RIGHTS``),
and refusal of malformed or oversized messages."""

from __future__ import annotations

import fcntl
import gc
import json
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from kernelrank.runner.wire import MAX_FDS, Fd, Link, LinkClosed, LinkTimeout, WireError, decode, encode


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


def _memfd(content: bytes) -> int:
    fd = os.memfd_create("wire-test", os.MFD_CLOEXEC)
    os.write(fd, content)
    return fd


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_a_descriptor_crosses_beside_the_message_as_a_new_descriptor_of_the_same_file() -> None:
    a, b = socket.socketpair()
    judge, child = Link(a), Link(b, max_fds=MAX_FDS)
    fd = _memfd(b"slot")
    judge.send({"op": "go", "h": {"fd": Fd(fd), "size": 4}, "t": torch.arange(3)}, time.monotonic() + 5)
    os.fstat(fd)  # sending does not close the sender's descriptor
    got = child.recv(time.monotonic() + 5)
    received = got["h"]["fd"]
    assert isinstance(received, Fd) and received.fd != fd and torch.equal(got["t"], torch.arange(3))
    assert os.fstat(received.fd).st_ino == os.fstat(fd).st_ino and os.pread(received.fd, 4, 0) == b"slot"
    assert fcntl.fcntl(received.fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC  # not inherited by what it runs
    before = len(_open_fds())
    judge.send({"a": Fd(fd), "b": Fd(fd)}, time.monotonic() + 5)
    pair = child.recv(time.monotonic() + 5)
    assert received.fd == -1 and len(_open_fds()) == before - 1 + 2  # the unclaimed one closed, two came
    taken = pair["a"].take()
    judge.send({}, time.monotonic() + 5)
    child.recv(time.monotonic() + 5)
    assert pair["b"].fd == -1 and len(_open_fds()) == before
    assert os.pread(taken, 4, 0) == b"slot"  # taken: the reader's to keep
    os.close(taken)
    os.close(fd)


def test_the_judges_end_installs_no_descriptor_a_child_sends() -> None:
    a, b = socket.socketpair()
    judge, child = Link(a), Link(b, max_fds=MAX_FDS)
    fd = _memfd(b"x")
    before = _open_fds()
    child.send({"ok": True, "f": Fd(fd)}, time.monotonic() + 5)
    with pytest.raises(WireError, match="did not come with the message"):
        judge.recv(time.monotonic() + 5)
    assert _open_fds() == before  # the kernel closed the passed one rather than install it
    os.close(fd)


def test_descriptors_are_refused_where_they_cannot_travel() -> None:
    fd = _memfd(b"")
    with pytest.raises(WireError):
        encode({"f": Fd(fd)})  # no list to collect them: an encoding that cannot carry them
    with pytest.raises(WireError):
        encode([Fd(fd)] * (MAX_FDS + 1), [])
    with pytest.raises(WireError):
        encode(Fd(-1), [])
    with pytest.raises(WireError, match="did not come"):
        decode({"body": {"__fd__": 0}}, [])
    with pytest.raises(WireError, match="did not come"):
        decode({"body": {"__fd__": True}}, [], fds=[Fd(fd)])
    os.close(fd)


_PEER = """
import os, socket, sys, time
from kernelrank.runner.wire import MAX_FDS, Link
link = Link(socket.socket(fileno=int(sys.argv[1])), max_fds=MAX_FDS)
msg = link.recv(time.monotonic() + 60)
fd = msg["fd"].fd
seen = os.pread(fd, 5, 0).decode()
os.pwrite(fd, b"world", 5)
link.send({"seen": seen, "pid": os.getpid()})
"""


@pytest.mark.timeout(120)
def test_a_descriptor_passes_to_another_process() -> None:
    """Two processes, a memory file between them: the other process reads what this one wrote
    through the descriptor it received, and its write is seen here (the same file)."""
    ours, theirs = socket.socketpair()
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", _PEER, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                            cwd=root, stderr=subprocess.PIPE, text=True)
    theirs.close()
    link = Link(ours)
    fd = _memfd(b"hello")
    link.send({"fd": Fd(fd)}, time.monotonic() + 60)
    reply = link.recv(time.monotonic() + 60)
    assert proc.wait(60) == 0, proc.stderr.read()[-2000:]
    assert reply["seen"] == "hello" and reply["pid"] == proc.pid
    assert os.pread(fd, 10, 0) == b"helloworld"
    os.close(fd)
