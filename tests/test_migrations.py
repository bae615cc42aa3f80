"""The Alembic migrations build exactly the schema of ``kernelrank.db.models``, on SQLite and on
PostgreSQL (the test servers; skipped with the reason when they are not configured)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine


def _diff(url: str) -> list:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from kernelrank.db.models import Base
    from kernelrank.db.session import migrate

    migrate(url)
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return compare_metadata(MigrationContext.configure(conn), Base.metadata)
    finally:
        engine.dispose()


def test_migrations_match_the_models_on_sqlite(tmp_path: Path) -> None:
    assert _diff(f"sqlite:///{tmp_path / 'm.db'}") == []


@pytest.mark.servers
def test_migrations_match_the_models_on_postgres() -> None:
    from tests.servers import fresh_backend

    with fresh_backend() as backend:
        assert _diff(backend.database_url) == []
