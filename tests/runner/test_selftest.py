"""The runner's self-test: its rules on recorded verdicts (fast), and the real thing on the CPU (slow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kernelrank.runner.host import hostprobe, selftest

from kernelrank.runner.containment import isolation

from kernelrank.runner import worker
from kernelrank.runner.host.selftest import (
    Check,
    SelfTest,
    SelfTestOptions,
    SelfTestReport,
    applies,
    attack_meta,
    attack_outcome,
    expected_verdict,
)
from tests.conftest import ROOT


def test_which_files_run_where_and_what_they_must_give() -> None:
    assert applies(Path("templates/cuda.py"), "cuda") and not applies(Path("templates/cuda.py"), "cpu")
    assert applies(Path("examples/correct_cpp.py"), "cpu") and not applies(Path("examples/correct_cpp.py"), "cuda")
    assert applies(Path("templates/triton.py"), "cpu") and applies(Path("templates/triton.py"), "cuda")
    assert expected_verdict(Path("examples/wrong_k_tail.py")) == "failed"
    assert expected_verdict(Path("examples/correct_triton.py")) == expected_verdict(Path("templates/pytorch.py")) == "passed"


def test_attack_docstrings_and_outcomes() -> None:
    meta = attack_meta(ROOT / "reference_kernels" / "mla_decode" / "attacks" / "cuda_event_patch.py")
    assert meta["Class"] and set(meta["Expected"].split("|")) <= selftest.ATTACK_VERDICTS
    m = {"Expected": "failed|rejected", "Message": "wall clock"}
    assert attack_outcome(m, "rejected", "claims not supported by the judge's WALL CLOCK", None)[0]
    assert not attack_outcome(m, "rejected", "something else", None)[0]
    assert not attack_outcome(m, "error", "wall clock", None)[0]
    assert not attack_outcome(m, "passed", "ok", 1.0)[0]
    allowed = {"Expected": "passed|rejected", "Max speedup": "1.2"}
    assert attack_outcome(allowed, "passed", "ok", 1.1)[0]
    assert not attack_outcome(allowed, "passed", "ok", 3.0)[0]


def _fake_evaluate(verdicts: dict[str, str]) -> Any:
    """An evaluate that answers ``verdicts[source]`` (default ``passed``), recording what it was asked."""
    asked: list[tuple[str, str, str]] = []

    def evaluate(spec: Any, source: str, mode: str, device: str, options: Any) -> Any:
        asked.append((spec.name, mode, device))
        status = verdicts.get(source, "passed")
        return SimpleNamespace(status=status, message=f"{status}: as told", speedup=None if status != "passed" else 1.0)

    evaluate.asked = asked  # type: ignore[attr-defined]
    return evaluate


def test_every_template_and_example_in_every_mode_and_a_wrong_verdict_fails(tmp_path: Path) -> None:
    files = [p for p in sorted((ROOT / "reference_kernels" / "gemm").glob("*/*.py"))
             if p.parent.name in ("templates", "examples") and applies(p, "cpu")]
    honest = {p.read_text(encoding="utf-8"): expected_verdict(p) for p in files}
    options = SelfTestOptions(device="cpu", problems=("gemm",), attacks=False, scratch_dir=tmp_path)
    st = SelfTest(options, evaluate=_fake_evaluate(honest))
    report = SelfTestReport("cpu", "now")
    st.toolchain(report)
    st.problem(report, "gemm")
    names = {(c.name, c.mode) for c in report.checks}
    for path in files:
        for mode in ("test", "benchmark", "leaderboard", "profile"):
            assert (f"gemm/{path.parent.name}/{path.name}", mode) in names
    assert not any("cuda.py" in n for n, _ in names)
    assert {c.name for c in report.checks if c.group == "toolchain"} == {
        "Triton JIT (interpreter)", "C++ load_inline, with PCH", "C++ load_inline, without PCH"}
    assert report.passed
    # a judge that passes a wrong example fails the self-test
    st = SelfTest(options, evaluate=_fake_evaluate({}))
    report = SelfTestReport("cpu", "now")
    st.problem(report, "gemm")
    assert not report.passed
    assert {c.expected for c in report.checks if not c.passed} == {"failed"}
    assert report.summary()["status"] == "failed" and report.summary()["failures"]


def test_the_attack_corpus_is_judged_against_its_docstrings(tmp_path: Path) -> None:
    fake = _fake_evaluate({})  # every attack "passes": each must be a failed check, unless a known gap
    st = SelfTest(SelfTestOptions(problems=("softmax",), scratch_dir=tmp_path), evaluate=fake)
    report = SelfTestReport("cpu", "now")
    st.attacks(report)
    attacks = sorted((ROOT / "reference_kernels" / "softmax" / "attacks").glob("*.py"))
    assert len(report.checks) == len(attacks)
    for c in report.checks:
        meta = attack_meta(ROOT / "reference_kernels" / c.name)
        assert c.passed == ("Known gap" in meta or ("passed" in meta["Expected"]
                                                   and float(meta.get("Max speedup", 0)) >= 1.0)), c
    assert all(mode == "leaderboard" for _, mode, _ in fake.asked)


def test_the_table_and_the_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    from rich.console import Console

    report = SelfTestReport("cpu", "2026-11-24T00:00:00+00:00", host_memory="cgroup 1 bytes")
    report.checks = [Check("toolchain", "Triton JIT", "test", "passed", "passed", True, 1.0),
                     Check("problem", "gemm/examples/wrong_k_tail.py", "test", "failed", "passed", False, 2.0, "why")]
    console = Console(width=200, record=True)
    selftest.render(report, console)
    text = console.export_text()
    assert "FAIL" in text and "wrong_k_tail.py" in text and "self-test failed: 1 of 2" in text
    assert not report.passed and report.to_dict()["rows"][1]["detail"] == "why"


def test_the_gate_takes_no_jobs_after_a_failed_self_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker, "_self_test", None)
    monkeypatch.setattr(worker, "_identity", None)
    sent: list[dict[str, Any]] = []
    assert worker.heartbeat_info("cpu")["self_test"] == {"status": "not run"}
    failed = {"status": "failed", "at": "2026-11-24T00:00:00+00:00", "failures": ["attack x: passed"]}
    assert worker.self_test_gate("cpu", run=lambda device: failed, report=lambda ident, info: sent.append(info)) is False
    assert sent and sent[0]["self_test"] == failed  # one heartbeat says why
    passed = {"status": "passed", "at": "2026-11-24T00:00:00+00:00", "checks": 3}
    assert worker.self_test_gate("cpu", run=lambda device: passed, report=lambda ident, info: sent.append(info))
    assert len(sent) == 1 and worker.heartbeat_info("cpu")["self_test"] == passed


def test_a_crashed_self_test_process_is_a_failed_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker.sys, "executable", "/bin/false")
    summary = worker.run_self_test_process("cpu", timeout=30)
    assert summary["status"] == "failed" and "no summary" in summary["failures"][0]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_self_test_passes_on_the_cpu_in_the_sandbox() -> None:
    """The real self-test, as ``kernelrank runner --self-test`` runs it, shrunk for CI: the
    toolchain, softmax's templates and examples in test mode, the clock.

    Left to other tests, which run the same judge on the same files with more assertions: the
    timed modes (``tests/test_examples.py``: every correct example in leaderboard mode) and the
    attack corpus (``tests/runner/test_attacks.py``: every attack in leaderboard mode;
    :func:`test_the_attack_corpus_is_judged_against_its_docstrings`: the self-test's own rule).
    With them this test took 550 s of CI's 90 minutes."""
    out = subprocess.run([sys.executable, "-m", "kernelrank.cli.main", "runner", "--self-test", "--device", "cpu",
                          "--quick", "--problem", "softmax", "--mode", "test", "--no-attacks"],
                         capture_output=True, text=True, timeout=1700)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert "self-test passed" in out.stdout
    flat = out.stdout.replace("\n", " ")
    assert "C++ load_inline, without PCH" in flat and "softmax/examples/wrong_naive_exp.py (test) -> failed" in flat
    assert "attacks/" not in out.stdout
    assert "fresh memory" in out.stdout and "ms per MiB" in out.stdout


def test_summary_is_json() -> None:
    report = SelfTestReport("cpu", "x", checks=[Check("a", "b", "-", "x", "x", True, 0.0)])
    assert json.loads(json.dumps(report.summary()))["status"] == "passed"


def test_the_output_reads_row_says_how_the_judge_reads_the_childs_outputs(tmp_path: Path) -> None:
    fast = selftest.output_reads_check("cpu", "process_vm_readv")
    assert fast.passed and fast.got == "process_vm_readv" and not fast.detail
    slow = selftest.output_reads_check("cpu", "/proc/<pid>/mem")
    assert slow.passed and "2.5x slower" in slow.got and "refused" in slow.detail and "2.5x" in slow.detail
    copied = selftest.output_reads_check("cpu", "slots")
    assert copied.passed and "copied by the child" in copied.got and "copied" in copied.detail
    assert selftest.output_reads_check("cuda", "slots").got == "slots"
    assert not selftest.output_reads_check("cpu", None).passed
    # the probe's real child on this machine: its record says how its outputs were read
    _overhead, measured = selftest.measure_overhead("cpu", tmp_path / "scratch", requests=6)
    assert measured["output_reads"] in ("process_vm_readv", "/proc/<pid>/mem")
    assert selftest.output_reads_check("cpu", measured["output_reads"]).passed
    assert str(measured["host_memory"]).split()[0] in ("cgroup", "address", "unbounded")
    from kernelrank.runner.containment.procfs import host_huge_pages

    assert measured["huge_pages"] == host_huge_pages()
    # the probe's child runs at the raised priority where the judge may raise it (CAP_SYS_NICE)
    assert measured["priority"]["nice"] == (isolation.CHILD_NICE if isolation.may_raise_priority() else 0)
    assert selftest.priority_check(measured["priority"]).got.startswith("nice ")


def test_the_priority_row_passes_either_way_and_says_what_it_costs() -> None:
    nice = isolation.CHILD_NICE
    raised = selftest.priority_check({"nice": nice, "autogroup": nice})
    assert raised.passed and raised.got == f"nice {nice}, autogroup {nice}" and not raised.detail
    assert selftest.priority_check({"nice": nice, "autogroup": None}).got == f"nice {nice}"
    for found in ({"nice": 0, "autogroup": 0}, {"nice": nice, "autogroup": 0}, None):
        low = selftest.priority_check(found)
        assert low.passed and "not raised" in low.got and "CAP_SYS_NICE" in low.detail, found


def test_the_huge_pages_row_passes_either_way_and_says_what_it_costs() -> None:
    assert selftest.huge_pages_check("madvise").got == "madvise"
    off = selftest.huge_pages_check("never")
    assert off.passed and "wider intervals" in off.got and "madvise" in off.detail


def test_the_fresh_memory_row_passes_either_way_and_says_what_it_costs() -> None:
    fast = selftest.fresh_memory_check(0.05, False)
    assert fast.passed and fast.got == "0.05 ms per MiB" and not fast.detail
    assert selftest.fresh_memory_check(0.05, None).got == "0.05 ms per MiB"
    for ms, reporting in ((1.7, False), (0.05, True), (1.7, True)):
        slow = selftest.fresh_memory_check(ms, reporting)
        assert slow.passed and "backs memory on first touch" in slow.got and "free page reporting" in slow.detail
        assert ("free page reporting on" in slow.got) == reporting, (ms, reporting)


def _virtio(root: Path, name: str, device: int, features: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "device").write_text(f"0x{device:04x}\n")
    (root / name / "features").write_text(features + "0" * (64 - len(features)) + "\n")


def test_free_page_reporting_is_read_from_the_balloons_feature_bits(tmp_path: Path) -> None:
    from kernelrank.runner.containment.procfs import host_free_page_reporting

    assert host_free_page_reporting(tmp_path / "absent") is None  # no virtio bus: most hosts
    bus = tmp_path / "devices"
    _virtio(bus, "virtio0", 0x0002, "001001")  # a block device with bit 5 set: not a balloon
    _virtio(bus, "virtio1", 0x0005, "011000")  # a balloon without reporting (bit 5)
    assert host_free_page_reporting(bus) is False
    _virtio(bus, "virtio2", 0x0005, "011001")  # a balloon whose driver took reporting
    assert host_free_page_reporting(bus) is True


def test_fresh_memory_is_measured_in_a_new_process() -> None:
    ms = hostprobe.fresh_memory_in_new_process()
    assert 0.0 < ms < 1000.0
    assert 0.0 < hostprobe.measure_fresh_memory(4 * 1024 * 1024) < 1000.0  # in this process, as a figure


def test_the_host_moments_row_passes_either_way_and_says_what_it_costs() -> None:
    steady = selftest.host_moments_check(0.021, 0.0)
    assert steady.passed and steady.got == "speedup ±2.1% a moment, steal 0.0%" and not steady.detail
    assert steady.group == "judge's clock" and steady.expected == "< ±5% a moment"
    moved = selftest.host_moments_check(0.147, 0.0125)
    assert moved.passed and moved.got.startswith("speedup ±14.7% a moment, steal 1.2%")
    assert "moves speedups" in moved.got and "cores of its own" in moved.detail
    edge = selftest.host_moments_check(hostprobe.HOST_MOMENTS_NOISY, 0.0)
    assert not edge.detail  # at the limit: still steady


def test_host_moments_are_measured_in_a_new_process_with_the_childrens_threads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError):
        hostprobe.measure_host_moments(1, 0.1)
    assert hostprobe.steal_share((10, 100), (15, 200)) == pytest.approx(0.05)  # 5 of 100 ticks stolen
    assert hostprobe.steal_share((10, 100), (10, 100)) == 0.0  # no tick passed
    sd, steal = hostprobe.host_moments_in_new_process(turns=4, turn_s=0.05)
    assert 0.0 < sd < 2.0 and 0.0 <= steal <= 1.0  # a figure of the machine: four speedups never agree exactly
    seen: dict[str, str] = {}

    def fake_run(args, **kwargs):  # noqa: ANN001, ANN202 - subprocess.run's signature
        seen.update(kwargs["env"])
        return subprocess.CompletedProcess(args, 1, stdout="", stderr="Traceback: boom")

    monkeypatch.setattr(subprocess, "run", fake_run)
    with pytest.raises(RuntimeError, match="host-moments probe failed.*boom"):
        hostprobe.host_moments_in_new_process()
    assert seen["OMP_PROC_BIND"] == "close" and seen["OMP_PLACES"] == "threads"  # bound as the children's


def test_the_output_check_row_says_whether_the_quick_rule_is_native(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelrank.runner.judge import native_check

    built = selftest.output_check_row("cpu")
    assert built.passed and built.got == native_check.method()
    monkeypatch.setattr(native_check, "method", lambda: "torch")
    slow = selftest.output_check_row("cpu")
    assert slow.passed and slow.got == "torch (slower)" and "C compiler" in slow.detail
    assert selftest.output_check_row("cuda").got == "torch on the device"
