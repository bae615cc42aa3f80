"""Per-job control groups: every process of a job in one group the runner controls.

A :class:`JobGroup` is made for each child that runs submitted code. The child joins it first
thing, before it isolates itself (:func:`kernelrank.runner.containment.isolation.enter` writes ``0`` into
each of :meth:`JobGroup.procs_files`), so everything it ever starts is a member: a process that
calls ``setsid``, double-forks or leaves a zombie leader behind stays in the group. The judge
then

- **freezes** the group outside every request and thaws it only for the request's duration
  (:meth:`JobGroup.freeze`, :meth:`JobGroup.thaw`): a frozen task cannot run at all, so no work
  can be done before or after the timed window, by any thread or process of the job;
- **kills** the whole membership at clean-up (:meth:`JobGroup.kill`), then removes the group;
- **bounds** processes (``pids.max``) and memory (``memory.max`` / ``memory.limit_in_bytes``)
  where the controllers are available: RLIMIT_AS cannot be used on GPUs (the CUDA driver maps
  terabytes of address space), a cgroup limit can.

Layouts (:func:`detect`), reported in the run's isolation record as ``containment``:

``v2``
    the unified hierarchy at ``/sys/fs/cgroup`` (most current hosts): ``cgroup.freeze``,
    ``cgroup.kill``, ``pids.max``, ``memory.max`` in one group.
``hybrid``
    a cgroup2 mount with no controllers beside cgroup v1 hierarchies (some VMs):
    the freezer from v2 (``cgroup.freeze``: p50 50 µs to frozen, against 103 µs for
    v1's ``freezer.state``), ``pids``, ``memory`` and ``cpuacct`` from v1.
``v1``
    v1 hierarchies only: ``freezer``, ``pids``, ``memory``, ``cpuacct``.
``none``
    nothing writable (not root, no delegated subtree): no containment; leaderboard jobs refuse to
    run (:attr:`kernelrank.runner.judge.options.EvalOptions.require_containment`). A runner finds
    this, or any group it cannot make, at start (:func:`containment_problem`, with the fix).

Sources: Documentation/admin-guide/cgroup-v2.rst (``cgroup.freeze``, ``cgroup.events``,
``cgroup.kill``) and Documentation/admin-guide/cgroup-v1/freezer-subsystem.rst.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
#: Name of the folder under each hierarchy holding the runner's job groups.
PARENT = "kernelrank"
#: Longest wait for a group to report itself frozen (a task in an uninterruptible sleep, e.g. a
#: page fault on a slow disk, delays it); past it the freeze counts as failed.
FREEZE_TIMEOUT_S = 5.0
#: Sleep between polls of a freezing group's state (the kernel's timer slack makes it ~60 µs).
FREEZE_POLL_S = 20e-6
LAYOUTS = ("v2", "hybrid", "v1", "none")


class CgroupError(RuntimeError):
    """A group could not be made, frozen, thawed or removed."""


class FreezeTimeout(CgroupError):
    """A group's tasks did not all stop within the freeze's timeout."""


@dataclass(frozen=True)
class Layout:
    """Where each capability lives: ``freezer`` is ``("v2", path)`` or ``("v1", path)``; the
    limits' and accounting's hierarchies map controller -> mount point."""

    name: str
    freezer: tuple[str, Path] | None = None
    controllers: dict[str, tuple[str, Path]] = field(default_factory=dict)


def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


@functools.lru_cache(maxsize=None)
def detect(root: str = str(ROOT)) -> Layout:
    """The layout this host offers to this process (cached: it depends on the host, not the job).

    Checks writability only; :meth:`JobGroup.create` finds out whether making a group works.
    """
    base = Path(root)
    if (base / "cgroup.controllers").exists():  # the unified hierarchy is the root: pure v2
        if not _writable(base):
            return Layout("none")
        available = (base / "cgroup.controllers").read_text().split()
        return Layout("v2", ("v2", base), {c: ("v2", base) for c in ("pids", "memory", "cpu") if c in available})
    unified = next((p for p in (base / "unified",) if (p / "cgroup.procs").exists() and _writable(p)), None)
    controllers = {c: ("v1", base / c) for c in ("pids", "memory", "cpuacct") if _writable(base / c)}
    if unified is not None:
        return Layout("hybrid", ("v2", unified), controllers)
    if _writable(base / "freezer"):
        return Layout("v1", ("v1", base / "freezer"), controllers)
    return Layout("none")


class JobGroup:
    """One job's group in every hierarchy of the layout.

    Args:
        name: unique per job (e.g. ``job-<judge pid>-<n>``).
        layout: from :func:`detect`.
        pids_max: most tasks (processes and threads) at once; ``None``: unbounded.
        memory_bytes: most memory (resident + page cache + kernel) of the whole group; ``None``: unbounded.

    Raises:
        CgroupError: a folder could not be made (the caller treats this as no containment).
    """

    #: the descriptor :meth:`cpu_ns` reads through, once opened, and whether it is v2's ``cpu.stat``
    _cpu_fd: int | None = None
    _cpu_v2: bool = False

    def __init__(self, name: str, layout: Layout, pids_max: int | None = None, memory_bytes: int | None = None):
        if layout.freezer is None:
            raise CgroupError("this host offers no writable cgroup freezer")
        self.layout = layout
        self.name = name
        self.dirs: list[Path] = []
        self.limits: dict[str, int] = {}
        #: controller -> why enabling it for the job groups failed (v2's ``cgroup.subtree_control``)
        self.enable_errors: dict[str, str] = {}
        kind, mount = layout.freezer
        self.freezer_kind = kind
        self.freezer_dir = self._make(mount)
        for controller, (ckind, cmount) in layout.controllers.items():
            if cmount == mount:
                continue  # v2: the same folder
            self._make(cmount)
        try:
            if pids_max is not None and "pids" in layout.controllers:
                self._write_limit("pids", "pids.max", str(pids_max))
                self.limits["pids_max"] = pids_max
            if memory_bytes is not None and "memory" in layout.controllers:
                ckind = layout.controllers["memory"][0]
                name_ = "memory.max" if ckind == "v2" else "memory.limit_in_bytes"
                self._write_limit("memory", name_, str(memory_bytes))
                if ckind == "v2":  # no swap: a bomb meets the limit, not the disk
                    try:
                        self._write(self._dir_of("memory") / "memory.swap.max", "0")
                    except CgroupError:
                        pass
                self.limits["memory_bytes"] = memory_bytes
        except CgroupError:
            self.remove()
            raise

    @classmethod
    def existing(cls, name: str, layout: Layout) -> "JobGroup":
        """The group ``name`` as it already is in each hierarchy of ``layout`` (made by another
        judge), to kill and remove it; nothing is created.

        Raises:
            CgroupError: the layout has no freezer.
        """
        if layout.freezer is None:
            raise CgroupError("this host offers no writable cgroup freezer")
        group = cls.__new__(cls)
        group.layout, group.name, group.limits, group.enable_errors = layout, name, {}, {}
        group.freezer_kind, mount = layout.freezer
        group.freezer_dir = mount / PARENT / name
        group.dirs = [group.freezer_dir]
        for _kind, cmount in layout.controllers.values():
            if cmount != mount and cmount / PARENT / name not in group.dirs:
                group.dirs.append(cmount / PARENT / name)
        return group

    def _make(self, mount: Path) -> Path:
        parent = mount / PARENT
        try:
            parent.mkdir(exist_ok=True)
            if self.layout.name == "v2":  # controllers must be enabled for children of the parent
                self._enable(mount, parent)
            path = parent / self.name
            path.mkdir()
        except OSError as e:
            raise CgroupError(f"cannot make cgroup {parent / self.name}: {e}") from None
        self.dirs.append(path)
        return path

    def _enable(self, mount: Path, parent: Path) -> None:
        # a refused enable is not fatal here (the controller may be enabled already), but its
        # reason is kept: the limit's file is then missing and its error says why (_write_limit)
        wanted = [c for c in ("pids", "memory") if c in self.layout.controllers]
        for where in (mount, parent):
            for c in wanted:
                try:
                    (where / "cgroup.subtree_control").write_text(f"+{c}")
                except OSError as e:
                    self.enable_errors[c] = f"+{c} into {where / 'cgroup.subtree_control'}: {e.strerror or e}"

    def _dir_of(self, controller: str) -> Path:
        _kind, mount = self.layout.controllers[controller]
        return mount / PARENT / self.name

    def _write_limit(self, controller: str, name: str, value: str) -> None:
        """Write a limit; a failure names the refused controller enable behind it, if any."""
        try:
            self._write(self._dir_of(controller) / name, value)
        except CgroupError as e:
            if controller in self.enable_errors:
                raise CgroupError(f"{e} (the {controller} controller could not be enabled: "
                                  f"{self.enable_errors[controller]})") from None
            raise

    @staticmethod
    def _write(path: Path, value: str) -> None:
        try:
            with open(path, "w") as f:
                f.write(value)
        except OSError as e:
            raise CgroupError(f"cannot write {value!r} to {path}: {e}") from None

    def procs_files(self) -> tuple[str, ...]:
        """The ``cgroup.procs`` files the child writes ``0`` into to join every hierarchy."""
        return tuple(str(d / "cgroup.procs") for d in self.dirs)

    def pids(self) -> set[int]:
        """Every process in the group (host pids), zombies included."""
        try:
            text = (self.freezer_dir / "cgroup.procs").read_text()
        except OSError:
            return set()
        return {int(x) for x in text.split()}

    def live_pids(self) -> set[int]:
        """Members with a thread that is not a zombie. A zombie process runs nothing (its parent,
        possibly the host's init, reaps it in its own time), but a *zombie leader* (a main thread
        that ended with ``pthread_exit``) can head threads that still run: ``/proc/<pid>/stat``
        says ``Z`` for it while ``/proc/<pid>/task/<tid>/stat`` says ``R``. Such a process is
        live (judging it by its leader's state let one outlive its job, spinning)."""
        return {pid for pid in self.pids() if _has_live_thread(pid)}

    def tasks(self) -> list[tuple[int, int]]:
        """``(pid, tid)`` of every thread of every process in the group."""
        found = []
        for pid in self.pids():
            try:
                found.extend((pid, int(t)) for t in os.listdir(f"/proc/{pid}/task"))
            except (OSError, ValueError):
                continue
        return found

    def cpu_ns(self) -> int | None:
        """CPU time used so far by every task the group ever held (ns): ``cpuacct.usage`` (v1) or
        ``usage_usec`` of ``cpu.stat`` (v2, which has it without the cpu controller); ``None``
        where neither is readable. The judge reads it around every request (both sides' groups:
        the other side's, to show that a frozen group ran nothing; its own, for the work it did
        outside its claims), through a descriptor kept open (1 µs a read, 15 µs opening it each
        time: bench/containment.py)."""
        if self._cpu_fd is None:
            if "cpuacct" in self.layout.controllers:
                path, self._cpu_v2 = self._dir_of("cpuacct") / "cpuacct.usage", False
            elif self.freezer_kind == "v2":
                path, self._cpu_v2 = self.freezer_dir / "cpu.stat", True
            else:
                return None
            try:
                self._cpu_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
        try:
            text = os.pread(self._cpu_fd, 4096, 0)
            if not self._cpu_v2:
                return int(text)
            for line in text.splitlines():
                if line.startswith(b"usage_usec "):
                    return int(line.split()[1]) * 1000
        except (OSError, ValueError, IndexError):
            return None
        return None

    def close(self) -> None:
        """Let go of the descriptor :meth:`cpu_ns` keeps open (before :meth:`remove`)."""
        if self._cpu_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._cpu_fd)
            self._cpu_fd = None

    # -- freezing -------------------------------------------------------------------------------
    def freeze(self, timeout: float = FREEZE_TIMEOUT_S) -> None:
        """Stop every task of the group and return once the kernel reports them all stopped.

        Raises:
            CgroupError: not frozen within ``timeout`` seconds.
        """
        if self.freezer_kind == "v2":
            self._write(self.freezer_dir / "cgroup.freeze", "1")
            done = self._frozen_v2
        else:
            self._write(self.freezer_dir / "freezer.state", "FROZEN")
            done = self._frozen_v1
        end = time.monotonic() + timeout
        while not done():
            # sleep between polls, never spin: a task freezes only once it runs (a thread still on
            # its way back to its socket after answering must get a CPU to stop), and a judge
            # spinning on that CPU held it off for the scheduler's slice. Busy-polling first took
            # 3.7 ms a freeze (p90 6 ms) after a call whose OpenMP workers spin-wait; sleeping,
            # 0.25-0.4 ms (docs/research/bench-history.md)
            time.sleep(FREEZE_POLL_S)
            if time.monotonic() > end:
                raise FreezeTimeout(f"the job's cgroup did not freeze within {timeout:g} s")

    def _frozen_v2(self) -> bool:
        try:
            with open(self.freezer_dir / "cgroup.events", "rb") as f:
                return b"frozen 1" in f.read()
        except OSError:
            return True  # gone: nothing can run

    def _frozen_v1(self) -> bool:
        try:
            with open(self.freezer_dir / "freezer.state", "rb") as f:
                return f.read().strip() == b"FROZEN"
        except OSError:
            return True

    def thaw(self) -> None:
        """Let the group's tasks run again.

        Raises:
            CgroupError: the freezer could not be written.
        """
        if self.freezer_kind == "v2":
            self._write(self.freezer_dir / "cgroup.freeze", "0")
        else:
            self._write(self.freezer_dir / "freezer.state", "THAWED")

    # -- clean-up --------------------------------------------------------------------------------
    def kill(self, timeout: float = 10.0) -> int:
        """SIGKILL every member until the group is empty (a fork bomb refilling it included: the
        group is frozen first, so nothing forks between rounds); returns how many were left.

        Members are killed while frozen, then thawed so the kernel can deliver the signals.
        """
        end = time.monotonic() + timeout
        v2_kill = self.freezer_dir / "cgroup.kill"
        killed: set[int] = set()
        while True:
            members = self.live_pids()
            # and none of those killed still runs a thread (one on its way out may have left the
            # group's list already: returning then let the caller see it run, a CI failure)
            if not members and not any(_has_live_thread(pid) for pid in killed):
                return 0
            killed |= members
            if self.freezer_kind == "v2" and v2_kill.exists():
                try:
                    self._write(v2_kill, "1")
                except CgroupError:
                    pass
            else:
                try:
                    self.freeze(timeout=1.0)
                except CgroupError:
                    pass
            # also a process-directed SIGKILL to each member: cgroup.kill passes over a zombie
            # leader whose threads still run (seen on Linux 6.18), a kill(2) of its pid does not
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                self.thaw()
            except CgroupError:
                pass
            if time.monotonic() > end:
                return len(self.live_pids() | {pid for pid in killed if _has_live_thread(pid)})
            time.sleep(0.005)

    def remove(self) -> None:
        """Remove the group's folders (after :meth:`kill`; a folder still holding a task, e.g. a
        zombie no one reaps, stays)."""
        self.close()
        for d in reversed(self.dirs):
            for _ in range(20):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)  # tasks just killed leave the group asynchronously


def _has_live_thread(pid: int) -> bool:
    """Whether a thread of process ``pid`` is neither a zombie nor dead (``/proc/<pid>/task``)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        if raw[raw.rfind(b")") + 2:][:1] not in (b"Z", b"X"):
            return True
    return False


def _judge_pid(name: str) -> int | None:
    """The judge's pid in a group name ``job-<judge pid>-<n>``, else ``None``."""
    parts = name.split("-")
    if len(parts) == 3 and parts[0] == "job" and parts[1].isdigit():
        return int(parts[1])
    return None


def sweep_stale(layout: Layout) -> list[str]:
    """Kill and remove the job groups whose judge is gone; returns their names.

    A judge killed outright (SIGKILL, a runner's machine restarted without a reboot, pytest's
    timeout) cannot clean up, and its child stays frozen in its group forever (a frozen process
    does not even notice that its socket closed). Every new group first sweeps the groups named
    after a judge pid that no longer exists. Runners sharing one cgroup tree are assumed to share
    one PID namespace (true on one host; a container gets a cgroup namespace of its own).
    """
    if layout.freezer is None:
        return []
    parent = layout.freezer[1] / PARENT
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    swept = []
    for name in names:
        pid = _judge_pid(name)
        if pid is None or os.path.exists(f"/proc/{pid}"):
            continue
        group = JobGroup.existing(name, layout)
        group.kill(timeout=2.0)
        group.remove()
        swept.append(name)
    return swept


def make_group(name: str, pids_max: int | None = None, memory_bytes: int | None = None) -> JobGroup | None:
    """A group for one job where this host allows it, else ``None`` (no containment); groups
    that dead judges left behind are swept first (:func:`sweep_stale`)."""
    layout = detect()
    if layout.freezer is None:
        return None
    sweep_stale(layout)
    try:
        return JobGroup(name, layout, pids_max, memory_bytes)
    except CgroupError:
        return None


#: What an operator does when the runner cannot make job groups (docs/gpu-runner.md, "Containers").
CONTAINMENT_FIX = ("run the runner as root with a writable, delegated cgroup tree: in Docker give its service its "
                   "own cgroup namespace and a read-write /sys/fs/cgroup (docker-compose.yml's runner services: "
                   "`cgroup: private` and deploy/runner-entrypoint.sh), on a host run it as root or in a systemd "
                   "unit with Delegate=yes")
#: Limits the start-up probe group asks for: enough for nothing to run in it, enough to need the controllers.
PROBE_PIDS_MAX = 16
PROBE_MEMORY_BYTES = 64 << 20


def containment_problem(root: str = str(ROOT)) -> str | None:
    """Why this runner cannot contain jobs, with the fix, or ``None`` when it can.

    Makes (and removes) a probe group ``probe-<pid>`` with a process and a memory limit, as a job's
    group is made (:func:`make_group`), so that a read-only cgroup tree (Docker's default), a
    missing freezer and a v2 controller that cannot be enabled for the runner's subtree (the
    ``cgroup.subtree_control`` write that fails while the container's own group holds processes)
    are all found before the first job, not by each leaderboard job's refusal.
    """
    detect.cache_clear()  # the probe must see the tree as it is now, not as the first look found it
    layout = detect(root)
    if layout.freezer is None:
        return (f"the runner cannot make job cgroups: nothing under {root} is writable with a freezer "
                f"(read-only or not delegated); leaderboard jobs are refused. Fix: {CONTAINMENT_FIX}")
    try:
        group = JobGroup(f"probe-{os.getpid()}", layout, pids_max=PROBE_PIDS_MAX, memory_bytes=PROBE_MEMORY_BYTES)
    except CgroupError as e:
        return f"the runner cannot make job cgroups ({e}); leaderboard jobs are refused. Fix: {CONTAINMENT_FIX}"
    group.remove()
    return None
