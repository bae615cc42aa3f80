"""The per-user lock on Postgres (``SELECT ... FOR UPDATE`` on the user's row): eight simultaneous
submissions of a user with three slots, with and without the lock, on a private Postgres cluster
(the one ``bench/leaderboard.py`` uses). Skipped where no PostgreSQL server or psycopg is installed."""

from __future__ import annotations

import glob
import importlib.util
import threading
import time
from collections.abc import Iterator

import pytest

pytestmark = [
    pytest.mark.servers,
    pytest.mark.skipif(not glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                       reason="no PostgreSQL server installed (apt-get install -y postgresql)"),
    pytest.mark.skipif(importlib.util.find_spec("psycopg") is None,
                       reason="psycopg not installed (pip install -e '.[production]')"),
]


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    from bench.service import private_postgres
    from kernelrank.db.session import migrate

    with private_postgres() as url:
        migrate(url)
        yield url


def _race(url: str, locked: bool, monkeypatch: pytest.MonkeyPatch, name: str) -> int:
    from sqlalchemy import select
    from sqlalchemy.orm import sessionmaker

    from kernelrank.db.models import ProblemRevision, Submission, User
    from kernelrank.db.session import make_engine
    from kernelrank.problems import load_all
    from kernelrank.services import limits, problems, users

    engine = make_engine(url)
    factory = sessionmaker(engine, expire_on_commit=False)
    with factory() as s:
        if s.scalar(select(ProblemRevision.id).limit(1)) is None:
            problems.sync_all(s, load_all())
        user_id = users.create_user(s, name)[0].id
        s.commit()
        rev_id = s.scalar(select(ProblemRevision.id).limit(1))
    if not locked:
        monkeypatch.setattr(limits, "lock_user", lambda session, uid: None)
    barrier, accepted = threading.Barrier(8), []

    def attempt() -> None:
        barrier.wait()
        with factory() as s:
            try:
                limits.check_submission(s, s.get(User, user_id), limits.Limits(per_hour=0, concurrent=3))
            except limits.RateLimited:
                s.rollback()
                return
            time.sleep(0.05)  # the work between the check and the insert
            s.add(Submission(user_id=user_id, problem_revision_id=rev_id, device="cpu", mode="test",
                             language="pytorch", code="x", code_sha256="0" * 64, status="queued"))
            s.commit()
            accepted.append(1)

    threads = [threading.Thread(target=attempt) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    engine.dispose()
    return len(accepted)


def test_the_row_lock_holds_simultaneous_submissions_to_the_limit(postgres: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert _race(postgres, True, monkeypatch, "alice") == 3


def test_without_the_lock_the_race_is_real(postgres: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control case: the same race without the lock lets more than three in."""
    assert _race(postgres, False, monkeypatch, "bob") > 3
