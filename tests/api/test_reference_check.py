"""The reference check a push runs (the harness in a subprocess): its verdicts and what the
subprocess is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelrank.problems import load_problem
from kernelrank.services.reference_check import check_reference

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _double_spec(tmp_path: Path, edit=None):
    import shutil

    shutil.copytree(FIXTURES / "problems" / "double", tmp_path / "problems" / "double")
    ref = tmp_path / "reference_kernels" / "double"
    shutil.copytree(FIXTURES / "reference_kernels" / "double", ref, ignore=shutil.ignore_patterns("__pycache__"))
    if edit:
        (ref / "reference.py").write_text(edit((ref / "reference.py").read_text()))
    return load_problem("double", tmp_path / "problems", tmp_path / "reference_kernels").spec()


def test_the_check_process_gets_no_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELRANK_DATABASE_URL", "postgresql+psycopg://kr:s3cret-db@db/kr")
    monkeypatch.setenv("KERNELRANK_BROKER_URL", "redis://:s3cret-broker@broker:6379/0")
    spec = _double_spec(tmp_path, edit=lambda src: src.replace(
        '    g = torch.Generator(device=device).manual_seed(seed)\n',
        '    import os\n'
        '    raise RuntimeError("seen: " + repr({k: v for k, v in os.environ.items() if "s3cret" in v}))\n'))
    reason = check_reference(spec)
    assert reason is not None and "seen: {}" in reason, reason
    assert "s3cret" not in reason


def test_a_passing_reference_gives_no_reason(tmp_path: Path) -> None:
    assert check_reference(_double_spec(tmp_path)) is None


def test_a_hanging_reference_is_stopped_at_the_time_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from kernelrank.services import reference_check

    marker = tmp_path / "still-running"
    spec = _double_spec(tmp_path, edit=lambda src: src.replace(
        '    g = torch.Generator(device=device).manual_seed(seed)\n',
        '    import time, pathlib\n'
        '    while True:\n'
        f'        pathlib.Path({str(marker)!r}).touch()\n'
        '        time.sleep(0.2)\n'))
    monkeypatch.setattr(reference_check, "MARGIN_S", 15.0 - spec.definition.budgets.compile
                        - spec.definition.budgets.test)  # 15 s in all: Python and torch start first
    start = time.monotonic()
    reason = check_reference(spec)
    assert reason == "the reference's test run did not finish within 15 s"
    assert time.monotonic() - start < 40
    assert marker.exists()  # it did start hanging
    before = marker.stat().st_mtime
    time.sleep(1.0)
    assert marker.stat().st_mtime == before  # and nothing of it runs on


def _loosened(tmp_path: Path, atol: str) -> Path:
    problem = tmp_path / "problems" / "double" / "problem.yaml"
    problem.write_text(problem.read_text().replace("float32: {atol: 1.0e-6, rtol: 1.0e-6}",
                                                   f"float32: {{atol: {atol}, rtol: 1.0e-6}}"))
    return problem


def test_a_tolerance_that_zeros_pass_is_refused(tmp_path: Path) -> None:
    """``atol`` 10 lets an all-zeros (or a constant) output pass for ``x ~ N(0, 1)`` doubled: the
    push is refused, naming the case and the tolerance."""
    _double_spec(tmp_path)
    _loosened(tmp_path, "10.0")
    spec = load_problem("double", tmp_path / "problems", tmp_path / "reference_kernels").spec()
    reason = check_reference(spec)
    assert reason is not None and reason.startswith("failed: tolerances:"), reason
    assert "test case 0" in reason and "all zeros passes the tolerance (atol=10" in reason
    assert "the mean everywhere" in reason


def test_a_reference_whose_own_error_fills_its_tolerance_is_refused(tmp_path: Path) -> None:
    """A reference that computes float32 outputs in bfloat16 (and float64 ones exactly) is off by
    up to ~0.4% of a value from float64, far beyond 1e-6: its own tolerance would fail honest
    float32 kernels."""
    spec = _double_spec(tmp_path, edit=lambda src: src.replace(
        "    return data[0] * 2\n",
        "    x = data[0]\n    return x * 2 if x.dtype == torch.float64 else (x.bfloat16() * 2).to(x.dtype)\n"))
    reason = check_reference(spec)
    assert reason is not None and "the reference's own error against float64 uses" in reason, reason


def test_the_audit_on_the_shipped_problems_finds_nothing() -> None:
    from kernelrank.problems import load_all
    from kernelrank.runner.judge.reference_audit import audit, tolerance_share

    import torch

    for problem in load_all():
        assert audit(problem.spec()) == [], problem.name
    exact = torch.tensor([1.0, 2.0, 0.0], dtype=torch.float64)
    assert tolerance_share(torch.tensor([1.0, 2.0, 0.0]), exact, 0.1, 0.0) == 0.0
    assert tolerance_share(torch.tensor([1.05, 2.0, 0.0]), exact, 0.1, 0.0) == pytest.approx(0.5)
    assert tolerance_share(torch.tensor([1.0, 2.0, 1.0]), exact, 0.0, 0.1) == float("inf")  # no allowance at 0
