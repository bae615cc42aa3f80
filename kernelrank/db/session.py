"""Engine and sessions, built on first use from the settings (never at import time)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from kernelrank.settings import PROJECT_ROOT, get_settings


def make_engine(url: str) -> Engine:
    """An engine for ``url``. SQLite gets WAL and a busy timeout so the API and the control worker
    can share the file; Postgres gets pre-ping so a restarted server is reconnected."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record) -> None:  # pragma: no cover - exercised by every SQLite test
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


@lru_cache
def get_engine() -> Engine:
    """The process's engine for the configured database URL."""
    return make_engine(get_settings().resolved_database_url())


@lru_cache
def get_sessionmaker() -> sessionmaker[Session]:
    return sessionmaker(get_engine(), expire_on_commit=False)


@contextmanager
def session_scope() -> Iterator[Session]:
    """A session committed on success and rolled back on error."""
    session = get_sessionmaker()()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def migrate(url: str | None = None) -> None:
    """Bring the database at ``url`` (default: the configured one) to the newest migration (Alembic)."""
    from alembic import command
    from alembic.config import Config

    url = url or get_settings().resolved_database_url()
    if url.startswith("sqlite"):  # Alembic's engine does not create the folder of a new database file
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    cfg = Config()
    cfg.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    command.upgrade(cfg, "head")


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (``None``: not SQLite, or in memory)."""
    if not url.startswith("sqlite") or "///" not in url:  # "sqlite://": in memory
        return None
    path = url.split("///", 1)[-1]
    return Path(path) if path and path != ":memory:" else None


def database_exists(url: str | None = None) -> bool:
    """Whether the database at ``url`` (default: the configured one) is a KernelRank database
    already (it has Alembic's version table). A SQLite file that does not exist is not opened (that
    would create it).

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the database server cannot be reached.
    """
    from sqlalchemy import inspect

    url = url or get_settings().resolved_database_url()
    path = sqlite_path(url)
    if path is not None and not path.is_file():
        return False
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return inspect(conn).has_table("alembic_version")
    finally:
        engine.dispose()
