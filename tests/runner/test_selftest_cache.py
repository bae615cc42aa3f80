"""A runner's self-test cache: a pass stands for a restart with the same code, host and device, for
a while; step times feed the estimate a self-test prints before it starts."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from kernelrank.runner.host import selftest, selftest_cache
from kernelrank.runner.host.selftest_rows import Check

AT = "2026-12-02T10:00:00+00:00"
PASSED = {"status": "passed", "scope": "quick", "at": AT, "checks": 20, "seconds": 95.0}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The runner's cache in a temporary folder, passes kept for 24 hours."""
    from kernelrank.settings import get_settings

    monkeypatch.setenv("KERNELRANK_RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KERNELRANK_RUNNER_SELF_TEST_CACHE_HOURS", "24")
    get_settings.cache_clear()
    yield tmp_path / "cache"
    get_settings.cache_clear()


def _later(hours: float) -> dt.datetime:
    return dt.datetime.fromisoformat(AT) + dt.timedelta(hours=hours)


def test_a_pass_stands_for_the_same_code_host_and_device_for_its_hours(cache: Path) -> None:
    selftest_cache.store_pass("cpu", PASSED)
    assert selftest_cache.load_pass("cpu", now=_later(1)) == PASSED
    assert selftest_cache.load_pass("cpu", now=_later(25)) is None  # older than the configured hours
    assert selftest_cache.load_pass("cuda", now=_later(1)) is None  # another device
    stored = json.loads((cache / "self-test-cpu.json").read_text())
    assert stored["fingerprint"] == selftest_cache.fingerprint("cpu")
    for fact in ("code", "torch", "triton", "python", "host", "kernel", "cpu", "cpus", "memory_bytes"):
        assert stored["fingerprint"][fact], fact
    selftest_cache.drop_pass("cpu")
    assert selftest_cache.load_pass("cpu", now=_later(1)) is None


def test_a_change_of_code_or_host_is_a_new_fingerprint(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    selftest_cache.store_pass("cpu", PASSED)
    same = selftest_cache.fingerprint("cpu")
    monkeypatch.setattr(selftest_cache, "_code_digest", lambda: "0" * 64)  # an upgraded runner
    assert selftest_cache.fingerprint("cpu") != same and selftest_cache.load_pass("cpu", now=_later(1)) is None
    monkeypatch.undo()
    monkeypatch.setenv("KERNELRANK_RUNNER_CACHE_DIR", str(cache))
    monkeypatch.setattr(selftest_cache.platform, "release", lambda: "7.0.0-other")  # a new kernel
    assert selftest_cache.load_pass("cpu", now=_later(1)) is None


def test_the_code_digest_covers_the_runner_and_the_reference_kernels(cache: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from kernelrank.settings import get_settings

    before = selftest_cache._code_digest()
    copy = tmp_path / "reference_kernels"
    shutil.copytree(get_settings().reference_kernels_dir, copy)
    monkeypatch.setenv("KERNELRANK_REFERENCE_KERNELS_DIR", str(copy))
    get_settings.cache_clear()
    assert selftest_cache._code_digest() == before  # the same files
    (copy / "softmax" / "reference.py").write_text("# changed\n", encoding="utf-8")
    assert selftest_cache._code_digest() != before


def test_failed_passes_are_not_kept_and_an_unreadable_cache_is_absent(cache: Path) -> None:
    selftest_cache.store_pass("cpu", {**PASSED, "status": "failed"})
    assert not (cache / "self-test-cpu.json").exists()
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "self-test-cpu.json").write_text("{not json")
    assert selftest_cache.load_pass("cpu", now=_later(1)) is None
    (cache / "self-test-seconds-cpu.json").write_text("[]")
    assert selftest_cache.recorded_seconds("cpu") == {}


def test_no_pass_is_kept_with_zero_hours(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelrank.settings import get_settings

    selftest_cache.store_pass("cpu", PASSED)
    monkeypatch.setenv("KERNELRANK_RUNNER_SELF_TEST_CACHE_HOURS", "0")
    get_settings.cache_clear()
    assert selftest_cache.load_pass("cpu", now=_later(0.1)) is None


def test_step_seconds_merge_and_the_latest_wins(cache: Path) -> None:
    selftest_cache.record_seconds("cpu", {"a": 1.234, "b": 2.0})
    selftest_cache.record_seconds("cpu", {"b": 3.0})
    assert selftest_cache.recorded_seconds("cpu") == {"a": 1.23, "b": 3.0}


def _fake_probe(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The harness and the host rows replaced: each evaluation passes and is recorded."""
    from types import SimpleNamespace

    from kernelrank.runner.judge import harness

    asked: list[str] = []

    def evaluate(spec: Any, source: str, mode: str, device: str, options: Any) -> Any:
        asked.append(mode)
        return SimpleNamespace(status="passed", message="ok", speedup=None, speedup_ci=None)

    monkeypatch.setattr(harness, "evaluate", evaluate)
    monkeypatch.setattr(selftest, "clock_rows", lambda device, scratch: (
        [Check("judge's clock", "per-request overhead", "-", "measured", "40 µs", True, 0.0)], {}))
    return asked


def test_a_start_with_a_cached_pass_runs_only_the_probes(cache: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    asked = _fake_probe(monkeypatch)
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    selftest_cache.store_pass("cpu", {**PASSED, "at": now})
    assert selftest.main(["--device", "cpu", "--cached", "--json"]) == 0
    out = capsys.readouterr()
    lines = out.out.strip().splitlines()
    assert [json.loads(x)["progress"][:2] for x in lines[:-1]] == [[0, 2], [1, 2], [2, 2]]
    summary = json.loads(lines[-1])
    assert summary["scope"] == "probes" and summary["cached"] == {"scope": "quick", "at": now, "seconds": 95.0, "checks": 20}
    assert asked == ["test"]  # the device's initialisation alone
    assert "self-test (probes) on cpu: 2 steps" in out.err and f"the quick self-test passed here at {now}" in out.err
    # what it timed is recorded for the next estimate
    assert set(selftest_cache.recorded_seconds("cpu")) == {"initialise cpu in the sandbox",
                                                            "the judge's clock and the sandbox"}


def test_a_start_without_a_cached_pass_runs_the_quick_self_test_and_keeps_its_pass(
        cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    asked = _fake_probe(monkeypatch)
    monkeypatch.setattr(selftest, "pair_reads_one", lambda result: (True, "1.00× (0.98–1.02×)"))
    monkeypatch.setattr(selftest, "attack_outcome", lambda meta, status, message, speedup: (True, "failed"))
    monkeypatch.setattr(selftest, "expected_verdict", lambda path: "passed")  # the fake passes every example
    assert selftest.main(["--device", "cpu", "--cached", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["scope"] == "quick" and "cached" not in summary and len(asked) > 10
    assert selftest_cache.load_pass("cpu")["scope"] == "quick"
    # a filtered run proves less: it is not kept, and a failure drops the pass
    selftest_cache.drop_pass("cpu")
    assert selftest.main(["--device", "cpu", "--problem", "softmax", "--json"]) == 0
    assert selftest_cache.load_pass("cpu") is None
    selftest_cache.store_pass("cpu", {**PASSED, "at": dt.datetime.now(dt.timezone.utc).isoformat()})
    monkeypatch.setattr(selftest, "pair_reads_one", lambda result: (False, "0.90×"))
    assert selftest.main(["--device", "cpu", "--json"]) == 1
    assert selftest_cache.load_pass("cpu") is None
