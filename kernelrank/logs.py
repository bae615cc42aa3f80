"""Logging for every KernelRank process, configured here and nowhere else.

Lines are JSON objects, one per line (``settings.log_format = "json"``, python-json-logger), with
``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message`` and any ``extra`` fields; or plain
text (``"text"``). Every line written while a submission is being handled carries its
``submission_id``:

- in the API, the routes pass ``extra={"submission_id": ...}`` and the request log line of
  ``/api/v1/submissions/{submission_id}...`` carries it (:mod:`kernelrank.metrics`);
- in Celery workers (control worker and runners), :func:`install_celery_hooks` binds the id of
  the task's submission (its first argument: an id, or a job message with ``submission_id``) for
  the task's duration, so every line the task logs carries it;
- anywhere else, ``with bind_submission(id):``.

Log lines never carry secrets: no tokens, URLs with passwords, secret seeds or submitted code.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import logging
import sys
from collections.abc import Iterator
from typing import Any, TextIO

_submission_id: contextvars.ContextVar[int | None] = contextvars.ContextVar("kernelrank_submission_id", default=None)
#: Marks the handler installed by :func:`configure_logging` (replaced, never duplicated, on a second call).
_HANDLER_MARK = "_kernelrank_handler"


def current_submission() -> int | None:
    """The submission id bound in this context, if any."""
    return _submission_id.get()


@contextlib.contextmanager
def bind_submission(submission_id: int | None) -> Iterator[None]:
    """Within the block, every log line carries ``submission_id`` (unless a line sets its own)."""
    token = _submission_id.set(None if submission_id is None else int(submission_id))
    try:
        yield
    finally:
        _submission_id.reset(token)


class SubmissionFilter(logging.Filter):
    """Adds the bound ``submission_id`` to records that do not carry one."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "submission_id", None) is None:
            bound = _submission_id.get()
            if bound is not None:
                record.submission_id = bound
        return True


class _TextFormatter(logging.Formatter):
    """``time level logger [submission N] message``."""

    def format(self, record: logging.LogRecord) -> str:
        sub = getattr(record, "submission_id", None)
        record.submission_tag = f" [submission {sub}]" if sub is not None else ""
        return super().format(record)


def _utc_time(_formatter: Any, record: logging.LogRecord, _datefmt: str | None = None) -> str:
    return dt.datetime.fromtimestamp(record.created, dt.timezone.utc).isoformat(timespec="milliseconds")


#: The ``extra`` fields a JSON line may carry. Anything else a library attaches is left out: Celery,
#: for one, attaches each task's arguments (``data``), which hold submitted code and secret seeds.
EXTRA_FIELDS = frozenset({"submission_id", "user", "problem", "device", "mode", "kind", "runner", "method", "route",
                          "status", "duration_ms", "exc_info", "stack_info", "taskName"})


def _json_formatter() -> logging.Formatter:
    from pythonjsonlogger.json import JsonFormatter

    class _Formatter(JsonFormatter):
        def add_fields(self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]) -> None:
            super().add_fields(log_data, record, message_dict)
            for key in [k for k in log_data if k not in _BASE_FIELDS and k not in EXTRA_FIELDS]:
                del log_data[key]
            log_data.pop("taskName", None)

    return _Formatter("{asctime}{levelname}{name}{message}", style="{",
                      rename_fields={"asctime": "time", "levelname": "level", "name": "logger"})


_BASE_FIELDS = frozenset({"time", "level", "logger", "message"})


def make_formatter(fmt: str) -> logging.Formatter:
    """The formatter of ``fmt``: ``json`` (one JSON object per line) or ``text``.

    Raises:
        ValueError: another format.
    """
    if fmt == "json":
        formatter: logging.Formatter = _json_formatter()
    elif fmt == "text":
        formatter = _TextFormatter("%(asctime)s %(levelname)s %(name)s%(submission_tag)s %(message)s")
    else:
        raise ValueError(f"unknown log format {fmt!r}; json or text")
    formatter.formatTime = _utc_time.__get__(formatter)  # type: ignore[method-assign]
    return formatter


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at each line (it can be replaced after configuration,
    e.g. by a test runner's capture)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


def configure_logging(settings: Any = None, stream: TextIO | None = None) -> logging.Handler:
    """Send the root logger's lines to ``stream`` (default stderr) in ``settings.log_format`` at
    ``settings.log_level``; returns the handler. Calling it again replaces its own handler (other
    handlers, e.g. pytest's, are left alone).
    """
    if settings is None:
        from kernelrank.settings import get_settings

        settings = get_settings()
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    handler = logging.StreamHandler(stream) if stream is not None else _StderrHandler()
    setattr(handler, _HANDLER_MARK, True)
    handler.setFormatter(make_formatter(settings.log_format))
    handler.addFilter(SubmissionFilter())
    root.addHandler(handler)
    root.setLevel(settings.log_level)
    return handler


def submission_of_task(args: Any) -> int | None:
    """The submission a Celery task is about: its first argument, an id (``job_started``,
    ``record_result``) or a job message with ``submission_id`` (``evaluate``)."""
    if not args:
        return None
    first = args[0]
    if isinstance(first, dict):
        first = first.get("submission_id")
    if isinstance(first, bool):
        return None
    if isinstance(first, int):
        return first
    if isinstance(first, str) and first.isdigit():
        return int(first)
    return None


_task_tokens: dict[str, contextvars.Token] = {}


def _on_task_prerun(task_id: str | None = None, args: Any = None, **_: Any) -> None:
    sub = submission_of_task(args)
    if sub is not None and task_id is not None:
        _task_tokens[task_id] = _submission_id.set(sub)


def _on_task_postrun(task_id: str | None = None, **_: Any) -> None:
    token = _task_tokens.pop(task_id, None) if task_id is not None else None
    if token is not None:
        _submission_id.reset(token)


def _on_setup_logging(**_: Any) -> None:
    configure_logging()


def install_celery_hooks() -> None:
    """In a Celery process: our logging instead of Celery's (``setup_logging``), and the task's
    submission id bound while it runs (``task_prerun`` / ``task_postrun``). Safe to call twice."""
    from celery import signals

    signals.setup_logging.connect(_on_setup_logging, weak=False, dispatch_uid="kernelrank.logs.setup")
    signals.task_prerun.connect(_on_task_prerun, weak=False, dispatch_uid="kernelrank.logs.prerun")
    signals.task_postrun.connect(_on_task_postrun, weak=False, dispatch_uid="kernelrank.logs.postrun")
