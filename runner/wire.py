"""The private channel between the judge and the child that runs submitted code.

Messages cross a socket pair, never stdout, and never as pickle: unpickling bytes from hostile
code would hand it the judge. A message is a JSON header plus raw buffers::

    [u32 header length][header JSON][u64 length][buffer bytes]...  (little-endian)

Values are encoded recursively: ``None``, ``bool``, ``int``, ``float``, ``str``, lists, tuples,
string-keyed dicts, and tensors as ``{"__tensor__": i, "dtype": "bfloat16", "shape": [..]}``
referring to buffer ``i``, and file descriptors (:class:`Fd`) as ``{"__fd__": i}`` referring to
the ``i``-th descriptor passed beside the message (``SCM_RIGHTS``, on its first bytes). :func:`decode` checks every tensor's dtype against an allowlist and its
byte length against its shape, and :class:`Link` bounds the size of what it accepts, so the
judge never allocates what the child merely claims.
"""

from __future__ import annotations

import array
import json
import math
import os
import signal
import socket
import struct
import time
from typing import Any

import torch

from kernelrank.vocab import DeviceClass

_HEADER = struct.Struct("<I")
_BUFLEN = struct.Struct("<Q")
MAX_HEADER_BYTES = 4 * 1024 * 1024

#: The signal the child answers with a dump of its Python stack (every thread, ``faulthandler``),
#: registered before the submission loads, and the file in its folder the dump goes to
#: (:mod:`kernelrank.runner.judge.hangs`).
STACK_SIGNAL = signal.SIGUSR2
STACK_FILE = "stack.txt"
#: Most file descriptors one message may carry (the device slots pass one).
MAX_FDS = 4

#: dtypes that may cross the channel, by name.
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
# the dtypes of this torch build that only some builds have: unsigned integers, float8 (GPU MODE's
# fp8 problems); each is plain bytes on the channel and in the slots
for _name in ("uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
    if isinstance(getattr(torch, _name, None), torch.dtype):
        DTYPES[_name] = getattr(torch, _name)
_DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


class WireError(Exception):
    """A malformed, oversized or truncated message, or a closed channel."""


class LinkClosed(WireError):
    """The peer closed its end (for the judge: the child exited or died)."""


class LinkTimeout(WireError):
    """No complete message arrived before the deadline."""


class Fd:
    """A file descriptor that crosses the channel beside a message, as ``SCM_RIGHTS`` ancillary
    data: the kernel installs a descriptor for the same open file in the receiving process,
    whatever PID or user namespace that process is in (an open file is a capability, not a name).

    Sending does not close ``fd`` (the kernel passes a duplicate). On receipt the receiver owns
    the new descriptor: it closes it (:meth:`close`) or keeps it (:meth:`take`); a
    :class:`Link` closes what was neither at its next :meth:`Link.recv`.
    """

    __slots__ = ("fd",)

    def __init__(self, fd: int):
        self.fd = fd

    def take(self) -> int:
        """The descriptor, now the caller's to close (this object forgets it)."""
        fd, self.fd = self.fd, -1
        return fd

    def close(self) -> None:
        """Close the descriptor unless it was taken or closed already."""
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            try:
                os.close(fd)
            except OSError:
                pass

    def __repr__(self) -> str:
        return f"Fd({self.fd})"


def dtype_name(dtype: torch.dtype) -> str:
    """Wire name of a dtype (``torch.bfloat16`` -> ``"bfloat16"``).

    Raises:
        WireError: the dtype may not cross the channel.
    """
    try:
        return _DTYPE_NAMES[dtype]
    except KeyError:
        raise WireError(f"dtype {dtype} cannot cross the channel") from None


def encode(value: Any, fds: list[int] | None = None) -> tuple[dict[str, Any], list[memoryview]]:
    """Encode a value into a JSON-able header and a list of raw buffers.

    Tensors are copied to host memory (``.cpu()``) and made contiguous; their bytes are a snapshot,
    so later writes to the tensor by anyone do not change what was sent. Each :class:`Fd` is
    appended to ``fds`` (the descriptors to pass beside the message) and referred to by index.

    Raises:
        WireError: a value of a type the channel does not carry; an :class:`Fd` with no ``fds``
            to collect it, or more than :data:`MAX_FDS`.
    """
    buffers: list[memoryview] = []
    return {"body": _enc(value, buffers, fds)}, buffers


# The recursion is a module-level function with the buffers passed in, not a closure over them:
# a nested function that calls itself is a reference cycle holding every buffer until Python's
# collector runs (measured: up to 500 MiB of 16 MiB copies alive in the child, its heap growing by
# 16 MiB of fresh pages, 4096 page faults at 2-10 µs each, inside timed calls).
def _enc(v: Any, buffers: list[memoryview], fds: list[int] | None) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return {"__float__": repr(v)} if not math.isfinite(v) else v
    if isinstance(v, torch.Tensor):
        t = v.detach()
        name = dtype_name(t.dtype)
        t = t.to("cpu", copy=True).contiguous()
        raw = t.reshape(-1).view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8)
        buffers.append(memoryview(raw.numpy()).cast("B"))
        return {"__tensor__": len(buffers) - 1, "dtype": name, "shape": list(t.shape)}
    if isinstance(v, Fd):
        if fds is None or v.fd < 0 or len(fds) >= MAX_FDS:
            raise WireError("a file descriptor this message cannot carry")
        fds.append(v.fd)
        return {"__fd__": len(fds) - 1}
    if isinstance(v, tuple):
        return {"__tuple__": [_enc(x, buffers, fds) for x in v]}
    if isinstance(v, list):
        return [_enc(x, buffers, fds) for x in v]
    if isinstance(v, dict):
        if not all(isinstance(k, str) for k in v):
            raise WireError("dict keys must be strings")
        return {"__dict__": {k: _enc(x, buffers, fds) for k, x in v.items()}}
    raise WireError(f"cannot send a value of type {type(v).__name__}")


def decode(header: dict[str, Any], buffers: list[bytes | bytearray], device: str = DeviceClass.cpu,
           fds: list[Fd] | None = None) -> Any:
    """Inverse of :func:`encode`; tensors are created on ``device``, ``{"__fd__": i}`` becomes
    ``fds[i]`` (the descriptors received beside the message).

    Raises:
        WireError: an unknown dtype, a negative or inconsistent shape, a missing buffer or descriptor.
    """
    if not isinstance(header, dict) or "body" not in header:
        raise WireError("message has no body")
    return _dec(header["body"], buffers, device, fds or [])


def _dec(v: Any, buffers: list[bytes | bytearray], device: str, fds: list[Fd]) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list):
        return [_dec(x, buffers, device, fds) for x in v]
    if not isinstance(v, dict) or len(v) == 0:
        raise WireError("malformed value")
    if "__tuple__" in v:
        return tuple(_dec(x, buffers, device, fds) for x in _list(v["__tuple__"]))
    if "__dict__" in v:
        d = v["__dict__"]
        if not isinstance(d, dict):
            raise WireError("malformed dict")
        return {str(k): _dec(x, buffers, device, fds) for k, x in d.items()}
    if "__float__" in v:
        s = v["__float__"]
        if s not in ("nan", "inf", "-inf"):
            raise WireError("malformed float")
        return float(s)
    if "__tensor__" in v:
        return _tensor(v, buffers, device)
    if "__fd__" in v:
        idx = v["__fd__"]
        if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < len(fds):
            raise WireError("a file descriptor that did not come with the message")
        return fds[idx]
    raise WireError("malformed value")


def _list(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise WireError("malformed list")
    return v


def _tensor(v: dict[str, Any], buffers: list[bytes | bytearray], device: str) -> torch.Tensor:
    idx, name, shape = v.get("__tensor__"), v.get("dtype"), v.get("shape")
    if not isinstance(idx, int) or not 0 <= idx < len(buffers):
        raise WireError("tensor refers to a missing buffer")
    if name not in DTYPES:
        raise WireError(f"tensor dtype {name!r} not allowed")
    if not isinstance(shape, list) or not all(isinstance(s, int) and 0 <= s < 2**40 for s in shape) or len(shape) > 8:
        raise WireError("malformed tensor shape")
    dtype = DTYPES[name]
    numel = math.prod(shape)
    itemsize = torch.empty(0, dtype=dtype).element_size()
    raw = buffers[idx]
    if len(raw) != numel * itemsize:
        raise WireError(f"tensor of shape {shape} and dtype {name} needs {numel * itemsize} bytes, got {len(raw)}")
    # A tensor of its own from torch's allocator (64-byte aligned, as every tensor a kernel meets
    # elsewhere), not a view of the receive buffer (16-byte aligned by malloc: vector loads that
    # straddle cache lines made a softmax 10-15% slower here).
    t = torch.empty(shape, dtype=dtype)
    if numel:
        t.view(-1).view(torch.uint8).copy_(torch.frombuffer(raw, dtype=torch.uint8))
    return t.to(device) if device != DeviceClass.cpu else t


class Link:
    """One end of the socket pair, sending and receiving whole messages.

    Args:
        sock: a connected ``AF_UNIX`` stream socket.
        max_message_bytes: the most this end accepts in one message (header and buffers);
            a larger claim raises :class:`WireError` before anything is allocated.
        max_fds: the most file descriptors this end accepts beside one message (the child's end:
            :data:`MAX_FDS`; the judge's: 0, so the kernel closes any a child sends instead of
            installing them in the judge).
    """

    def __init__(self, sock: socket.socket, max_message_bytes: int = 1 << 34, max_fds: int = 0):
        self.sock = sock
        self.max_message_bytes = max_message_bytes
        self.max_fds = max_fds
        #: the descriptors received with the last message; those its reader neither closed nor took
        #: are closed at the next :meth:`recv`
        self.received: list[Fd] = []
        #: ``time.perf_counter_ns()`` when the last message, encoded, started to go out, and when the
        #: first bytes of the last received message arrived.
        self.send_start_ns = 0
        self.first_byte_ns = 0

    def send(self, value: Any, deadline: float | None = None) -> None:
        """Encode and send one message; a peer that stops reading cannot block past ``deadline``.

        The :class:`Fd` values in ``value`` travel as ``SCM_RIGHTS`` on the message's first bytes
        (as the zygote passes a child's pipes: ``socket.send_fds``).

        Raises:
            LinkTimeout: the peer did not take the message before the deadline.
            LinkClosed: the peer closed its end.
            WireError: a value the channel does not carry.
        """
        fds: list[int] = []
        header, buffers = encode(value, fds)
        head = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
        self.send_start_ns = time.perf_counter_ns()
        first = _HEADER.pack(len(head)) + head + _BUFLEN.pack(len(buffers))
        if fds:  # the descriptors ride on the header's length, which the receiver reads first
            sent = self._write_fds(first[:_HEADER.size], fds, deadline)
            first = first[sent:]
        self._write(first, deadline)
        for buf in buffers:
            self._write(_BUFLEN.pack(buf.nbytes), deadline)
            if buf.nbytes:
                self._write(buf, deadline)

    def _write_fds(self, data: bytes, fds: list[int], deadline: float | None) -> int:
        self._set_timeout(deadline, "the peer did not take the message before the deadline")
        try:
            return socket.send_fds(self.sock, [data], fds)
        except TimeoutError:
            raise LinkTimeout("the peer did not take the message before the deadline") from None
        except (BrokenPipeError, ConnectionResetError) as e:
            raise LinkClosed(f"channel error: {e}") from None

    def _set_timeout(self, deadline: float | None, late: str) -> None:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LinkTimeout(late)
            self.sock.settimeout(remaining)
        else:
            self.sock.settimeout(None)

    def _write(self, data: bytes | memoryview, deadline: float | None) -> None:
        self._set_timeout(deadline, "the peer did not take the message before the deadline")
        try:
            self.sock.sendall(data)
        except TimeoutError:
            raise LinkTimeout("the peer did not take the message before the deadline") from None
        except (BrokenPipeError, ConnectionResetError) as e:
            raise LinkClosed(f"channel error: {e}") from None

    def readable(self, deadline: float) -> bool:
        """Wait until the peer's next message starts to arrive (or it closes), at most until
        ``deadline`` (``time.monotonic()``); whether it did. Nothing is read."""
        import select

        ready, _, _ = select.select([self.sock], [], [], max(0.0, deadline - time.monotonic()))
        return bool(ready)

    def recv(self, deadline: float | None = None, device: str = DeviceClass.cpu) -> Any:
        """Receive one message, decoding tensors onto ``device``.

        Args:
            deadline: ``time.monotonic()`` value after which :class:`LinkTimeout` is raised.

        Raises:
            LinkClosed, LinkTimeout, WireError.
        """
        budget = self.max_message_bytes
        for fd in self.received:
            fd.close()
        self.received = []
        (hlen,) = _HEADER.unpack(self._read(_HEADER.size, deadline, self.received if self.max_fds else None))
        self.first_byte_ns = time.perf_counter_ns()
        if hlen > min(MAX_HEADER_BYTES, budget):
            raise WireError(f"message header of {hlen} bytes is over the limit")
        try:
            header = json.loads(self._read(hlen, deadline))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise WireError(f"message header is not JSON: {e}") from None
        budget -= hlen
        (nbuf,) = _BUFLEN.unpack(self._read(_BUFLEN.size, deadline))
        if nbuf > 1 << 20:
            raise WireError("too many buffers")
        buffers = []
        for _ in range(nbuf):
            (blen,) = _BUFLEN.unpack(self._read(_BUFLEN.size, deadline))
            if blen > budget:
                raise WireError(f"message of more than {self.max_message_bytes} bytes refused")
            budget -= blen
            buffers.append(self._read(blen, deadline))
        return decode(header, buffers, device, self.received)

    def _read(self, n: int, deadline: float | None, fds: list[Fd] | None = None) -> bytearray:
        """``n`` bytes; with ``fds``, the descriptors that came with them appended
        (:func:`_recv_fds_into`). Without, the kernel closes any that came."""
        out = bytearray(n)
        view = memoryview(out)
        got = 0
        while got < n:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise LinkTimeout("no answer before the deadline")
                self.sock.settimeout(remaining)
            else:
                self.sock.settimeout(None)
            try:
                if fds is None:
                    k = self.sock.recv_into(view[got:], min(n - got, 1 << 24))
                else:
                    k = _recv_fds_into(self.sock, view[got:], self.max_fds - len(fds), fds)
            except TimeoutError:
                raise LinkTimeout("no answer before the deadline") from None
            except OSError as e:
                raise LinkClosed(f"channel error: {e}") from None
            if k == 0:
                raise LinkClosed("the other side closed the channel")
            got += k
        return out

    def close(self) -> None:
        """Close this end."""
        try:
            self.sock.close()
        except OSError:
            pass


def _recv_fds_into(sock: socket.socket, view: memoryview, maxfds: int, fds: list[Fd]) -> int:
    """``recvmsg`` into ``view``, appending the ``SCM_RIGHTS`` descriptors that came (at most
    ``maxfds``; the kernel closes the rest), close-on-exec (``MSG_CMSG_CLOEXEC``, which
    ``socket.recv_fds`` does not pass on); the bytes read."""
    k, ancdata, _, _ = sock.recvmsg_into([view], socket.CMSG_SPACE(max(maxfds, 0) * _FD.itemsize),
                                         socket.MSG_CMSG_CLOEXEC)
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            came = array.array("i")
            came.frombytes(data[:len(data) - len(data) % _FD.itemsize])
            fds.extend(Fd(fd) for fd in came)
    return k


_FD = array.array("i")
