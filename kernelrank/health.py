"""Readiness checks of the service's dependencies: the database and the Celery broker.

Each check returns a :class:`Check`; a failure says only the error's type (``OperationalError``,
``ConnectionRefusedError``...), never its text, which can hold the database or broker URL and so a
password.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

#: Seconds a broker connection attempt may take.
BROKER_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Check:
    """One dependency's state: ``ok``, or why not (``detail``)."""

    name: str
    ok: bool
    detail: str = "ok"


def check_database(session_factory: Callable[[], Any]) -> Check:
    """``SELECT 1`` in a new session from ``session_factory`` (closed afterwards)."""
    from sqlalchemy import text

    try:
        session = session_factory()
        try:
            session.execute(text("SELECT 1")).scalar_one()
        finally:
            session.close()
    except Exception as e:  # noqa: BLE001 - any failure means not ready
        return Check("database", False, f"unavailable ({type(e).__name__})")
    return Check("database", True)


def check_broker(settings: Any, timeout_s: float = BROKER_TIMEOUT_S) -> Check:
    """The embedded filesystem broker: its message folders exist (or can be made) and are
    writable. Any other broker (Redis, AMQP): a connection opens within ``timeout_s``."""
    url = settings.resolved_broker_url()
    if url.startswith("filesystem"):
        return _check_folders(settings.broker_folder)
    from kombu import Connection

    try:
        with Connection(url, connect_timeout=timeout_s) as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout_s)
            conn.default_channel  # noqa: B018 - opens a channel: the transport really answers
    except Exception as e:  # noqa: BLE001 - any failure means not ready
        return Check("broker", False, f"unreachable ({type(e).__name__})")
    return Check("broker", True)


def _check_folders(folder) -> Check:
    for sub in ("queue", "processed", "control"):
        path = folder / sub
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            return Check("broker", False, f"message folder {sub!r} cannot be created ({type(e).__name__})")
        if not os.access(path, os.W_OK | os.X_OK):
            return Check("broker", False, f"message folder {sub!r} is not writable")
    return Check("broker", True)
