"""Isolation of the child that runs submitted code: the plan, its set-up inside the child, and its pieces.

The child sets itself up (:func:`enter`) before it imports torch or the submission, following a
:class:`Plan` the judge wrote. Methods, chosen once per judge process by :func:`~kernelrank.runner.containment.isolation_check.choose` (a probe
runs the real set-up in a throw-away process and checks it from inside):

``setuid`` (the judge runs as root)
    New network and mount namespaces (``unshare(2)``), the view of the system made read-only, then
    the child becomes a dedicated unprivileged user (``uid`` = :data:`SANDBOX_UID_BASE` + a number
    unique per judge process and child) with no capabilities and ``no_new_privs``. Being neither
    root nor the judge's user, it cannot remount, read the judge's ``/proc/<pid>/environ`` or
    memory, signal or trace it, and ``RLIMIT_NPROC`` holds. Every process it starts keeps that
    uid (no capability to change it), so the judge finds and kills all of them by uid.
``userns`` (a non-root judge, where unprivileged user namespaces are allowed)
    The same namespaces and read-only view inside a new user namespace in which the child is root
    mapped to the judge's own user; then every capability is dropped (bounding set included) and
    ``no_new_privs`` set. Weaker: the child has the judge's uid, so on a host without Yama it could
    trace a process of that user; processes are found by session, parent chain and network
    namespace, which a determined submission can leave (``setsid`` plus a nested namespace).
``none``
    No namespaces: only the private working folder, the clean environment and the limits.

The read-only view: the whole mount tree is made read-only (``mount_setattr(2)``, Linux 5.12+),
except the working folder (bound onto itself; its ``build`` also at :data:`BUILD_VIEW`), private,
size-limited ``tmpfs`` on ``/tmp``, ``/var/tmp`` and ``/dev/shm``, and the child's own ``/proc`` (its system-wide knobs,
:data:`PROC_READ_ONLY`, read-only). The host's service folders (:data:`COVERED`: ``/run``, ``/var/lib``,
``/srv``, ``/home``, ..., where Unix sockets of host services live, and ``/sys/fs/cgroup``, where
other jobs' groups are), the judge's home folder, the folder holding the job folders, any
path the caller names and (``setuid``) any folder the sandbox user may not enter are covered by an
empty ``tmpfs``; the folders the child needs to run Python (interpreter prefixes, site-packages,
the runner's own packages, never the judge's working folder or ``PYTHONPATH``) are bound back
read-only. A new network namespace holds only a loopback interface that is down: nothing is
reachable, not even ``127.0.0.1``. A new IPC namespace holds the child's System V objects and
POSIX message queues, which end with it.

Nothing here is seccomp or a VM: a kernel exploit, or a GPU driver bug reached through the device
files the child must open, is not contained.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelrank.runner.containment import rlimits
from kernelrank.runner.containment.gpufiles import gpu_devices, gpu_files_to_hide, runner_gpu_minor
from kernelrank.vocab import DeviceClass

#: Sandbox uids are ``SANDBOX_UID_BASE + (judge pid << 4 | child number % 16)``: unique among
#: live judges, never a real account.
SANDBOX_UID_BASE = 1_000_000_000
#: The children's scheduling priority over the host's other work, as a nice value
#: (``setpriority(2)``) given to the child's thread and to its session's autogroup (``sched(7)``:
#: with ``kernel.sched_autogroup_enabled``, nice values weigh threads only within their session,
#: and the sessions themselves share a CPU by their autogroups' nice). Set while the child is still
#: privileged (:func:`enter`), so every thread it starts (OpenMP's included) inherits it, and the
#: sandbox user cannot lower it further; both sides of a pair get it alike. Beside a one-core CPU
#: hog at nice 0, -10 brings a timed call back to its idle speed: the hog's share of the core falls
#: from a half to about a tenth (weights 1024 against 9548). Idle, it changes nothing
#: (docs/research/bench-history.md, section 16).
CHILD_NICE = -10
#: Exit status of a child whose sandbox set-up failed (message on stderr).
SETUP_FAILED = 121
#: Size of each private writable ``tmpfs`` (``/tmp``, ``/var/tmp``, ``/dev/shm``).
PRIVATE_TMPFS = "256m"
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
#: Where each namespaced child sees its folder's ``build`` (``TORCH_EXTENSIONS_DIR``): one path for
#: every child, so that the build the judge copies from a submission's first process to its others
#: is up to date where torch's ninja file names it (``SubmissionProcess.seed_build``).
BUILD_VIEW = "/tmp/kernelrank-build"
#: Never covered, whatever the caller asks.
_SYSTEM_DIRS = frozenset({"/", "/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/dev", "/proc",
                          "/sys", "/opt", "/var", "/run", "/home", "/srv", "/mnt", "/media", "/boot"})

#: Host folders always covered in the child's view (what the child needs inside them, e.g. a
#: virtual environment under ``/home``, is bound back): where host services keep Unix sockets
#: (reachable from any network namespace) and data, and the cgroup tree (other jobs' state and
#: CPU time).
COVERED = ("/run", "/var/run", "/var/lib", "/var/spool", "/var/mail", "/var/log", "/srv", "/home", "/mnt",
           "/media", "/sys/fs/cgroup")

METHODS = ("setuid", "userns", "none")

#: The child's own ``/proc`` (of its PID namespace) stays writable: CUDA's initialisation names
#: its threads through ``/proc/self/task/<tid>/comm`` and fails with error 304
#: (``cudaErrorOperatingSystem``) where it cannot (seen on an H200, docs/gpu-checks/). The
#: system-wide knobs under it are bound read-only, as container runtimes do.
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")


@dataclass(frozen=True)
class Plan:
    """What the child does to itself before loading anything it did not write (JSON across argv).

    ``hide``: folders covered by an empty read-only ``tmpfs``; ``keep``: folders bound back inside
    them (read-only); ``limits``: resolved :class:`~kernelrank.runner.containment.rlimits.SandboxLimits` values.
    """

    method: str
    workdir: str
    uid: int | None = None
    hide: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()
    limits: dict[str, int | None] = field(default_factory=dict)
    #: ``cgroup.procs`` files of the job's groups (:mod:`~kernelrank.runner.containment.cgroups`), joined first
    cgroup_procs: tuple[str, ...] = ()
    #: GPU device files covered by ``/dev/null`` (other GPUs than the runner's; every GPU
    #: for a CPU job), see :func:`gpu_files_to_hide`
    gpu_hide: tuple[str, ...] = ()
    #: the nice value the child gives itself and its autogroup (:data:`CHILD_NICE`)
    nice: int = CHILD_NICE
    #: where the folder's ``build`` is bound in the child's view (:data:`BUILD_VIEW`; ``None``: not bound)
    build_view: str | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown isolation method {self.method!r}")
        if self.method == "setuid" and self.uid is None:
            raise ValueError("the setuid method needs a uid")

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        d = json.loads(text)
        d["hide"], d["keep"] = tuple(d["hide"]), tuple(d["keep"])
        d["cgroup_procs"] = tuple(d.get("cgroup_procs", ()))
        d["gpu_hide"] = tuple(d.get("gpu_hide", ()))
        return cls(**d)


# -- the child's side --------------------------------------------------------------------------
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
CLONE_NEWIPC = 0x08000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 4096, 16384, 1 << 18
MNT_DETACH = 0x2
PR_SET_PDEATHSIG = 1
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 0x1, 0x2
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
SYS_MOUNT_SETATTR = 442  # the same number on every architecture that has it
PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 24, 28, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
#: NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE, each with its lock bit.
SECURE_BITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x80 | 0x40


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _check(result: int, what: str) -> None:
    if result != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    """``mount(2)`` (``MS_*`` flags, filesystem ``data`` options).

    Raises:
        OSError: the mount was refused."""
    enc = (lambda s: None if s is None else s.encode())
    _check(_libc().mount(enc(source), target.encode(), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {target}")


def unmount(target: str) -> None:
    """``umount2(2)`` with ``MNT_DETACH``: the mount leaves the tree now, its contents go once no
    process holds them.

    Raises:
        OSError: the unmount was refused (not a mount point, no privilege)."""
    _check(_libc().umount2(target.encode(), MNT_DETACH), f"unmount {target}")


def _set_mount_attr(path: str, set_: int = 0, clear: int = 0, recursive: bool = False) -> None:
    attr = _MountAttr(set_, clear, 0, 0)
    _check(_libc().syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path.encode(), AT_RECURSIVE if recursive else 0,
                           ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr))), f"mount_setattr {path}")


def _prctl(option: int, arg: int, what: str) -> None:
    _check(_libc().prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)), what)


def _depth(path: str) -> int:
    return len(Path(path).parts)


def _private_dirs() -> list[str]:
    """The folders of :data:`PRIVATE_DIRS` that get a private ``tmpfs`` here (real folders, not links)."""
    return [d for d in PRIVATE_DIRS if os.path.isdir(d) and not os.path.islink(d)]


def _build_view(plan: Plan) -> None:
    """Private mount tree: a fresh ``/proc`` of the child's PID namespace, hidden folders covered,
    needed ones bound back, private tmpfs, the working folder writable, everything else read-only
    and nosuid."""
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    keep = [p for p in dict.fromkeys((*plan.keep, plan.workdir)) if os.path.isdir(p)]
    fds = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in keep}
    build = -1 if not plan.build_view else os.open(os.path.join(plan.workdir, "build"),
                                                   os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
    private = _private_dirs()
    steps = sorted([(p, "hide") for p in plan.hide] + [(p, "private") for p in private] + [(p, "keep") for p in keep],
                   key=lambda s: (_depth(s[0]), s[1] != "hide", s[1] != "private"))
    for path, action in steps:
        if action == "keep":
            if path != plan.workdir and os.path.isdir(path) and _listable(path):
                continue  # visible already
            os.makedirs(path, exist_ok=True)
            mount(f"/proc/self/fd/{fds[path]}", path, None, MS_BIND | MS_REC)
        elif os.path.isdir(path) and not os.path.islink(path):
            options = f"mode=1777,size={PRIVATE_TMPFS}" if action == "private" else "mode=755,size=4m"
            mount("tmpfs", path, "tmpfs", MS_NOSUID, options)
    if plan.build_view:  # inside the private /tmp, mounted above
        os.makedirs(plan.build_view)
        mount(f"/proc/self/fd/{build}", plan.build_view, None, MS_BIND)
        os.close(build)
    for fd in fds.values():
        os.close(fd)
    for path in plan.gpu_hide:  # other GPUs' device files: /dev/null in their place
        if os.path.exists(path):
            mount("/dev/null", path, None, MS_BIND)
    _set_mount_attr("/", set_=MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, recursive=True)
    for path in (*private, plan.workdir, *([plan.build_view] if plan.build_view else []), "/proc"):
        _set_mount_attr(path, clear=MOUNT_ATTR_RDONLY)
    for path in PROC_READ_ONLY:  # the rest of /proc stays as writable as its permissions say
        if os.path.exists(path):
            mount(path, path, None, MS_BIND)
            _set_mount_attr(path, set_=MOUNT_ATTR_RDONLY)


def _listable(path: str) -> bool:
    """True when ``path`` shows its real content (not an empty stand-in made by a covering tmpfs)."""
    try:
        return bool(os.listdir(path))
    except OSError:
        return False


def _empty_bounding_set() -> None:
    """No capability can be gained again, not even by executing a program as root."""
    for cap in range(int(Path("/proc/sys/kernel/cap_last_cap").read_text()) + 1):
        _prctl(PR_CAPBSET_DROP, cap, f"drop capability {cap} from the bounding set")


def _drop_capabilities() -> None:
    """Lock root out (securebits), empty the bounding and ambient sets, then clear every capability."""
    _prctl(PR_SET_SECUREBITS, SECURE_BITS, "securebits")
    _empty_bounding_set()
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, "clear ambient capabilities")
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    _check(_libc().capset(ctypes.byref(header), ctypes.byref(data)), "capset")


def join_cgroups(plan: Plan) -> None:
    """Join the job's groups (``0``: this process): everything started later is a member.

    Raises:
        OSError: a group could not be joined (the child must not go on: it would be uncontained).
    """
    for procs in plan.cgroup_procs:
        with open(procs, "w") as f:
            f.write("0")


def raise_priority(nice: int) -> None:
    """Give this process's session (its autogroup, ``/proc/self/autogroup``) and this thread the
    nice value ``nice`` (:data:`CHILD_NICE`); threads started later inherit the thread's. Best
    effort: lowering a nice value needs ``CAP_SYS_NICE`` (a judge running as root), and a host
    without autogroups has no file to write; whatever was refused stays at the default, and the
    judge reads what holds from outside (:func:`kernelrank.runner.containment.procfs.priority`)."""
    if nice == 0:
        return
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
    except OSError:
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError:
        pass


#: ``CAP_SYS_NICE``'s bit in a capability set (``capability.h``).
CAP_SYS_NICE = 23


def may_raise_priority() -> bool:
    """Whether a child this process starts can give itself :data:`CHILD_NICE`: this process has
    ``CAP_SYS_NICE`` in its effective set (``/proc/self/status``), as a judge running as root
    has, and a child inherits before it drops its capabilities."""
    cap = status_fields(os.getpid())[1]
    return cap is not None and bool(int(cap, 16) >> CAP_SYS_NICE & 1)


def _become_pid_one() -> None:
    """Fork after ``unshare(CLONE_NEWPID)``: the new process is PID 1 of the new namespace and
    returns; this one stays outside as a shim that only waits for it and ends as it ended (exit
    status, or the same signal), so the judge sees the child's end as before. The shim closes
    every descriptor (the channel's end of file is then the child's), and PID 1 dies with it.
    When PID 1 ends, the kernel kills every other process of the namespace."""
    pid = os.fork()
    if pid == 0:
        _prctl(PR_SET_PDEATHSIG, 9, "parent death signal")
        return
    os.closerange(0, 1 << 16)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(SETUP_FAILED)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        import signal

        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else SETUP_FAILED)


def enter(plan: Plan) -> None:
    """Apply ``plan`` to this process (child side, single-threaded, before importing torch).

    Order: join the job's cgroups and raise the priority (:func:`raise_priority`; both while
    still privileged), new namespaces (user for ``userns``;
    mount, network and PID), fork into PID 1 of the new PID namespace (:func:`_become_pid_one`;
    the caller continues as PID 1), the read-only view with a fresh ``/proc``, the sandbox user
    (its ``setresuid`` clears the parent-death signal, so it is set again), limits.

    Raises:
        OSError: a step failed; the caller must not go on to load the submission.
    """
    libc = _libc()
    join_cgroups(plan)
    raise_priority(plan.nice)
    if plan.method == "userns":
        uid, gid = os.getuid(), os.getgid()
        _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC),
               "unshare user, mount, network, PID and IPC namespaces")
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
        Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
    elif plan.method == "setuid":
        _check(libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC),
               "unshare mount, network, PID and IPC namespaces")
    if plan.method != "none":
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        _become_pid_one()
        _build_view(plan)
        if plan.method == "setuid":
            assert plan.uid is not None  # checked by Plan
            _empty_bounding_set()
            os.setgroups([])
            os.setresgid(plan.uid, plan.uid, plan.uid)
            os.setresuid(plan.uid, plan.uid, plan.uid)  # clears every capability
        else:
            _drop_capabilities()
        _prctl(PR_SET_PDEATHSIG, 9, "parent death signal")  # again: a change of user clears it
        _prctl(PR_SET_NO_NEW_PRIVS, 1, "no_new_privs")
    os.chdir(plan.workdir)  # re-enter the folder through its new mount
    rlimits.apply(plan.limits)


def inner_pid(pid: int, timeout: float = 5.0) -> int:
    """The host pid of the process that runs the submission: PID 1 of the child's namespace, the
    only child of the shim ``pid`` (:func:`_become_pid_one`); ``pid`` itself when the child has no
    PID namespace of its own."""
    import time

    try:
        own = os.readlink("/proc/self/ns/pid")
    except OSError:
        return pid
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return pid
        for k in kids:
            try:
                if os.readlink(f"/proc/{k}/ns/pid") != own:
                    return int(k)
            except OSError:
                continue
        if not kids:
            try:  # not forked yet, or no namespace: the shim is the child itself
                if os.readlink(f"/proc/{pid}/ns/pid_for_children") == own:
                    return pid
            except OSError:
                return pid
        time.sleep(0.001)
    return pid


def probe_report(plan: Plan) -> dict[str, Any]:
    """After :func:`enter`, what holds, seen from inside (the probe process prints this)."""
    import importlib.util
    import socket

    report: dict[str, Any] = {"uid": os.getuid(), "pid_one": os.getpid() == 1,
                              "processes_seen": sum(1 for d in os.listdir("/proc") if d.isdigit())}
    try:  # what the child needs stays readable: the standard library, torch, the runner
        import glob  # noqa: F401 - not loaded yet at this point
        import kernelrank.runner.timing  # noqa: F401

        spec = importlib.util.find_spec("torch")
        with open(spec.origin if spec and spec.origin else "", "rb") as f:
            f.read(1)
        report["python_readable"] = True
    except (ImportError, OSError) as e:
        report["python_readable"] = False
        report["python_error"] = f"{type(e).__name__}: {e}"[:300]
    report["gpu_devices_blocked"] = [d for d in gpu_devices() if not os.access(d, os.R_OK | os.W_OK)]
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    code = s.connect_ex(("127.0.0.1", 9))
    s.close()
    report["network_blocked"] = code == errno.ENETUNREACH
    try:
        fd = os.open(os.path.join(sys.prefix, ".kernelrank-probe"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as e:
        report["outside_read_only"] = e.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
    else:  # pragma: no cover - only where isolation failed
        os.close(fd)
        os.unlink(os.path.join(sys.prefix, ".kernelrank-probe"))
        report["outside_read_only"] = False
    probe_file = os.path.join(plan.workdir, "probe")
    with open(probe_file, "w") as f:
        f.write("ok")
    report["workdir_writable"] = True
    if plan.build_view:  # the same folder, seen at its fixed path
        with open(os.path.join(plan.build_view, "probe"), "w") as f:
            f.write("ok")
        report["build_view"] = os.path.exists(os.path.join(plan.workdir, "build", "probe"))
    return report


# -- the judge's side: choosing and checking -------------------------------------------------------
_child_seq = 0


def sandbox_uid() -> int:
    """A fresh sandbox uid for the next child of this judge process."""
    global _child_seq
    _child_seq += 1
    return SANDBOX_UID_BASE + ((os.getpid() << 4) | (_child_seq % 16))


def keep_paths() -> tuple[str, ...]:
    """Folders the child needs to run Python and the runner: interpreter prefixes, ``sys.path``,
    the ``kernelrank`` packages, torch, and a CUDA toolkit named in the environment."""
    import kernelrank
    import kernelrank.runner

    # not sys.path[0] (the judge's script folder or working folder) nor PYTHONPATH: the child has
    # neither, and they may hold the service's files
    skip = {os.path.realpath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
             os.path.dirname(os.path.abspath(kernelrank.__file__)),
             os.path.dirname(os.path.abspath(kernelrank.runner.__file__)),
             *(p for p in sys.path[1:] if p and os.path.realpath(p) not in skip)]
    paths += [os.environ[v] for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    out = []
    for p in paths:
        real = os.path.realpath(p)
        if os.path.isdir(real) and real not in out:
            out.append(real)
    return tuple(out)


def hide_paths(workdir: Path, extra: tuple[Path, ...] = ()) -> tuple[str, ...]:
    """Folders to cover: :data:`COVERED`, the judge's home, the folder holding the job folders, and
    ``extra`` (e.g. the service's data folder); other system folders are never covered."""
    candidates = [os.path.expanduser("~"), str(workdir.parent), *(str(p) for p in extra)]
    out = [p for p in COVERED if os.path.isdir(p) and not os.path.islink(p)]
    for p in candidates:
        real = os.path.realpath(p)
        private = any(real == d or real.startswith(d + "/") for d in PRIVATE_DIRS)  # hidden anyway
        covered = any(real == d or real.startswith(d + "/") for d in out)
        if real not in _SYSTEM_DIRS and not private and not covered and os.path.isdir(real):
            out.append(real)
    return tuple(out)


def make_plan(method: str, workdir: Path, limits: dict[str, int | None], hidden: tuple[Path, ...] = (),
              cgroup_procs: tuple[str, ...] = (), device: str | None = None) -> Plan:
    """The plan for one child in ``workdir`` (judge side); with ``device``, the GPU device files
    the child must not reach (:func:`gpu_files_to_hide`) are covered."""
    if method == "none":
        # RLIMIT_NPROC counts every process of the user: without a user or user namespace of its
        # own the child would share the count with the whole account, so it is not set
        return Plan("none", str(workdir), limits={k: v for k, v in limits.items() if k != "processes"},
                    cgroup_procs=cgroup_procs)
    gpu_hide: tuple[str, ...] = ()
    if device is not None:
        files = gpu_devices()
        gpu_hide = gpu_files_to_hide(device, files, runner_gpu_minor() if device == DeviceClass.cuda and files else None)
    real = os.path.realpath(workdir)
    keep = keep_paths()
    if method == "setuid":  # the sandbox user must reach what it needs through closed folders too
        hidden = (*hidden, *(Path(c) for c in (_closed_ancestor(p) for p in (*keep, real)) if c is not None))
    hide = hide_paths(Path(real), hidden)
    return Plan(method, real, uid=sandbox_uid() if method == "setuid" else None, hide=hide, keep=keep,
                limits=dict(limits), cgroup_procs=cgroup_procs, gpu_hide=gpu_hide,
                build_view=BUILD_VIEW if "/tmp" in _private_dirs() and os.path.isdir(os.path.join(real, "build")) else None)


def _closed_ancestor(path: str) -> str | None:
    """The outermost folder above ``path`` that others may not enter (no ``o+x``), if any: it is
    covered in the child's view and what is needed under it bound back."""
    parts = Path(path).parts
    for i in range(2, len(parts)):
        folder = os.path.join(*parts[:i])
        try:
            if not os.stat(folder).st_mode & 0o001:
                return folder
        except OSError:
            return None
    return None


def child_command(plan: Plan, *args: str) -> list[str]:
    """The command line starting the child module with ``plan``."""
    return [sys.executable, "-m", "kernelrank.runner.submission.child", *args, plan.to_json()]


def status_fields(pid: int) -> tuple[int | None, str | None]:
    """Real uid and effective capabilities (hex) of ``pid``."""
    uid, cap = None, None
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Uid:"):
                    uid = int(line.split()[1])
                elif line.startswith("CapEff:"):
                    cap = line.split()[1]
    except OSError:
        pass
    return uid, cap
