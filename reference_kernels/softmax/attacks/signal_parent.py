"""Kills the judge: SIGKILL to its parent process (and the parent's process group) on the first call.

Class: signals to the parent
Expected: error

A submission that can signal its judge ends the evaluation with no verdict at all: a runner that
dies mid-job leaves the job to be redelivered (another try at the secret-seed run, or a queue stuck
redelivering it), and a stopped judge holds a runner forever. The submission sends SIGKILL to
``os.getppid()`` and to that process's group on its first call. A working defence makes the judge
unreachable to signals from the submission (another user, a PID namespace); the ``kill`` then fails
and the submission raises.
"""

import os
import signal

import torch


def custom_kernel(data):
    ppid = os.getppid()
    if ppid <= 1:
        raise RuntimeError(f"the judge is not visible from here (parent pid {ppid})")
    os.kill(ppid, signal.SIGKILL)
    try:
        os.killpg(os.getpgid(ppid), signal.SIGKILL)
    except OSError:
        pass
    (x,) = data
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
