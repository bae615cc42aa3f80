"""Every problem's reference and examples through the real harness on the CPU.

- each reference, submitted as a kernel, passes its own test cases;
- every correct example (PyTorch, Triton under the interpreter, C++ through load_inline) passes
  its test cases (default tier; C++ for softmax, the other two problems' builds in the full tier),
  and passes in every timed mode: benchmark, leaderboard, profile (full tier), timed on one pair of processes (the verdict is checked here, not the timing
  statistics, so a C++ example is built once per run);
- every wrong example fails, with a message naming the case.
"""

from __future__ import annotations

from pathlib import Path

import dataclasses

import pytest

from kernelrank import vocab
from kernelrank.problems import load_problem
from kernelrank.runner.judge.answers import reference_submission
from kernelrank.runner.judge.harness import evaluate
from kernelrank.vocab import Verdict

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(ROOT.glob("reference_kernels/*/examples/*.py"))
CORRECT = [p for p in EXAMPLES if p.name.startswith("correct_")]
WRONG = [p for p in EXAMPLES if p.name.startswith("wrong_")]
#: (example, timed mode) runs of the full tier
RUNS = [(p, m) for p in CORRECT for m in vocab.MODES if m != "test"]


def _id(p: Path) -> str:
    return f"{p.parent.parent.name}/{p.stem}"


@pytest.mark.parametrize("name", ["gemm", "mla_decode", "softmax"])
def test_reference_passes_against_itself(name: str, options) -> None:
    spec = load_problem(name).spec()
    r = evaluate(spec, reference_submission(spec), "test", "cpu", options)
    assert r.status is Verdict.passed, r.message
    # not bit-exact: the judge computes on one thread, the child on all cores (another summation order)
    assert all(c.passed and c.checked == 1 for c in r.cases)
    assert len(r.cases) == len(spec.definition.tests)


def test_every_problem_has_correct_examples_in_three_languages_and_wrong_ones() -> None:
    for name in ("gemm", "mla_decode", "softmax"):
        mine = {p.stem for p in EXAMPLES if p.parent.parent.name == name}
        assert {"correct_pytorch", "correct_triton", "correct_cpp"} <= mine
        assert len([m for m in mine if m.startswith("wrong_")]) >= 2


@pytest.mark.parametrize("path", [pytest.param(p, marks=[pytest.mark.slow] if p.stem == "correct_cpp"
                                               and p.parent.parent.name != "softmax" else []) for p in CORRECT], ids=_id)
def test_correct_example_passes_its_tests(path: Path, options) -> None:
    """Every problem in every language (Triton under its interpreter, marked so; C++ built by
    load_inline) passes its test cases."""
    _assert_passes(path, "test", options)


@pytest.mark.slow
@pytest.mark.parametrize(("path", "mode"), RUNS, ids=[f"{_id(p)}-{m}" for p, m in RUNS])
def test_correct_example_passes(path: Path, mode: str, options) -> None:
    _assert_passes(path, mode, options)


def _assert_passes(path: Path, mode: str, options) -> None:
    """Judge the correct example ``path`` in ``mode`` (one pair of timed processes) and assert
    it passed, every case of the mode present and checked."""
    spec = load_problem(path.parent.parent.name).spec()
    r = evaluate(spec, path.read_text(), mode, "cpu", dataclasses.replace(options, processes=1))
    assert r.status is Verdict.passed, f"{r.message}\n{r.logs['stderr'][-2000:]}"
    tests = [c for c in r.cases if c.kind == "test"]
    assert len(tests) == len(spec.definition.tests) and all(c.passed for c in tests)
    # on the CPU, Triton kernels run under Triton's interpreter: judged for correctness, never scored
    assert r.interpreted == (path.stem == "correct_triton")
    if mode in ("benchmark", "leaderboard"):
        bench = [c for c in r.cases if c.kind == "benchmark"]
        assert len(bench) == len(spec.definition.benchmarks["cpu"])
        if r.interpreted:
            assert all(c.interpreted and c.timing["runs"] >= 1 and c.speedup is None and c.checked >= 2 for c in bench)
            assert r.speedup is None and r.score_ns is None and "interpreter" in r.message
        else:
            assert all(c.timing["runs"] >= 1 and c.speedup > 0 and c.wall_check["passed"] for c in bench)
            assert all(c.speedup_ci[0] <= c.speedup <= c.speedup_ci[1] for c in bench)
    if mode == "leaderboard" and not r.interpreted:
        assert r.score_ns > 0 and r.score_ci_ns[0] <= r.score_ns <= r.score_ci_ns[1]
    if mode == "profile":
        assert r.profile["table"]


@pytest.mark.parametrize("path", WRONG, ids=_id)
def test_wrong_example_fails_naming_the_case(path: Path, options) -> None:
    spec = load_problem(path.parent.parent.name).spec()
    r = evaluate(spec, path.read_text(), "test", "cpu", options)
    assert r.status is Verdict.failed, r.message
    failing = [c for c in r.cases if not c.passed]
    assert failing
    first = failing[0]
    assert f"test case {first.index} (" in r.message
    assert f"seed={first.spec['seed']}" in r.message
