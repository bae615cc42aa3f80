"""Burns CPU in a thread and a helper process all the time, to slow the reference when it is timed.

Class: slowing the reference (CPU burnt while the other side is timed)
Expected: passed|rejected
Max speedup: 2.0

A speedup compares the submission with the reference; a submission that could slow the reference
would look faster without being faster. At import this one starts a thread and forks a helper
process (in its own session, as a daemon would) that spin forever, meant to take the cores while
the reference is timed. Measured against a judge that timed the reference while the submission's
process ran: means within the noise of this machine. A working defence freezes every process of the
submission (its cgroup) whenever it is not its own window, so the spinning only ever slows the
submission itself; the kernel is the honest ``torch.softmax``.
"""

import os
import threading

import torch


def _spin():
    x = 0
    while True:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


threading.Thread(target=_spin, daemon=True).start()
if os.fork() == 0:
    try:
        os.setsid()
    except OSError:
        pass
    _spin()
print("[attack] spinning thread and helper process started at import", flush=True)


def custom_kernel(data):
    (x,) = data
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
