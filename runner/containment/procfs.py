"""What the judge reads of processes and of the host from ``/proc`` and ``/sys``, never from the child's
reports: a process's threads, state, priority and CPU, every process of a sandbox found and killed
(:class:`ProcessWatch`), and the host's memory settings (huge pages, free page reporting) and
scheduling (autogroups).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any


#: The virtio device id of a memory balloon, and its feature bit for free page reporting
#: (virtio 1.2, section 5.5: ``VIRTIO_BALLOON_F_REPORTING``).
_VIRTIO_BALLOON, _BALLOON_F_REPORTING = 5, 5


def host_huge_pages(setting: str = "enabled") -> str:
    """The host's transparent huge page setting ``/sys/kernel/mm/transparent_hugepage/<setting>``:
    ``enabled`` for private memory (``always``, ``madvise`` or ``never``), ``shmem_enabled`` for
    shared memory such as the slots' memory file (``always``, ``within_size``, ``advise``,
    ``never``, ``deny``, ``force``); ``"unknown"`` where it cannot be read (no THP in the kernel,
    another OS)."""
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage", setting).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        return "unknown"
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else "unknown"


def host_free_page_reporting(devices: Path = Path("/sys/bus/virtio/devices")) -> bool | None:
    """Whether this machine is a virtual machine that hands its free memory back to its host: a
    virtio memory balloon whose driver took the free page reporting feature (each device's
    ``device`` id and ``features`` bit string under ``devices``). Such a host takes memory the
    guest freed and backs it again on its next first touch, so fresh memory costs the guest far
    more than zeroing it (1.4-2.3 ms per MiB against 0.04 once backed, on a
    Firecracker VM: docs/research/bench-history.md, section 17). ``None`` where ``devices`` cannot be
    read (no virtio bus: most hosts)."""
    try:
        entries = list(devices.iterdir())
    except OSError:
        return None
    for entry in entries:
        try:
            device = int((entry / "device").read_text(encoding="ascii").strip(), 16)
            features = (entry / "features").read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if device == _VIRTIO_BALLOON and features[_BALLOON_F_REPORTING:_BALLOON_F_REPORTING + 1] == "1":
            return True
    return False


def host_autogroups() -> bool:
    """Whether the kernel groups threads by session for scheduling (``sched(7)``: autogroups on,
    ``/proc/sys/kernel/sched_autogroup_enabled``): nice values then weigh threads only within
    their session, and sessions share a CPU by their autogroups' nice."""
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text(encoding="ascii").strip() == "1"
    except (OSError, UnicodeDecodeError):
        return False


def priority(pid: int) -> dict[str, int | None]:
    """The scheduling priority of the live process ``pid``, read from ``/proc`` (not reported by
    the child; :func:`~kernelrank.runner.containment.isolation.raise_priority` sets it): ``nice``, the nice
    value of its main thread (``/proc/<pid>/stat``, field 19), and ``autogroup``, that of its
    session's autogroup (``/proc/<pid>/autogroup``), ``None`` where autogroups are off
    (:func:`host_autogroups`). Either is ``None`` when unreadable."""
    fields = stat_fields(pid)
    try:
        nice = int(fields[16]) if fields is not None else None
    except (ValueError, IndexError):
        nice = None
    group: int | None = None
    if host_autogroups():
        try:
            group = int(Path(f"/proc/{pid}/autogroup").read_text().split("nice")[1])
        except (OSError, ValueError, IndexError):
            group = None
    return {"nice": nice, "autogroup": group}


def only_cpu(pid: int) -> int | None:
    """The one CPU the process's main thread may run on (OpenMP's binding puts it there:
    :func:`child_environment`), or ``None`` (several, or unreadable)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Cpus_allowed_list:"):
                    value = line.split(":", 1)[1].strip()
                    return int(value) if value.isdigit() else None
    except (OSError, ValueError):
        return None
    return None


def host_memory_bound(record: dict[str, Any]) -> str:
    """What bounds a child's host memory, from its isolation record: ``"cgroup <n> bytes"`` (the
    job's group), ``"address space <n> bytes ..."`` (``RLIMIT_AS``, CPU only) or ``"unbounded ..."``
    (a GPU child on a host without a cgroup memory controller: a memory bomb meets the OOM killer)."""
    cgroup = (record.get("cgroup_limits") or {}).get("memory_bytes")
    if cgroup:
        return f"cgroup {cgroup} bytes"
    rlimit = (record.get("limits") or {}).get("address_space_bytes")
    if rlimit:
        return f"address space {rlimit} bytes (no cgroup memory controller)"
    return "unbounded (no cgroup memory controller)"


def thread_ids(pid: int) -> set[int]:
    """Live thread ids of ``pid`` (empty when it is gone)."""
    try:
        return {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    except OSError:
        return set()


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (the first is the state, field
    3 of stat(5)), or ``None`` when unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2:].split()


def process_stat(pid: int) -> tuple[str, int, int] | None:
    """``(state, ppid, session)`` of ``pid`` from ``/proc/<pid>/stat``."""
    rest = stat_fields(pid)
    if rest is None:
        return None
    return rest[0].decode(), int(rest[1]), int(rest[3])


class ProcessWatch:
    """Finds every process of one child's sandbox, to count and to kill them.

    With a sandbox uid, membership is the uid (which those processes cannot change). Otherwise
    it is the child's session, descent from a member, and the child's network namespace: a process
    that starts a new session and a nested network namespace, then loses its parent, escapes that.
    """

    def __init__(self, pid: int, uid: int | None):
        self.pid = pid
        self.uid = uid
        self.netns: str | None = None
        try:
            own = os.readlink("/proc/self/ns/net")
            net = os.readlink(f"/proc/{pid}/ns/net")
            self.netns = net if net != own else None
        except OSError:
            pass

    def members(self, include_self: bool = False) -> set[int]:
        """Live (not zombie) processes of the sandbox."""
        found: set[int] = set()
        parents: dict[int, int] = {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            p = int(entry.name)
            if self.uid is not None:
                try:
                    if entry.stat().st_uid != self.uid:
                        continue
                except OSError:
                    continue
                st = process_stat(p)
                if st is not None and st[0] != "Z":
                    found.add(p)
                continue
            st = process_stat(p)
            if st is None or st[0] == "Z":
                continue
            parents[p] = st[1]
            if st[2] == self.pid:  # the child leads its own session
                found.add(p)
            elif self.netns is not None:
                try:
                    if os.readlink(f"/proc/{p}/ns/net") == self.netns:
                        found.add(p)
                except OSError:
                    pass
        if self.uid is None:
            changed = True
            while changed:  # descendants of members
                changed = False
                for p, parent in parents.items():
                    if p not in found and parent in found:
                        found.add(p)
                        changed = True
        if not include_self:
            found.discard(self.pid)
        return found

    def kill_all(self, rounds: int = 200) -> int:
        """SIGKILL every member until none is left (a fork bomb refills between rounds); returns
        how many were left after the last round (0 when all are gone)."""
        left = 0
        for _ in range(rounds):
            members = self.members(include_self=True)
            left = len(members)
            if not members:
                return 0
            for p in members:
                try:
                    os.kill(p, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.01)
        return left


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL ``proc``'s process group (it leads one) and reap ``proc`` (at most 10 s); a group
    already gone is not an error."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail this way
        pass
