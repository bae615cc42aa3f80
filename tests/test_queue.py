"""The Celery configuration's delivery guarantees, and :func:`kernelrank.queue.pending_jobs` (what
the sweeper asks before requeueing a ``queued`` job) on the filesystem broker and on Redis."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelrank.settings import Settings
from tests.servers import Backend, fresh_backend


def test_config_acks_late_with_the_visibility_timeout_of_the_settings(tmp_path: Path) -> None:
    from kernelrank.queue import celery_config

    conf = celery_config(Settings(data_dir=tmp_path, broker_url="redis://127.0.0.1:1/0",
                                  broker_visibility_timeout=42, broker_key_prefix="kr:"))
    assert conf["task_acks_late"] and conf["task_reject_on_worker_lost"] and conf["worker_prefetch_multiplier"] == 1
    transport = conf["broker_transport_options"]
    assert transport["visibility_timeout"] == 42 and transport["global_keyprefix"] == "kr:"
    assert transport["unacked_restore_interval"] <= 42 / 4
    assert conf["result_backend"] == "redis://127.0.0.1:1/0"
    embedded = celery_config(Settings(data_dir=tmp_path))
    assert embedded["result_backend"].startswith("file://") and "global_keyprefix" not in embedded["broker_transport_options"]


@pytest.fixture(params=["embedded", pytest.param("redis", marks=pytest.mark.servers)])
def broker(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    """The process's Celery app on a fresh filesystem broker or Redis key prefix."""
    from kernelrank.queue import get_celery
    from kernelrank.settings import get_settings

    def use(backend: Backend) -> None:
        monkeypatch.setenv("KERNELRANK_DATA_DIR", str(tmp_path))
        for k, v in backend.env().items():
            monkeypatch.setenv(k, v)
        get_settings.cache_clear()
        get_celery.cache_clear()

    try:
        if request.param == "embedded":
            monkeypatch.delenv("KERNELRANK_BROKER_URL", raising=False)
            use(Backend("embedded"))
            yield Backend("embedded")
        else:
            with fresh_backend() as backend:
                use(backend)
                yield backend
    finally:
        get_celery().close()
        get_settings.cache_clear()
        get_celery.cache_clear()


def test_pending_jobs_lists_the_jobs_waiting_in_a_queue(broker: Backend) -> None:
    from kernelrank.queue import CONTROL_QUEUE, JOB_STARTED, pending_jobs, send, send_job

    assert pending_jobs("cpu") == set()
    for sid in (3, 5):
        send_job({"submission_id": sid, "source": "x" * 5000}, "cpu", 100.0)
    send_job({"submission_id": 9}, "cuda-h100", 100.0)
    send(JOB_STARTED, [4, "r"], queue=CONTROL_QUEUE)
    assert pending_jobs("cpu") == {3, 5}
    assert pending_jobs("cuda-h100") == {9}
    assert pending_jobs(CONTROL_QUEUE) == set()  # not evaluation jobs


# (the filesystem broker deletes a message when a runner claims it: the job's state tells instead)
@pytest.mark.servers
@pytest.mark.parametrize("broker", ["redis"], indirect=True)
def test_a_delivered_unacknowledged_job_is_still_pending_on_redis(broker: Backend) -> None:
    from kernelrank.queue import get_celery, pending_jobs, send_job

    send_job({"submission_id": 11}, "cpu", 100.0)
    with get_celery().connection_for_read() as conn:
        queue = conn.SimpleQueue("cpu")
        message = queue.get(timeout=10)  # delivered, not acknowledged: as to a runner mid-job
        assert pending_jobs("cpu") == {11}
        message.ack()
        assert pending_jobs("cpu") == set()
        queue.close()
