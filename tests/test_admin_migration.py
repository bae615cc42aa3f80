"""Migration 0002 (accounts and administration) over a database that already holds data at 0001:
rows survive with the new columns' defaults, the new unique rule on runs holds, and it downgrades."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa


def _alembic(url: str):
    from alembic.config import Config

    from kernelrank.settings import PROJECT_ROOT

    cfg = Config()
    cfg.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    cfg.set_main_option("sqlalchemy.url", url)
    return cfg


def _user_and_problem(c) -> None:
    """User 1 and problem 1 with its revision 1, as every migration since 0001 keeps them."""
    c.execute(sa.text("INSERT INTO users (id, name, is_admin) VALUES (1, 'alice', 0)"))
    c.execute(sa.text("INSERT INTO problems (id, name) VALUES (1, 'double')"))
    c.execute(sa.text("INSERT INTO problem_revisions (id, problem_id, revision, definition, reference_source, "
                      "templates, secret_seed, is_current) VALUES (1, 1, 'abc', '{}', '', '{}', 7, 1)"))


def test_0002_keeps_existing_rows_and_downgrades(tmp_path: Path) -> None:
    from alembic import command

    url = f"sqlite:///{tmp_path / 'old.db'}"
    cfg = _alembic(url)
    command.upgrade(cfg, "0001")
    engine = sa.create_engine(url)
    with engine.begin() as c:
        _user_and_problem(c)
        c.execute(sa.text("INSERT INTO submissions (id, user_id, problem_revision_id, device, mode, language, filename, "
                          "code, code_sha256, status, message, ranked, progress) VALUES "
                          "(1, 1, 1, 'cpu', 'leaderboard', 'pytorch', 'k.py', 'x', 'h', 'passed', '', 1, '{}')"))
        c.execute(sa.text("INSERT INTO runs (submission_id, kind, status, result, logs) VALUES "
                          "(1, 'public', 'passed', '{}', ''), (1, 'secret', 'passed', '{}', '')"))

    command.upgrade(cfg, "head")
    with engine.begin() as c:
        assert c.execute(sa.text("SELECT attempt, disqualified_at, ranked FROM submissions")).one() == (1, None, 1)
        assert c.execute(sa.text("SELECT hidden, deadline FROM problems")).one() == (0, None)
        assert c.execute(sa.text("SELECT password_hash FROM users")).one() == (None,)
        assert [r[0] for r in c.execute(sa.text("SELECT attempt FROM runs"))] == [1, 1]
        # a second attempt may hold its own public run; the same attempt may not
        c.execute(sa.text("INSERT INTO runs (submission_id, kind, attempt, status, result, logs) VALUES "
                          "(1, 'public', 2, 'passed', '{}', '')"))
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as c:
        c.execute(sa.text("INSERT INTO runs (submission_id, kind, attempt, status, result, logs) VALUES "
                          "(1, 'public', 2, 'passed', '{}', '')"))

    with engine.begin() as c:  # 0001's rule (one run per kind) cannot hold two attempts' runs
        c.execute(sa.text("DELETE FROM runs WHERE attempt = 2"))
    command.downgrade(cfg, "0001")
    with engine.begin() as c:
        assert "attempt" not in {col["name"] for col in sa.inspect(c).get_columns("runs")}
        assert "web_sessions" not in sa.inspect(c).get_table_names()
        assert c.execute(sa.text("SELECT count(*) FROM runs")).scalar() == 2
    engine.dispose()


def test_0006_fills_headline_figures_from_the_current_public_run(tmp_path: Path) -> None:
    import json

    from alembic import command

    url = f"sqlite:///{tmp_path / 'old.db'}"
    cfg = _alembic(url)
    command.upgrade(cfg, "0005")
    case = {"kind": "benchmark", "index": 0, "tflops": 0.25, "gbps": 310.0}
    old = {"kind": "benchmark", "index": 0, "tflops": 9.0, "gbps": 9.0}
    engine = sa.create_engine(url)
    with engine.begin() as c:
        _user_and_problem(c)
        for sid, attempt in ((1, 2), (2, 1)):
            c.execute(sa.text("INSERT INTO submissions (id, user_id, problem_revision_id, device, mode, language, "
                              "filename, code, code_sha256, status, message, ranked, progress, attempt) VALUES "
                              f"({sid}, 1, 1, 'cpu', 'leaderboard', 'pytorch', 'k.py', 'x', 'h', 'passed', '', 1, "
                              f"'{{}}', {attempt})"))
        runs = [(1, 1, "public", {"cases": [old]}), (1, 2, "secret", {"cases": [old]}),
                (1, 2, "public", {"cases": [{"kind": "test", "index": 0}, case]}), (2, 1, "public", {"cases": []})]
        for sid, attempt, kind, result in runs:
            c.execute(sa.text("INSERT INTO runs (submission_id, attempt, kind, status, result, logs) "
                              "VALUES (:s, :a, :k, 'passed', :r, '')"),
                      {"s": sid, "a": attempt, "k": kind, "r": json.dumps(result)})
    command.upgrade(cfg, "0006")
    with engine.connect() as c:
        got = c.execute(sa.text("SELECT id, tflops, gbps FROM submissions ORDER BY id")).all()
    assert [tuple(r) for r in got] == [(1, 0.25, 310.0), (2, None, None)]
    command.downgrade(cfg, "0005")
    with engine.connect() as c:
        assert "tflops" not in {col["name"] for col in sa.inspect(c).get_columns("submissions")}
    engine.dispose()
