"""Tries to get its slow calls timed again by making them look taken by the machine.

Class: faking pre-emption (SCHED_IDLE and a busy helper thread during the call)
Expected: passed|rejected
Max speedup: 2.0

The judge times a request again, on new inputs, when the kernel's accounting shows the child's
threads waiting for a CPU while the CPUs ran something else (a host that descheduled the virtual
machine). A child that could fake that would get its unlucky calls dropped and keep the lucky ones.
Every few calls this one moves its calling thread to ``SCHED_IDLE`` (it runs only when nothing else
wants a CPU) and wakes a helper thread that spins for a while at normal priority, so the calling
thread waits, runnable, for most of the window; then it computes the product honestly. Measured
against the landed rule: not one request timed again (the waits are the child's own: the CPUs ran
the child). It must gain nothing: it is ranked at its real cost or rejected.
"""

import os
import threading
import time

import torch

_go = threading.Event()


def _helper():
    while True:
        _go.wait()
        _go.clear()
        end = time.perf_counter() + 0.004
        while time.perf_counter() < end:
            pass


threading.Thread(target=_helper, daemon=True).start()
_calls = [0]


def custom_kernel(data):
    a, b = data
    _calls[0] += 1
    if _calls[0] % 3 == 0 and hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            _go.set()
            time.sleep(0)  # yield to the helper: the calling thread waits, runnable
        finally:
            try:
                os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            except PermissionError:  # a thread may not leave SCHED_IDLE without CAP_SYS_NICE on old kernels
                pass
    return torch.mm(a, b)  # the reference's own work: only the faked pre-emption may gain
