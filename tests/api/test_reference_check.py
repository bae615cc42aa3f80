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
