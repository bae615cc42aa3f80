"""Helpers that burn CPU all the time, so that the reference, timed beside it, looks slow.

Class: slowing the reference down (CPU burned while the reference is timed)
Expected: passed|rejected
Max speedup: 1.5

The judge times the submission and the reference side by side, call by call, in one run: a
speedup is the ratio of the two. A submission that could run while the reference is timed could
slow the reference down and look faster without being faster. At import this one starts a
background thread and a helper process (with a thread of its own) that spin without end, one per
CPU, then computes the softmax honestly, as the reference does. A working defence freezes the
job's cgroup whenever the reference is timed (and the reference's whenever the submission is), so
the helpers only ever run inside the submission's own calls, where they slow the submission
itself: its speedup over the reference, the same computation, stays at 1 or below.
"""

import os
import threading

import torch


def _burn():
    x = 1
    while True:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


threading.Thread(target=_burn, daemon=True).start()
if os.fork() == 0:
    threading.Thread(target=_burn, daemon=True).start()
    _burn()
print("[attack] burning CPU in a thread and a helper process", flush=True)


def custom_kernel(data):
    (x,) = data
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
