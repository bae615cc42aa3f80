"""Runners as seen through their heartbeats: which devices are served now."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from kernelrank.db.models import Runner, as_utc, utcnow


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


@dataclass(frozen=True)
class Served:
    """The device queues that take submissions: ``online`` (a runner online now) and ``waiting``
    (none online, the last seen at the time given, UTC, within the remembered hours: jobs wait)."""

    online: frozenset[str]
    waiting: dict[str, dt.datetime] = field(default_factory=dict)

    def takes(self, queue: str) -> bool:
        return queue in self.online or queue in self.waiting

    @property
    def queues(self) -> set[str]:
        return set(self.online) | set(self.waiting)


def served(session: Session, online_within_s: float, remember_hours: float) -> Served:
    """:class:`Served` now: queues with an online runner, and queues whose last runner's last
    heartbeat is at most ``remember_hours`` old."""
    now_online = frozenset(served_queues(session, online_within_s))
    since = utcnow() - dt.timedelta(hours=remember_hours)
    rows = session.execute(select(Runner.device, func.max(Runner.last_heartbeat))
                           .where(Runner.last_heartbeat >= since).group_by(Runner.device)).all()
    return Served(now_online, {q: as_utc(seen) for q, seen in rows if q not in now_online and seen is not None})
