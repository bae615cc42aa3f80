"""Shared fixtures: a private scratch folder, and the test-only problem ``double``."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelrank.problems import Problem, load_problem
from kernelrank.runner.harness import EvalOptions

FIXTURES = Path(__file__).parent / "fixtures"
SUBMISSIONS = FIXTURES / "submissions"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def double() -> Problem:
    """The test-only problem ``double`` (``y = 2x``), with small time budgets."""
    return load_problem("double", FIXTURES / "problems", FIXTURES / "reference_kernels")


@pytest.fixture
def options(tmp_path: Path) -> EvalOptions:
    """Options with a private scratch folder per test."""
    return EvalOptions(scratch_dir=tmp_path / "scratch", trace_dir=tmp_path / "traces")


def submission(name: str) -> str:
    """Source of a fixture submission under ``tests/fixtures/submissions``."""
    return (SUBMISSIONS / name).read_text(encoding="utf-8")
