"""Shared fixtures (a private scratch folder, the test-only problem ``double``) and the test tiers.

Tiers (README, *Tests*): ``default`` (plain ``pytest``, what CI runs) leaves out the tests marked
``slow``; ``full`` runs only those (``pytest -m slow`` is the same); ``all`` runs both. The tier
comes from ``--tier`` or ``KERNELRANK_TEST_TIER``; an explicit ``-m`` or a test named by its node id
(``file.py::test``) overrides it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.servers import REAL_BACKEND

if TYPE_CHECKING:
    from tests.e2e.conftest import Service

from kernelrank.problems import Problem, load_problem
from kernelrank.runner.judge.harness import EvalOptions

FIXTURES = Path(__file__).parent / "fixtures"
SUBMISSIONS = FIXTURES / "submissions"
ROOT = Path(__file__).resolve().parent.parent


#: The tiers and what each runs: the ``slow`` mark's value for a test to be kept (``None``: any).
TIERS = {"default": False, "full": True, "all": None}
TIER_ENV = "KERNELRANK_TEST_TIER"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--tier", choices=sorted(TIERS), default=None,
                     help=f"test tier: default (not slow), full (slow only), all (default: ${TIER_ENV} or 'default')")


def selected_tier(config: pytest.Config) -> str | None:
    """The tier in force, or ``None`` where ``-m`` or node ids choose the tests instead.

    Raises:
        pytest.UsageError: ``KERNELRANK_TEST_TIER`` names no tier."""
    tier = config.getoption("--tier") or os.environ.get(TIER_ENV) or "default"
    if tier not in TIERS:
        raise pytest.UsageError(f"{TIER_ENV}={tier!r} is not a tier: one of {', '.join(sorted(TIERS))}")
    if config.getoption("markexpr") or any("::" in arg for arg in config.args):
        return None
    return tier


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tells :mod:`tests.servers` which test is starting (before its fixtures): a test that
    reaches Redis or PostgreSQL must carry the ``servers`` mark."""
    from tests import servers

    servers.current_test = item


def pytest_report_header(config: pytest.Config) -> str:
    tier = selected_tier(config)
    return f"kernelrank test tier: {tier}" if tier else "kernelrank test tier: none (-m or node ids choose)"


@pytest.hookimpl(trylast=True)  # after the folders' own hooks have added their marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keeps the tier's tests (module docstring). Tests marked ``cuda`` need a real GPU: skipped,
    saying so, where torch sees none (CI's machines); ``pytest -m cuda`` on a
    GPU machine runs them."""
    tier = selected_tier(config)
    if tier is not None and TIERS[tier] is not None:
        keep: list[pytest.Item] = []
        dropped: list[pytest.Item] = []
        for item in items:
            (keep if (item.get_closest_marker("slow") is not None) == TIERS[tier] else dropped).append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep
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


@pytest.fixture(scope="session", params=["embedded", REAL_BACKEND])
def service(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """``kernelrank serve`` (API, control worker, CPU runner) over the embedded default (SQLite,
    filesystem broker) and over Redis and PostgreSQL (a database and key prefix of its own on the
    servers of ``scripts/test-servers.sh``; skipped with the reason when they are not configured,
    failed when ``KERNELRANK_REQUIRE_SERVERS=1``): one per backend for the whole session, shared by
    the end-to-end and browser tests (each makes users of its own names)."""
    from tests.e2e.conftest import serve
    from tests.servers import Backend, fresh_backend

    with ExitStack() as resources:
        backend = Backend("embedded") if request.param == "embedded" else resources.enter_context(fresh_backend())
        yield from serve(tmp_path_factory, backend)


@pytest.fixture
def options(tmp_path: Path) -> EvalOptions:
    """Options with a private scratch folder per test, timing on one pair of processes (the
    tests check verdicts and figures, not how processes differ: those that do ask for the
    device's default with ``processes=None``)."""
    return EvalOptions(scratch_dir=tmp_path / "scratch", trace_dir=tmp_path / "traces", processes=1)


def submission(name: str) -> str:
    """Source of a fixture submission under ``tests/fixtures/submissions``."""
    return (SUBMISSIONS / name).read_text(encoding="utf-8")
