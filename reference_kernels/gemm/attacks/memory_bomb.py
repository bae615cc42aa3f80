"""Memory bomb: touches 2 GiB, then claims address space in 1 GiB steps up to twice the host's RAM.

Class: memory bomb
Expected: error

On loading, the submission allocates 256 MiB blocks filled with ones (pages really committed) up to
2 GiB, then keeps reserving 1 GiB blocks without touching them until it holds twice the machine's
physical memory (``MemTotal`` in ``/proc/meminfo``). A real bomb touches every page and pushes the
host into swap or the OOM killer, which may pick the judge, the worker or the database rather than
the submission; this one stops touching at 2 GiB so the corpus cannot take a shared machine down
when the defence is missing. If every step succeeds the bomb "won" (nothing would have stopped it
from touching it all) and then behaves, so a harness without a memory limit lets it pass. A working
defence limits the child's memory below the host's (``RLIMIT_AS``/``RLIMIT_DATA``, or a cgroup
``memory.max``, which the touched part alone must exceed to trip): allocation fails, the submission
fails to load, and the judge is unharmed.
"""

import torch

TOUCH_BYTES = 2 << 30
TOUCH_STEP = 256 << 20
RESERVE_STEP = 1 << 30


def _ram_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 64 << 30


_hoard = []
_held = 0
_goal = 2 * _ram_bytes()
try:
    while _held < TOUCH_BYTES:
        _hoard.append(torch.ones(TOUCH_STEP, dtype=torch.uint8))
        _held += TOUCH_STEP
    while _held < _goal:
        _hoard.append(torch.empty(RESERVE_STEP, dtype=torch.uint8))  # reserved, not touched
        _held += RESERVE_STEP
except (MemoryError, RuntimeError) as e:
    raise RuntimeError(f"allocation refused after {_held >> 20} MiB: {str(e)[:200]}") from None
print(f"[attack] holding {_held >> 30} GiB of address space ({TOUCH_BYTES >> 30} GiB touched), no limit hit",
      flush=True)


def custom_kernel(data):
    a, b = data
    return torch.mm(a, b)
