"""The private channel between the judge and the child that runs submitted code.

Messages cross a socket pair, never stdout, and never as pickle: unpickling bytes from hostile
code would hand it the judge. A message is a JSON header plus raw buffers::

    [u32 header length][header JSON][u64 length][buffer bytes]...  (little-endian)

Values are encoded recursively: ``None``, ``bool``, ``int``, ``float``, ``str``, lists, tuples,
string-keyed dicts, and tensors as ``{"__tensor__": i, "dtype": "bfloat16", "shape": [..]}``
referring to buffer ``i``. :func:`decode` checks every tensor's dtype against an allowlist and its
byte length against its shape, and :class:`Link` bounds the size of what it accepts, so the
judge never allocates what the child merely claims.
"""

from __future__ import annotations

import json
import math
import socket
import struct
import time
from typing import Any

import torch

from kernelrank.vocab import DeviceClass

_HEADER = struct.Struct("<I")
_BUFLEN = struct.Struct("<Q")
MAX_HEADER_BYTES = 4 * 1024 * 1024

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
_DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


class WireError(Exception):
    """A malformed, oversized or truncated message, or a closed channel."""


class LinkClosed(WireError):
    """The peer closed its end (for the judge: the child exited or died)."""


class LinkTimeout(WireError):
    """No complete message arrived before the deadline."""


def dtype_name(dtype: torch.dtype) -> str:
    """Wire name of a dtype (``torch.bfloat16`` -> ``"bfloat16"``).

    Raises:
        WireError: the dtype may not cross the channel.
    """
    try:
        return _DTYPE_NAMES[dtype]
    except KeyError:
        raise WireError(f"dtype {dtype} cannot cross the channel") from None


def encode(value: Any) -> tuple[dict[str, Any], list[memoryview]]:
    """Encode a value into a JSON-able header and a list of raw buffers.

    Tensors are copied to host memory (``.cpu()``) and made contiguous; their bytes are a snapshot,
    so later writes to the tensor by anyone do not change what was sent.

    Raises:
        WireError: a value of a type the channel does not carry.
    """
    buffers: list[memoryview] = []
    return {"body": _enc(value, buffers)}, buffers


# The recursion is a module-level function with the buffers passed in, not a closure over them:
# a nested function that calls itself is a reference cycle holding every buffer until Python's
# collector runs (measured: up to 500 MiB of 16 MiB copies alive in the child, its heap growing by
# 16 MiB of fresh pages, 4096 page faults at 2-10 µs each, inside timed calls).
def _enc(v: Any, buffers: list[memoryview]) -> Any:
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
    if isinstance(v, tuple):
        return {"__tuple__": [_enc(x, buffers) for x in v]}
    if isinstance(v, list):
        return [_enc(x, buffers) for x in v]
    if isinstance(v, dict):
        if not all(isinstance(k, str) for k in v):
            raise WireError("dict keys must be strings")
        return {"__dict__": {k: _enc(x, buffers) for k, x in v.items()}}
    raise WireError(f"cannot send a value of type {type(v).__name__}")


def decode(header: dict[str, Any], buffers: list[bytes | bytearray], device: str = DeviceClass.cpu) -> Any:
    """Inverse of :func:`encode`; tensors are created on ``device``.

    Raises:
        WireError: an unknown dtype, a negative or inconsistent shape, a missing buffer.
    """
    if not isinstance(header, dict) or "body" not in header:
        raise WireError("message has no body")
    return _dec(header["body"], buffers, device)


def _dec(v: Any, buffers: list[bytes | bytearray], device: str) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list):
        return [_dec(x, buffers, device) for x in v]
    if not isinstance(v, dict) or len(v) == 0:
        raise WireError("malformed value")
    if "__tuple__" in v:
        return tuple(_dec(x, buffers, device) for x in _list(v["__tuple__"]))
    if "__dict__" in v:
        d = v["__dict__"]
        if not isinstance(d, dict):
            raise WireError("malformed dict")
        return {str(k): _dec(x, buffers, device) for k, x in d.items()}
    if "__float__" in v:
        s = v["__float__"]
        if s not in ("nan", "inf", "-inf"):
            raise WireError("malformed float")
        return float(s)
    if "__tensor__" in v:
        return _tensor(v, buffers, device)
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
    """

    def __init__(self, sock: socket.socket, max_message_bytes: int = 1 << 34):
        self.sock = sock
        self.max_message_bytes = max_message_bytes
        #: ``time.perf_counter_ns()`` when the last message, encoded, started to go out, and when the
        #: first bytes of the last received message arrived.
        self.send_start_ns = 0
        self.first_byte_ns = 0

    def send(self, value: Any, deadline: float | None = None) -> None:
        """Encode and send one message; a peer that stops reading cannot block past ``deadline``.

        Raises:
            LinkTimeout: the peer did not take the message before the deadline.
            LinkClosed: the peer closed its end.
        """
        header, buffers = encode(value)
        head = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
        self.send_start_ns = time.perf_counter_ns()
        self._write(_HEADER.pack(len(head)) + head + _BUFLEN.pack(len(buffers)), deadline)
        for buf in buffers:
            self._write(_BUFLEN.pack(buf.nbytes), deadline)
            if buf.nbytes:
                self._write(buf, deadline)

    def _write(self, data: bytes | memoryview, deadline: float | None) -> None:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LinkTimeout("the peer did not take the message before the deadline")
            self.sock.settimeout(remaining)
        else:
            self.sock.settimeout(None)
        try:
            self.sock.sendall(data)
        except TimeoutError:
            raise LinkTimeout("the peer did not take the message before the deadline") from None
        except (BrokenPipeError, ConnectionResetError) as e:
            raise LinkClosed(f"channel error: {e}") from None

    def recv(self, deadline: float | None = None, device: str = DeviceClass.cpu) -> Any:
        """Receive one message, decoding tensors onto ``device``.

        Args:
            deadline: ``time.monotonic()`` value after which :class:`LinkTimeout` is raised.

        Raises:
            LinkClosed, LinkTimeout, WireError.
        """
        budget = self.max_message_bytes
        (hlen,) = _HEADER.unpack(self._read(_HEADER.size, deadline))
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
        return decode(header, buffers, device)

    def _read(self, n: int, deadline: float | None) -> bytearray:
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
                k = self.sock.recv_into(view[got:], min(n - got, 1 << 24))
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
