"""GPU MODE's output conventions, judged end to end on the CPU: output buffers among the inputs
(destination-passing), outputs that are tuples and dicts of tensors, integer, boolean and float8
outputs, dtype promotion as ``verbose_allclose`` does it, and a problem's own
``check_implementation`` run in the judge's process."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kernelrank.problems import ProblemDefinition, ProblemSpec
from kernelrank.runner.judge.harness import evaluate
from kernelrank.vocab import CaseKind, Verdict

_FLOPS_BYTES = '''

def flops(case):
    return 1


def bytes(case):  # noqa: A001
    return 1
'''


def _spec(name: str, reference: str, *, tests: list[dict[str, Any]] | None = None, **fields: Any) -> ProblemSpec:
    """A problem of this module's references: small cases, loose timing (verdicts are tested here)."""
    definition = {
        "name": name, "title": name, "description": name,
        "contract": {"data": [{"name": "data", "dtype": "float32"}], "output": {"name": "out", "dtype": "float32"}},
        "tolerances": {"float32": {"atol": 1e-5, "rtol": 1e-5}, "float64": {"atol": 1e-5, "rtol": 1e-5}},
        "tests": tests or [{"n": 16, "seed": 1}, {"n": 1000, "seed": 2}],
        "benchmarks": {"cpu": [{"n": 4096, "seed": 3}], "cuda": [{"n": 4096, "seed": 3}]},
        "budgets": {"compile": 60, "test": 30, "benchmark": 60, "leaderboard": 60, "profile": 30},
        "timing": {"cpu": {"benchmark": 0.2, "leaderboard": 0.2, "target": 1000.0, "noisy_above": 1000.0},
                   "cuda": {"benchmark": 1.0, "leaderboard": 1.0}},
        **fields,
    }
    return ProblemSpec(ProblemDefinition.model_validate(definition), reference + _FLOPS_BYTES, f"rev-{name}")


def _judge(spec: ProblemSpec, source: str, options, mode: str = "test"):
    return evaluate(spec, source, mode, "cpu", options)


# -- destination-passing ---------------------------------------------------------------------------
DEST_REFERENCE = '''
import torch


def generate_input(*, n, seed, device="cpu"):
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(n, generator=g, device=device), torch.empty(n, device=device)


def ref_kernel(data):
    x, out = data
    out[...] = 2 * x
    return out
'''

WRITES_AND_RETURNS = '''
def custom_kernel(data):
    x, out = data
    out[...] = 2 * x
    return out
'''


def test_a_call_that_writes_its_output_buffer_and_returns_it_passes(options) -> None:
    spec = _spec("dest", DEST_REFERENCE, output_buffers=["1"])
    r = _judge(spec, WRITES_AND_RETURNS, options)
    assert r.status is Verdict.passed, r.message


def test_the_timed_phase_reads_output_buffers_from_the_judges_slots(options) -> None:
    spec = _spec("dest", DEST_REFERENCE, output_buffers=["1"])
    r = _judge(spec, WRITES_AND_RETURNS, options, mode="benchmark")
    assert r.status is Verdict.passed, r.message
    bench = [c for c in r.cases if c.kind == CaseKind.benchmark]
    assert bench and all(c.passed and c.checked > 1 for c in bench)


def test_without_the_declaration_the_same_solution_is_an_alias(options) -> None:
    r = _judge(_spec("dest", DEST_REFERENCE), WRITES_AND_RETURNS, options)
    assert r.status is Verdict.failed and "shares memory with an input" in r.message


@pytest.mark.parametrize(("source", "needle"), [
    # writes nothing: the buffer holds the judge's 0xFF bytes (NaN), never an earlier answer
    ("def custom_kernel(data):\n    return data[1]\n", "values outside"),
    ("def custom_kernel(data):\n    return data[1].clone()\n", "values outside"),
    # writes half of it
    ("def custom_kernel(data):\n    x, out = data\n    out[: len(x) // 2] = 2 * x[: len(x) // 2]\n    return out\n",
     "values outside"),
    # writes a wrong answer
    ("def custom_kernel(data):\n    x, out = data\n    out[...] = 3 * x\n    return out\n", "values outside"),
    # another input is still an alias
    ("def custom_kernel(data):\n    x, out = data\n    x.mul_(2)\n    return x\n", "other than the output buffers"),
    # a part of the buffer is not the buffer
    ("def custom_kernel(data):\n    x, out = data\n    out[...] = 2 * x\n    return out[1:]\n",
     "other than the output buffers"),
])
def test_a_call_that_does_not_write_the_right_answer_into_its_buffer_fails(options, source: str, needle: str) -> None:
    r = _judge(_spec("dest", DEST_REFERENCE, output_buffers=["1"]), source, options)
    assert r.status is Verdict.failed, r.message
    assert needle in r.message


def test_a_new_tensor_instead_of_the_buffer_passes_too(options) -> None:
    r = _judge(_spec("dest", DEST_REFERENCE, output_buffers=["1"]), "def custom_kernel(data):\n    return 2 * data[0]\n",
               options)
    assert r.status is Verdict.passed, r.message


def test_an_output_buffer_path_that_names_no_tensor_is_a_broken_problem(options) -> None:
    from kernelrank.problems import ProblemError

    with pytest.raises(ProblemError, match="output_buffers path '2'"):
        _judge(_spec("dest", DEST_REFERENCE, output_buffers=["2"]), WRITES_AND_RETURNS, options)


# -- structured, integer, boolean and float8 outputs -----------------------------------------------
TREE_REFERENCE = '''
import torch


def generate_input(*, n, seed, device="cpu"):
    g = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(n, generator=g, device=device),)


def ref_kernel(data):
    x, = data
    return 2 * x, {"argmax": torch.argmax(x).reshape(1), "positive": x > 0}
'''


@pytest.mark.parametrize(("body", "status", "needle"), [
    ('return 2 * x, {"argmax": torch.argmax(x).reshape(1), "positive": x > 0}', Verdict.passed, ""),
    ('return [2 * x, {"argmax": torch.argmax(x).reshape(1), "positive": x > 0}]', Verdict.passed, ""),
    ('return 2 * x, {"argmax": torch.argmin(x).reshape(1), "positive": x > 0}', Verdict.failed, "output[1]['argmax']"),
    ('return 2 * x, {"argmax": torch.argmax(x).reshape(1), "positive": x >= -1e9}', Verdict.failed,
     "output[1]['positive']"),
    ('return 2 * x + 1, {"argmax": torch.argmax(x).reshape(1), "positive": x > 0}', Verdict.failed, "output[0]"),
    ("return (2 * x,)", Verdict.failed, "sequence of 2"),
    ('return 2 * x, {"argmax": torch.argmax(x).reshape(1)}', Verdict.failed, "keys"),
    ('return 2 * x, {"argmax": torch.argmax(x).reshape(1), "positive": (x > 0).tolist()}', Verdict.failed,
     "plain torch.Tensor"),
])
def test_tuples_and_dicts_are_checked_tensor_by_tensor_integers_and_booleans_exactly(
        options, body: str, status: Verdict, needle: str) -> None:
    source = f"import torch\n\n\ndef custom_kernel(data):\n    x, = data\n    {body}\n"
    r = _judge(_spec("tree", TREE_REFERENCE), source, options)
    assert r.status is status, r.message
    assert needle in r.message


def test_a_tuple_output_is_checked_on_every_timed_call(options) -> None:
    source = ('import torch\n\n\ndef custom_kernel(data):\n    x, = data\n'
              '    return 2 * x, {"argmax": torch.argmax(x).reshape(1), "positive": x > 0}\n')
    r = _judge(_spec("tree", TREE_REFERENCE), source, options, mode="benchmark")
    assert r.status is Verdict.passed, r.message
    assert all(c.checked > 1 for c in r.cases if c.kind == CaseKind.benchmark)


FP8_REFERENCE = '''
import torch


def generate_input(*, n, seed, device="cpu"):
    g = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(n, generator=g, device=device).to(torch.float8_e4m3fn),)


def ref_kernel(data):
    x, = data
    return (x.float() * 2).to(torch.float8_e4m3fn)
'''


@pytest.mark.parametrize(("expr", "status"), [("(x.float() * 2).to(torch.float8_e4m3fn)", Verdict.passed),
                                              ("(x.float() * 2 + 1).to(torch.float8_e4m3fn)", Verdict.failed),
                                              ("x.float() * 2", Verdict.failed)])
def test_float8_inputs_and_outputs_cross_the_channel_and_are_checked(options, expr: str, status: Verdict) -> None:
    spec = _spec("fp8", FP8_REFERENCE, tolerances={"float8_e4m3fn": {"atol": 1e-3, "rtol": 1e-3}})
    r = _judge(spec, f"import torch\n\n\ndef custom_kernel(data):\n    x, = data\n    return {expr}\n", options)
    assert r.status is status, r.message


# -- the source's checking semantics ---------------------------------------------------------------
PREFIXSUM_REFERENCE = '''
import torch


def generate_input(*, n, seed, device="cpu"):
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(n, generator=g, device=device), torch.empty(n, device=device)


def ref_kernel(data):
    x, out = data
    return torch.cumsum(x.to(torch.float64), dim=0)
'''

PREFIXSUM_SOLUTION = '''
import torch


def custom_kernel(data):
    x, out = data
    out[...] = torch.cumsum(x, dim=0)
    return out
'''


def test_a_float32_output_passes_against_a_float64_reference_by_promotion(options) -> None:
    tol = {"float32": {"atol": 1e-4, "rtol": 1e-4}, "float64": {"atol": 1e-4, "rtol": 1e-4}}
    promoted = _judge(_spec("prefix", PREFIXSUM_REFERENCE, output_buffers=["1"], check="promote", tolerances=tol),
                      PREFIXSUM_SOLUTION, options)
    assert promoted.status is Verdict.passed, promoted.message
    strict = _judge(_spec("prefix", PREFIXSUM_REFERENCE, output_buffers=["1"], tolerances=tol), PREFIXSUM_SOLUTION,
                    options)
    assert strict.status is Verdict.failed and "dtype float32 differs from expected float64" in strict.message
    wrong = _judge(_spec("prefix", PREFIXSUM_REFERENCE, output_buffers=["1"], check="promote", tolerances=tol),
                   PREFIXSUM_SOLUTION.replace("torch.cumsum(x, dim=0)", "torch.cumsum(x, dim=0) * 1.01"), options)
    assert wrong.status is Verdict.failed and "values outside" in wrong.message


CHOLESKY_REFERENCE = '''
import os
import torch


def generate_input(*, n, seed, device="cpu"):
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(4, n, n, generator=g, device=device)
    return a @ a.transpose(-1, -2) / n + torch.eye(n, device=device)


def ref_kernel(data):
    return torch.linalg.cholesky_ex(data).L


def check_implementation(data, output):
    with open(PIDS, "a") as f:
        f.write(f"{os.getpid()}\\n")
    if not isinstance(output, torch.Tensor) or output.shape != data.shape:
        return False, "output must be a tensor of the input's shape"
    residual = (output @ output.transpose(-1, -2) - data).abs().amax().item()
    if residual > 1e-4 * data.abs().amax().item():
        return False, f"L @ L.T does not reconstruct A: residual={residual:.3g}"
    return True, f"residual={residual:.3g}"
'''


def test_a_problems_own_check_implementation_decides_in_the_judges_process(options, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    reference = CHOLESKY_REFERENCE.replace("PIDS", repr(str(pids)))
    spec = _spec("chol", reference, check="source", tests=[{"n": 8, "seed": 1}, {"n": 32, "seed": 2}])
    # -L is no Cholesky factor elementwise, yet L @ L.T is A: the source's residual check passes it
    negated = "import torch\n\n\ndef custom_kernel(a):\n    return -torch.linalg.cholesky_ex(a).L\n"
    r = _judge(spec, negated, options)
    assert r.status is Verdict.passed, r.message
    assert {int(p) for p in pids.read_text().split()} == {os.getpid()}
    wrong = "import torch\n\n\ndef custom_kernel(a):\n    return torch.linalg.cholesky_ex(a).L + 0.01\n"
    r = _judge(spec, wrong, options)
    assert r.status is Verdict.failed and "does not reconstruct A" in r.message
    strict = _judge(_spec("chol", reference, tests=[{"n": 8, "seed": 1}]), negated, options)
    assert strict.status is Verdict.failed and "values outside" in strict.message


def test_a_source_check_without_check_implementation_is_a_broken_problem(options) -> None:
    from kernelrank.problems import ProblemError

    with pytest.raises(ProblemError, match="check_implementation"):
        _judge(_spec("dest", DEST_REFERENCE, output_buffers=["1"], check="source"), WRITES_AND_RETURNS, options)


def test_every_timed_output_is_judged_by_the_problems_rule(options, tmp_path: Path) -> None:
    """The timed phase's outputs go the full way where the quick rule does not apply (another
    dtype under ``promote``, ``source``), each judged with the judge's own input set."""
    tol = {"float32": {"atol": 1e-3, "rtol": 1e-3}, "float64": {"atol": 1e-3, "rtol": 1e-3}}
    spec = _spec("prefix", PREFIXSUM_REFERENCE, output_buffers=["1"], check="promote", tolerances=tol)
    r = _judge(spec, PREFIXSUM_SOLUTION, options, mode="benchmark")
    assert r.status is Verdict.passed, r.message
    assert all(c.checked > 1 for c in r.cases if c.kind == CaseKind.benchmark)
    pids = tmp_path / "pids"
    chol = _spec("chol", CHOLESKY_REFERENCE.replace("PIDS", repr(str(pids))), check="source",
                 tests=[{"n": 8, "seed": 1}], benchmarks={"cpu": [{"n": 16, "seed": 3}], "cuda": [{"n": 16, "seed": 3}]})
    negated = "import torch\n\n\ndef custom_kernel(a):\n    return -torch.linalg.cholesky_ex(a).L\n"
    r = _judge(chol, negated, options, mode="benchmark")
    assert r.status is Verdict.passed, r.message
    timed = [c for c in r.cases if c.kind == CaseKind.benchmark]
    assert timed and all(c.checked > 1 for c in timed)
    assert len(pids.read_text().split()) >= 1 + sum(c.checked for c in timed)  # every timed output, and the reference's
