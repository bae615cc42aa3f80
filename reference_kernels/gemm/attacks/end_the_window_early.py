"""Ends the judge's window early: writes the start of an answer to the channel itself, then works.

Class: ending the timed window early
Expected: rejected|error

A judge whose window closes at the first bytes of the child's answer can be told "done" early: the
submission finds the child's socket to the judge (a Unix socket among its open descriptors) and
writes a plausible length prefix on it at the start of the call, then computes the product. Against
such a judge this read 2.7-3.5x "faster" on a busy machine. A working defence closes the window only
when the child is frozen again after its whole answer, and bytes that are not a well-formed message
break the protocol: the run is rejected.
"""

import os
import stat
import struct

import torch

_sent = []


def _channel_fds():
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            fd = int(name)
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                found.append(fd)
        except (OSError, ValueError):
            continue
    return found


def custom_kernel(data):
    a, b = data
    if not _sent:
        for fd in _channel_fds():
            try:
                os.write(fd, struct.pack("<I", 2))  # "a 2-byte header follows"
                _sent.append(fd)
            except OSError:
                pass
        print(f"[attack] wrote an early answer prefix on {len(_sent)} socket(s)", flush=True)
    return (a.float() @ b.float()).to(a.dtype)
