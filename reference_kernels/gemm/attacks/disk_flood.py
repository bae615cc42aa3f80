"""Fills the runner's disk through its working folder, each file under the per-file limit.

Class: exhausting the host
Expected: error

The per-file limit (``RLIMIT_FSIZE``) stops one large file, not many: on the host's scratch disk,
files of 512 MiB each take gigabytes in seconds. On loading this attack writes such files into its
working folder up to 3 GiB (more than a job's disk holds). If it gets there, the disk is unbounded:
it deletes them and behaves. A working defence gives the job a disk of its own (a size-limited
tmpfs): the writes stop with ``ENOSPC`` before 3 GiB and the attack raises.
"""

import os

import torch

_block = b"\0" * (1 << 20)
_written = 0
try:
    for _n in range(6):
        with open(f"flood{_n}", "wb") as _f:
            for _ in range(512):
                _f.write(_block)
                _written += 1
except OSError as _e:
    raise RuntimeError(f"the disk refused after {_written} MiB: errno {_e.errno}") from None
print(f"[attack] wrote {_written} MiB to the host's disk", flush=True)
for _n in range(6):
    os.unlink(f"flood{_n}")


def custom_kernel(data):
    a, b = data
    return torch.mm(a, b)
