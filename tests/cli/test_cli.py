"""The ``kernelrank`` command as a user runs it: output, JSON contract, exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT, SUBMISSIONS

KERNELRANK = str(Path(sys.executable).parent / "kernelrank")


def _run(*args: str, fixtures: bool | Path = True, tmp: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``kernelrank ARGS`` from this checkout (``PYTHONPATH``), on the fixture problems (or on
    ``fixtures/problems`` and ``fixtures/reference_kernels`` when ``fixtures`` is a folder)."""
    env = dict(os.environ, COLUMNS="160", PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    if fixtures:
        folder = fixtures if isinstance(fixtures, Path) else FIXTURES
        env["KERNELRANK_PROBLEMS_DIR"] = str(folder / "problems")
        env["KERNELRANK_REFERENCE_KERNELS_DIR"] = str(folder / "reference_kernels")
    return subprocess.run([KERNELRANK, *args], capture_output=True, text=True, env=env, timeout=600, cwd=tmp)


def test_eval_json_is_exactly_one_object_with_the_contract_fields(tmp_path: Path) -> None:
    p = _run("eval", "double", str(SUBMISSIONS / "double_ok.py"), "--mode", "leaderboard", "--device", "cpu", "--json")
    result = json.loads(p.stdout)  # the whole stdout is one JSON object
    assert p.returncode == 0, (result["status"], result["message"], p.stderr)
    for key in ("status", "mode", "problem", "revision", "device", "cases", "score_ns", "message"):
        assert key in result
    assert result["status"] == "passed" and result["mode"] == "leaderboard" and result["device"] == "cpu"
    assert result["score_ns"] > 0
    bench = [c for c in result["cases"] if c["kind"] == "benchmark"]
    assert bench and all({"runs", "mean_ns", "std_ns", "stderr_ns", "min_ns", "median_ns", "max_ns"} <= set(c["timing"]) for c in bench)
    assert all("spec" in c and "passed" in c and "max_abs_error" in c for c in result["cases"])


def test_eval_exit_status_is_1_for_a_failing_verdict() -> None:
    p = _run("eval", "double", str(SUBMISSIONS / "double_wrong.py"), "--device", "cpu", "--json")
    assert p.returncode == 1
    result = json.loads(p.stdout)
    assert result["status"] == "failed" and result["score_ns"] is None
    assert "test case 0" in result["message"]


def test_eval_table_output_names_the_verdict() -> None:
    p = _run("eval", "double", str(SUBMISSIONS / "raises.py"), "--device", "cpu")
    assert p.returncode == 1
    assert "verdict: error" in p.stdout and "ValueError" in p.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("eval", "no_such_problem", str(SUBMISSIONS / "double_ok.py")),
        ("eval", "double", "/no/such/file.py"),
        ("eval", "double", str(SUBMISSIONS / "double_ok.py"), "--mode", "fastest"),
        ("problems", "show", "no_such_problem", "--local"),
    ],
)
def test_usage_errors_exit_2(args: tuple[str, ...]) -> None:
    p = _run(*args)
    assert p.returncode == 2
    assert p.stdout == "" or "error" in (p.stdout + p.stderr).lower()


def test_problems_list_and_show_on_the_real_problems() -> None:
    """``--local``: the problem folders here (without it, the server's problems: tests/cli/test_browse.py)."""
    p = _run("problems", "list", "--local", fixtures=False)
    assert p.returncode == 0
    for name in ("softmax", "gemm", "mla_decode"):
        assert name in p.stdout
    p = _run("problems", "show", "mla_decode", "--local", fixtures=False)
    assert p.returncode == 0
    for needle in ("block_table", "cache_seqlens", "bfloat16", "atol", "rtol", "Test cases", "Benchmark cases (cuda)"):
        assert needle in p.stdout, needle


def test_profile_writes_a_chrome_trace(tmp_path: Path) -> None:
    p = _run("eval", "double", str(SUBMISSIONS / "double_ok.py"), "--mode", "profile", "--device", "cpu",
             "--trace-dir", str(tmp_path), "--json")
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    trace = json.loads(Path(result["profile"]["trace_file"]).read_text())
    assert "traceEvents" in trace


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the message shown where no CUDA device exists")
def test_cuda_without_a_gpu_is_a_usage_error() -> None:
    p = _run("eval", "double", str(SUBMISSIONS / "double_ok.py"), "--device", "cuda")
    assert p.returncode == 2
    assert "no CUDA device" in p.stderr


BROKEN = FIXTURES / "broken"


@pytest.mark.parametrize("problem, exit_code, reason", [
    ("broken_import", 1, "reference for 'broken_import' failed to import: RuntimeError: this reference is broken on purpose"),
    ("bad_yaml", 1, "cannot read YAML"),
    ("no_such_problem", 2, "unknown problem 'no_such_problem'"),
])
def test_eval_json_is_one_object_when_the_problem_is_broken(problem: str, exit_code: int, reason: str) -> None:
    p = _run("eval", problem, str(SUBMISSIONS / "double_ok.py"), "--device", "cpu", "--json", fixtures=BROKEN)
    result = json.loads(p.stdout)  # the whole stdout is one JSON object: no traceback
    assert p.returncode == exit_code, p.stderr
    assert result["status"] == "error" and reason in result["message"]
    assert result["problem"] == problem and result["cases"] == [] and "Traceback" not in p.stderr


def test_eval_without_json_names_a_broken_reference_without_a_traceback() -> None:
    p = _run("eval", "broken_import", str(SUBMISSIONS / "double_ok.py"), "--device", "cpu", fixtures=BROKEN)
    assert p.returncode == 1
    assert "failed to import: RuntimeError" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("args, reason", [
    (("--mode", "fast"), "unknown mode 'fast'"),
    (("--device", "gpu"), "unknown device 'gpu'"),
    (("--device", "cuda-h100"), "--device cuda-h100"),
])
def test_eval_json_is_one_object_for_a_bad_option(args: tuple[str, ...], reason: str) -> None:
    p = _run("eval", "double", str(SUBMISSIONS / "double_ok.py"), "--json", *args)
    result = json.loads(p.stdout)
    assert p.returncode == 2 and result["status"] == "error" and reason in result["message"]


def test_eval_json_writes_non_finite_error_figures_as_strings(tmp_path: Path) -> None:
    kernel = tmp_path / "inf.py"
    kernel.write_text("import torch\n\ndef custom_kernel(data):\n    y = data[0] * 2\n    y[::2] = float('inf')\n"
                      "    y[1] = float('nan')\n    return y\n")
    p = _run("eval", "double", str(kernel), "--device", "cpu", "--json")
    result = json.loads(p.stdout, parse_constant=_refuse)  # strict JSON: no bare Infinity or NaN
    case = result["cases"][0]  # N=10: infinities at 0, 2, 4, 6, 8 and a NaN at 1; the first failing case
    assert p.returncode == 1 and result["status"] == "failed"
    assert case["max_abs_error"] == "NaN" and case["max_rel_error"] == "NaN"
    assert case["nan_mismatches"] == 1 and case["inf_mismatches"] == 5 and case["mismatches"] == 6
    assert "(1 NaN and 5 infinite differences); max abs error nan" in case["message"]


def _refuse(token: str) -> None:
    raise ValueError(f"not JSON: {token}")
