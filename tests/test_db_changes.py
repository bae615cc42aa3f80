"""Word of commits for the API's long-polls (``kernelrank.db.changes.ChangeListener``): SQLite's
write-ahead log through inotify, and PostgreSQL's ``NOTIFY`` from migration 0018's trigger (on a
private cluster; skipped where no PostgreSQL server or psycopg is installed)."""

from __future__ import annotations

import glob
import importlib.util
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text, update

from kernelrank.db.changes import ChangeListener
from kernelrank.db.models import Submission
from kernelrank.db.session import make_engine, migrate


def _listening(url: str) -> Iterator[threading.Event]:
    woke = threading.Event()
    listener = ChangeListener(url, woke.set)
    assert listener.start()
    try:
        assert woke.wait(5.0) or url.startswith("sqlite")  # PostgreSQL's first word: it listens now
        yield woke
    finally:
        listener.close()


def _commits_wake(url: str, write) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as conn:  # the pool's first read (SQLite: it makes the log file)
            conn.execute(text("SELECT count(*) FROM submissions"))
        for woke in _listening(url):
            woke.clear()
            with engine.begin() as conn:  # a read commits nothing: no word
                conn.execute(text("SELECT count(*) FROM submissions"))
            assert not woke.wait(1.5)
            with engine.begin() as conn:
                conn.execute(write)
            assert woke.wait(5.0), f"no word of a commit of {write}"
    finally:
        engine.dispose()


def test_a_commit_to_a_sqlite_database_wakes_its_listener(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'kernelrank.db'}"
    migrate(url)
    _commits_wake(url, text("UPDATE alembic_version SET version_num = version_num"))  # any commit that writes


def test_a_database_without_a_source_has_no_listener() -> None:
    assert ChangeListener("sqlite://", lambda: None).start() is False


@pytest.mark.servers
@pytest.mark.skipif(not glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                    reason="no PostgreSQL server installed (apt-get install -y postgresql)")
@pytest.mark.skipif(importlib.util.find_spec("psycopg") is None,
                    reason="psycopg not installed (pip install -e '.[production]')")
def test_a_statement_on_submissions_in_postgres_notifies_its_listener() -> None:
    from bench.service import private_postgres

    with private_postgres() as url:
        migrate(url)
        # the trigger is per statement: one that touches no row is word enough (readers read again)
        _commits_wake(url, update(Submission).where(Submission.id == -1).values(message="x"))
