"""The real Redis and PostgreSQL of ``scripts/test-servers.sh``, for the tests that use them.

``.ci/run`` starts the servers and exports ``KERNELRANK_TEST_REDIS_URL``,
``KERNELRANK_TEST_DATABASE_URL``, ``KERNELRANK_TEST_SERVERS_DIR`` and
``KERNELRANK_REQUIRE_SERVERS=1``. Without the URLs a test that needs them is skipped with the
reason, unless servers are required: then it fails.

Each test gets a database of its own (created, migrated, dropped at the end) and a Redis key
prefix of its own (``KERNELRANK_BROKER_KEY_PREFIX``), never a shared one emptied afterwards.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic_settings import BaseSettings, SettingsConfigDict

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "test-servers.sh"


class ServerSettings(BaseSettings):
    """``KERNELRANK_TEST_*`` and ``KERNELRANK_REQUIRE_SERVERS`` (read by the tests only)."""

    model_config = SettingsConfigDict(env_prefix="KERNELRANK_", extra="ignore")

    test_redis_url: str | None = None
    test_database_url: str | None = None
    test_servers_dir: Path | None = None
    require_servers: bool = False


@dataclass(frozen=True)
class Backend:
    """Where one test's service keeps its data: a database URL and a broker URL and key prefix.
    ``None`` URLs mean the embedded default (SQLite and the filesystem broker in the data folder)."""

    name: str
    database_url: str | None = None
    broker_url: str | None = None
    key_prefix: str = ""

    @property
    def real(self) -> bool:
        return self.broker_url is not None

    def env(self) -> dict[str, str]:
        """``KERNELRANK_*`` variables selecting this backend."""
        out: dict[str, str] = {}
        if self.database_url:
            out["KERNELRANK_DATABASE_URL"] = self.database_url
        if self.broker_url:
            out["KERNELRANK_BROKER_URL"] = self.broker_url
            out["KERNELRANK_BROKER_KEY_PREFIX"] = self.key_prefix
        return out


#: The test being set up or run (kept by ``tests/conftest.py``): :func:`require` checks its mark.
current_test: pytest.Item | None = None

#: The ``redis+postgres`` backend as a parameter: every test it reaches carries the ``servers`` mark.
REAL_BACKEND = pytest.param("redis+postgres", marks=pytest.mark.servers, id="redis+postgres")


def unmarked(item: pytest.Item | None) -> str | None:
    """Why ``item`` may not reach the servers (it lacks the ``servers`` mark), or ``None``."""
    if item is None or item.get_closest_marker("servers") is not None:
        return None
    return (f"{item.nodeid} reaches the Redis/PostgreSQL test servers but is not marked `servers`: "
            "mark it (or its parameter: tests.servers.REAL_BACKEND) so that -m 'not servers' leaves it out")


def require() -> ServerSettings:
    """The servers' settings; skips (or, with ``KERNELRANK_REQUIRE_SERVERS=1``, fails) the test
    when they are not configured, and fails a test that is not marked ``servers`` (even where
    they are not configured: the marks stay complete on every machine)."""
    if (why := unmarked(current_test)) is not None:
        pytest.fail(why)
    s = ServerSettings()
    if not (s.test_redis_url and s.test_database_url):
        reason = ("no Redis/PostgreSQL test servers: run `bash scripts/test-servers.sh start` as root and "
                  "source the file `bash scripts/test-servers.sh envfile` prints")
        if s.require_servers:
            pytest.fail(f"KERNELRANK_REQUIRE_SERVERS is set but {reason}")
        pytest.skip(reason)
    return s


@contextmanager
def fresh_backend() -> Iterator[Backend]:
    """A new, empty PostgreSQL database and Redis key prefix on the test servers (the database is
    dropped afterwards). Skips or fails as :func:`require` says when there are no servers."""
    s = require()
    with new_backend(s.test_database_url, s.test_redis_url) as backend:
        yield backend


@contextmanager
def new_backend(database_url: str, redis_url: str) -> Iterator[Backend]:
    """A new, empty database on the PostgreSQL server of ``database_url`` and a new Redis key prefix
    on ``redis_url``, dropped afterwards (no pytest: ``bench/latency.py`` uses it too)."""
    import psycopg
    from sqlalchemy.engine import make_url

    tag = uuid.uuid4().hex[:12]
    name = f"kr_test_{tag}"
    base = make_url(database_url)
    admin = base.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        url = base.set(database=name).render_as_string(hide_password=False)
        yield Backend("redis+postgres", url, redis_url, f"kr{tag}:")
    finally:
        _drop_database(admin, name)
        _drop_redis_keys(redis_url, f"kr{tag}:")


def _drop_database(admin: str, name: str, attempts: int = 20) -> None:
    """``DROP DATABASE ... WITH (FORCE)``, tried again for up to ~10 s while PostgreSQL refuses
    to end a session in it that the tests' role may not end (an autovacuum worker, on servers
    set up before ``scripts/test-servers.sh`` granted ``pg_signal_backend``) or one still starts."""
    import psycopg

    for attempt in range(attempts):
        try:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            return
        except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ObjectInUse):
            if attempt == attempts - 1:
                raise
            time.sleep(0.5)


def _drop_redis_keys(url: str, prefix: str) -> None:
    """Remove this test's own keys (its prefix only; other tests' keys are untouched)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=500))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def control_server(action: str) -> None:
    """``scripts/test-servers.sh <action>`` (``redis-kill``, ``redis-start``, ``pg-stop``, ...)."""
    s = require()
    env_dir = {"KERNELRANK_TEST_SERVERS_DIR": str(s.test_servers_dir)} if s.test_servers_dir else {}
    import os

    out = subprocess.run(["bash", str(SCRIPT), action], env={**os.environ, **env_dir}, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, f"test-servers.sh {action} failed: {out.stderr[-2000:]}"
