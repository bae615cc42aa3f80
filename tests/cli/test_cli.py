"""The ``kernelrank`` command as a user runs it: output, JSON contract, exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, SUBMISSIONS

KERNELRANK = str(Path(sys.executable).parent / "kernelrank")


def _run(*args: str, fixtures: bool = True, tmp: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="160")
    if fixtures:
        env["KERNELRANK_PROBLEMS_DIR"] = str(FIXTURES / "problems")
        env["KERNELRANK_REFERENCE_KERNELS_DIR"] = str(FIXTURES / "reference_kernels")
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
        ("problems", "show", "no_such_problem"),
    ],
)
def test_usage_errors_exit_2(args: tuple[str, ...]) -> None:
    p = _run(*args)
    assert p.returncode == 2
    assert p.stdout == "" or "error" in (p.stdout + p.stderr).lower()


def test_problems_list_and_show_on_the_real_problems() -> None:
    p = _run("problems", "list", fixtures=False)
    assert p.returncode == 0
    for name in ("softmax", "gemm", "mla_decode"):
        assert name in p.stdout
    p = _run("problems", "show", "mla_decode", fixtures=False)
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
