"""The self-test's GPU rows (runner/host/selftest_gpu.py) on a simulated NVML and recorded figures."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kernelrank.runner.host import selftest, selftest_gpu
from kernelrank.runner.host.selftest import SelfTest, SelfTestOptions, SelfTestReport
from tests.runner.simnvml import SimNVML

OWN = frozenset({100, 101})


def _rows(nvml: SimNVML) -> dict[str, Any]:
    return {row.name: row for row in selftest_gpu.nvml_rows(nvml, nvml.gpu, OWN)}


def test_a_healthy_gpu_alone_passes_every_nvml_row() -> None:
    nvml = SimNVML()
    nvml.processes = [(100, 512 << 20)]  # the runner's own context
    rows = _rows(nvml)
    assert set(rows) == {"other compute processes", "uncorrected ECC errors", "retired pages", "compute mode"}
    assert all(r.passed and r.group == "GPU" for r in rows.values()), rows
    assert rows["other compute processes"].got == "none" and rows["compute mode"].got == "default"


def test_another_compute_process_fails_and_says_what_to_do() -> None:
    nvml = SimNVML()
    nvml.processes = [(100, 1 << 20), (4242, 2048 << 20)]
    row = _rows(nvml)["other compute processes"]
    assert not row.passed and row.got == "pid 4242 (2048 MiB)"
    assert "GPU of its own" in row.detail


@pytest.mark.parametrize(("volatile", "aggregate", "passed", "advice"), [
    (0, 0, True, ""),
    (2, 2, False, "reset it"),
    (0, 1, False, "clear the counters"),
])
def test_uncorrected_ecc_errors_fail(volatile: int, aggregate: int, passed: bool, advice: str) -> None:
    nvml = SimNVML()
    nvml.ecc = {"volatile": volatile, "aggregate": aggregate}
    row = _rows(nvml)["uncorrected ECC errors"]
    assert row.passed is passed and row.got == f"{volatile} since the driver loaded, {aggregate} in its life"
    assert advice in row.detail and bool(row.detail) is not passed


def test_retired_pages_and_a_pending_retirement_fail() -> None:
    nvml = SimNVML()
    nvml.retired = 3
    row = _rows(nvml)["retired pages"]
    assert not row.passed and row.got == "3 retired" and "replaced" in row.detail
    nvml.retired, nvml.retired_pending = 0, True
    row = _rows(nvml)["retired pages"]
    assert not row.passed and row.got == "0 retired, a retirement pending" and "reset" in row.detail


def test_counters_a_gpu_does_not_report_pass_saying_so() -> None:
    facts = {"ecc_uncorrected_volatile": None, "ecc_uncorrected_aggregate": None, "retired_pages": None,
             "retired_pending": None}
    assert selftest_gpu.ecc_check(facts).passed and selftest_gpu.ecc_check(facts).got == "not reported"
    assert selftest_gpu.retired_pages_check(facts).passed


@pytest.mark.parametrize("mode", [2, 3])
def test_a_compute_mode_other_than_default_fails(mode: int) -> None:
    nvml = SimNVML()
    nvml.compute_mode = mode
    row = _rows(nvml)["compute mode"]
    assert not row.passed and row.got in ("prohibited", "exclusive_process")
    assert "nvidia-smi -c DEFAULT" in row.detail


def test_without_nvml_one_row_fails() -> None:
    rows = selftest_gpu.nvml_rows(None, None, OWN)
    assert [(r.name, r.passed) for r in rows] == [("NVML", False)] and "nvidia-ml-py" in rows[0].detail


# recorded: 1 ms sleeps at 1,755 MHz (1,755,000 cycles) as the events read them
_CYCLES = 1_755_000
_GOOD = [(1_003_200, 1755), (998_900, 1755), (1_001_100, 1755), (1_000_400, 1755), (1_250_000, 1755)]


def test_a_sleep_of_known_length_must_read_within_two_percent() -> None:
    row = selftest_gpu.sleep_check(_CYCLES, _GOOD)  # one call stretched by a preemption: the median holds
    assert row.passed and row.got == "1000 µs sleep read 1.001× its length"
    slow = [(1_030_000, 1755)] * 5  # 3% long
    assert not selftest_gpu.sleep_check(_CYCLES, slow).passed
    # the SM clock dropped under the sleep: it lasted longer, and the expectation follows NVML's clock
    throttled = [(1_323_000, 1327)] * 5
    assert selftest_gpu.sleep_check(_CYCLES, throttled).passed
    row = selftest_gpu.sleep_check(_CYCLES, [])
    assert not row.passed and row.got == "not measured"


def test_the_gpu_rows_run_nvml_then_the_sleep_and_a_failed_sleep_is_a_failed_row() -> None:
    nvml = SimNVML()
    rows = selftest_gpu.gpu_rows(nvml, nvml.gpu, lambda: (_CYCLES, _GOOD), own_pids=OWN)
    assert [r.name for r in rows][-1] == "timer against a known sleep" and all(r.passed for r in rows)

    def broken() -> tuple[int, list[tuple[int, int]]]:
        raise RuntimeError("NVML gave no SM clock for this GPU")

    rows = selftest_gpu.gpu_rows(nvml, nvml.gpu, broken, own_pids=OWN)
    assert not rows[-1].passed and "no SM clock" in rows[-1].detail


def _pair(speedup: float | None, ci: list[float] | None = None, status: str = "passed") -> Any:
    return SimpleNamespace(status=status, message="m", speedup=speedup, speedup_ci=ci)


def test_on_cuda_an_identical_kernel_must_read_one_within_three_percent() -> None:
    # a tight GPU interval that misses 1 by 0.5% passes on CUDA; the CPU's rule would fail it
    on_cuda = selftest_gpu.identical_kernel_reads_one
    tight = _pair(1.005, [1.003, 1.007])
    assert on_cuda(tight)[0] and not selftest.pair_reads_one(tight)[0]
    # a wide interval holding 1 passes on the CPU, not on CUDA, where the estimate is 4% off
    wide = _pair(1.04, [0.9, 1.2])
    assert selftest.pair_reads_one(wide)[0] and not on_cuda(wide)[0]
    assert on_cuda(_pair(0.97)) == (True, "0.970×") and not on_cuda(_pair(0.969))[0]
    assert not on_cuda(_pair(None, status="failed"))[0]


def test_the_cuda_plan_starts_with_the_gpu_and_pairs_every_problem(tmp_path: Path) -> None:
    def evaluate(spec: Any, source: str, mode: str, device: str, options: Any) -> Any:
        return _pair(1.06 if spec.name == "gemm" else 1.01, [0.99, 1.1])

    for scope in ("probes", "quick", "full"):
        st = SelfTest(SelfTestOptions(device="cuda", scope=scope, scratch_dir=tmp_path), evaluate=evaluate)
        labels = [s.label for s in st.plan()]
        assert labels[0] == "the GPU's health and timer", scope
        pairs = [label for label in labels if "the reference against itself" in label]
        assert pairs == ([] if scope == "probes" else [f"{p}: the reference against itself (leaderboard)"
                                                      for p in st.problems()])
    report = SelfTestReport("cuda", "now")
    for step in st.plan():
        if "the reference against itself" in step.label:
            step.run(report)
    read = {c.name: c for c in report.checks}
    assert read["softmax: the reference against itself"].passed
    gemm = read["gemm: the reference against itself"]
    assert not gemm.passed and gemm.expected == "1.00× ± 3%" and "KERNELRANK_RUNNER_LOCK_CLOCKS" in gemm.detail
    cpu = [s.label for s in SelfTest(SelfTestOptions(device="cpu", scratch_dir=tmp_path), evaluate=evaluate).plan()]
    assert [label for label in cpu if "the reference against itself" in label] == [
        f"{selftest.PAIR_PROBLEM}: the reference against itself (leaderboard)"]
