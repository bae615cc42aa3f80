"""Runners as seen through their heartbeats: which devices are served now."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelrank.db.models import Runner, utcnow


def heartbeat(session: Session, name: str, device: str, info: dict[str, Any], version: str, jobs_done: int = 0) -> None:
    """Record that runner ``name`` serving queue ``device`` is alive."""
    row = session.scalar(select(Runner).where(Runner.name == name))
    if row is None:
        row = Runner(name=name[:255], device=device)
        session.add(row)
    row.device, row.info, row.version, row.jobs_done = device, info, version[:32], jobs_done
    row.last_heartbeat = utcnow()


def online(session: Session, within_s: float) -> list[Runner]:
    """Runners whose last heartbeat is at most ``within_s`` seconds old."""
    since = utcnow() - dt.timedelta(seconds=within_s)
    return list(session.scalars(select(Runner).where(Runner.last_heartbeat >= since).order_by(Runner.device, Runner.name)))


def served_devices(session: Session, within_s: float) -> set[str]:
    """Device queues with at least one online runner."""
    return {r.device for r in online(session, within_s)}
