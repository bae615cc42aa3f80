"""The child process that runs submitted code, seen from the judge's side.

:class:`SubmissionProcess` starts ``python -m kernelrank.runner.submission.child`` in a fresh private working
folder with an allowlisted environment (no secrets: nothing of the judge's environment passes
unless named in :data:`~kernelrank.runner.containment.childenv.ENV_ALLOWLIST`), standard input
closed, its own session and process group,
stdout and stderr drained into bounded logs, and a private socket for requests. The child first
isolates itself following a :class:`~kernelrank.runner.containment.isolation.Plan` (namespaces, read-only
view, sandbox user, limits); :meth:`SubmissionProcess.start` waits for that and records the
isolation in force, measured from ``/proc``. :meth:`SubmissionProcess.request` enforces a deadline
and a size bound on every answer; :meth:`SubmissionProcess.cpu_ns` and
:meth:`SubmissionProcess.main_cpu_ns` read the job's CPU time; :meth:`SubmissionProcess.close` kills every
process of the sandbox (:class:`ProcessWatch`) and removes the folder without following links out
of it. Host-side file operations on the folder go through a descriptor opened before the child
ran, never through a path the child could redirect.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from kernelrank.runner.containment import cgroups, isolation, isolation_check, jobdisk, rlimits
from kernelrank.runner.containment.childenv import child_environment
from kernelrank.runner.containment.childlogs import BoundedLog, fatal_report
from kernelrank.runner.containment.procfs import (ProcessWatch, host_huge_pages, host_memory_bound, kill_group,
                                                  only_cpu, priority, stat_fields)
from kernelrank.runner.judge import slots
from kernelrank.runner.slotformat import CudaVmm
from kernelrank.runner.wire import Link, LinkClosed, LinkTimeout, WireError
from kernelrank.vocab import DeviceClass

log = logging.getLogger(__name__)

_group_seq = 0


class ChildDied(Exception):
    """The child exited or was killed before answering; ``returncode`` as from ``Popen``."""

    def __init__(self, message: str, returncode: int | None):
        super().__init__(message)
        self.returncode = returncode


class ChildTimeout(Exception):
    """The child did not answer before the deadline (it has been killed)."""


class ProtocolViolation(Exception):
    """The child's answer was malformed or oversized."""


class ChildUnfrozen(ProtocolViolation):
    """The child's processes did not all stop within the freeze's timeout after a call (it has
    been killed): the submission's is a breach like any other; the reference's, the machine too
    busy (:mod:`kernelrank.runner.judge.busy`)."""


class SandboxError(RuntimeError):
    """The child could not isolate itself as planned: a problem of the host, not of the submission."""


class SubmissionProcess:
    """One child running one submission for one evaluation.

    Args:
        source: the submission's Python source (written to ``submission.py`` in the folder), or
            ``None`` for a child started ahead of its evaluation (:mod:`~kernelrank.runner.containment.spare`),
            whose source :meth:`assign` writes before :meth:`start`.
        device: ``"cpu"`` or ``"cuda"``.
        threads: intra-op threads for the child (CPU device).
        scratch_dir: where the private folder is made (default: the system's temp folder).
        log_limit: bytes kept of stdout and of stderr each.
        max_message_bytes: largest answer accepted from the child (a request may lower it).
        method: isolation method (see :func:`kernelrank.runner.containment.isolation_check.choose`).
        limits: resolved resource limits (:meth:`kernelrank.runner.containment.rlimits.SandboxLimits.resolved`).
        hidden: extra folders covered in the child's view (e.g. the service's data folder).
        zygote: a running :class:`~kernelrank.runner.submission.zygote.Zygote` for this device and thread
            count: the child is forked from it (torch already imported) instead of started cold.
        contain: put the child and everything it starts in a cgroup of its own
            (:mod:`~kernelrank.runner.containment.cgroups`), frozen outside requests, where the host allows;
            ``containment`` says what was used (``"none"`` where nothing could be).

    Between requests the child is frozen (when contained): :meth:`request` thaws it, sends, waits
    for the answer, and freezes it again; ``span_ns`` is that whole window on the judge's clock.
    """

    def __init__(self, source: str | None, device: str, threads: int, scratch_dir: Path | None = None,
                 log_limit: int = 64 * 1024, max_message_bytes: int = 1 << 32, method: str = "none",
                 limits: dict[str, int | None] | None = None, hidden: tuple[Path, ...] = (),
                 zygote: Any = None, contain: bool = True, runs: str = "submission"):
        #: what the process runs, as its death is reported (:meth:`_died`): "submission" or
        #: "reference" (the judge's own reference processes of a paired case)
        self.runs = runs
        if scratch_dir is not None:
            scratch_dir.mkdir(parents=True, exist_ok=True)
        self.workdir = Path(tempfile.mkdtemp(prefix=jobdisk.folder_prefix(), dir=scratch_dir))
        limits = limits or {"core_bytes": 0}
        #: whether the folder is a size-limited disk of its own (``limits["disk_bytes"]``)
        self.disk = jobdisk.mount(self.workdir, limits.get("disk_bytes"))
        disk_bytes = limits.get("disk_bytes") if self.disk else None
        self._dir_fd = os.open(self.workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        self.device = device
        for folder in ("tmp", "build"):
            (self.workdir / folder).mkdir()
        #: whether the process was started before its evaluation took it (:meth:`assign`)
        self.ahead = source is None
        if source is not None:
            self.assign(source)
        self.group: cgroups.JobGroup | None = None
        if contain:
            global _group_seq
            _group_seq += 1
            memory = limits.get("address_space_bytes") or max(4 << 30, rlimits._ram_bytes() // 2)
            self.group = cgroups.make_group(f"job-{os.getpid()}-{_group_seq}", pids_max=limits.get("processes"),
                                            memory_bytes=memory)
        self.containment = self.group.layout.name if self.group is not None else "none"
        self.plan = isolation.make_plan(method, self.workdir, limits, hidden,
                                        cgroup_procs=self.group.procs_files() if self.group else (), device=device)
        if self.plan.uid is not None:
            for path in (self.workdir, self.workdir / "tmp", self.workdir / "build"):
                os.chown(path, self.plan.uid, self.plan.uid)
            ProcessWatch(-1, self.plan.uid).kill_all()  # leftovers of a dead judge that had this pid
        # on CUDA the slots are device memory of their own, passed to the child as a descriptor
        self.arena = slots.Arena(ipc=CudaVmm() if device == DeviceClass.cuda else None)
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.max_message_bytes = max_message_bytes
        self.channel = Link(parent_sock, max_message_bytes=max_message_bytes)
        env = child_environment(Path(self.plan.workdir), device, threads, build_dir=self.plan.build_view)
        self.warm = zygote is not None and zygote.matches(device, threads)
        try:
            if self.warm:
                out_r, out_w = os.pipe()
                err_r, err_w = os.pipe()
                try:
                    self.proc: Any = zygote.spawn(str(self.workdir), env, device, threads, self.plan.to_json(),
                                                  child_sock.fileno(), out_w, err_w, self.arena.fd)
                finally:
                    os.close(out_w)
                    os.close(err_w)
                stdout, stderr = os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb")
            else:
                self.proc = subprocess.Popen(
                    isolation.child_command(self.plan, str(child_sock.fileno()), str(self.arena.fd), device, str(threads)),
                    cwd=self.workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, pass_fds=(child_sock.fileno(), self.arena.fd), start_new_session=True,
                )
                assert self.proc.stdout is not None and self.proc.stderr is not None  # created by PIPE above
                stdout, stderr = self.proc.stdout, self.proc.stderr
        finally:
            child_sock.close()
        self.stdout = BoundedLog(stdout, log_limit)
        self.stderr = BoundedLog(stderr, log_limit)
        self.closed = False
        self.span_ns = 0
        self.watch = ProcessWatch(self.proc.pid, self.plan.uid)
        # the job's disk: a tmpfs of its own of that many bytes, or the scratch disk (None)
        self.isolation: dict[str, Any] = {"method": method, "disk_bytes": disk_bytes}
        #: host pid of the process running the submission (PID 1 of its namespace; see :meth:`start`)
        self.pid = self.proc.pid
        #: the child's memory (outputs read in place while frozen, :class:`~kernelrank.runner.judge.slots.ChildMemory`),
        #: or ``None`` where the judge may not read it
        self.memory: slots.ChildMemory | None = None
        # faults(): the last reading's fault count and resident pages, and the pages that became
        # resident beyond the faults counted (huge pages: one fault each)
        self._faults_seen: tuple[int, int] | None = None
        self._beyond_faults = 0
        self._processes: set[int] = set()
        self._frozen = False
        #: the child's integrity fingerprint in its ``hello`` answer (:meth:`start`)
        self.integrity: Any = None
        #: whether :meth:`start` has returned (its isolation measured)
        self.started = False
        #: the CPU the child's main thread is bound to, where the judge waits for its answers
        #: (:meth:`_wait_on_home_cpu`); ``None`` until :meth:`start`, or when it has several
        self.home_cpu: int | None = None
        #: the child's device memory as the judge measures it around each window, and its budget
        #: (a :class:`~kernelrank.runner.judge.devmem.DeviceMemoryWatch`, set before :meth:`start`), or ``None``
        self.device_memory: Any = None

    def gone(self) -> bool:
        """Whether a child not yet asked anything (one started ahead) has ended, its exit reported
        or not: until its first request it sends nothing, so a socket that reads (end of file) or
        hung up means its process is gone. Not for a child with an answer unread."""
        return self.proc.poll() is not None or self.channel.readable(time.monotonic())

    def assign(self, source: str) -> None:
        """Write the submission's source as ``submission.py`` in the folder, once, before :meth:`start`
        (the child reads it when asked to ``load``), through the folder's descriptor, never
        following or replacing what is there.

        Raises:
            FileExistsError: the folder has a ``submission.py`` already.
        """
        fd = os.open("submission.py", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                     dir_fd=self._dir_fd)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(source)

    def start(self, deadline: float) -> dict[str, Any]:
        """Wait until the child has isolated itself, then measure the isolation in force.

        Raises:
            SandboxError: the child's set-up failed (its message is in the error).
            ChildTimeout, ChildDied, ProtocolViolation: as for :meth:`request`.
        """
        try:
            # the budget reaches the child before the submission is imported (it caps its allocator)
            budget = {"device_memory_bytes": self.device_memory.budget} if self.device_memory is not None else {}
            hello = self.request({"op": "hello", **budget}, deadline, max_bytes=1 << 20)
        except ChildDied as e:
            if e.returncode == isolation.SETUP_FAILED:
                raise SandboxError(self.stderr.text().strip()[-2000:] or "sandbox set-up failed") from None
            raise
        # the tripwire's fingerprint before any submitted code ran (runner/submission/integrity.py)
        self.integrity = hello.get("integrity")
        self.pid = isolation.inner_pid(self.proc.pid)
        self.memory = slots.ChildMemory.open(self.pid, hello.get("memory_probe"))
        if self.memory is not None and self.runs == "submission":  # the reference is trusted code
            self.memory.watch_slots(self.arena.fd)
        self.watch = ProcessWatch(self.pid, self.plan.uid)  # now in its network namespace
        self.isolation = {**isolation_check.measure(self.pid, self.plan), "disk_bytes": self.isolation["disk_bytes"]}
        self.isolation["containment"] = self.containment
        # which path started the child: forked from the runner's zygote, or a new interpreter
        self.isolation["start"] = "warm" if self.warm else "cold"
        # started before its evaluation, while the runner was idle (runner/containment/spare.py)
        self.isolation["started_ahead"] = self.ahead
        # how the judge reads outputs where the child left them (slots.ChildMemory), or "slots"
        self.isolation["output_reads"] = self.memory.method if self.memory is not None else "slots"
        # whether the child's large blocks may be huge pages (child_environment: THP_MEM_ALLOC_ENABLE)
        self.isolation["huge_pages"] = host_huge_pages()
        # whether the slots' memory file may be huge pages (slotformat.advise_huge)
        self.isolation["shared_huge_pages"] = host_huge_pages("shmem_enabled")
        # the child's nice values, as isolation.raise_priority left them
        self.isolation["priority"] = priority(self.pid)
        if self.group is not None:
            self.isolation["cgroup_limits"] = dict(self.group.limits)
        # what bounds the child's host memory, said plainly (on CUDA there is no RLIMIT_AS)
        self.isolation["host_memory"] = host_memory_bound(self.isolation)
        self.isolation["cleanup"] = ("by cgroup" if self.group is not None else "by sandbox uid"
                                     if self.plan.uid is not None else "by process group, session and descent")
        self.home_cpu = only_cpu(self.pid)
        self.started = True
        return self.isolation

    def set_baseline(self) -> None:
        """Remember the sandbox's processes as they are now (uncontained children: :meth:`cpu_ns`
        covers processes the submission started at import)."""
        self._processes = self.watch.members()

    def main_cpu_ns(self) -> int:
        """CPU time (ns) used so far by the thread that makes the calls (the child's main thread),
        from the kernel's scheduler accounting (``/proc/<pid>/task/<pid>/schedstat``, first field):
        a figure the child cannot forge, and which load from other processes does not inflate;
        0 when unreadable."""
        try:
            with open(f"/proc/{self.pid}/task/{self.pid}/schedstat", "rb") as f:
                return int(f.read().split(maxsplit=1)[0])
        except (OSError, ValueError, IndexError):
            return 0

    def faults(self) -> int | None:
        """Page faults of the child's process so far, all its threads together, counted in base
        pages, from the kernel's accounting (``/proc/<pid>/stat``): a figure the child cannot
        forge. ``None`` when unreadable. The judge's warm-up reads it around each request: a call
        that faults is still growing its process's memory, not in its steady state
        (:data:`~kernelrank.runner.timing.WARM_FAULTS_PER_CALL`).

        The count is the minor and major faults (fields 10 and 12), plus, between two readings,
        whatever the resident set (field 24, in pages) grew beyond the faults counted: a
        transparent huge page (the child's ``THP_MEM_ALLOC_ENABLE``,
        :func:`child_environment`) is one fault for 512 pages, 2 MiB cleared. So the difference
        of two readings is the larger of the faults and the pages made resident meanwhile."""
        fields = stat_fields(self.pid)
        try:
            if fields is None:
                return None
            faults, resident = int(fields[7]) + int(fields[9]), int(fields[21])  # minflt, majflt, rss
        except (ValueError, IndexError):
            return None
        if self._faults_seen is not None:
            seen_faults, seen_resident = self._faults_seen
            self._beyond_faults += max(0, (resident - seen_resident) - (faults - seen_faults))
        self._faults_seen = (faults, resident)
        return faults + self._beyond_faults

    def cpu_ns(self) -> int | None:
        """CPU time (ns) the job used so far: its cgroup's, every process it ever started included
        (:meth:`~kernelrank.runner.containment.cgroups.JobGroup.cpu_ns`); without a cgroup, the sum over the
        threads of the child and of the sandbox's processes there at :meth:`set_baseline` (from
        ``/proc/<pid>/task/<tid>/schedstat``); ``None`` when not readable."""
        if self.group is not None:
            return self.group.cpu_ns()
        total = 0
        for pid, tid in self._tasks():
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                    total += int(f.read().split(maxsplit=1)[0])
            except (OSError, ValueError, IndexError):
                continue
        return total

    def _tasks(self) -> list[tuple[int, int]]:
        """``(pid, tid)`` of every thread of the job: its cgroup's members when contained, else the
        child and the sandbox's baseline processes."""
        if self.group is not None:
            return self.group.tasks()
        found = []
        for pid in {self.pid} | self._processes:
            try:
                found.extend((pid, int(tid)) for tid in os.listdir(f"/proc/{pid}/task"))
            except (OSError, ValueError):
                continue
        return found

    def request(self, message: dict[str, Any], deadline: float, max_bytes: int | None = None,
                late: Callable[[], float | None] | None = None, check_s: float = 5.0) -> dict[str, Any]:
        """Send one request and wait for its answer until ``deadline`` (``time.monotonic()``),
        accepting at most ``max_bytes`` bytes of answer (default and cap: ``max_message_bytes``).
        With ``late``, the wait is cut every ``check_s`` seconds while no answer has begun:
        ``late()``, asked while the child runs, gives when to ask next (the request's deadline
        moves there if later: a call that compiles, :mod:`~kernelrank.runner.judge.hangs`), or
        ``None`` to give up now.

        Afterwards, on the judge's clock: ``span_ns``, the *window*: for a contained child from just
        before it is thawed to the moment it is frozen again after answering (it can run at no
        other time); otherwise from the moment the encoded request started to go out to the first
        bytes of the answer.
        """
        self.channel.max_message_bytes = min(max_bytes or self.max_message_bytes, self.max_message_bytes)
        restore = self._wait_on_home_cpu()
        watch = self.device_memory
        if watch is not None:  # outside the window: the device's memory before the child runs
            watch.opened()
        try:
            opened = time.perf_counter_ns()
            self._thaw()
            self.channel.send(message, deadline)
            ask = min(deadline, time.monotonic() + check_s)
            while late is not None and not self.channel.readable(ask):
                nxt = late()
                if nxt is None:
                    raise LinkTimeout("no answer before the deadline")
                ask, deadline = nxt, max(deadline, nxt)
            reply = self.channel.recv(deadline=deadline)
            if self._freeze():
                self.span_ns = time.perf_counter_ns() - opened
            else:
                self.span_ns = self.channel.first_byte_ns - self.channel.send_start_ns
        except LinkTimeout:
            self.kill()
            raise ChildTimeout("no answer before the time budget ran out") from None
        except LinkClosed:
            raise self._died() from None
        except WireError as e:
            self.kill()
            raise ProtocolViolation(str(e)) from None
        finally:
            if restore is not None:
                os.sched_setaffinity(0, restore)
        if watch is not None:  # frozen again (or not contained): what the window left on the device
            watch.closed()
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            self.kill()
            raise ProtocolViolation("the child's answer is not a well-formed reply")
        return reply

    def _wait_on_home_cpu(self) -> set[int] | None:
        """Move the calling thread (the judge's) onto the CPU the child's main thread is bound to,
        for one request; the thread's CPUs before, to restore (``None``: nothing moved).

        The judge's thread sleeps while the child calls, and the child's main thread, once it has
        answered, goes back to its socket at once: sharing its CPU costs neither. The CPU of
        the child's OpenMP worker, which spin-waits after a call, is where the judge should not
        be when the answer wakes it: it waited there for the scheduler's slice before it could
        freeze the child (docs/research/bench-history.md: the path's median 2.0-3.6 ms a request
        unpinned, 1.5-1.7 ms pinned)."""
        cpu = self.home_cpu
        if cpu is None:
            return None
        try:
            before = os.sched_getaffinity(0)
            if before == {cpu} or cpu not in before:
                return None
            os.sched_setaffinity(0, {cpu})
        except OSError:
            return None
        return before

    def _thaw(self) -> None:
        if self.memory is not None:
            self.memory.ran()  # its mappings may change now
        if self.group is not None and self._frozen:
            self.group.thaw()
            self._frozen = False

    def _freeze(self) -> bool:
        """Freeze the job's group; whether it is frozen now (``False``: not contained)."""
        if self.group is None:
            return False
        try:
            self.group.freeze()
        except cgroups.CgroupError as e:
            self.kill()
            raise (ChildUnfrozen if isinstance(e, cgroups.FreezeTimeout) else ProtocolViolation)(
                f"the {self.runs}'s processes could not be stopped after the call: {e}") from None
        self._frozen = True
        return True

    def _died(self) -> ChildDied:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        if code is not None and code < 0:
            try:
                what = f"was killed by signal {signal.Signals(-code).name}"
            except ValueError:
                what = f"was killed by signal {-code}"
            reported = fatal_report(self.stderr.text(timeout=1.0))
            if reported:
                what += f' after it reported "{reported}" (its traceback is in the logs)'
        else:
            what = f"exited with code {code}"
        return ChildDied(f"the process running the {self.runs} {what}", code)

    def kill(self) -> None:
        """SIGKILL every process of the job's cgroup (when contained), the child's process group,
        then every other process of its sandbox."""
        if self.proc.poll() is None:
            # the child itself first: one still starting (not yet in its groups nor its own process
            # group) forks only after joining them, so nothing it starts can escape the group's kill
            # below; missed, it lived on and close waited 10 s for it (a runner closing its spare)
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.group is not None:
            self.group.kill()
            self._frozen = False
        kill_group(self.proc)
        self.watch.kill_all()

    def logs(self) -> dict[str, str]:
        """The child's stdout and stderr, bounded (call after :meth:`close`)."""
        return {"stdout": self.stdout.text(), "stderr": self.stderr.text()}

    def stack_dump(self, wait_s: float) -> str:
        """The child's Python stack now (:func:`kernelrank.runner.judge.hangs.dump`)."""
        from kernelrank.runner.judge import hangs

        return hangs.dump(self.pid, self._dir_fd, wait_s)

    def build_folder(self) -> int:
        """A new descriptor of the folder's ``build`` (``TORCH_EXTENSIONS_DIR``), opened without
        following a link; the caller closes it."""
        return os.open("build", jobdisk.DIR_FLAGS, dir_fd=self._dir_fd)

    def seed_build(self, src_fd: int) -> int | None:
        """Before this process loads the submission, copy the build folder open at ``src_fd`` (the
        same source's, kept by :class:`~kernelrank.runner.containment.buildcache.BuildCache`) into
        its own, so that torch's ninja finds the build up to date; the bytes copied, or ``None`` where
        nothing was (not namespaced: its build folder's path is its own; or the copy refused, what
        was copied removed): the process then builds for itself. The copy follows no link and is
        bounded by this process's disk (:func:`jobdisk.copy_tree`)."""
        if self.plan.build_view is None:
            return None
        try:
            dst = self.build_folder()
            try:
                return jobdisk.copy_tree(src_fd, dst, self.plan.uid, self.isolation["disk_bytes"] or 1 << 30,
                                         skip=jobdisk.BUILD_LEFT_OUT)
            finally:
                os.close(dst)
        except OSError as e:
            log.info("build folder not copied (%s): the process builds for itself", e)
            jobdisk.remove_contents(self.workdir / "build")  # the folder itself stays: the child's view binds it
            return None

    def copy_out(self, name: str, dest: Path, limit: int) -> str | None:
        """Copy the regular file ``name`` from the folder to ``dest`` (at most ``limit`` bytes),
        opened through the folder's descriptor without following a link; ``None`` when it is
        missing, a link, not a regular file or larger than ``limit``."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=self._dir_fd)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
                return None
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(f.read(limit))
        return str(dest)

    def close(self, graceful: bool = True) -> None:
        """Ask the child to exit (briefly), then kill every process of the sandbox and remove the folder."""
        if self.closed:
            return
        self.closed = True
        if graceful and self.proc.poll() is None:
            try:
                self._thaw()
                self.channel.send({"op": "exit"}, time.monotonic() + 2)
                self.channel.recv(deadline=time.monotonic() + 2)
            except Exception:  # noqa: BLE001 - any failure here ends in the kill below
                pass
        # every step is tried whatever an earlier one raised, and none raises: the run's verdict
        # and the other processes' clean-up must not depend on what the child left behind
        # (the job's disk is unmounted before its groups go: its pages are charged to them)
        for step in (self.kill, lambda: os.close(self._dir_fd), self._unmount, lambda: jobdisk.remove_tree(self.workdir),
                     self._remove_group, self.channel.close, self.arena.close, self._close_memory):
            try:
                step()
            except Exception:  # noqa: BLE001 - logged; the next step still runs
                log.warning("sandbox clean-up step failed (%s)", self.workdir, exc_info=True)

    def _unmount(self) -> None:
        if self.disk:
            self.disk = False
            jobdisk.unmount(self.workdir)

    def _remove_group(self) -> None:
        if self.group is not None:
            self.group.remove()

    def _close_memory(self) -> None:
        if self.memory is not None:
            self.memory.close()
            self.memory = None


