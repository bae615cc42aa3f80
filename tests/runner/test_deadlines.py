"""Per-call deadlines: a kernel that hangs is stopped within seconds of its
call's deadline and the verdict names the case; the mode's budget stays the outer bound; a slow
but honest kernel still finishes."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest
import yaml

from kernelrank.problems import Budgets, load_problem
from kernelrank.runner.judge.harness import evaluate
from tests.conftest import FIXTURES

HANG_ON_SECOND_CALL = """
import torch
_calls = [0]
def custom_kernel(data):
    _calls[0] += 1
    if _calls[0] >= 2:
        while True:
            pass
    return data[0] * 2
"""

HANG_ON_FIRST_CALL = """
def custom_kernel(data):
    while True:
        pass
"""

SLOW_BUT_HONEST = """
import time
def custom_kernel(data):
    time.sleep(0.05)
    return data[0] * 2
"""


@pytest.fixture
def short_calls(tmp_path: Path):
    """The ``double`` problem with a long mode budget and short per-call deadlines."""
    problems, kernels = tmp_path / "problems", tmp_path / "reference_kernels"
    shutil.copytree(FIXTURES / "problems" / "double", problems / "double")
    shutil.copytree(FIXTURES / "reference_kernels" / "double", kernels / "double")
    path = problems / "double" / "problem.yaml"
    data = yaml.safe_load(path.read_text())
    data["budgets"] = {"compile": 60, "test": 120, "benchmark": 120, "leaderboard": 120, "profile": 60,
                       "first_call": 4, "call_floor": 2, "call_factor": 100}
    path.write_text(yaml.safe_dump(data))
    return load_problem("double", problems, kernels)


def test_call_deadline_rule() -> None:
    b = Budgets(first_call=60, call_floor=10, call_factor=100)
    assert b.call_deadline(True, 0.001) == 60
    assert b.call_deadline(False, 0.001) == 10            # the floor
    assert b.call_deadline(False, 0.5) == 50              # 100x the reference
    assert b.call_deadline(False, 0.5, calls=4) == 200    # per call of a batch
    assert b.call_deadline(True, 1.0) == 100              # a first call never less than a later one
    with pytest.raises(ValueError):
        Budgets(call_factor=1)


@pytest.mark.parametrize("source, case, which", [(HANG_ON_SECOND_CALL, "test case 1", "calls after the first"),
                                                 (HANG_ON_FIRST_CALL, "test case 0", "first call")])
def test_a_hang_is_a_verdict_within_seconds_naming_its_case(short_calls, options, source, case, which) -> None:
    started = time.monotonic()
    r = evaluate(short_calls.spec(), source, "test", "cpu", options)
    took = time.monotonic() - started
    assert r.status.value == "timeout", r.message
    assert case in r.message and which in r.message and "deadline" in r.message, r.message
    at = re.search(r"it was at submission\.py line (\d+), in custom_kernel", r.message)  # where it hung
    assert at and source.splitlines()[int(at.group(1)) - 1].strip() in ("while True:", "pass"), r.message
    assert took < 30, f"{took:.1f} s: the mode's 120 s budget, not the call's deadline, ended it"


def test_a_slow_but_honest_kernel_is_timed(short_calls, options) -> None:
    """50 ms per call, thousands of times the reference: within the floor, so it finishes."""
    r = evaluate(short_calls.spec(), SLOW_BUT_HONEST, "benchmark", "cpu", options)
    assert r.status.value == "passed", r.message
    assert all(c.timing and c.timing["mean_ns"] >= 50e6 for c in r.cases if c.kind == "benchmark")


@pytest.mark.parametrize("where, expected", [("torch/_inductor/fake_codegen.py", "passed"), ("mylib/slow.py", "timeout")])
def test_a_first_call_compiling_past_its_deadline_is_not_a_hang(short_calls, options, where: str, expected: str) -> None:
    """A first call that spends longer than ``first_call`` (4 s here) inside a compiler's frames (a
    stand-in of inductor: code whose file is under ``torch/_inductor/``) is given time; the same
    time spent anywhere else is a hang, named where it was (runner/judge/hangs.py)."""
    source = f'''
import time
_code = compile("def build():\\n    t = time.monotonic()\\n    while time.monotonic() - t < 7.0:\\n        pass\\n",
                "/x/{where}", "exec")
_ns = {{"time": time}}
exec(_code, _ns)
_built = []

def custom_kernel(data):
    if not _built:
        _ns["build"]()
        _built.append(1)
    return data[0] * 2
'''
    r = evaluate(short_calls.spec(), source, "test", "cpu", options)
    assert r.status.value == expected, r.message
    if expected == "timeout":
        assert "it was at submission.py line" in r.message and "inside /x/mylib/slow.py" in r.message, r.message


def test_a_cuda_only_problem_is_refused_on_the_cpu_with_its_reason(short_calls, options) -> None:
    """An imported problem whose reference needs a GPU (``cuda_only``): a CPU run is an error
    naming why, at once, and the service's reference check does not run it on the CPU."""
    from kernelrank.problems import ProblemSpec
    from kernelrank.services.reference_check import check_reference

    spec = short_calls.spec()
    only = ProblemSpec(spec.definition.model_copy(update={"cuda_only": "its reference needs aiter"}),
                       spec.reference_source, spec.revision)
    started = time.monotonic()
    r = evaluate(only, SLOW_BUT_HONEST, "test", "cpu", options)
    assert r.status.value == "error" and "runs on CUDA only: its reference needs aiter" in r.message
    assert time.monotonic() - started < 5
    assert check_reference(only) is None
