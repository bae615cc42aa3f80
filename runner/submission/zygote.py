"""A warm start for the child that runs submitted code: a process with torch imported that forks
one fresh child per evaluation.

Importing torch takes most of a second; a runner judging small jobs would spend most of its time
there. :class:`Zygote` starts ``python -m kernelrank.runner.submission.zygote`` once, with the environment a
child gets (no secrets: :func:`~kernelrank.runner.containment.childenv.child_environment`), which imports torch
and then only forks. It never runs a torch operation, so no OpenMP or CUDA state exists to be
broken by ``fork``. For each evaluation the judge sends the child's socket, its stdout and stderr
pipes (``SCM_RIGHTS``), its folder, environment and isolation plan; the forked process starts its
own session, takes the environment, and isolates itself exactly as a cold child does
(:func:`kernelrank.runner.submission.child.serve`). Submitted code therefore runs in a new, single-use
process every time; what is shared is only the zygote's memory image: torch and the runner's
modules, read before any submission existed, and no secret (the zygote never held one; a child
reading ``/proc/<parent>`` finds the zygote's clean environment, not the runner's).

The zygote reports each child's exit status back (as ``Popen.returncode`` would: the exit code,
or minus the signal), so :class:`ZygoteProcess` stands in for :class:`subprocess.Popen` in
:class:`~kernelrank.runner.containment.sandbox.SubmissionProcess`.

Usage (the zygote side): ``python -m kernelrank.runner.submission.zygote FD`` with FD a ``SOCK_SEQPACKET``
socket to the judge.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import traceback
from typing import Any

from kernelrank.runner.containment.procfs import kill_group


#: Largest request (folder, environment, plan as JSON) the zygote reads.
_REQUEST_BYTES = 1 << 20
_SPAWN_TIMEOUT_S = 30.0
#: Exit status of a forked child whose start failed before it could serve.
_START_FAILED = 70


class ZygoteError(RuntimeError):
    """The zygote is gone or did not answer."""


class ZygoteProcess:
    """A child forked by the zygote, with the part of :class:`subprocess.Popen`'s interface the
    sandbox uses: ``pid``, ``returncode``, ``poll()``, ``wait(timeout)``."""

    def __init__(self, pid: int, zygote: "Zygote"):
        self.pid = pid
        self._zygote = zygote

    @property
    def returncode(self) -> int | None:
        return self._zygote.exit_status(self.pid)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The exit status, once the zygote reported it.

        Raises:
            subprocess.TimeoutExpired: not ended within ``timeout`` seconds.
        """
        code = self._zygote.wait_exit(self.pid, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"zygote child {self.pid}", timeout or 0)
        return code


class Zygote:
    """The judge's side of a warm zygote for one device class and thread count.

    Args:
        env: the zygote's whole environment: a child's (:func:`kernelrank.runner.containment.childenv.child_environment`),
            so that libraries reading it when torch loads (OpenMP's spin count and threads) see
            what a cold child would.
        device, threads: what the children it forks serve; :meth:`matches` tells the harness.

    Raises:
        ZygoteError: (from :meth:`spawn`) the zygote died or did not answer.
    """

    def __init__(self, env: dict[str, str], device: str, threads: int):
        self.device, self.threads = device, threads
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "kernelrank.runner.submission.zygote", str(theirs.fileno())],
                                         env=env, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         pass_fds=(theirs.fileno(),), start_new_session=True)
        finally:
            theirs.close()
        self._sock = ours
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._exits: dict[int, int] = {}
        self._spawned: list[int] = []
        self._ready = False  # its imports done (:meth:`wait_ready`)
        self._alive = True
        self._reader = threading.Thread(target=self._read, name="zygote-reader", daemon=True)
        self._reader.start()

    @classmethod
    def start(cls, device: str, threads: int) -> "Zygote":
        """A zygote whose environment is a child's for ``device`` and ``threads`` (no secrets)."""
        from pathlib import Path

        from kernelrank.runner.containment.childenv import child_environment

        return cls(child_environment(Path("/"), device, threads), device, threads)

    def matches(self, device: str, threads: int) -> bool:
        """Whether this zygote's children serve ``device`` with ``threads`` threads, and it runs."""
        return self._alive and self.proc.poll() is None and (device, threads) == (self.device, self.threads)

    def spawn(self, cwd: str, env: dict[str, str], device: str, threads: int, plan_json: str,
              channel_fd: int, stdout_fd: int, stderr_fd: int, slots_fd: int) -> ZygoteProcess:
        """Fork a child that serves on ``channel_fd`` after isolating itself with the plan, with
        the shared slots' memory file ``slots_fd`` (:mod:`~kernelrank.runner.judge.slots`).

        Raises:
            ZygoteError: the zygote is gone or did not answer in time.
        """
        request = json.dumps({"cwd": cwd, "env": env, "device": device, "threads": threads, "plan": plan_json})
        with self._lock:
            if not self._alive:
                raise ZygoteError("the zygote is not running")
            with self._cond:
                known = len(self._spawned)
            try:
                socket.send_fds(self._sock, [request.encode()], [channel_fd, stdout_fd, stderr_fd, slots_fd])
            except OSError as e:
                raise ZygoteError(f"the zygote is gone: {e}") from None
            with self._cond:
                if not self._cond.wait_for(lambda: len(self._spawned) > known or not self._alive, _SPAWN_TIMEOUT_S):
                    raise ZygoteError("the zygote did not answer")
                if len(self._spawned) <= known:
                    raise ZygoteError("the zygote died")
                return ZygoteProcess(self._spawned[known], self)

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the zygote has made its imports and forks at once (at most ``timeout``
        seconds); whether it has."""
        with self._cond:
            return self._cond.wait_for(lambda: self._ready or not self._alive, timeout) and self._ready

    def exit_status(self, pid: int) -> int | None:
        with self._cond:
            return self._exits.get(pid)

    def wait_exit(self, pid: int, timeout: float | None) -> int | None:
        with self._cond:
            self._cond.wait_for(lambda: pid in self._exits or not self._alive, timeout)
            return self._exits.get(pid, None if self._alive else -signal.SIGKILL)

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(65536)
            except OSError:
                data = b""
            with self._cond:
                if not data:
                    self._alive = False
                    self._cond.notify_all()
                    return
                try:
                    msg = json.loads(data)
                except ValueError:
                    continue
                if "pid" in msg:
                    self._spawned.append(int(msg["pid"]))
                elif msg.get("ready") is True:
                    self._ready = True
                elif "exit" in msg:
                    self._exits[int(msg["exit"])] = int(msg["code"])
                self._cond.notify_all()

    def close(self) -> None:
        """Stop the zygote (its children are the sandbox's to kill)."""
        self._alive = False
        try:
            self._sock.close()
        except OSError:
            pass
        kill_group(self.proc)


# -- the zygote process ---------------------------------------------------------------------------
def _status(raw: int) -> int:
    """``Popen.returncode`` from a ``waitpid`` status."""
    return -os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else os.WEXITSTATUS(raw)


def _child(ctl: socket.socket, request: dict[str, Any], fds: list[int]) -> int:
    """In the forked process: become the child of one evaluation."""
    from kernelrank.runner.submission import child
    from kernelrank.runner.containment.isolation import Plan

    ctl.close()
    signal.set_wakeup_fd(-1)  # the zygote's wake-up pipe is closed below: no byte may reach a reused descriptor
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    channel, out, err, slots = fds
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    for fd in (devnull, out, err):
        os.close(fd)
    low, high = sorted((channel, slots))
    os.closerange(3, low)
    os.closerange(low + 1, high)
    os.closerange(high + 1, 1 << 16)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in request["env"].items()})
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    return child.serve(channel, str(request["device"]), int(request["threads"]), Plan.from_json(request["plan"]),
                       slots)


def main(argv: list[str]) -> int:
    """Import torch, then fork a child per request until the judge closes the socket."""
    ctl = socket.socket(fileno=int(argv[1]))
    from kernelrank.runner.submission.steady import steady_allocator

    steady_allocator()
    import torch  # noqa: F401 - the point of the zygote; no operation may run here (OpenMP, CUDA)

    # a child makes cpp_extension's header removal tolerant before any submission runs
    # (child.adapt_toolchain): imported here, once, instead of 180 ms in every child's start
    import torch.utils.cpp_extension  # noqa: F401

    import kernelrank.runner.submission.child  # noqa: F401
    import kernelrank.runner.containment.isolation  # noqa: F401
    # what a child imports before it answers ``hello`` (ChildLoop): 16 ms in every child, once here
    import kernelrank.runner.submission.integrity  # noqa: F401
    import kernelrank.runner.submission.mapping  # noqa: F401
    import kernelrank.runner.submission.profiling  # noqa: F401
    import kernelrank.runner.timing  # noqa: F401
    import kernelrank.runner.wire  # noqa: F401

    # a child's end wakes the loop at once (its judge waits for the exit status to close the job),
    # not at the next look: polling every 50 ms made a test verdict 0-50 ms later
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    ctl.send(json.dumps({"ready": True}).encode())  # Zygote.wait_ready: a runner's start waits for this
    children: set[int] = set()
    while True:
        try:
            ready, _, _ = select.select([ctl, wake_r], [], [], 1.0)
        except InterruptedError:
            ready = []
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
            ready.remove(wake_r)
        for pid in list(children):
            try:
                done, raw = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                children.discard(pid)
                continue
            if done:
                children.discard(pid)
                ctl.send(json.dumps({"exit": pid, "code": _status(raw)}).encode())
        if not ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(ctl, _REQUEST_BYTES, 4)
        except OSError:
            return 0
        if not data:
            return 0  # the judge is gone
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            continue
        request = json.loads(data)
        pid = os.fork()
        if pid == 0:
            code = _START_FAILED
            try:
                code = _child(ctl, request, fds)
            except BaseException:  # noqa: BLE001 - whatever happens, this process must end here
                traceback.print_exc()
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        children.add(pid)
        ctl.send(json.dumps({"pid": pid}).encode())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
