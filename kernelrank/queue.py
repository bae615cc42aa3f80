"""The one Celery app, its queues and task names: declared here and nowhere else.

Queues: one per device type (``cpu``, and per GPU model, e.g. ``cuda-h100``) consumed by runners,
and ``control`` consumed on the server side. Work is sent by task *name*, so the API never imports
the runner's code (nor torch). Long jobs are delivered reliably: late acknowledgement, requeue
when a worker dies, prefetch of one, a broker visibility timeout above the longest job, and per-job
time limits from the problem's budgets.

This module imports no torch and no database code.
"""

from __future__ import annotations

import base64
import json
import os
from functools import lru_cache
from typing import Any

from celery import Celery

from kernelrank.settings import Settings, get_settings
from kernelrank.vocab import TIMED_MODES, run_kinds

CONTROL_QUEUE = "control"

#: Task names (the contract between server and runners).
EVALUATE = "kernelrank.evaluate"
JOB_STARTED = "kernelrank.job_started"
RECORD_RESULT = "kernelrank.record_result"
HEARTBEAT = "kernelrank.heartbeat"

#: Seconds between a job's hard and soft time limits (the runner's clean-up after the soft one).
SOFT_LIMIT_MARGIN_S = 30.0
#: How a runner retries sending a report while the broker is away (restarting): about 5 minutes.
REPORT_RETRY_POLICY = {"max_retries": 70, "interval_start": 0, "interval_step": 1, "interval_max": 5}
#: Seconds a runner's go-ahead answer (``JOB_STARTED``'s result) is kept in the result backend.
RESULT_EXPIRES_S = 3600


def job_time_limit(budgets: dict[str, float], mode: str) -> float:
    """Hard time limit (s) for one job: load and mode budgets for each run (two in leaderboard
    mode: public and secret), the reference timing once more, and a minute for clean-up."""
    runs = len(run_kinds(mode))
    per_run = budgets.get("compile", 300) + budgets.get(mode, 600)
    reference = budgets.get(mode, 600) if mode in TIMED_MODES else 0
    return runs * per_run + reference + 60


def celery_config(settings: Settings) -> dict[str, Any]:
    """Celery settings for the configured broker (filesystem transport by default)."""
    url = settings.resolved_broker_url()
    timeout = settings.broker_visibility_timeout
    transport: dict[str, Any] = {
        # Redis: an unacknowledged job (its runner died) goes back to its queue after this long;
        # every consumer looks for such jobs every ``unacked_restore_interval`` seconds.
        "visibility_timeout": timeout,
        "unacked_restore_interval": max(1.0, min(10.0, timeout / 4)),
        "unacked_restore_throttle": 1,
    }
    if settings.broker_key_prefix:
        transport["global_keyprefix"] = settings.broker_key_prefix
    result_backend = url
    if url.startswith("filesystem"):
        folder = settings.broker_folder
        result_backend = f"file://{folder / 'results'}"
        for sub in ("queue", "processed", "control", "results"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        transport.update({
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "processed_folder": str(folder / "processed"),
            # exchange bindings: kombu's default is a relative "control" folder in the working
            # directory, which differs between processes (serve, its children, tests)
            "control_folder": str(folder / "control"),
            "store_processed": False,
            # only where inotify is missing: consumers wake on new messages (kernelrank.fsbroker)
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
        # only JOB_STARTED keeps a result: the runner's go-ahead (see kernelrank.control)
        "result_backend": result_backend,
        "result_expires": RESULT_EXPIRES_S,
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


def send_job(job: dict[str, Any], queue: str, time_limit: float) -> None:
    """Send one evaluation job (``services.submissions.job_message``) to a device queue, with its
    hard time limit (s) and a soft one :data:`SOFT_LIMIT_MARGIN_S` earlier.

    Raises:
        Exception: the broker's own errors (they vary by transport) when it refuses the message.
    """
    send(EVALUATE, [job], queue=queue, time_limit=time_limit,
         soft_time_limit=max(time_limit - SOFT_LIMIT_MARGIN_S, 1.0))


def pending_jobs(queue: str) -> set[int] | None:
    """Submission ids with an evaluation job waiting in ``queue`` or delivered and not yet
    acknowledged; ``None`` when this broker cannot be looked into.

    Reads the Redis lists and unacknowledged-message hash of kombu's Redis transport, or the
    message files of the embedded filesystem broker (whose claimed messages are gone: a job a
    runner took is not pending there).
    """
    app = get_celery()
    url = str(app.conf.broker_url or "")
    raw: list[bytes | str] = []
    if url.startswith("filesystem"):
        folder = app.conf.broker_transport_options["data_folder_in"]
        suffix = f".{queue}.msg"
        for name in os.listdir(folder):
            if name.endswith(suffix):
                try:
                    with open(os.path.join(folder, name), "rb") as f:
                        raw.append(f.read())
                except OSError:  # claimed meanwhile
                    continue
    elif url.startswith(("redis://", "rediss://")):
        with app.connection_for_read() as conn:
            channel = conn.default_channel
            client = channel.client
            prefix = channel.global_keyprefix  # LRANGE and HVALS are not among kombu's prefixed commands
            keys = [channel._q_for_pri(queue, pri) for pri in channel.priority_steps]
            for key in dict.fromkeys(keys):
                raw.extend(client.lrange(prefix + key, 0, -1))
            for value in client.hvals(prefix + channel.unacked_key):
                try:
                    message, _exchange, routing_key = json.loads(value)
                except (ValueError, TypeError):
                    continue
                if routing_key == queue:
                    raw.append(json.dumps(message))
    else:
        return None
    found: set[int] = set()
    for item in raw:
        sid = _job_submission(item)
        if sid is not None:
            found.add(sid)
    return found


def _job_submission(raw: bytes | str) -> int | None:
    """The submission id of an evaluation job message (kombu's JSON envelope), else ``None``."""
    try:
        message = json.loads(raw)
        if message.get("headers", {}).get("task") != EVALUATE:
            return None
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
        return int(args[0]["submission_id"])
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None
