"""Shared fixtures: a private scratch folder, and the test-only problem ``double``."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelrank.problems import Problem, load_problem
from kernelrank.runner.harness import EvalOptions

FIXTURES = Path(__file__).parent / "fixtures"
SUBMISSIONS = FIXTURES / "submissions"
ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``cuda`` need a real GPU: skipped, saying so, where torch sees none (this
    project's machines and CI); ``pytest -m cuda`` on a GPU machine runs them."""
    marked = [item for item in items if item.get_closest_marker("cuda")]
    if not marked:
        return
    import torch

    if torch.cuda.is_available():  # pragma: no cover - GPU machines
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False here): run pytest -m cuda on one")
    for item in marked:
        item.add_marker(skip)


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
