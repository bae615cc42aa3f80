"""The leaderboard's query and its partial index (migration 0004) stay matched, and the migrated
schema is the models' schema."""

from __future__ import annotations

from sqlalchemy import text


def test_migrated_schema_matches_the_models(database: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from kernelrank.db.models import Base
    from kernelrank.db.session import make_engine, migrate

    migrate(database)
    engine = make_engine(database)
    with engine.connect() as c:
        assert compare_metadata(MigrationContext.configure(c), Base.metadata) == []
    engine.dispose()


def test_the_ranking_reads_the_user_best_index(database: str) -> None:
    from kernelrank.db.session import make_engine, migrate
    from kernelrank.services.leaderboard import ranking_query

    migrate(database)
    engine = make_engine(database)
    sql = str(ranking_query([1], "cpu", 100).compile(engine, compile_kwargs={"literal_binds": True}))
    with engine.connect() as c:
        plan = " | ".join(row[-1] for row in c.execute(text(f"EXPLAIN QUERY PLAN {sql}")))
    engine.dispose()
    assert "USING INDEX ix_submissions_user_best (problem_revision_id=? AND device=?)" in plan, plan
