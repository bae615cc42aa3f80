"""``/api/v1/runners``: the runners seen through their heartbeats, and the queue depths (public)."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import select

from kernelrank.api.deps import SessionDep, SettingsDep
from kernelrank.api.schemas import RunnerPublic, RunnersPublic
from kernelrank.db.models import Runner
from kernelrank.services import runners, submissions

router = APIRouter(prefix="/api/v1/runners", tags=["runners"])


@router.get("", response_model=RunnersPublic, summary="Runners and queues")
def list_runners(session: SessionDep, settings: SettingsDep) -> RunnersPublic:
    """Every runner ever seen (``online`` when its last heartbeat is at most
    ``runner_online_seconds`` old and it has not said it stopped; ``info``: its device, versions
    and measured ``ceilings``), and the queued submissions of each device queue that is
    served now or has work waiting."""
    online = {r.name for r in runners.online(session, settings.runner_online_seconds)}
    rows = session.scalars(select(Runner).order_by(Runner.device, Runner.name))
    queues = {device: 0 for device in runners.served_devices(session, settings.runner_online_seconds)}
    queues.update(submissions.queued_counts(session))
    return RunnersPublic(
        runners=[RunnerPublic(name=r.name, device=r.device, info=r.info or {}, version=r.version,
                              last_heartbeat=r.last_heartbeat, jobs_done=r.jobs_done, online=r.name in online,
                              stopped_at=r.stopped_at)
                 for r in rows],
        queues=dict(sorted(queues.items())),
    )
