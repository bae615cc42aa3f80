"""``/api/v1/runners``: the runners seen through their heartbeats, and the queue depths (public)."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import select

from kernelrank.api.deps import SessionDep, SettingsDep
from kernelrank.api.presenters import runner_public
from kernelrank.api.schemas import RunnersPublic
from kernelrank.db.models import Runner
from kernelrank.services import queueing, runners, submissions

router = APIRouter(prefix="/api/v1/runners", tags=["runners"])


@router.get("", response_model=RunnersPublic, summary="Runners and queues")
def list_runners(session: SessionDep, settings: SettingsDep) -> RunnersPublic:
    """Every runner ever seen (``online`` when its last heartbeat is at most
    ``runner_online_seconds`` old and it has not said it stopped; ``info``: its device, versions
    and measured ``ceilings``), and the queued submissions of each device queue that is
    served now or has work waiting."""
    online = {r.name for r in runners.online(session, settings.runner_online_seconds)}
    rows = session.scalars(select(Runner).order_by(Runner.device, Runner.name))
    queues = {queue: 0 for queue in runners.served(session, settings.runner_online_seconds,
                                                   settings.runner_remember_hours).queues}
    queues.update(submissions.queued_counts(session))
    return RunnersPublic(
        runners=[runner_public(r, online=r.name in online) for r in rows],
        queues=dict(sorted(queues.items())),
        oldest_wait_s=dict(sorted(queueing.queue_waits(session).items())),
    )
