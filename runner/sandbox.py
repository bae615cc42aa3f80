"""The child process that runs submitted code, seen from the judge's side.

:class:`SubmissionProcess` starts ``python -m kernelrank.runner.child`` in a fresh private working
folder with an allowlisted environment (no secrets: nothing of the judge's environment passes
unless named in :data:`ENV_ALLOWLIST`), standard input closed, its own session and process group
(so a timeout kills it and everything it started), stdout and stderr drained into bounded logs,
and a private socket for requests. :meth:`SubmissionProcess.request` enforces a deadline on every
answer; :meth:`SubmissionProcess.close` kills the whole group and removes the folder without
following links out of it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from kernelrank.runner.wire import Channel, ChannelClosed, ChannelTimeout, WireError

#: Variables passed through from the judge's environment when set; everything else is dropped.
ENV_ALLOWLIST = (
    "PATH", "LANG", "LC_ALL", "TZ", "CC", "CXX", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
    "VIRTUAL_ENV",
)


class ChildDied(Exception):
    """The child exited or was killed before answering; ``returncode`` as from ``Popen``."""

    def __init__(self, message: str, returncode: int | None):
        super().__init__(message)
        self.returncode = returncode


class ChildTimeout(Exception):
    """The child did not answer before the deadline (it has been killed)."""


class ProtocolViolation(Exception):
    """The child's answer was malformed or oversized."""


class BoundedLog:
    """Drains a pipe in a thread, keeping the first and last ``limit // 2`` bytes.

    A flood is cut, not buffered whole: memory stays at ``limit`` bytes whatever is written.
    """

    def __init__(self, pipe: IO[bytes], limit: int):
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._thread = threading.Thread(target=self._drain, args=(pipe,), daemon=True)
        self._thread.start()

    def _drain(self, pipe: IO[bytes]) -> None:
        try:
            while chunk := pipe.read1(65536):  # type: ignore[attr-defined]
                self.total += len(chunk)
                room = self.half - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail += chunk
                    if len(self.tail) > self.half:
                        del self.tail[: len(self.tail) - self.half]
        except (OSError, ValueError):
            pass
        finally:
            pipe.close()

    def text(self, timeout: float = 2.0) -> str:
        """The kept bytes as text, with a marker where bytes were cut."""
        self._thread.join(timeout)
        cut = self.total - len(self.head) - len(self.tail)
        middle = f"\n[... {cut} bytes cut ...]\n" if cut > 0 else ""
        return (bytes(self.head) + middle.encode() + bytes(self.tail)).decode("utf-8", "replace")


def child_environment(workdir: Path, device: str, threads: int, source_env: dict[str, str] | None = None) -> dict[str, str]:
    """The child's whole environment: allowlisted variables plus its own folders and settings.

    ``TRITON_INTERPRET=1`` on the CPU device runs Triton kernels under Triton's interpreter;
    ``TORCH_EXTENSIONS_DIR`` gives C++/CUDA builds a per-submission build folder.
    """
    src = os.environ if source_env is None else source_env
    env = {k: src[k] for k in ENV_ALLOWLIST if k in src}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    n = str(max(threads, 1))
    env.update({
        "HOME": str(workdir),
        "TMPDIR": str(workdir / "tmp"),
        "TORCH_EXTENSIONS_DIR": str(workdir / "build"),
        "TRITON_CACHE_DIR": str(workdir / "triton-cache"),
        "OMP_NUM_THREADS": n,
        "MKL_NUM_THREADS": n,
        "OPENBLAS_NUM_THREADS": n,
        "MAX_JOBS": n,
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONHASHSEED": "0",
    })
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


class SubmissionProcess:
    """One child running one submission for one evaluation.

    Args:
        source: the submission's Python source (written to ``submission.py`` in the folder).
        device: ``"cpu"`` or ``"cuda"``.
        threads: intra-op threads for the child (CPU device).
        scratch_dir: where the private folder is made (default: the system's temp folder).
        log_limit: bytes kept of stdout and of stderr each.
        max_message_bytes: largest answer accepted from the child.
    """

    def __init__(self, source: str, device: str, threads: int, scratch_dir: Path | None = None,
                 log_limit: int = 64 * 1024, max_message_bytes: int = 1 << 32):
        if scratch_dir is not None:
            scratch_dir.mkdir(parents=True, exist_ok=True)
        self.workdir = Path(tempfile.mkdtemp(prefix="kr-job-", dir=scratch_dir))
        self.device = device
        (self.workdir / "tmp").mkdir()
        (self.workdir / "submission.py").write_text(source, encoding="utf-8")
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.channel = Channel(parent_sock, max_message_bytes=max_message_bytes)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kernelrank.runner.child", str(child_sock.fileno()), device, str(threads)],
                cwd=self.workdir,
                env=child_environment(self.workdir, device, threads),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(child_sock.fileno(),),
                start_new_session=True,
            )
        finally:
            child_sock.close()
        assert self.proc.stdout is not None and self.proc.stderr is not None  # created by PIPE above
        self.stdout = BoundedLog(self.proc.stdout, log_limit)
        self.stderr = BoundedLog(self.proc.stderr, log_limit)
        self.closed = False
        self.answer_ns = 0

    def request(self, message: dict[str, Any], deadline: float) -> dict[str, Any]:
        """Send one request and wait for its answer until ``deadline`` (``time.monotonic()``).

        Afterwards ``answer_ns`` holds the judge's clock from the moment the encoded request started
        to go out to the moment the answer's first bytes arrived: the transfer of the request and
        the child's whole work on it, without the judge's own encoding and the answer's transfer.

        Raises:
            ChildTimeout: no answer in time (the child's process group has been killed).
            ChildDied: the child exited or was killed first.
            ProtocolViolation: the answer was malformed or oversized.
        """
        try:
            self.channel.send(message, deadline)
            reply = self.channel.recv(deadline=deadline)
            self.answer_ns = self.channel.first_byte_ns - self.channel.send_start_ns
        except ChannelTimeout:
            self.kill()
            raise ChildTimeout("no answer before the time budget ran out") from None
        except ChannelClosed:
            raise self._died() from None
        except WireError as e:
            self.kill()
            raise ProtocolViolation(str(e)) from None
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            self.kill()
            raise ProtocolViolation("the child's answer is not a well-formed reply")
        return reply

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
        else:
            what = f"exited with code {code}"
        return ChildDied(f"the process running the submission {what}", code)

    def kill(self) -> None:
        """SIGKILL the child's whole process group (compilers and anything it started included)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail this way
            pass

    def logs(self) -> dict[str, str]:
        """The child's stdout and stderr, bounded (call after :meth:`close`)."""
        return {"stdout": self.stdout.text(), "stderr": self.stderr.text()}

    def close(self, graceful: bool = True) -> None:
        """Ask the child to exit (briefly), then kill its process group and remove the folder."""
        if self.closed:
            return
        self.closed = True
        if graceful and self.proc.poll() is None:
            try:
                self.channel.send({"op": "exit"}, time.monotonic() + 2)
                self.channel.recv(deadline=time.monotonic() + 2)
            except Exception:  # noqa: BLE001 - any failure here ends in the kill below
                pass
        self.kill()
        self.channel.close()
        remove_tree(self.workdir)


def remove_tree(path: Path) -> None:
    """Delete a folder without following symbolic links out of it.

    ``shutil.rmtree`` unlinks links instead of descending into them (it refuses a link as the
    top and, on Linux, uses the ``fd``-based walk that is safe against link races).
    """
    if path.is_symlink():
        path.unlink()
        return
    shutil.rmtree(path, ignore_errors=True)
