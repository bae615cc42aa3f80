"""Truncates the shared memory file the judge writes every call's inputs into.

Class: breaking the judge through shared memory
Expected: error

The judge places each call's inputs in a memory file it shares with the child (``memfd``, mapped by
both). A child that truncates that file to nothing makes the judge's next placement a write past the
end of its mapping: a SIGBUS that kills the judge (and, on a runner, the same job redelivered kills
the next one). On its first call this attack finds the file among its descriptors and truncates
it; if that works it behaves. A working defence seals the file against shrinking (``F_SEAL_SHRINK``)
and further seals: the truncation is refused and the attack raises.
"""

import os

import torch

_tried = False


def _slots_fds():
    for fd in os.listdir("/proc/self/fd"):
        try:
            if "kernelrank-slots" in os.readlink(f"/proc/self/fd/{fd}"):
                yield int(fd)
        except OSError:
            continue


def custom_kernel(data):
    global _tried
    if not _tried:
        _tried = True
        fds = list(_slots_fds())
        if not fds:
            raise RuntimeError("no slots memory file among the descriptors")
        refused = []
        for fd in fds:
            try:
                os.ftruncate(fd, 0)
                print(f"[attack] truncated the slots file (fd {fd})", flush=True)
            except OSError as e:
                refused.append(e.errno)
        if len(refused) == len(fds):
            raise RuntimeError(f"truncating the slots file was refused: errno {refused}")
    (x,) = data
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
