"""A helper process the judge cannot see computes between calls.

Class: helper process working between calls
Expected: passed|failed|rejected
Max speedup: 2.0

At import the submission forks a helper that calls ``setsid`` (leaving the child's session and
process group), starts a worker thread and ends its main thread, so ``/proc`` shows it as a zombie
and process lists by state leave it out. The helper and the child share an anonymous shared
mapping: the child posts each input there and the helper computes the softmax into it; whatever the
helper does between calls is free time on a judge that only watches. Against such a judge this was
5.6x on a busy machine, and the helper outlived the job. A working defence puts every process of
the job in one cgroup frozen outside the window (the helper can only work while the call runs, so
it is paid for) and kills the whole group at the end.
"""

import mmap
import os
import struct
import threading
import time

import torch

_SIZE = 64 << 20
_shm = mmap.mmap(-1, _SIZE, flags=mmap.MAP_SHARED)
_HDR = struct.Struct("<QQQQ")  # sequence posted, sequence done, rows, cols


def _helper_loop():
    torch.set_num_threads(1)  # no OpenMP team after fork: one thread computes inline
    last = 0
    while True:
        seq, done, rows, cols = _HDR.unpack_from(_shm, 0)
        if seq != last and rows:
            n = rows * cols
            x = torch.frombuffer(_shm, dtype=torch.float32, count=n, offset=64).view(rows, cols)
            y = torch.frombuffer(_shm, dtype=torch.float32, count=n, offset=64 + 4 * n).view(rows, cols)
            y.copy_(torch.softmax(x, dim=-1))
            last = seq
            struct.pack_into("<Q", _shm, 8, seq)
        else:
            time.sleep(0.0001)


if os.fork() == 0:
    os.setsid()
    threading.Thread(target=_helper_loop, daemon=False).start()
    import ctypes

    ctypes.CDLL(None).pthread_exit(None)  # the main thread ends: a zombie leader with a live thread
print("[attack] helper process forked at import", flush=True)
_seq = [0]


def custom_kernel(data):
    (x,) = data
    rows, cols = x.shape
    if 64 + 8 * rows * cols > _SIZE:
        return torch.softmax(x.float(), dim=-1).to(x.dtype)
    n = rows * cols
    torch.frombuffer(_shm, dtype=torch.float32, count=n, offset=64).view(rows, cols).copy_(x.float())
    # the shape first, the sequence number last (one 8-byte store): the helper never sees a new
    # sequence number with an old or missing shape (which hung this attack on its own)
    struct.pack_into("<QQ", _shm, 16, rows, cols)
    _seq[0] += 1
    struct.pack_into("<Q", _shm, 0, _seq[0])
    while _HDR.unpack_from(_shm, 0)[1] != _seq[0]:
        pass
    y = torch.frombuffer(_shm, dtype=torch.float32, count=n, offset=64 + 4 * n).view(rows, cols)
    return y.to(x.dtype, copy=True)
