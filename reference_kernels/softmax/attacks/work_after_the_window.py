"""Returns an unfinished output and lets a thread finish it after the call returned.

Class: work after the timed call
Expected: failed|rejected|passed
Max speedup: 2.0

``custom_kernel`` allocates the output, hands the softmax to a worker thread started at import and
returns at once; the thread fills the output while the harness is busy fetching and checking.
Against a judge that copies the output out in a request after the window (and lets the child run
meanwhile), finishing the output on ``detach`` gave 22x. A working defence freezes every thread of
the child when its answer is in, and reads the output while it is frozen: an output finished later
is wrong, and one finished inside the window was paid for.
"""

import queue
import threading

import torch

_jobs = queue.Queue()


def _worker():
    while True:
        x, out = _jobs.get()
        out.copy_(torch.softmax(x.float(), dim=-1).to(x.dtype))


threading.Thread(target=_worker, daemon=True).start()
print("[attack] worker thread started at import", flush=True)


def custom_kernel(data):
    (x,) = data
    out = torch.empty_like(x)
    _jobs.put((x.clone(), out))
    return out
