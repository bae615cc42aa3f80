"""Compiling told from hanging by the child's Python stack, and a hang's verdict naming the line
it hung at (runner/judge/hangs.py; the whole path in tests/runner/test_deadlines.py)."""

from __future__ import annotations

import time

from kernelrank.runner.judge import hangs

DUMP = '''Thread 0x00007f1 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/usr/lib/python3.11/threading.py", line 622 in wait

Current thread 0x00007f0 (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/nn/functional.py", line 1890 in softmax
  File "/tmp/kr-job-x/submission.py", line 9 in spin
  File "/tmp/kr-job-x/submission.py", line 12 in custom_kernel
  File "/venv/lib/python3.11/site-packages/kernelrank/runner/submission/child.py", line 250 in op_go
'''

COMPILING = DUMP.replace("torch/nn/functional.py", "torch/_inductor/codecache.py")


def test_the_running_threads_frames_and_where_the_submission_was() -> None:
    frames = hangs.main_thread(DUMP)
    assert frames[0] == ("/venv/lib/python3.11/site-packages/torch/nn/functional.py", 1890, "softmax")
    assert len(frames) == 4  # the other thread's frames are not the call's
    assert hangs.where(frames) == "submission.py line 9, in spin (inside torch/nn/functional.py line 1890, in softmax)"
    assert not hangs.compiling(frames)
    assert hangs.compiling(hangs.main_thread(COMPILING))
    assert hangs.where(hangs.main_thread(DUMP.replace("submission.py", "other.py"))) is None
    assert hangs.main_thread("") == []


class FakeChild:
    def __init__(self, dump: str):
        self.dump, self.asked = dump, 0

    def stack_dump(self, wait_s: float) -> str:
        self.asked += 1
        return self.dump


def test_a_compiling_call_is_given_time_up_to_its_compile_budget_and_a_hang_is_not() -> None:
    said: list[str] = []
    now = time.monotonic()
    watch = hangs.CallWatch(FakeChild(COMPILING), now - 20, 15.0, 300.0, now + 1000, said.append, "test case 0")
    nxt = watch.late()  # past its 15 s, inside inductor: moves on
    assert nxt is not None and nxt > now and watch.own == nxt and "compiling" in said[-1]
    hung = hangs.CallWatch(FakeChild(DUMP), now - 20, 15.0, 300.0, now + 1000, said.append, "test case 0")
    assert hung.late() is None
    assert hung.hung_at() == "; it was at submission.py line 9, in spin (inside torch/nn/functional.py line 1890, in softmax)"
    spent = hangs.CallWatch(FakeChild(COMPILING), now - 400, 15.0, 300.0, now + 1000, said.append, None)
    assert spent.late() is None  # compiling, but past the compile budget


def test_a_first_call_shows_its_progress_before_its_deadline() -> None:
    said: list[str] = []
    child = FakeChild(DUMP)
    watch = hangs.CallWatch(child, time.monotonic() - 6, 15.0, 300.0, time.monotonic() + 1000, said.append, "test case 0")
    nxt = watch.late()
    assert nxt is not None and nxt <= watch.own and child.asked == 0  # no stack taken before the deadline
    assert said == ["test case 0: first call running, 6 s of its 15 s"]
