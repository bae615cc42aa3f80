"""Warm start (runner/submission/zygote.py): children forked from a zygote with torch imported give the same
verdicts as cold children, isolated the same way, and the zygote holds no secret."""

from __future__ import annotations

import dataclasses
import time

import pytest

from kernelrank.runner.host.devices import cpu_threads
from kernelrank.runner.judge.harness import EvalOptions, evaluate
from kernelrank.runner.submission.zygote import Zygote
from kernelrank.vocab import Verdict
from tests.conftest import submission
from tests.runner.conftest import zygote_children


@pytest.fixture
def warm(options: EvalOptions, zygote: Zygote) -> EvalOptions:
    return dataclasses.replace(options, zygote=zygote)


def test_warm_children_pass_and_are_isolated_like_cold_ones(double, options, warm) -> None:
    cold = evaluate(double.spec(), submission("double_ok.py"), "test", "cpu", options)
    hot = evaluate(double.spec(), submission("double_ok.py"), "test", "cpu", warm)
    assert cold.status is hot.status is Verdict.passed, (cold.message, hot.message)
    same = lambda iso: {k: v for k, v in iso.items() if k not in ("uid", "start")}  # noqa: E731 - a uid per job
    assert same(hot.isolation) == same(cold.isolation)
    assert (cold.isolation["start"], hot.isolation["start"]) == ("cold", "warm")


def test_each_evaluation_gets_a_fresh_process(double, warm) -> None:
    # A reused process would still hold what the first evaluation left in its interpreter, and two
    # processes started apart have different start times (a PID namespace's inode is no proof: the
    # kernel reuses it once the first namespace is gone, as a CI run showed).
    src = ("import os, sys\n"
           "start = open('/proc/self/stat').read().rsplit(')', 1)[1].split()[19]\n"
           "print('reused' if hasattr(sys, '_kr_seen') else 'fresh', start)\n"
           "sys._kr_seen = True\n"
           "def custom_kernel(data):\n    return data[0] * 2\n")
    outs = [evaluate(double.spec(), src, "test", "cpu", warm).logs["stdout"].split() for _ in range(2)]
    assert [o[0] for o in outs] == ["fresh", "fresh"], outs
    assert outs[0][1] != outs[1][1], outs


def test_a_warm_child_holds_no_descriptor_or_wake_up_of_the_zygote(double, options, warm) -> None:
    """The zygote wakes on its children's ends through a pipe (``signal.set_wakeup_fd``): a
    forked child has no wake-up descriptor set and as many open descriptors as a cold child (their
    numbers differ: the channel's and the slots' are whatever each start gave them)."""
    src = ("import os, signal\n"
           "print(signal.set_wakeup_fd(-1), len(os.listdir('/proc/self/fd')))\n"
           "def custom_kernel(data):\n    return data[0] * 2\n")
    cold, hot = (evaluate(double.spec(), src, "test", "cpu", o) for o in (options, warm))
    assert cold.status is hot.status is Verdict.passed, (cold.message, hot.message)
    assert hot.logs["stdout"].split(maxsplit=1)[0] == "-1", hot.logs["stdout"]
    assert hot.logs["stdout"] == cold.logs["stdout"]


def test_crash_hang_and_exit_are_verdicts_and_the_zygote_keeps_serving(double, warm, zygote) -> None:
    crashed = evaluate(double.spec(), submission("os_exit.py"), "test", "cpu", warm)
    assert crashed.status is Verdict.error and "exited with code 7" in crashed.message
    hung = evaluate(double.spec(), submission("hang.py"), "test", "cpu", warm)
    assert hung.status is Verdict.timeout, hung.message
    deadline = time.monotonic() + 10
    while zygote_children(zygote) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert zygote_children(zygote) == []  # every child ended and was reaped
    assert evaluate(double.spec(), submission("double_ok.py"), "test", "cpu", warm).status is Verdict.passed


def test_the_zygote_holds_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELRANK_DATABASE_URL", "postgresql://kr:hunter2@db/kr")
    z = Zygote.start("cpu", 1)
    try:
        with open(f"/proc/{z.proc.pid}/environ", "rb") as f:
            environ = f.read()
        assert b"hunter2" not in environ and b"KERNELRANK" not in environ
        assert b"OMP_NUM_THREADS=1" in environ  # a child's environment, OpenMP settings included
    finally:
        z.close()


def test_a_dead_zygote_falls_back_to_a_cold_start(double, options) -> None:
    z = Zygote.start("cpu", cpu_threads(0))
    z.close()
    assert not z.matches("cpu", cpu_threads(0))
    r = evaluate(double.spec(), submission("double_ok.py"), "test", "cpu", dataclasses.replace(options, zygote=z))
    assert r.status is Verdict.passed, r.message
