"""Fork bomb: forks in a loop until the system refuses (capped at 300 here), children kept asleep.

Class: fork bomb
Expected: error

On loading, the submission forks as fast as it can; every child sleeps (so the machine fills with
processes, not CPU load) and would outlive a harness that only kills its direct child. The loop is
capped at 300 processes and the sleepers at 120 s so that this corpus cannot take a shared machine
down when the defence is missing; an uncapped bomb would exhaust the process table of the host and
every other job on it. If the cap is reached the bomb "won": it then behaves, so a harness without
a process limit lets it pass. A working defence limits the processes of a submission (a PID
namespace or cgroup ``pids.max``, or ``RLIMIT_NPROC`` for a non-root user): ``fork`` fails, the
submission fails to load, and its whole group is killed afterwards.
"""

import os
import time

import torch

CAP = 300
SLEEP_S = 120

_children = 0
for _ in range(CAP):
    try:
        pid = os.fork()
    except OSError as e:
        raise RuntimeError(f"fork refused after {_children} processes: {e}") from None
    if pid == 0:
        try:
            time.sleep(SLEEP_S)
        finally:
            os._exit(0)
    _children += 1
print(f"[attack] {_children} processes forked, no limit hit", flush=True)


def custom_kernel(data):
    (x,) = data
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
