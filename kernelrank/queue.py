"""The one Celery app, its queues and task names: declared here and nowhere else.

Queues: one per device type (``cpu``, and per GPU model, e.g. ``cuda-h100``) consumed by runners,
and ``control`` consumed on the server side. Work is sent by task *name*, so the API never imports
the runner's code (nor torch). Long jobs are delivered reliably: late acknowledgement, requeue
when a worker dies, prefetch of one, a broker visibility timeout above the longest job, and per-job
time limits from the problem's budgets.

This module imports no torch and no database code.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from celery import Celery

from kernelrank.settings import Settings, get_settings

CONTROL_QUEUE = "control"

#: Task names (the contract between server and runners).
EVALUATE = "kernelrank.evaluate"
JOB_STARTED = "kernelrank.job_started"
RECORD_RESULT = "kernelrank.record_result"
HEARTBEAT = "kernelrank.heartbeat"

#: Broker visibility timeout (s): above the longest job, or Redis redelivers running jobs.
VISIBILITY_TIMEOUT = 6 * 3600
_QUEUE_NAME = re.compile(r"^(cpu|cuda-[a-z0-9-]{1,48})$")


def device_class(queue: str) -> str:
    """The harness device class of a runner queue: ``cpu`` -> ``cpu``, ``cuda-*`` -> ``cuda``.

    Raises:
        ValueError: not a device queue name.
    """
    if not _QUEUE_NAME.match(queue):
        raise ValueError(f"{queue!r} is not a device queue (cpu or cuda-<model>)")
    return "cpu" if queue == "cpu" else "cuda"


def gpu_queue_name(gpu_name: str) -> str:
    """Queue of a GPU model: ``"NVIDIA H100 80GB HBM3"`` -> ``"cuda-h100"``; unknown models get a slug."""
    lowered = gpu_name.lower()
    m = re.search(r"\b([abhlt]\d{1,3}|b\d{3}|gh\d{3}|rtx ?\d{4}|mi\d{3}x?|v100|p100)\b", lowered)
    slug = m.group(1).replace(" ", "") if m else re.sub(r"[^a-z0-9]+", "-", lowered.removeprefix("nvidia ")).strip("-")
    return f"cuda-{slug[:48]}"


def job_time_limit(budgets: dict[str, float], mode: str) -> float:
    """Hard time limit (s) for one job: load and mode budgets for each run (two in leaderboard
    mode: public and secret), the reference timing once more, and a minute for clean-up."""
    runs = 2 if mode == "leaderboard" else 1
    per_run = budgets.get("compile", 300) + budgets.get(mode, 600)
    reference = budgets.get(mode, 600) if mode in ("benchmark", "leaderboard") else 0
    return runs * per_run + reference + 60


def celery_config(settings: Settings) -> dict[str, Any]:
    """Celery settings for the configured broker (filesystem transport by default)."""
    url = settings.resolved_broker_url()
    transport: dict[str, Any] = {"visibility_timeout": VISIBILITY_TIMEOUT}
    if url.startswith("filesystem"):
        folder = settings.broker_folder
        for sub in ("queue", "processed", "control"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        transport.update({
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "processed_folder": str(folder / "processed"),
            # exchange bindings: kombu's default is a relative "control" folder in the working
            # directory, which differs between processes (serve, its children, tests)
            "control_folder": str(folder / "control"),
            "store_processed": False,
            "polling_interval": 0.1,
        })
    return {
        "broker_url": url,
        # kombu's filesystem transport with atomic publish and claim (see kernelrank.fsbroker)
        "broker_transport": "kernelrank.fsbroker:Transport" if url.startswith("filesystem") else None,
        "broker_transport_options": transport,
        "broker_connection_retry_on_startup": True,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_default_queue": CONTROL_QUEUE,
        "task_serializer": "json",
        "accept_content": ["json"],
        "result_backend": None,
        "task_ignore_result": True,
        "worker_hijack_root_logger": False,
        "worker_send_task_events": False,
    }


def make_celery(settings: Settings | None = None) -> Celery:
    """A Celery app configured from ``settings``."""
    from kernelrank.logs import install_celery_hooks

    app = Celery("kernelrank")
    app.conf.update(celery_config(settings or get_settings()))
    install_celery_hooks()  # JSON log lines, each carrying the task's submission_id
    return app


@lru_cache
def get_celery() -> Celery:
    """The process's Celery app (built on first use)."""
    return make_celery()


def send(task: str, args: list[Any], queue: str, **options: Any) -> None:
    """Send a task by name to a queue."""
    get_celery().send_task(task, args=args, queue=queue, **options)
