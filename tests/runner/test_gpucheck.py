"""The GPU check's logic on a machine without a GPU: it refuses at once here, and its steps'
judging, time limits, facts row and report are checked with recorded outputs and SimNVML."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from kernelrank.runner.host import gpucheck, gpuinfo
from kernelrank.runner.results import EvalResult
from kernelrank.vocab import Verdict
from tests.conftest import ROOT
from tests.runner.simnvml import SimNVML


def test_without_a_gpu_it_says_so_and_exits_at_once(tmp_path: Path) -> None:
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "kernelrank.runner.host.gpucheck"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == gpucheck.NO_GPU_EXIT, out.stderr
    assert "no GPU to check here" in out.stdout and "nothing was run" in out.stdout
    assert list(tmp_path.iterdir()) == []  # no report: nothing was checked
    assert time.monotonic() - started < 60
    script = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-check.sh")], capture_output=True, text=True, timeout=60)
    assert script.returncode == gpucheck.NO_GPU_EXIT and "no GPU" in script.stdout


def test_a_step_past_its_limit_fails_with_its_output_kept() -> None:
    step = gpucheck.Step("slow", [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(30)"],
                         30, gpucheck.pytest_judge)
    r = gpucheck.run_step(step, budget_left=1.5)
    assert not r.ok and r.summary.startswith("timed out after")
    assert r.seconds < 10


def test_a_step_past_its_limit_is_interrupted_first_and_leaves_no_process(tmp_path: Path) -> None:
    """Cut off, a step gets Ctrl-C's signal (its clean-up runs: judges close their children), then
    its whole process group is killed: a grandchild holding on (a GPU, on a real machine) is gone."""
    cleaned, grandchild = tmp_path / "cleaned", tmp_path / "grandchild.pid"
    script = (f"import subprocess, time\n"
              f"p = subprocess.Popen(['sleep', '300'])\n"
              f"open({str(grandchild)!r}, 'w').write(str(p.pid))\n"
              f"print('started', flush=True)\n"
              f"try:\n    time.sleep(300)\n"
              f"finally:\n    open({str(cleaned)!r}, 'w').write('ok')\n")
    step = gpucheck.Step("holds on", [sys.executable, "-c", script], 30, gpucheck.pytest_judge)
    r = gpucheck.run_step(step, budget_left=3)
    assert not r.ok and r.summary == "timed out after 3 s" and "started" in r.tail
    assert cleaned.read_text() == "ok"
    pid = int(grandchild.read_text())
    deadline = time.monotonic() + 10
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(pid)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"  # a zombie has ended
    except OSError:
        return False


def test_pytest_steps_pass_only_on_exit_zero() -> None:
    assert gpucheck.pytest_judge(0, "...\n===== 12 passed in 30.1s =====\n")[:2] == (True, "12 passed in 30.1s")
    assert not gpucheck.pytest_judge(5, "===== no tests ran in 0.1s =====")[0]  # the tests are missing
    assert not gpucheck.pytest_judge(1, "===== 1 failed, 11 passed =====")[0]


def test_self_test_step_names_its_failed_rows() -> None:
    rows = [{"group": "clock", "name": "sleep", "got": "1.000 ms", "passed": True},
            {"group": "gpu", "name": "other processes", "got": "pid 4242", "passed": False}]
    output = json.dumps({"progress": [1, 2, "x"]}) + "\n" + json.dumps({"passed": False, "checks": rows})
    ok, summary, data = gpucheck.selftest_judge(1, output)
    assert not ok and "1 of 2 rows passed" in summary and "pid 4242" in summary
    assert gpucheck.selftest_judge(0, json.dumps({"passed": True, "checks": rows[:1]}))[0]
    assert not gpucheck.selftest_judge(1, "Traceback ...")[0]


@pytest.mark.parametrize(("ci", "expect"), [([0.97, 1.04], True), ([1.02, 1.09], False)])
def test_identical_kernel_step_needs_one_inside_the_interval(ci: list[float], expect: bool) -> None:
    result = EvalResult(status=Verdict.passed, mode="leaderboard", problem="gemm", revision="r", device="cuda",
                        speedup=sum(ci) / 2, speedup_ci=ci)
    ok, got, data = gpucheck.pair_judge(0, "noise\n" + json.dumps(result.to_dict()))
    assert ok is expect and "×" in got and data["status"] == "passed"
    failed = EvalResult(status=Verdict.error, mode="leaderboard", problem="gemm", revision="r", device="cuda",
                        message="runs too noisy")
    assert gpucheck.pair_judge(1, json.dumps(failed.to_dict()))[:2] == (False, "error: runs too noisy")


def _facts(nvml: SimNVML) -> dict:
    return {**gpuinfo.gpu_facts(nvml, nvml.gpu), "health": gpuinfo.health(nvml, nvml.gpu),
            "other_processes": gpuinfo.other_processes(nvml, nvml.gpu, {1})}


def test_facts_row_passes_a_clean_gpu_and_names_what_is_wrong() -> None:
    nvml = SimNVML()
    row = gpucheck.facts_result(_facts(nvml), 0.1)
    assert row.ok and "H100" in row.summary and "compute mode default" in row.summary
    nvml.compute_mode, nvml.processes, nvml.ecc = 3, [(1, 1 << 30), (777, 2 << 30)], {"volatile": 4, "aggregate": 4}
    row = gpucheck.facts_result(_facts(nvml), 0.1)
    assert not row.ok
    assert "4 uncorrected ECC errors" in row.summary and "exclusive_process" in row.summary
    assert "1 other compute processes" in row.summary  # pid 1 is the runner's own


def test_plan_runs_slots_tests_self_test_and_both_identical_kernels(tmp_path: Path) -> None:
    steps = gpucheck.plan(ROOT, tmp_path)
    assert [s.name for s in steps] == ["slots", "cuda tests", "self-test", "gemm", "mla_decode"]
    assert sum(s.timeout_s for s in steps) + 10 <= gpucheck.BUDGET_S
    assert "not self_test_on_cuda" in steps[1].argv[steps[1].argv.index("-k") + 1]  # step 3 runs it once
    gemm = steps[3]
    assert "leaderboard" in gemm.argv and "cuda" in gemm.argv
    assert "custom_kernel = ref_kernel" in Path(gemm.argv[gemm.argv.index("gemm") + 1]).read_text()


def test_report_has_one_row_per_step_and_the_verdict() -> None:
    rows = [gpucheck.StepResult("facts", True, "NVIDIA H200", 0.2, data={"name": "NVIDIA H200"}),
            gpucheck.StepResult("gemm", False, "error: x|y", 41.0, tail="last line")]
    text = gpucheck.report_markdown(rows, datetime(2026, 12, 2, tzinfo=timezone.utc), 41.2)
    assert text.startswith("# GPU check: FAILED")
    assert "| gemm | FAIL | 41.0 | error: x/y |" in text and '"name": "NVIDIA H200"' in text and "last line" in text
