"""Fault tests: the service's processes started one by one (:mod:`tests.faults.stack`) over Redis
and PostgreSQL (``scripts/test-servers.sh``; skipped with the reason when they are not
configured, failed when ``KERNELRANK_REQUIRE_SERVERS=1``), some also over the embedded default."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.stack import Stack, make_stack
from tests.servers import REAL_BACKEND, Backend, fresh_backend


@pytest.fixture(params=[REAL_BACKEND])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The backend of one test: ``redis+postgres`` (default) or ``embedded`` (by
    ``@pytest.mark.parametrize("backend", [...], indirect=True)``)."""
    if request.param == "embedded":
        yield Backend("embedded")
        return
    with fresh_backend() as b:
        yield b


@pytest.fixture
def stack(backend: Backend, tmp_path: Path) -> Iterator[Stack]:
    """A prepared service (database migrated, ``double`` loaded, admin created), no process yet."""
    s = make_stack(tmp_path, backend)
    try:
        yield s
    finally:
        s.close()
