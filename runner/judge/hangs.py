"""Telling a call that compiles from one that hangs, and saying where a hung call was.

When a call passes its deadline the judge asks the child for its Python stack: the child dumps
every thread's frames (``faulthandler``, registered on :data:`STACK_SIGNAL` before the submission
loads, writing to :data:`STACK_FILE` in its folder), which works while the thread is inside C code
too. A main thread inside a compiler (:data:`COMPILER_PATHS`: inductor and dynamo, Triton's
compiler, a C++/CUDA build) is compiling: its deadline is extended, a few seconds at a time, up to
the problem's ``budgets.compile_call``. Anything else is a hang, and the verdict names the
innermost frame of the submission's own file (file, line, function).

The stack comes from the submission's process, which is hostile: it can at most claim to be
compiling and so spend its compile budget, a bound the judge sets; it decides nothing else.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any, Callable

from kernelrank.runner.wire import STACK_FILE, STACK_SIGNAL

#: Seconds between looks at a call that has not answered yet (its progress shown, its deadline checked).
CHECK_S = 5.0
#: Seconds the judge waits for a dump after the signal.
STACK_WAIT_S = 0.5
#: Seconds a compiling call's deadline moves on at a time (then it is sampled again).
COMPILE_STEP_S = 5.0
#: Path fragments of frames that are compiling: torch.compile (dynamo, inductor and the C++ or
#: Triton builds it starts), Triton's JIT compiler, ``torch.utils.cpp_extension`` (``load_inline``).
COMPILER_PATHS = ("torch/_dynamo/", "torch/_inductor/", "triton/compiler/", "triton/runtime/build",
                  "torch/utils/cpp_extension", "triton/backends/")

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def main_thread(dump: str) -> list[tuple[str, int, str]]:
    """The frames of the thread that was running the call, innermost first: the block headed
    ``Current thread`` of a ``faulthandler`` dump (the thread the signal interrupted: the main
    thread, which makes every call), else the first block; ``(file, line, function)``."""
    blocks = re.split(r"\n(?=(?:Current thread|Thread) 0x)", dump.strip())
    block = next((b for b in blocks if b.startswith("Current thread")), blocks[0] if blocks else "")
    return [(m["file"], int(m["line"]), m["func"]) for m in _FRAME.finditer(block)]


def compiling(frames: list[tuple[str, int, str]]) -> bool:
    """Whether any frame of the running thread is inside a compiler (:data:`COMPILER_PATHS`)."""
    return any(part in path for path, _, _ in frames for part in COMPILER_PATHS)


def where(frames: list[tuple[str, int, str]], submission: str = "submission.py") -> str | None:
    """The innermost frame of the submission's own file, as ``"submission.py line 12, in spin"``
    (with the innermost frame below it when that is elsewhere: ``"...; inside torch/nn/... line 8"``);
    ``None`` when the submission's file is not on the stack."""
    own = next((f for f in frames if f[0].endswith("/" + submission) or f[0] == submission), None)
    if own is None:
        return None
    text = f"{submission} line {own[1]}, in {own[2]}"
    if frames and frames[0] is not own:
        text += f" (inside {_short(frames[0][0])} line {frames[0][1]}, in {frames[0][2]})"
    return text


def dump(pid: int, dir_fd: int, wait_s: float = STACK_WAIT_S) -> str:
    """The stack dump of child ``pid`` now: :data:`STACK_SIGNAL` sent, then what it appended to
    :data:`STACK_FILE` in its folder (``dir_fd``, opened without following links) within ``wait_s``
    seconds; ``""`` when nothing came (the child gone, or the handler removed by the submission)."""

    def size() -> int:
        try:
            return os.stat(STACK_FILE, dir_fd=dir_fd, follow_symlinks=False).st_size
        except OSError:
            return 0

    before, until = size(), time.monotonic() + wait_s
    try:
        os.kill(pid, STACK_SIGNAL)
    except OSError:
        return ""
    while size() <= before and time.monotonic() < until:
        time.sleep(0.02)
    time.sleep(0.05)  # the other threads' frames follow the first
    try:
        fd = os.open(STACK_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        f.seek(before)
        return f.read(64 * 1024).decode(errors="replace")


def _short(path: str) -> str:
    return path[path.find("site-packages/") + len("site-packages/"):] if "site-packages/" in path else path


class CallWatch:
    """One call's deadline as the judge keeps it (:meth:`late` is the sandbox's ``late`` hook).

    Args:
        child: the submission's process (``stack_dump(wait_s) -> str``).
        started: when the call was sent (``time.monotonic()``).
        allowed: the call's own deadline, in seconds from ``started``.
        compile_s: the most the call may take in all while it is found compiling (s).
        bound: the mode's deadline (``time.monotonic()``), never passed.
        say: the progress line callback (the run's phase).
        label: what a first call's progress lines name (``None``: no lines for later calls).
    """

    def __init__(self, child: Any, started: float, allowed: float, compile_s: float, bound: float,
                 say: Callable[[str], None], label: str | None):
        self.child, self.started, self.allowed, self.compile_s, self.bound = child, started, allowed, compile_s, bound
        self.say, self.label = say, label
        #: the call's deadline now (``time.monotonic()``): moved on while it compiles
        self.own = started + allowed
        self.frames: list[tuple[str, int, str]] = []

    def late(self) -> float | None:
        """When to look next, or ``None``: the deadline passed and the call is not compiling."""
        now = time.monotonic()
        if now < self.own - 0.01:
            if self.label:
                self.say(f"{self.label}: first call running, {now - self.started:.0f} s of its {self.allowed:.0f} s")
            return min(self.own, now + CHECK_S)
        self.frames = main_thread(self.child.stack_dump(STACK_WAIT_S))
        limit = min(self.started + self.compile_s, self.bound)
        if compiling(self.frames) and now < limit:
            self.own = min(now + COMPILE_STEP_S, limit)
            self.say(f"{self.label or 'a call'}: compiling, {now - self.started:.0f} s (up to {self.compile_s:.0f} s)")
            return self.own
        return None

    def hung_at(self) -> str:
        """Where the call was when it was stopped, for the verdict (``""`` without a dump)."""
        if not self.frames:
            return ""
        at = where(self.frames)
        if at:
            return f"; it was at {at}"
        inner = self.frames[0]
        return f"; it was outside the submission's file, at {_short(inner[0])} line {inner[1]}, in {inner[2]}"
