"""The runner's self-test: its rules on recorded verdicts (fast), and the real thing on the CPU (slow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kernelrank.runner.host import hostprobe, selftest, selftest_process, selftest_rows

from kernelrank.runner.containment import isolation

from kernelrank import vocab
from kernelrank.runner import worker
from kernelrank.runner.host.selftest_rows import Check
from kernelrank.runner.host.selftest import (
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


def _run_steps(st: SelfTest, report: SelfTestReport, kinds: set[str] | None = None) -> list[str]:
    """Run the plan's steps but the host rows (a real probe child: tested on its own below)."""
    labels = []
    for step in st.plan():
        if step.kind != "clock" and (kinds is None or step.kind in kinds):
            step.run(report)
            labels.append(step.label)
    return labels


def test_the_full_scope_runs_every_template_and_example_in_every_mode_and_a_wrong_verdict_fails(tmp_path: Path) -> None:
    files = [p for p in sorted((ROOT / "reference_kernels" / "gemm").glob("*/*.py"))
             if p.parent.name in ("templates", "examples") and applies(p, "cpu")]
    honest = {p.read_text(encoding="utf-8"): expected_verdict(p) for p in files}
    options = SelfTestOptions(device="cpu", scope="full", problems=("gemm",), attacks=False, scratch_dir=tmp_path)
    st = SelfTest(options, evaluate=_fake_evaluate(honest))
    report = SelfTestReport("cpu", "now")
    _run_steps(st, report)
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
    _run_steps(st, report, kinds=set(vocab.MODES))
    assert not report.passed
    assert {c.expected for c in report.checks if not c.passed} == {"failed"}
    assert report.summary()["status"] == "failed" and report.summary()["failures"]


def test_the_quick_scope_proves_each_part_of_the_host_once(tmp_path: Path) -> None:
    """What a runner runs before its first job: the device, one Triton JIT, one build with the
    precompiled header, one correct and one wrong example per problem in test mode, the
    reference against itself in leaderboard mode, one attack per wall, then the host rows."""
    fake = _fake_evaluate({})
    st = SelfTest(SelfTestOptions(device="cpu", scratch_dir=tmp_path), evaluate=fake)
    plan = st.plan()
    labels = [s.label for s in plan]
    assert labels[:3] == ["initialise cpu in the sandbox", "Triton JIT (interpreter)", "C++ load_inline, with PCH"]
    for problem in ("gemm", "mla_decode", "softmax"):
        mine = [label for label in labels if label.startswith(f"{problem}/examples/")]
        assert len(mine) == 2 and mine[0] == f"{problem}/examples/correct_pytorch.py (test)", mine
        assert "/wrong_" in mine[1] and mine[1].endswith("(test)"), mine
    assert f"{selftest.PAIR_PROBLEM}: the reference against itself (leaderboard)" in labels
    assert [label for label in labels if "/attacks/" in label] == list(selftest.QUICK_ATTACKS)
    assert labels[-1] == "the judge's clock and the sandbox" and len(plan) == 3 + 6 + 1 + len(selftest.QUICK_ATTACKS) + 1
    # about a ninth of the full scope's steps
    assert len(SelfTest(SelfTestOptions(device="cpu", scope="full", scratch_dir=tmp_path), evaluate=fake).plan()) > 8 * len(plan)
    # probes: the device and the host rows alone
    probes = SelfTest(SelfTestOptions(device="cpu", scope="probes", scratch_dir=tmp_path), evaluate=fake).plan()
    assert [s.label for s in probes] == ["initialise cpu in the sandbox", "the judge's clock and the sandbox"]
    on_cuda = [s.label for s in SelfTest(SelfTestOptions(device="cuda", scratch_dir=tmp_path), evaluate=fake).plan()]
    assert "CUDA load_inline, with PCH" in on_cuda and "Triton JIT" in on_cuda
    with pytest.raises(ValueError, match="unknown scope"):
        SelfTestOptions(scope="medium")


def test_the_quick_scope_runs_in_test_mode_and_times_one_case(tmp_path: Path) -> None:
    fake = _fake_evaluate({})
    st = SelfTest(SelfTestOptions(device="cpu", problems=("softmax",), attacks=False, scratch_dir=tmp_path), evaluate=fake)
    report = SelfTestReport("cpu", "now")
    _run_steps(st, report, kinds={"test", "build"})
    assert {mode for _, mode, _ in fake.asked} == {"test"}
    spec = st._spec("softmax")
    assert all(len(cases) == 1 for cases in spec.definition.benchmarks.values())


def _pair(status: str = "passed", speedup: float | None = 1.0, ci: list[float] | None = None) -> Any:
    return SimpleNamespace(status=status, message="m", speedup=speedup, speedup_ci=ci)


def test_the_reference_against_itself_must_read_one_within_its_interval(tmp_path: Path) -> None:
    assert selftest.pair_reads_one(_pair(ci=[0.97, 1.04])) == (True, "1.00× (0.970–1.04×)")
    assert not selftest.pair_reads_one(_pair(speedup=1.1, ci=[1.05, 1.15]))[0]
    assert not selftest.pair_reads_one(_pair(status="failed", speedup=None))[0]
    assert not selftest.pair_reads_one(_pair(ci=None))[0]
    answers = iter([_pair(speedup=0.9, ci=[0.85, 0.95]), _pair(ci=[0.98, 1.02])])
    asked: list[tuple[str, str]] = []

    def evaluate(spec: Any, source: str, mode: str, device: str, options: Any) -> Any:
        asked.append((source, mode))
        return next(answers)

    st = SelfTest(SelfTestOptions(device="cpu", scratch_dir=tmp_path), evaluate=evaluate)
    report = SelfTestReport("cpu", "now")
    st.reference_pair(report)
    assert report.passed and len(asked) == 2  # a first miss is decided by a second run
    source, mode = asked[0]
    assert mode == "leaderboard" and source.rstrip().endswith("custom_kernel = ref_kernel")
    answers = iter([_pair(speedup=0.9, ci=[0.85, 0.95])] * 2)
    report = SelfTestReport("cpu", "now")
    st.reference_pair(report)
    assert not report.passed and "did not read 1" in report.checks[0].detail


def test_progress_and_the_estimate_follow_the_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selftest, "clock_rows", lambda device, scratch: (
        [Check("judge's clock", "per-request overhead", "-", "measured", "40 µs", True, 0.0)], {"host_memory": "cgroup 1 bytes"}))
    st = SelfTest(SelfTestOptions(device="cpu", scope="probes", scratch_dir=tmp_path), evaluate=_fake_evaluate({}))
    steps, seconds, known = st.estimate({})
    assert (steps, known) == (2, 0) and seconds == selftest.STEP_SECONDS["test"] + selftest.STEP_SECONDS["clock"]
    assert st.estimate({"initialise cpu in the sandbox": 1.5})[1:] == (1.5 + selftest.STEP_SECONDS["clock"], 1)
    seen: list[tuple[int, int, str]] = []
    report = st.run(lambda done, total, label: seen.append((done, total, label)))
    assert seen == [(0, 2, "initialise cpu in the sandbox"), (1, 2, "the judge's clock and the sandbox"), (2, 2, "done")]
    assert report.passed and report.scope == "probes" and report.host_memory == "cgroup 1 bytes"
    assert set(st.step_seconds) == {"initialise cpu in the sandbox", "the judge's clock and the sandbox"}


def test_the_attack_corpus_is_judged_against_its_docstrings(tmp_path: Path) -> None:
    fake = _fake_evaluate({})  # every attack "passes": each must be a failed check, unless a known gap
    st = SelfTest(SelfTestOptions(scope="full", problems=("softmax",), scratch_dir=tmp_path), evaluate=fake)
    report = SelfTestReport("cpu", "now")
    _run_steps(st, report, kinds={"attack"})
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
    assert "FAIL" in text and "wrong_k_tail.py" in text and "self-test failed (quick): 1 of 2" in text
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
    # a starting runner's heartbeats then say it starts its worker, carrying the pass
    monkeypatch.setattr(worker, "_starting", {"state": "starting: self-test 17/17", "device": "cpu"})
    assert worker.self_test_gate("cpu", run=lambda device: passed, report=lambda ident, info: sent.append(info))
    assert worker._starting == {"state": "starting: worker", "device": "cpu", "self_test": passed}


def test_a_crashed_self_test_process_is_a_failed_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selftest_process.sys, "executable", "/bin/false")
    summary = selftest_process.run_self_test_process("cpu", timeout=30)
    assert summary["status"] == "failed" and "no summary" in summary["failures"][0]


def _fake_self_test(tmp_path: Path, body: str) -> str:
    """An executable standing in for the interpreter that runs the self-test: it prints ``body``."""
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return str(script)


def test_the_self_test_process_reports_its_progress_as_it_goes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = {"status": "passed", "scope": "quick", "checks": 2}
    lines = [json.dumps({"progress": [0, 2, "initialise cpu in the sandbox"]}), "not json: ignored",
             json.dumps({"progress": [1, 2, "the judge's clock and the sandbox"]}), json.dumps({"progress": [2, 2, "done"]}),
             json.dumps(summary)]
    monkeypatch.setattr(selftest_process.sys, "executable", _fake_self_test(tmp_path, "cat <<'EOF'\n" + "\n".join(lines) + "\nEOF\n"))
    seen: list[tuple[int, int]] = []
    assert selftest_process.run_self_test_process("cpu", on_progress=lambda done, total: seen.append((done, total))) == summary
    assert seen == [(0, 2), (1, 2), (2, 2)]
    # the starting heartbeat says how far it is, sent at once
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(worker, "_identity", worker.RunnerIdentity("runner-cpu-1", "cpu"))
    monkeypatch.setattr(worker, "_starting", {"state": "starting: self-test", "device": "cpu"})
    monkeypatch.setattr(worker, "send_heartbeat", lambda ident, info: sent.append(dict(info)))
    worker.self_test_progress(12, 30)
    assert sent == [{"state": "starting: self-test 12/30", "device": "cpu"}]


def test_a_self_test_process_past_its_time_is_a_failed_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selftest_process.sys, "executable", _fake_self_test(tmp_path, "exec sleep 30\n"))
    summary = selftest_process.run_self_test_process("cpu", timeout=0.5)
    assert summary["status"] == "failed" and "ran past 0 s" in summary["failures"][0]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_quick_self_test_passes_on_the_cpu_and_a_restart_runs_only_the_probes(tmp_path: Path) -> None:
    """The real quick self-test, as ``kernelrank runner --self-test`` and a starting runner run it:
    it passes, and it is cached, so the runner's next start (``--cached``) runs only the probes
    and says what it stands on. Its time is a figure (``bench/selftest_times.py``), not asserted."""
    import os

    env = {**os.environ, "KERNELRANK_RUNNER_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-m", "kernelrank.cli.main", "runner", "--self-test", "--device", "cpu"],
                         capture_output=True, text=True, timeout=1100, env=env)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    flat = out.stdout.replace("\n", " ")
    assert "self-test (quick) on cpu:" in flat and "self-test passed (quick)" in flat
    assert "C++ load_inline, with PCH" in flat and "without PCH" not in flat
    assert "softmax/examples/wrong_float32_output.py (test) -> failed" in flat
    assert "ok   judge's clock: the reference against itself (leaderboard) -> " in flat
    assert "softmax/attacks/fork_bomb.py" in flat and "fresh memory" in flat and "ms per MiB" in flat
    again = subprocess.run([sys.executable, "-m", "kernelrank.runner.host.selftest", "--device", "cpu", "--cached", "--json"],
                           capture_output=True, text=True, timeout=600, env=env)
    assert again.returncode == 0, again.stderr[-6000:]
    summary = json.loads(again.stdout.strip().splitlines()[-1])
    assert summary["status"] == "passed" and summary["scope"] == "probes" and summary["cached"]["scope"] == "quick"
    assert summary["checks"] < 15 and "fork_bomb" not in again.stderr


def test_summary_is_json() -> None:
    report = SelfTestReport("cpu", "x", checks=[Check("a", "b", "-", "x", "x", True, 0.0)])
    assert json.loads(json.dumps(report.summary()))["status"] == "passed"


def test_the_output_reads_row_says_how_the_judge_reads_the_childs_outputs(tmp_path: Path) -> None:
    fast = selftest_rows.output_reads_check("cpu", "process_vm_readv")
    assert fast.passed and fast.got == "process_vm_readv" and not fast.detail
    slow = selftest_rows.output_reads_check("cpu", "/proc/<pid>/mem")
    assert slow.passed and "2.5x slower" in slow.got and "refused" in slow.detail and "2.5x" in slow.detail
    copied = selftest_rows.output_reads_check("cpu", "slots")
    assert copied.passed and "copied by the child" in copied.got and "copied" in copied.detail
    assert selftest_rows.output_reads_check("cuda", "slots").got == "slots"
    assert not selftest_rows.output_reads_check("cpu", None).passed
    # the probe's real child on this machine: its record says how its outputs were read
    _overhead, measured = selftest_rows.measure_overhead("cpu", tmp_path / "scratch", requests=6)
    assert measured["output_reads"] in ("process_vm_readv", "/proc/<pid>/mem")
    assert selftest_rows.output_reads_check("cpu", measured["output_reads"]).passed
    assert str(measured["host_memory"]).split()[0] in ("cgroup", "address", "unbounded")
    from kernelrank.runner.containment.procfs import host_huge_pages

    assert measured["huge_pages"] == host_huge_pages()
    assert measured["shared_huge_pages"] == host_huge_pages("shmem_enabled")
    # the probe's child runs at the raised priority where the judge may raise it (CAP_SYS_NICE)
    assert measured["priority"]["nice"] == (isolation.CHILD_NICE if isolation.may_raise_priority() else 0)
    assert selftest_rows.priority_check(measured["priority"]).got.startswith("nice ")


def test_the_priority_row_passes_either_way_and_says_what_it_costs() -> None:
    nice = isolation.CHILD_NICE
    raised = selftest_rows.priority_check({"nice": nice, "autogroup": nice})
    assert raised.passed and raised.got == f"nice {nice}, autogroup {nice}" and not raised.detail
    assert selftest_rows.priority_check({"nice": nice, "autogroup": None}).got == f"nice {nice}"
    for found in ({"nice": 0, "autogroup": 0}, {"nice": nice, "autogroup": 0}, None):
        low = selftest_rows.priority_check(found)
        assert low.passed and "not raised" in low.got and "CAP_SYS_NICE" in low.detail, found


def test_the_huge_pages_row_passes_either_way_and_says_what_it_costs() -> None:
    assert selftest_rows.huge_pages_check("madvise").got == "madvise"
    off = selftest_rows.huge_pages_check("never")
    assert off.passed and "wider intervals" in off.got and "madvise" in off.detail


def test_the_fresh_memory_row_passes_either_way_and_says_what_it_costs() -> None:
    fast = selftest_rows.fresh_memory_check(0.05, False)
    assert fast.passed and fast.got == "0.05 ms per MiB" and not fast.detail
    assert selftest_rows.fresh_memory_check(0.05, None).got == "0.05 ms per MiB"
    for ms, reporting in ((1.7, False), (0.05, True), (1.7, True)):
        slow = selftest_rows.fresh_memory_check(ms, reporting)
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
    steady = selftest_rows.host_moments_check(0.021, 0.0)
    assert steady.passed and steady.got == "speedup ±2.1% a moment, steal 0.0%" and not steady.detail
    assert steady.group == "judge's clock" and steady.expected == "< ±5% a moment"
    moved = selftest_rows.host_moments_check(0.147, 0.0125)
    assert moved.passed and moved.got.startswith("speedup ±14.7% a moment, steal 1.2%")
    assert "moves speedups" in moved.got and "cores of its own" in moved.detail
    edge = selftest_rows.host_moments_check(hostprobe.HOST_MOMENTS_NOISY, 0.0)
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

    built = selftest_rows.output_check_row("cpu")
    assert built.passed and built.got == native_check.method()
    monkeypatch.setattr(native_check, "method", lambda: "torch")
    slow = selftest_rows.output_check_row("cpu")
    assert slow.passed and slow.got == "torch (slower)" and "C compiler" in slow.detail
    assert selftest_rows.output_check_row("cuda").got == "torch on the device"


def test_the_sandbox_row_without_a_cgroup_passes_and_names_the_fix() -> None:
    """Test mode runs without a cgroup (docs/security.md), so the row passes; its note says that
    leaderboard jobs are refused and how the operator gives the runner job cgroups."""
    contained = {"method": "setuid", "network": "netns", "pid_namespace": True, "filesystem": "read-only"}
    row = selftest_rows.sandbox_check({**contained, "containment": "none"})
    assert row.passed and "no cgroup" in row.got
    assert "refuses leaderboard jobs" in row.detail and "`cgroup: private`" in row.detail
    row = selftest_rows.sandbox_check({**contained, "containment": "hybrid"})
    assert row.passed and row.detail == "" and "cgroup hybrid, frozen outside calls" in row.got
