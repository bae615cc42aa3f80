"""Ceilings that hold still: the best of a runner's recent probes with their spread and times,
kept across restarts, refreshed only while no job runs (runner/host/ceiling_probes.py)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from kernelrank.runner.host import ceiling_probes


def _probe(copy: float, f32: float, name: str = "test cpu") -> dict:
    return {"device": "cpu", "name": name, "threads": 2, "copy_gbps": copy, "matmul_tflops": {"float32": f32}}


def test_the_best_of_the_recent_probes_with_spread_and_when() -> None:
    record = None
    # a busy machine reads low: 15, then 43 when quiet, then 30
    for i, (copy, f32) in enumerate([(9.0, 0.015), (12.0, 0.043), (10.0, 0.030)]):
        record = ceiling_probes.merge(record, _probe(copy, f32), f"2026-12-02T10:0{i}:00+00:00")
    assert record["copy_gbps"] == 12.0 and record["matmul_tflops"] == {"float32": 0.043}
    assert record["best_at"] == {"copy_gbps": "2026-12-02T10:01:00+00:00",
                                 "matmul_tflops": {"float32": "2026-12-02T10:01:00+00:00"}}
    assert record["spread"]["copy_gbps"] == pytest.approx(0.25)  # (12 - 9) / 12
    assert record["spread"]["matmul_tflops"]["float32"] == pytest.approx((0.043 - 0.015) / 0.043)
    assert record["probes"] == 3 and record["measured_at"] == "2026-12-02T10:02:00+00:00"
    assert record["name"] == "test cpu" and record["threads"] == 2


def test_old_probes_age_out_so_a_slower_machine_is_followed() -> None:
    record = ceiling_probes.merge(None, _probe(50.0, 1.0), "t0")
    for i in range(ceiling_probes.KEEP):
        record = ceiling_probes.merge(record, _probe(10.0, 0.1), f"t{i + 1}")
    assert record["copy_gbps"] == 10.0 and record["spread"]["copy_gbps"] == 0.0
    assert len(record["history"]["copy_gbps"]) == ceiling_probes.KEEP
    assert record["probes"] == ceiling_probes.KEEP + 1


def test_a_failed_figure_keeps_the_others_best() -> None:
    record = ceiling_probes.merge(None, _probe(10.0, 0.5), "t0")
    missing = {"device": "cpu", "name": "test cpu", "copy_gbps": None, "matmul_tflops": {}}
    record = ceiling_probes.merge(record, missing, "t1")
    assert record["copy_gbps"] == 10.0 and record["matmul_tflops"] == {"float32": 0.5}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from kernelrank.settings import get_settings

    monkeypatch.setenv("KERNELRANK_RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    get_settings.cache_clear()
    yield tmp_path / "cache"
    get_settings.cache_clear()


def test_probes_merge_across_restarts_and_a_new_device_starts_afresh(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probes = iter([_probe(20.0, 0.2), _probe(10.0, 0.4), _probe(5.0, 0.1, name="another cpu")])
    monkeypatch.setattr(ceiling_probes, "probe", lambda cls, threads: next(probes))
    first = ceiling_probes.probe_and_merge("cpu", "cpu", 2)
    second = ceiling_probes.probe_and_merge("cpu", "cpu", 2)  # a restarted runner reads the file
    assert (second["copy_gbps"], second["matmul_tflops"]["float32"], second["probes"]) == (20.0, 0.4, 2)
    assert first["probes"] == 1 and ceiling_probes.record_path("cpu", 2).is_file()
    third = ceiling_probes.probe_and_merge("cpu", "cpu", 2)  # another device under the same queue name
    assert (third["copy_gbps"], third["probes"]) == (5.0, 1)


def test_a_refresh_waits_for_no_job_and_a_job_waits_for_no_refresh(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(ceiling_probes, "probe", lambda cls, threads: calls.append("probe") or _probe(1.0, 0.1))
    with ceiling_probes.busy("cpu"):  # a job runs
        assert ceiling_probes.refresh_if_idle("cpu", "cpu", 2) is None
    assert calls == []
    assert ceiling_probes.refresh_if_idle("cpu", "cpu", 2)["probes"] == 1 and calls == ["probe"]
    # while a probe holds the file, a job's shared lock cannot be had at once
    fd = os.open(ceiling_probes.busy_path("cpu"), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    other = os.open(ceiling_probes.busy_path("cpu"), os.O_RDWR)
    with pytest.raises(BlockingIOError):
        fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)
    os.close(fd)
    fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)  # the probe done: the job goes on
    os.close(other)
