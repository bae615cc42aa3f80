"""The go-ahead: may this runner run this job? Asked beside the judging, not before it.

A runner asks the control worker (``JOB_STARTED``, :func:`kernelrank.services.jobs.start_job`)
whether to run each job: a job that is finished or cancelled, runs on another live runner, or was
started ``job_max_starts`` times is not run. The question takes a round trip through the broker
and the database, so a job delivered for the first time starts at once while it is asked
(:class:`GoAhead`): where the answer is no, the judging is stopped (:class:`JobStopped`, raised
in the judging thread) and no result is reported; where it is yes (or no answer comes within
``settings.job_gate_seconds``), the results go out, never before the answer. A job delivered
again (the broker's redelivery after a lost runner, or the sweeper's requeue: ``job["redelivered"]``)
may be one that kills its runner, so it waits for its go-ahead before it starts, as every job once did.

Stopping: in the main thread (a Celery prefork pool process runs its task there) the answer
interrupts the judging at once through :data:`STOP_SIGNAL`, whose handler raises
:class:`JobStopped` while the judging is armed (:meth:`GoAhead.stoppable`); a blocking wait on a
child is cut short, the harness's ``finally`` blocks close its children. Elsewhere (a thread)
the judging is stopped at its next event (:meth:`GoAhead.check`, called from the harness's
``on_event``). Imports no database or web code.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

log = logging.getLogger("kernelrank.runner")

#: ``start(submission_id, runner[, attempt]) -> (run, reason)``: the question, asked once per job.
Ask = Callable[..., tuple[bool, str]]

#: The signal that stops an armed judging in the main thread (a real-time one: nothing else in the
#: runner uses it; the judge's children are other processes, its stack signal is SIGUSR2).
STOP_SIGNAL = signal.SIGRTMIN + 3
#: Seconds between two looks at a file-system result backend for the answer (Celery's default,
#: 0.5 s, would put up to half a second on every job's verdict); Redis pushes its answer.
ANSWER_POLL_S = 0.01


class JobStopped(BaseException):
    """The go-ahead said no while the job ran: its judging ends here and nothing is reported.

    A ``BaseException`` (as ``KeyboardInterrupt``), so that no ``except Exception`` in the
    judge turns it into a verdict; its ``finally`` blocks still close the job's processes."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def ask_to_start(submission_id: int, runner: str, attempt: int | None = None) -> tuple[bool, str]:
    """Send ``JOB_STARTED`` and wait up to ``settings.job_gate_seconds`` for the control worker's
    go-ahead (``kernelrank.services.jobs.start_job``): ``(run, reason)``. Without an answer in time
    (control worker down or busy) the job runs: its start is recorded when the message is read.
    """
    from celery.exceptions import TimeoutError as ResultTimeout

    from kernelrank.queue import CONTROL_QUEUE, JOB_STARTED, REPORT_RETRY_POLICY, get_celery
    from kernelrank.settings import get_settings

    wait_s = get_settings().job_gate_seconds
    args = [submission_id, runner] if attempt is None else [submission_id, runner, attempt]
    result = get_celery().send_task(JOB_STARTED, args=args, queue=CONTROL_QUEUE, retry=True,
                                    retry_policy=REPORT_RETRY_POLICY)
    try:
        answer = result.get(timeout=wait_s, interval=ANSWER_POLL_S, disable_sync_subtasks=False)
    except ResultTimeout:
        log.warning("job %s: no go-ahead from the control worker in %.0f s; running it", submission_id, wait_s)
        return True, ""
    except Exception as e:  # noqa: BLE001 - a failed answer must not lose the job
        log.warning("job %s: the go-ahead failed (%s); running it", submission_id, type(e).__name__)
        return True, ""
    finally:
        try:
            result.forget()
        except Exception:  # noqa: BLE001 - the answer expires anyway
            pass
    if isinstance(answer, dict):
        return bool(answer.get("run", True)), str(answer.get("reason", ""))
    return True, ""


_asker: tuple[int, ThreadPoolExecutor] | None = None
_asker_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    """This process's one go-ahead thread (made again in a forked pool process), so the result
    backend's connection it opens serves every job."""
    global _asker
    with _asker_lock:
        if _asker is None or _asker[0] != os.getpid():
            _asker = (os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernelrank-go-ahead"))
        return _asker[1]


# -- stopping the main thread's judging ------------------------------------------------------------
_armed: GoAhead | None = None  # the go-ahead whose refusal stops the main thread's judging now
_handler_installed = False


def _on_stop_signal(_signum: int, _frame: Any) -> None:
    gate = _armed
    if gate is not None and gate.refused():
        raise JobStopped(gate.reason)


def _install_handler() -> bool:
    """Install the :data:`STOP_SIGNAL` handler once in this process; ``False`` off the main thread."""
    global _handler_installed
    if threading.current_thread() is not threading.main_thread():
        return False
    if not _handler_installed:
        signal.signal(STOP_SIGNAL, _on_stop_signal)  # kept: a late signal must never meet the default action
        _handler_installed = True
    return True


class GoAhead:
    """One job's go-ahead, asked in the background from construction on.

    ``asked_at`` and ``answered_at`` are wall-clock times (``time.time()``, s); ``reason`` is the
    answer's reason once it said no."""

    def __init__(self, ask: Ask, submission_id: int, runner: str, attempt: int | None = None) -> None:
        self.reason = ""
        self.asked_at = time.time()
        self.answered_at: float | None = None
        self._answer: tuple[bool, str] | None = None
        self._lock = threading.Lock()
        self._judging: int | None = None  # the main thread's ident while its judging is armed
        args = (submission_id, runner) if attempt is None else (submission_id, runner, attempt)
        self._future: Future = _executor().submit(self._ask, ask, args)

    def _ask(self, ask: Ask, args: tuple[Any, ...]) -> tuple[bool, str]:
        try:
            run, reason = ask(*args)
        except Exception as e:  # noqa: BLE001 - as ask_to_start: a failed question must not lose the job
            log.warning("job %s: asking for the go-ahead failed (%s); running it", args[0], type(e).__name__)
            run, reason = True, ""
        with self._lock:
            self._answer, self.reason, self.answered_at = (bool(run), str(reason)), str(reason), time.time()
            if not run and self._judging is not None:
                signal.pthread_kill(self._judging, STOP_SIGNAL)
        return self._answer

    def answer(self) -> tuple[bool, str]:
        """``(run, reason)``, waiting for it (at most ``settings.job_gate_seconds`` with
        :func:`ask_to_start`, which then says run)."""
        return self._future.result()

    def refused(self) -> bool:
        """Whether the answer came and says not to run the job."""
        answer = self._answer
        return answer is not None and not answer[0]

    def check(self) -> None:
        """Raise :class:`JobStopped` where the answer came and says no (a judge's event calls it)."""
        if self.refused():
            raise JobStopped(self.reason)

    @contextlib.contextmanager
    def stoppable(self) -> Iterator[None]:
        """The judging inside is stopped as soon as the answer says no: :class:`JobStopped` is
        raised in it (at once in the main thread, else at its next :meth:`check`)."""
        global _armed
        self.check()
        main = _install_handler()
        if main:
            with self._lock:
                _armed, self._judging = self, threading.get_ident()
        try:
            self.check()  # answered between the first check and arming: no signal was sent
            yield
        finally:
            if main:
                with self._lock:  # from here on no signal is sent; one sent before finds _armed gone
                    self._judging = None
                _armed = None
