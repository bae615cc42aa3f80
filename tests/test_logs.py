"""Structured logs: JSON lines with ``submission_id`` on every line about a submission, in the
API, in Celery tasks and under ``bind_submission``; plain text on request; no token in them."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from kernelrank.settings import Settings


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_json_lines_carry_the_bound_submission(restore_root: None) -> None:
    from kernelrank.logs import bind_submission, configure_logging

    out = io.StringIO()
    configure_logging(Settings(log_format="json", log_level="INFO"), stream=out)
    log = logging.getLogger("kernelrank.test")
    log.info("before")
    with bind_submission(42):
        log.warning("judging %s", "softmax", extra={"device": "cpu"})
        log.debug("not at INFO")
    log.info("after", extra={"submission_id": 7})
    first, during, after = _lines(out)
    assert "submission_id" not in first
    assert during["submission_id"] == 42 and during["message"] == "judging softmax"
    assert during["level"] == "WARNING" and during["logger"] == "kernelrank.test" and during["device"] == "cpu"
    assert during["time"].endswith("+00:00")
    assert after["submission_id"] == 7


def test_configuring_twice_keeps_one_handler(restore_root: None) -> None:
    from kernelrank.logs import configure_logging

    out = io.StringIO()
    configure_logging(Settings(), stream=io.StringIO())
    configure_logging(Settings(), stream=out)
    logging.getLogger("kernelrank.test").info("once")
    assert [line["message"] for line in _lines(out)] == ["once"]


def test_text_format_names_the_submission(restore_root: None) -> None:
    from kernelrank.logs import bind_submission, configure_logging

    out = io.StringIO()
    configure_logging(Settings(log_format="text"), stream=out)
    with bind_submission(5):
        logging.getLogger("kernelrank.test").info("hello")
    line = out.getvalue().strip()
    assert line.endswith("INFO kernelrank.test [submission 5] hello")


def test_celery_tasks_bind_their_submission(restore_root: None) -> None:
    from celery import signals

    from kernelrank.logs import configure_logging, install_celery_hooks, submission_of_task

    assert submission_of_task([{"submission_id": 9, "source": "..."}]) == 9
    assert submission_of_task([12, "public", {}, "r"]) == 12
    assert submission_of_task(["runner-1", "cpu", {}]) is None and submission_of_task([]) is None
    out = io.StringIO()
    configure_logging(Settings(), stream=out)
    install_celery_hooks()
    install_celery_hooks()  # twice: still one receiver each
    log = logging.getLogger("kernelrank.runner")
    signals.task_prerun.send(sender=None, task_id="t-1", task=None, args=[{"submission_id": 9}], kwargs={})
    log.info("job: public run passed")
    signals.task_postrun.send(sender=None, task_id="t-1", task=None, args=[], kwargs={})
    log.info("idle")
    during, after = _lines(out)
    assert during["submission_id"] == 9 and "submission_id" not in after


def test_json_lines_leave_out_unknown_extras(restore_root: None) -> None:
    """Celery attaches a task's arguments (submitted code, the secret seed) as ``data``: never logged."""
    from kernelrank.logs import configure_logging

    out = io.StringIO()
    configure_logging(Settings(), stream=out)
    logging.getLogger("celery.worker.strategy").info(
        "Task %s received", "kernelrank.evaluate",
        extra={"data": {"args": "[{'source': 'SECRET-CODE', 'secret_seed': 987654321}]"}, "submission_id": 3})
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("kernelrank.runner").exception("judge failed")
    received, failed = _lines(out)
    assert received == {"time": received["time"], "level": "INFO", "logger": "celery.worker.strategy",
                        "message": "Task kernelrank.evaluate received", "submission_id": 3}
    assert "SECRET-CODE" not in out.getvalue() and "987654321" not in out.getvalue()
    assert "ValueError: boom" in failed["exc_info"]

