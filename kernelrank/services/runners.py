"""Runners as seen through their heartbeats: which devices are served now."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelrank.db.models import Runner, utcnow


def heartbeat(session: Session, name: str, device_queue: str, info: dict[str, Any], version: str, jobs_done: int = 0,
              online: bool = True) -> None:
    """Record that runner ``name`` serving queue ``device_queue`` is alive, or (``online`` false: its
    last message, sent when it shuts down) that it stopped: offline from now on. A stop message
    without device information keeps the last one."""
    row = session.scalar(select(Runner).where(Runner.name == name))
    if row is None:
        row = Runner(name=name[:255], device=device_queue)
        session.add(row)
    row.device, row.version, row.jobs_done = device_queue, version[:32], jobs_done
    if info or online:
        row.info = info
    row.last_heartbeat = utcnow()
    row.stopped_at = None if online else row.last_heartbeat


def online(session: Session, within_s: float) -> list[Runner]:
    """Runners whose last heartbeat is at most ``within_s`` seconds old and that have not said
    they stopped."""
    since = utcnow() - dt.timedelta(seconds=within_s)
    return list(session.scalars(select(Runner).where(Runner.last_heartbeat >= since, Runner.stopped_at.is_(None))
                                .order_by(Runner.device, Runner.name)))


def ceilings_of(session: Session, name: str | None) -> dict[str, Any] | None:
    """The ceilings runner ``name`` measured when it started (``info["ceilings"]`` of its
    heartbeat, :mod:`kernelrank.runner.host.ceilings`), or ``None`` (unknown runner, none measured)."""
    if not name:
        return None
    info = session.scalar(select(Runner.info).where(Runner.name == name))
    ceilings = (info or {}).get("ceilings") if isinstance(info, dict) else None
    return ceilings if isinstance(ceilings, dict) else None


def served_queues(session: Session, within_s: float) -> set[str]:
    """Device queues with at least one online runner."""
    return {r.device for r in online(session, within_s)}
