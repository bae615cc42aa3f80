"""Infinite loop that ignores every catchable signal.

Class: infinite loop
Expected: timeout
Message: timeout

On its first call the submission ignores SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGALRM, SIGUSR1/2 and
SIGXCPU, then spins forever in pure Python. A harness that waits for the call without a deadline
hangs a runner forever; one that ends a child with SIGTERM or an alarm is ignored. A working
defence enforces a deadline from outside and kills the whole process group with SIGKILL.
"""

import signal


def custom_kernel(data):
    for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGALRM", "SIGUSR1", "SIGUSR2", "SIGXCPU"):
        try:
            signal.signal(getattr(signal, name), signal.SIG_IGN)
        except (AttributeError, OSError, ValueError):
            pass
    n = 0
    while True:
        n += 1
