"""The runner's Celery task: judge one job with the harness and report back by task name.

A runner is a Celery worker consuming one device queue (``cpu``, ``cuda-<model>``; ``kernelrank runner``). For each job (``services.submissions.job_message``) it asks ``JOB_STARTED`` for a go-ahead
beside the judging (:mod:`kernelrank.runner.goahead`: a job that is finished, cancelled, running
elsewhere or out of starts is stopped unreported; a job delivered again waits for it), runs the public
run and, in leaderboard mode, the secret-seeded run, and sends one ``RECORD_RESULT`` per run to the
``control`` queue, each result with the wall-clock times of the job's hops (``hops``). A heartbeat thread in the worker's main process sends ``HEARTBEAT`` every
``settings.heartbeat_seconds`` (with the device's ceilings, probed before the first job and while
idle: :mod:`kernelrank.runner.host.ceiling_probes`), and a last one, saying it stops, when the worker shuts down.

Every job ends in recorded results (a judge error an ``error`` result, the soft time limit a
``timeout`` result). No database code here. Submitted code runs isolated as ``settings.runner_isolation``
says; a leaderboard job is ``rejected`` unrun where the network cannot be isolated (unless
``settings.runner_allow_unisolated_network``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from celery import signals
from celery.exceptions import SoftTimeLimitExceeded

from kernelrank import __version__
from kernelrank.queue import (CONTROL_QUEUE, EVALUATE, HEARTBEAT, JOB_STARTED, RECORD_RESULT, REPORT_RETRY_POLICY,
                              get_celery, send)
from kernelrank.runner.goahead import GoAhead, JobStopped, ask_to_start
from kernelrank.runner import warm_start
from kernelrank.runner.containment.buildcache import BuildCache
from kernelrank.runner.host import ceiling_probes
from kernelrank.runner.results import error_result, job_problem_name, json_result
from kernelrank.settings import get_settings
from kernelrank.vocab import DeviceClass, Mode, RunKind, Verdict, device_class

log = logging.getLogger("kernelrank.runner")

#: ``celery -A kernelrank.runner.worker`` finds the app here.
app = get_celery()

#: Message of the secret run when the public run did not pass (it is not run).
SKIPPED_SECRET = "not run: the public-seed run did not pass"


@dataclass(frozen=True)
class RunnerIdentity:
    """Who this runner is: ``name`` is ``host:pid:queue`` with the pid of the worker's main process."""

    name: str
    queue: str


_identity: RunnerIdentity | None = None
#: Seconds the runner's "ready" waits for its pool process's warm start (:mod:`~kernelrank.runner.warm_start`).
WARM_START_TIMEOUT_S = 120.0
#: The start-up self-test's summary (:func:`self_test_gate`), shown in every heartbeat.
_self_test: dict[str, Any] | None = None
#: Seconds a starting runner's self-test may take before it counts as failed (the quick one takes
#: about 2 minutes on a 2-core CPU host: bench/selftest_times.py).
SELF_TEST_TIMEOUT_S = 1200.0
#: The starting heartbeat's information (:func:`announce_start`), which the self-test's progress updates.
_starting: dict[str, Any] | None = None
#: What locking the GPU's clocks gave (:func:`lock_gpu_clocks`), shown with its facts.
_clock_lock: dict[str, Any] = {}
#: The device's ceilings (:func:`measured_ceilings`), and whether this process probed them yet.
_ceilings: dict[str, Any] | None = None
_ceilings_tried = False
#: Whether this runner can make job cgroups (:func:`check_containment`), shown in every heartbeat;
#: ``None`` until checked. Set in the main process before the pool forks, so every job sees it.
_containment: dict[str, Any] | None = None
#: Jobs finished by this worker, shared by the main process and its forked pool processes.
_jobs_done: Any = None
_heartbeat_stop = threading.Event()


def runner_name(queue: str, pid: int | None = None) -> str:
    """``f"{hostname}:{pid}:{queue}"``."""
    return f"{socket.gethostname()}:{pid or os.getpid()}:{queue}"


def configure(queue: str) -> RunnerIdentity:
    """Fix this process's runner identity for ``queue`` (call in the worker's main process,
    before the pool forks, so every pool process reports under the same name).

    Raises:
        ValueError: ``queue`` is not a device queue.
    """
    global _identity, _jobs_done
    device_class(queue)
    _identity = RunnerIdentity(runner_name(queue), queue)
    if _jobs_done is None:
        _jobs_done = multiprocessing.Value("q", 0)
    warm_start.prepare()
    return _identity


def identity() -> RunnerIdentity | None:
    """The identity set by :func:`configure` (``None`` outside a configured runner)."""
    return _identity


def jobs_done() -> int:
    """Jobs finished since this worker started."""
    return int(_jobs_done.value) if _jobs_done is not None else 0


def _count_job() -> None:
    if _jobs_done is not None:
        with _jobs_done.get_lock():
            _jobs_done.value += 1


def check_containment() -> dict[str, Any]:
    """Whether this runner can make job cgroups (``{"job_cgroups": bool, "problem": str}``), found
    once at start-up (:func:`~kernelrank.runner.containment.cgroups.containment_problem`), the
    problem and its fix logged once; kept for every heartbeat (``info["containment"]``)."""
    global _containment
    from kernelrank.runner.containment import cgroups

    problem = cgroups.containment_problem()
    _containment = {"job_cgroups": problem is None, **({"problem": problem} if problem else {})}
    if problem:
        log.error("%s", problem)
    return _containment


def containment_refusal(mode: str, allow_uncontained: bool) -> str | None:
    """Why a job of ``mode`` is rejected unrun where :func:`check_containment` found no job cgroups,
    else ``None``: leaderboard jobs only, unless the operator allows uncontained runs
    (``settings.runner_allow_unisolated_network``; docs/security.md)."""
    if mode != Mode.leaderboard or allow_uncontained or not _containment or _containment.get("job_cgroups"):
        return None
    return ("rejected: this runner cannot contain submitted code, which leaderboard jobs require; the submission "
            f"was not run. Runner: {_containment.get('problem')}")


# -- the task ------------------------------------------------------------------------------------
@app.task(name=EVALUATE, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def evaluate_job(self: Any, job: dict[str, Any]) -> None:
    """Judge one job and report it: ``JOB_STARTED``, then ``RECORD_RESULT`` per run."""
    ident = _identity or RunnerIdentity(runner_name(str(job.get("device", "cpu"))), str(job.get("device", "cpu")))
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    try:
        with ceiling_probes.busy(ident.queue):  # no ceilings probe runs beside a job
            run_job(job, ident.name, redelivered=redelivered)
    finally:
        _count_job()


def run_job(job: dict[str, Any], runner: str, report: Any = None, start: Any = None,
            redelivered: bool = False) -> list[dict[str, Any]]:
    """Run every run of ``job`` and report each result; returns the results sent (none when the
    go-ahead said no).

    ``start(submission_id, runner[, attempt]) -> (run, reason)`` asks whether to run the job at all
    (default: :func:`~kernelrank.runner.goahead.ask_to_start`; with a custom ``report`` and no
    ``start``, the start is only reported). It is asked beside the judging, which stops where the
    answer is no; a job ``redelivered`` by the broker, or resent by the sweeper
    (``job["redelivered"]``), waits for the answer before it starts. No result is reported before
    the answer. ``report(task_name, args)`` sends a control message (default: to the ``control``
    queue). Never raises for a bad job or a judge failure: those become ``error`` results.
    """
    received = time.time()
    if start is None and report is not None:
        def start(sid: int, name: str, attempt: int | None = None) -> tuple[bool, str]:
            report(JOB_STARTED, [sid, name] if attempt is None else [sid, name, attempt])
            return True, ""
    report = _send_control if report is None else report
    submission_id = int(job["submission_id"])
    kinds = list(job.get("runs") or [RunKind.public.value])
    attempt = job.get("attempt")
    gate = GoAhead(ask_to_start if start is None else start, submission_id, runner, attempt)
    results: list[dict[str, Any]] = []
    builds = BuildCache(get_settings().scratch_dir)  # the public run's C++ build, for the secret run
    try:
        if redelivered or job.get("redelivered"):  # it may be one that kills its runner: asked first
            gate.answer()
        log.info("job %s: %s %s on %s (%s)", submission_id, job_problem_name(job), job.get("mode"), job.get("device"),
                 "+".join(kinds))
        previous: dict[str, Any] | None = None
        for kind in kinds:
            gate.check()
            hops: dict[str, Any] = {"received": received, "asked": gate.asked_at}
            if previous is not None and previous.get("status") != Verdict.passed:
                result = error_result(job, SKIPPED_SECRET, status=str(previous.get("status", Verdict.error.value)))
            else:
                result = _evaluate_run(job, kind, gate, hops, builds)
            run, reason = gate.answer()
            if not run:
                raise JobStopped(reason)
            result["hops"] = {**hops, "answered": gate.answered_at, "sent": time.time()}
            report(RECORD_RESULT, [submission_id, kind, result, runner] + ([] if attempt is None else [attempt]))
            _start_spare(job)  # for the next run, this job's or the next job's
            log.info("job %s: %s run %s: %s", submission_id, kind, result.get("status"),
                     str(result.get("message", ""))[:200])
            results.append(result)
            previous = result
    except JobStopped as stopped:
        log.warning("job %s stopped, nothing reported: %s", submission_id, stopped.reason)
    finally:
        builds.close()
    return results


def _send_control(task: str, args: list[Any]) -> None:
    """A report to the control worker, retried for minutes while the broker restarts."""
    send(task, args, queue=CONTROL_QUEUE, retry=True, retry_policy=REPORT_RETRY_POLICY)


def _evaluate_run(job: dict[str, Any], kind: str, gate: GoAhead, hops: dict[str, Any],
                  builds: Any = None) -> dict[str, Any]:
    """One harness run as a JSON-ready result dict; judge failures become an ``error`` result;
    ``builds``: the job's :class:`~kernelrank.runner.containment.buildcache.BuildCache`. Stopped
    (:class:`~kernelrank.runner.goahead.JobStopped`) where ``gate`` says no; ``hops`` gets the
    wall-clock times (s) the judging started and ended, and of each phase it announced."""
    try:
        from kernelrank.problems import ProblemSpec
        from kernelrank.runner.containment import jobdisk
        from kernelrank.runner.judge.harness import evaluate

        settings = get_settings()
        if refusal := containment_refusal(job["mode"], settings.runner_allow_unisolated_network):
            return error_result(job, refusal, status=Verdict.rejected.value)
        jobdisk.sweep_scratch(settings.scratch_dir)  # what judges gone before left: mounts, folders
        spec = ProblemSpec.from_message(job["problem"])
        secret = job.get("secret_seed") if kind == RunKind.secret else None
        if kind == RunKind.secret and secret is None:
            raise ValueError("the secret run needs the job's secret seed")
        options = _eval_options(job, settings, secret, builds)
        samples: list[dict[str, Any]] = []  # each timed case's judged pairs, for the score's bundle

        def keep_samples(event: dict[str, Any]) -> None:
            gate.check()
            if event.get("event") == "samples":
                samples.append({k: v for k, v in event.items() if k != "event"})
            elif event.get("event") == "phase":
                hops.setdefault("phases", {}).setdefault(str(event.get("phase")), time.time())

        hops["judging"] = time.time()
        with gate.stoppable():
            result = evaluate(spec, job["source"], job["mode"], device_class(job["device"]), options, keep_samples)
        hops["judged"] = time.time()
        return json_result({**result.to_dict(), **({"samples": samples} if samples else {})})
    except SoftTimeLimitExceeded:
        return error_result(job, f"timeout: the {kind} run exceeded the job's time limit on the runner",
                             status="timeout")
    except Exception as e:  # noqa: BLE001 - a broken problem or judge error must still end the job
        log.exception("job %s: the judge failed on the %s run", job.get("submission_id"), kind)
        return error_result(job, f"the judge could not evaluate this submission ({kind} run): "
                                  f"{type(e).__name__}: {str(e)[:2000]}")


def _eval_options(job: dict[str, Any], settings: Any, secret: Any = None, builds: Any = None) -> Any:
    """The harness's options for a run of ``job`` on this runner (``secret``: the secret run's seed;
    ``builds``: the job's ``BuildCache``)."""
    from kernelrank.runner.judge.harness import EvalOptions

    leaderboard = job["mode"] == Mode.leaderboard and not settings.runner_allow_unisolated_network
    device = device_class(job["device"])
    return EvalOptions(threads=settings.cpu_threads, scratch_dir=settings.scratch_dir,
                       log_limit=settings.log_limit_bytes, secret=None if secret is None else int(secret),
                       trace_dir=None, isolation=settings.runner_isolation, require_network_isolation=leaderboard,
                       require_containment=leaderboard, hidden_paths=(settings.data_dir.resolve(),),
                       zygote=warm_start.warm_zygote(device, settings), spare=warm_start.spare(device, settings),
                       builds=builds)


def _start_spare(job: dict[str, Any]) -> None:
    """Start the next evaluation's first process, a run's result sent (:func:`harness.start_spare`); never raises."""
    from kernelrank.problems import ProblemSpec
    from kernelrank.runner.judge.harness import start_spare
    try:
        start_spare(ProblemSpec.from_message(job["problem"]), job["mode"], device_class(job["device"]),
                    _eval_options(job, get_settings()))
    except Exception:  # noqa: BLE001 - a malformed job: the next evaluation starts its own process
        log.warning("job %s: no process started ahead", job.get("submission_id"), exc_info=True)


# -- heartbeat -----------------------------------------------------------------------------------
def heartbeat_info(queue: str) -> dict[str, Any]:
    """``device_info(...).to_dict()`` for ``queue``'s device class, with the ``ceilings`` this
    runner measured (:func:`measured_ceilings`; absent when not measured).

    On CUDA the information comes from a short subprocess: initialising CUDA in the worker's main
    process would break the pool processes forked from it.
    """
    info = _device_facts(queue)
    ceilings = measured_ceilings(queue)
    if ceilings is not None:
        info["ceilings"] = ceilings
    return info


def measured_ceilings(queue: str) -> dict[str, Any] | None:
    """The ceilings of this runner's device: the best of its probes so far
    (:mod:`kernelrank.runner.host.ceiling_probes`), probed once when this process first asks (in
    a subprocess, with the threads the judge gives a kernel) and again while idle
    (:func:`refresh_ceilings`); ``None`` when ``settings.runner_ceilings`` is off or none succeeded."""
    global _ceilings, _ceilings_tried
    settings = get_settings()
    if not settings.runner_ceilings:
        return None
    if not _ceilings_tried:  # once here: later probes wait for an idle moment (refresh_ceilings)
        _ceilings_tried = True
        _ceilings = ceiling_probes.probe_and_merge(queue, *ceiling_probes.probe_args(queue))
        if _ceilings is not None:
            log.info("ceilings of %s: copy %.3g GB/s, matmul %s TFLOP/s (best of %s probes)", queue,
                     _ceilings.get("copy_gbps") or 0.0, {k: float(f"{v:.3g}") for k, v in
                                                        (_ceilings.get("matmul_tflops") or {}).items()},
                     _ceilings.get("probes"))
    return _ceilings


def refresh_ceilings(queue: str, last: float, now: float) -> bool:
    """Probe the ceilings again when ``settings.runner_ceilings_refresh_minutes`` have passed since
    ``last`` (monotonic s) and no job runs; whether the record changed."""
    global _ceilings
    minutes = get_settings().runner_ceilings_refresh_minutes
    if _ceilings is None or not minutes or now - last < minutes * 60:
        return False
    record = ceiling_probes.refresh_if_idle(queue, *ceiling_probes.probe_args(queue))
    if record is None:
        return False
    _ceilings = record
    return True


def _device_facts(queue: str) -> dict[str, Any]:
    """``device_info(...).to_dict()`` for ``queue``'s device class (see :func:`heartbeat_info`)."""
    settings = get_settings()
    cls = device_class(queue)
    if cls == DeviceClass.cpu:
        from kernelrank.runner.host.devices import device_info

        info = device_info("cpu", settings.cpu_threads).to_dict()
    else:
        code = ("import json; from kernelrank.runner.host.devices import device_info; "
                "print(json.dumps(device_info('cuda').to_dict()))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
        info = json.loads(out.stdout.strip().splitlines()[-1])
        # NVML's facts (no CUDA context: safe in the worker's main process)
        from kernelrank.runner.host import gpuinfo

        info["gpu"] = gpuinfo.runner_gpu(os.environ.get("CUDA_VISIBLE_DEVICES")) | _clock_lock
    # the start-up self-test's result and date (kernelrank runner --self-test)
    info["self_test"] = _self_test if _self_test is not None else {"status": "not run"}
    if _containment is not None:
        info["containment"] = _containment
    return info


def send_heartbeat(ident: RunnerIdentity, info: dict[str, Any], online: bool = True) -> None:
    """One ``HEARTBEAT`` message; it expires unread after a few periods (a stale one says nothing).
    ``online`` false: the runner's last message, saying it stops."""
    period = get_settings().heartbeat_seconds
    send(HEARTBEAT, [ident.name, ident.queue, info, __version__, jobs_done()] + ([] if online else [False]),
         queue=CONTROL_QUEUE, expires=max(4 * period, 60.0))


def _heartbeat_loop(ident: RunnerIdentity, info: dict[str, Any] | None = None) -> None:
    period = get_settings().heartbeat_seconds
    if info is not None and _heartbeat_stop.wait(period):  # the first one was sent already
        return
    probed = time.monotonic()
    while True:
        try:
            if info is None:
                info = heartbeat_info(ident.queue)
            elif "state" not in info and refresh_ceilings(ident.queue, probed, time.monotonic()):  # ready, idle
                probed, info = time.monotonic(), {**info, "ceilings": _ceilings}
            send_heartbeat(ident, info)
        except Exception as e:  # noqa: BLE001 - broker or device hiccups: try again next period
            log.warning("heartbeat failed: %s", type(e).__name__)
        if _heartbeat_stop.wait(period):
            return


def start_heartbeat(ident: RunnerIdentity, info: dict[str, Any] | None = None) -> threading.Thread:
    """Start the daemon heartbeat thread: every ``settings.heartbeat_seconds``, starting now, or
    one period from now when ``info`` is given (its first heartbeat was sent already)."""
    global _heartbeat_thread
    _heartbeat_stop.clear()
    thread = threading.Thread(target=_heartbeat_loop, args=(ident, info), name="kernelrank-heartbeat", daemon=True)
    thread.start()
    _heartbeat_thread = thread
    return thread


_heartbeat_thread: threading.Thread | None = None
#: Seconds a stopping runner waits for a heartbeat being sent, so its stop message comes after it.
STOP_WAIT_S = 5.0


def stop_heartbeat(ident: RunnerIdentity | None) -> bool:
    """Stop the heartbeat thread and send the runner's last message, saying it stops
    (shown offline at once). Returns whether the message was sent (not when the broker cannot be
    reached: the runner then shows offline once its heartbeats are ``runner_online_seconds`` old)."""
    _heartbeat_stop.set()
    if _heartbeat_thread is not None and _heartbeat_thread is not threading.current_thread():
        _heartbeat_thread.join(STOP_WAIT_S)
    if ident is None:
        return False
    try:
        send_heartbeat(ident, {}, online=False)
    except Exception as e:  # noqa: BLE001 - shutting down anyway
        log.warning("stop message not sent: %s", type(e).__name__)
        return False
    log.info("runner %s stopping: told the server", ident.name)
    return True


def announce_start(ident: RunnerIdentity, what: str) -> None:
    """Say, now and every heartbeat period until the worker is ready (:func:`first_heartbeat`),
    that this runner is starting (``info["state"]``: ``starting: <what>``), so that its device
    queue keeps taking submissions (they wait in the queue) while it runs its self-test or starts
    its worker, and the runners page says why it takes no job yet. Cheap: no device probe."""
    global _starting
    info = _starting = {"state": f"starting: {what}", "device": device_class(ident.queue),
                        "self_test": _self_test if _self_test is not None else {"status": "not run"},
                        **({"containment": _containment} if _containment is not None else {})}
    try:
        send_heartbeat(ident, info)
    except Exception as e:  # noqa: BLE001 - the thread tries again
        log.warning("starting heartbeat failed: %s", type(e).__name__)
    start_heartbeat(ident, info)


def _end_heartbeat_thread() -> None:
    """Stop the heartbeat thread (a starting runner's) without saying the runner stops."""
    _heartbeat_stop.set()
    if _heartbeat_thread is not None and _heartbeat_thread is not threading.current_thread():
        _heartbeat_thread.join(STOP_WAIT_S)


def first_heartbeat(ident: RunnerIdentity) -> dict[str, Any] | None:
    """Send the runner's first heartbeat now and return the device information it carried
    (``None`` when it failed). Called before the worker takes its first job, so the control
    worker hears of the runner before any of its job starts (else a runner slow to describe its
    device could be taken for a vanished one by the sweeper)."""
    try:
        info = heartbeat_info(ident.queue)
        send_heartbeat(ident, info)
        return info
    except Exception as e:  # noqa: BLE001 - the thread tries again
        log.warning("first heartbeat failed: %s", type(e).__name__)
        return None


# -- start-up: self-test and clocks -------------------------------------------------------
SelfTestRunner = Any


def self_test_progress(done: int, total: int) -> None:
    """Say in the starting heartbeat (:func:`announce_start`) how far the self-test is
    (``starting: self-test 12/30``), sent now; the heartbeat thread repeats it each period."""
    if _starting is None:
        return
    _starting["state"] = f"starting: self-test {done}/{total}"
    ident = _identity
    if ident is None:
        return
    try:
        send_heartbeat(ident, _starting)
    except Exception as e:  # noqa: BLE001 - the heartbeat thread sends it again
        log.warning("progress heartbeat failed: %s", type(e).__name__)


def self_test_gate(queue: str, run: SelfTestRunner = None, report: Any = None) -> bool:
    """Run the quick self-test before taking any job (only its probes where this runner's code,
    host and device passed it before: :mod:`~kernelrank.runner.host.selftest_cache`); ``True``
    when it passed. Its progress shows in the starting heartbeat (:func:`self_test_progress`).

    Its summary (status, scope, date, counts, first failures, the runner's per-request overhead)
    is kept for every heartbeat (``info["self_test"]``). On failure one heartbeat carrying it is
    sent (``report(ident, info)``, default :func:`send_heartbeat`) so the runners page shows why
    this runner takes no jobs; the caller then exits.
    """
    global _self_test
    if run is None:
        from kernelrank.runner.host.selftest_process import run_self_test_process

        summary = run_self_test_process(device_class(queue), timeout=SELF_TEST_TIMEOUT_S, on_progress=self_test_progress)
    else:
        summary = run(device_class(queue))
    _self_test = summary
    if summary.get("status") == Verdict.passed:
        log.info("self-test passed on %s (%s checks)", queue, summary.get("checks"))
        if _starting is not None:  # what the heartbeats say until the worker is ready
            _starting.update(state="starting: worker", self_test=summary)
        return True
    log.error("self-test FAILED on %s: %s; this runner takes no jobs", queue, summary.get("failures"))
    _end_heartbeat_thread()  # a starting heartbeat must not overwrite the failure below
    ident = _identity or configure(queue)
    try:
        (report or send_heartbeat)(ident, heartbeat_info(queue))
    except Exception as e:  # noqa: BLE001 - the broker may be down too: the log says it
        log.warning("could not report the failed self-test: %s", type(e).__name__)
    return False


def lock_gpu_clocks(requested_mhz: int = 0) -> dict[str, Any]:  # pragma: no cover - GPU-only: NVML on a real GPU
    """Lock the runner's GPU's SM clock where the operator allows it (``KERNELRANK_RUNNER_LOCK_CLOCKS``,
    :func:`~kernelrank.runner.host.gpuinfo.lock_runner_clocks`); the outcome is shown with the GPU's facts."""
    from kernelrank.runner.host import gpuinfo

    _clock_lock.update(gpuinfo.lock_runner_clocks(os.environ.get("CUDA_VISIBLE_DEVICES"), requested_mhz))
    return dict(_clock_lock)


@signals.celeryd_after_setup.connect
def _on_worker_setup(sender: Any = None, instance: Any = None, **_: Any) -> None:
    """Main process, before the pool forks: take the identity from the consumed device queue."""
    queues = [q for q in instance.app.amqp.queues.consume_from if _is_device_queue(q)]
    if len(queues) != 1:
        log.error("a runner consumes exactly one device queue (cpu or cuda-<model>); got %s",
                  sorted(instance.app.amqp.queues.consume_from))
        return
    configure(queues[0])
    if _containment is None:  # started by celery -A directly, not by `kernelrank runner`
        check_containment()


@signals.worker_ready.connect
def _on_worker_ready(**_: Any) -> None:
    """Main process, after the pool started and before the first job is fetched."""
    if _identity is not None:
        warm_start.started()
        if not warm_start.wait_warm(WARM_START_TIMEOUT_S):  # still "starting" meanwhile
            log.warning("the pool process did not warm up within %.0f s: its first job starts it", WARM_START_TIMEOUT_S)
        _end_heartbeat_thread()  # the starting heartbeats (announce_start) end here
        info = first_heartbeat(_identity)
        log.info("runner %s ready on queue %s", _identity.name, _identity.queue)
        start_heartbeat(_identity, info)


@signals.worker_process_init.connect
def _on_pool_process_init(**_: Any) -> None:
    """A pool process: its zygote starts once the runner's start-up is over (:mod:`~kernelrank.runner.warm_start`)."""
    if _identity is not None:
        warm_start.start_when_ready(device_class(_identity.queue), get_settings())


@signals.worker_shutting_down.connect
def _on_worker_shutting_down(**_: Any) -> None:
    stop_heartbeat(_identity)


@signals.worker_process_shutdown.connect
def _on_pool_process_shutdown(**_: Any) -> None:
    """A pool process ending: the process it started ahead goes with its folder and groups."""
    warm_start.close_spares()


@signals.worker_shutdown.connect
def _on_worker_shutdown(**_: Any) -> None:
    """The main process, its pool processes gone (unwarned on a cold shutdown): what they left (a
    process started ahead, a job cut short) is swept now, not by the next runner."""
    from kernelrank.runner.containment import cgroups, jobdisk
    jobdisk.sweep_scratch(get_settings().scratch_dir)
    with contextlib.suppress(Exception):  # no cgroups here, or one still busy: the next runner's sweep
        cgroups.sweep_stale(cgroups.detect())


def _is_device_queue(name: str) -> bool:
    try:
        device_class(name)
        return True
    except ValueError:
        return False
