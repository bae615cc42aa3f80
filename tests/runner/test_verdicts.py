"""Every way a submission can end becomes a verdict, with its logs, and leaves nothing running.

Uses the test-only problem ``double`` (small budgets, so hangs end in seconds).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kernelrank.runner.judge import judging
from kernelrank.runner.judge.harness import EvalOptions, evaluate
from kernelrank.vocab import Verdict
from tests.conftest import submission


def _run(double, name: str, options: EvalOptions, mode: str = "test"):
    return evaluate(double.spec(), submission(name), mode, "cpu", options)


def _no_processes_left(marker: str) -> bool:
    """True when no live process has ``marker`` in its command line or working folder."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if marker in cwd:
            return False
    return True


def test_correct_submission_passes(double, options) -> None:
    r = _run(double, "double_ok.py", options)
    assert r.status is Verdict.passed, r.message
    assert [c.passed for c in r.cases] == [True, True]
    assert r.score_ns is None


def test_wrong_values_fail_naming_the_case(double, options) -> None:
    r = _run(double, "double_wrong.py", options)
    assert r.status is Verdict.failed
    assert "test case 0" in r.message and "seed=1" in r.message
    bad = r.cases[0]
    assert not bad.passed and bad.mismatches > 0 and bad.first_mismatch is not None and bad.max_abs_error > 0


@pytest.mark.parametrize(
    ("name", "status", "needle"),
    [
        ("raises.py", Verdict.error, "ValueError: kernel bug"),
        ("sys_exit.py", Verdict.error, "SystemExit"),
        ("os_exit.py", Verdict.error, "exited with code 7"),
        ("segfault.py", Verdict.error, "SIGSEGV"),
        ("aborts.py", Verdict.error, 'after it reported "Fatal Python error: Aborted"'),
        ("syntax_error.py", Verdict.compile_error, "SyntaxError"),
        ("no_kernel.py", Verdict.compile_error, "custom_kernel"),
        ("returns_list.py", Verdict.failed, "plain torch.Tensor"),
        ("subclass.py", Verdict.failed, "plain torch.Tensor"),
    ],
)
def test_verdicts(double, options, name: str, status: Verdict, needle: str) -> None:
    r = _run(double, name, options)
    assert r.status is status, r.message
    assert needle in r.message


def test_crash_keeps_its_logs(double, options) -> None:
    r = _run(double, "segfault.py", options)
    assert "about to crash" in r.logs["stdout"]
    assert "stderr line" in r.logs["stderr"]
    # faulthandler's report: what crashed, and the Python line that called into the crash
    assert 'reported "Fatal Python error: Segmentation fault"' in r.message
    assert "Fatal Python error: Segmentation fault" in r.logs["stderr"] and "in custom_kernel" in r.logs["stderr"]


def test_the_childs_fatal_report_is_quoted_as_its_own_words() -> None:
    from kernelrank.runner.containment.childlogs import FATAL_QUOTE, fatal_report

    assert fatal_report("stderr line\nFatal Python error: Aborted\n\nCurrent thread ...") == "Fatal Python error: Aborted"
    assert fatal_report("nothing fatal here") is None and fatal_report("Fatal Python error: \n") is None
    long = fatal_report('Fatal Python error: "x\x1b[31m' + "y" * 500)
    assert long is not None and long == "Fatal Python error: x[31m" + "y" * (FATAL_QUOTE - 5)


def test_hang_is_a_timeout_and_kills_the_process_group(double, options) -> None:
    started = time.monotonic()
    r = _run(double, "hang.py", options)
    assert r.status is Verdict.timeout
    assert "test case 0" in r.message
    assert time.monotonic() - started < double.definition.budgets.test + 20
    scratch = options.scratch_dir
    assert scratch is not None and _no_processes_left(str(scratch))
    assert list(scratch.iterdir()) == []  # the working folder was removed


def test_hang_while_loading_hits_the_compile_budget(double, tmp_path: Path) -> None:
    fast = double.definition.model_copy(update={"budgets": double.definition.budgets.model_copy(update={"compile": 3.0})})
    spec = double.spec().__class__(fast, double.spec().reference_source, double.revision)
    r = evaluate(spec, submission("hang_on_import.py"), "test", "cpu", EvalOptions(scratch_dir=tmp_path))
    assert r.status is Verdict.timeout and "loading" in r.message


def test_log_flood_is_cut_not_buffered(double, options) -> None:
    r = _run(double, "log_flood.py", options)
    assert r.status is Verdict.passed, r.message
    out = r.logs["stdout"]
    assert len(out) < 2 * options.log_limit
    assert "bytes cut" in out


@pytest.mark.slow
def test_cpp_compile_error_is_a_compile_error(double, options) -> None:
    r = _run(double, "cpp_compile_error.py", options)
    assert r.status is Verdict.compile_error, r.message
    assert "undeclared_factor" in r.message


def test_environment_holds_no_secrets(double, options, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELRANK_DATABASE_URL", "postgresql://user:hunter2@db/kr")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2")
    src = (
        "import os\n"
        "leak = [k for k, v in os.environ.items() if 'hunter2' in v or k.startswith('KERNELRANK')]\n"
        "def custom_kernel(data):\n"
        "    assert not leak, leak\n"
        "    assert os.environ['TRITON_INTERPRET'] == '1'\n"
        "    return data[0] * 2\n"
    )
    r = evaluate(double.spec(), src, "test", "cpu", options)
    assert r.status is Verdict.passed, r.message


def test_timed_modes_report_statistics(double, options) -> None:
    r = _run(double, "double_ok.py", options, mode="benchmark")
    assert r.status is Verdict.passed, r.message
    bench = [c for c in r.cases if c.kind == "benchmark"]
    assert len(bench) == 2
    for c in bench:
        for t in (c.timing, c.ref_timing):  # both sides, timed in pairs
            assert t["runs"] >= 1 and t["min_ns"] <= t["median_ns"] <= t["max_ns"]
            assert t["min_ns"] <= t["mean_ns"] <= t["max_ns"]
        assert c.ref_mean_ns == c.ref_timing["mean_ns"] and c.speedup_ci[0] <= c.speedup <= c.speedup_ci[1]
        assert c.gbps > 0 and c.wall_check["passed"]
    assert r.score_ns is None and r.speedup > 0


def test_leaderboard_scores_and_checks_every_call(double, options) -> None:
    r = _run(double, "double_ok.py", options, mode="leaderboard")
    assert r.status is Verdict.passed, r.message
    bench = [c for c in r.cases if c.kind == "benchmark"]
    # every timed call's output was checked, the warm-up pairs' too (timed, not counted), plus each
    # timed process's first warm-up output
    assert all(c.checked == c.timing["runs"] + c.pairing["warm_up_pairs"] * c.pairing["calls_per_pair"]
               + c.pairing["processes"] for c in bench)
    times = [c.time_ns for c in bench]
    assert r.score_ns == pytest.approx((times[0] * times[1]) ** 0.5)


def test_escaping_the_timed_region_is_rejected(double, options) -> None:
    """30 ms of busy work per call outside the claimed interval. Each call counts for the judge's
    window anyway, so the lie gains nothing; and where the calling thread's CPU time shows the work
    (any machine not so busy that the claims themselves are mostly waiting), it is rejected."""
    r = _run(double, "untimed_work.py", options, mode="benchmark")
    if r.status is Verdict.rejected:
        assert "wall clock" in r.message
        return
    assert r.status is Verdict.passed, r.message
    bench = [c for c in r.cases if c.kind == "benchmark"]
    assert all(c.wall_check["main_unexplained_low_ns"] < 2 * judging.MAIN_OVERHEAD_FLOOR_NS for c in bench), \
        "the CPU time showed the work, yet the lie was not rejected"
    assert r.speedup_ci[1] < 1.0, r.speedup_ci  # the reference's ~0.1 ms calls against 30 ms and more


def test_profile_mode_gives_table_and_trace(double, options) -> None:
    r = _run(double, "double_ok.py", options, mode="profile")
    assert r.status is Verdict.passed, r.message
    assert "Self CPU" in r.profile["table"] and "case 0" in r.profile["table"]
    trace = Path(r.profile["trace_file"])
    assert trace.is_file() and trace.stat().st_size > 0


def test_tracebacks_start_at_the_submissions_own_frame(double, options) -> None:
    """The traceback in the verdict begins with the submission's frame: none of the
    harness's (the child's request loop, the timer, importlib) comes before it."""
    r = _run(double, "raises.py", options)
    assert r.status is Verdict.error
    tb = r.message[r.message.index("Traceback (most recent call last):"):]
    frames = [line for line in tb.splitlines() if line.lstrip().startswith("File ")]
    assert frames and frames[0].strip().startswith('File "') and "submission.py" in frames[0]
    assert "kernelrank/runner" not in tb and "runner/submission/child.py" not in tb and "importlib" not in tb
    assert tb.rstrip().endswith("ValueError: kernel bug: index out of range")
