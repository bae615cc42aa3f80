"""API test fixtures: a fresh migrated SQLite database per test (in ``tmp_path``; a copy of one
migrated once per session) holding the real problems, three users, a ``cpu`` runner's heartbeat, and a client whose job dispatch is recorded
instead of sent to a broker."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from kernelrank.problems import Problem, load_all

#: ``KERNELRANK_MAX_CODE_BYTES`` in these tests (the smallest the settings accept is 1024).
MAX_CODE_BYTES = 2048
KERNEL = "import torch\n\n\ndef custom_kernel(data):\n    return torch.softmax(data[0], dim=-1)\n"


@dataclass
class Recorder:
    """A ``dispatch`` that keeps ``(job, queue, time_limit)`` instead of sending to Celery."""

    calls: list[tuple[dict[str, Any], str, float]] = field(default_factory=list)

    def __call__(self, job: dict[str, Any], queue: str, time_limit: float) -> None:
        self.calls.append((job, queue, time_limit))


@dataclass
class World:
    """What the database was seeded with."""

    tokens: dict[str, str]
    seeds: dict[str, int]  # problem -> its current revision's secret seed
    revisions: dict[str, str]

    def auth(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[user]}"}


@pytest.fixture(scope="session")
def real_problems() -> list[Problem]:
    return load_all()


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Settings pointing at a new SQLite file in ``tmp_path`` (not yet migrated); yields its URL."""
    from kernelrank.db import session as db_session
    from kernelrank.settings import get_settings

    url = f"sqlite:///{tmp_path / 'kernelrank.db'}"
    monkeypatch.setenv("KERNELRANK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("KERNELRANK_DATABASE_URL", url)
    monkeypatch.setenv("KERNELRANK_MAX_CODE_BYTES", str(MAX_CODE_BYTES))

    def clear() -> None:
        get_settings.cache_clear()
        db_session.get_sessionmaker.cache_clear()
        db_session.get_engine.cache_clear()

    clear()
    yield url
    db_session.get_engine().dispose()
    clear()


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory: pytest.TempPathFactory, real_problems: list[Problem]) -> Path:
    """A SQLite file migrated to the newest revision and holding the real problems, made once per
    session; each test's ``world`` starts from a copy (migrating anew costs ~0.4-1 s a test)."""
    from sqlalchemy.orm import Session

    from kernelrank.db.session import make_engine, migrate
    from kernelrank.services import problems

    path = tmp_path_factory.mktemp("template-db") / "kernelrank.db"
    url = f"sqlite:///{path}"
    migrate(url)
    engine = make_engine(url)
    try:
        with Session(engine) as s:
            problems.sync_all(s, real_problems)
            s.commit()
    finally:
        engine.dispose()
    return path


def copy_database(source: Path, url: str) -> None:
    """Copy the SQLite database ``source`` to the file of ``url`` (SQLite's online backup: whole
    and consistent, write-ahead log included)."""
    from kernelrank.db.session import sqlite_path

    target = sqlite_path(url)
    assert target is not None, url
    target.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


@pytest.fixture
def world(database: str, real_problems: list[Problem], migrated_template: Path) -> World:
    """The migrated database with the real problems, users ``alice``, ``bob`` and admin ``root``,
    and an online ``cpu`` runner."""
    from kernelrank.db.session import session_scope
    from kernelrank.services import problems, runners, users

    copy_database(migrated_template, database)
    with session_scope() as s:
        revs = problems.sync_all(s, real_problems)
        tokens = {name: users.create_user(s, name, admin=(name == "root"))[1] for name in ("alice", "bob", "root")}
        runners.heartbeat(s, "runner-cpu-1", "cpu", {"name": "test cpu", "threads": 4}, "0.1.0", jobs_done=3)
        seeds = {r.problem.name: r.secret_seed for r in revs}
        revisions = {r.problem.name: r.revision for r in revs}
    return World(tokens, seeds, revisions)


@pytest.fixture
def dispatched() -> Recorder:
    return Recorder()


@pytest.fixture
def client(world: World, dispatched: Recorder) -> Iterator[TestClient]:
    from kernelrank.api.app import create_app
    from kernelrank.api.deps import get_dispatch

    app = create_app()
    app.dependency_overrides[get_dispatch] = lambda: dispatched
    with TestClient(app) as c:
        yield c


def submit(client: TestClient, token: str | None, problem: str = "softmax", code: str | bytes = KERNEL,
           **fields: str):
    """POST a multipart submission; ``fields`` are extra form fields (device, mode)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    raw = code.encode() if isinstance(code, str) else code
    return client.post("/api/v1/submissions", data={"problem": problem, **fields},
                       files={"file": ("kernel.py", raw, "text/x-python")}, headers=headers)


def passed_result(score_ns: float, speedup: float = 1.5, **extra: Any) -> dict[str, Any]:
    """A harness result (``EvalResult.to_dict()`` shape) that passed."""
    return {"status": "passed", "mode": "leaderboard", "message": "", "cases": [], "score_ns": score_ns,
            "speedup": speedup, "logs": {"stdout": "", "stderr": ""}, **extra}


def record(submission_id: int, kind: str, result: dict[str, Any]) -> None:
    """Record one run of a submission as the control worker would."""
    from kernelrank.db.session import session_scope
    from kernelrank.services import guard
    from kernelrank.services.submissions import record_run

    with session_scope() as s:
        assert record_run(s, submission_id, kind, dict(result), "runner-cpu-1")
    with session_scope() as s:
        guard.store(s, submission_id)
