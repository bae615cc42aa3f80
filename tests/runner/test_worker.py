"""The runner's task body (``run_job``) without a broker: what it reports, in which order, and
that every job ends in recorded results, whatever the harness does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kernelrank.problems import Problem
from kernelrank.queue import JOB_STARTED, RECORD_RESULT
from tests.conftest import submission

RUNNER = "host:1:cpu"
worker: Any = None


@pytest.fixture(autouse=True)
def _worker_module(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Import the runner's module (it builds the Celery app, which makes the filesystem broker's
    folders) with the data folder in a temporary folder, not in the working directory; afterwards
    close the process the jobs left started ahead (runner/containment/spare.py)."""
    global worker
    if worker is None:
        from kernelrank.queue import get_celery
        from kernelrank.settings import get_settings

        with monkeypatch.context() as m:
            m.setenv("KERNELRANK_DATA_DIR", str(tmp_path_factory.mktemp("data")))
            get_settings.cache_clear()
            get_celery.cache_clear()
            from kernelrank.runner import worker as module
        get_settings.cache_clear()
        worker = module
    yield
    from kernelrank.runner import warm_start

    warm_start.close_spares()


class Reports(list):
    """A ``report`` that keeps ``(task_name, args)``."""

    def __call__(self, task: str, args: list[Any]) -> None:
        json.dumps(args, allow_nan=False)  # what the broker will carry: strict JSON
        self.append((task, args))

    def results(self) -> dict[str, dict[str, Any]]:
        return {args[1]: args[2] for task, args in self if task == RECORD_RESULT}


def job(problem: Problem, source: str, mode: str = "test", **extra: Any) -> dict[str, Any]:
    return {"submission_id": 7, "problem": problem.spec().to_message(), "source": source, "mode": mode,
            "device": "cpu", "runs": ["public", "secret"] if mode == "leaderboard" else ["public"],
            "secret_seed": 1234 if mode == "leaderboard" else None, **extra}


def test_reports_start_then_the_public_result(double: Problem) -> None:
    reports = Reports()
    worker.run_job(job(double, submission("double_ok.py")), RUNNER, reports)
    assert [t for t, _ in reports] == [JOB_STARTED, RECORD_RESULT]
    assert reports[0][1] == [7, RUNNER]
    task, (sid, kind, result, runner) = reports[1]
    assert (sid, kind, runner) == (7, "public", RUNNER)
    assert result["status"] == "passed" and result["problem"] == "double"
    assert len(result["cases"]) == 2 and all(c["passed"] for c in result["cases"])


def test_a_job_refused_by_the_go_ahead_is_dropped_unrun(double: Problem) -> None:
    reports, asked = Reports(), []

    def refuse(sid: int, runner: str) -> tuple[bool, str]:
        asked.append((sid, runner))
        return False, "submission 7 is already finished (passed)"

    assert worker.run_job(job(double, submission("double_ok.py")), RUNNER, reports, start=refuse) == []
    assert asked == [(7, RUNNER)] and list(reports) == []


def test_a_broken_problem_is_an_error_result_not_a_lost_job(double: Problem) -> None:
    broken = job(double, submission("double_ok.py"))
    broken["problem"]["reference_source"] = (
        "def generate_input(**params):\n    raise RuntimeError('reference cannot make inputs')\n"
        "def ref_kernel(data):\n    return data\n"
        "def flops(params):\n    return 0\n"
        "def bytes(params):\n    return 0\n")
    reports = Reports()
    worker.run_job(broken, RUNNER, reports)
    result = reports.results()["public"]
    assert result["status"] == "error"
    assert "judge could not evaluate" in result["message"]
    assert "reference cannot make inputs" in result["message"]


def test_a_malformed_job_is_an_error_result(double: Problem) -> None:
    bad = job(double, submission("double_ok.py"), device="tpu")
    reports = Reports()
    worker.run_job(bad, RUNNER, reports)
    assert reports.results()["public"]["status"] == "error"


def test_secret_run_is_not_run_after_a_failed_public_run(double: Problem) -> None:
    reports = Reports()
    worker.run_job(job(double, submission("double_wrong.py"), mode="leaderboard"), RUNNER, reports)
    results = reports.results()
    assert list(results) == ["public", "secret"]
    assert results["public"]["status"] == "failed"
    assert results["secret"]["status"] == "failed"
    assert results["secret"]["message"] == worker.SKIPPED_SECRET
    assert results["secret"]["cases"] == []


def test_only_the_secret_run_gets_the_secret_seed(double: Problem, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelrank.runner.judge import harness
    from kernelrank.runner.results import EvalResult
    from kernelrank.vocab import Verdict

    seen: list[tuple[str, Any]] = []

    def fake_evaluate(spec, source, mode, device, options, on_event=None):  # noqa: ANN001 - the harness's signature
        seen.append((mode, options.secret))
        return EvalResult(Verdict.passed, mode, spec.name, spec.revision, device, score_ns=float("inf"))

    monkeypatch.setattr(harness, "evaluate", fake_evaluate)
    reports = Reports()
    worker.run_job(job(double, "def custom_kernel(data): return data", mode="leaderboard"), RUNNER, reports)
    assert seen == [("leaderboard", None), ("leaderboard", 1234)]
    # a non-finite float becomes "Infinity" (kernelrank.runner.results.json_ready): strict JSON for the database
    assert reports.results()["secret"]["score_ns"] == "Infinity"


def test_soft_time_limit_becomes_a_timeout_result(double: Problem, monkeypatch: pytest.MonkeyPatch) -> None:
    from celery.exceptions import SoftTimeLimitExceeded

    from kernelrank.runner.judge import harness

    def slow(*_args: Any, **_kwargs: Any) -> None:
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(harness, "evaluate", slow)
    reports = Reports()
    worker.run_job(job(double, "def custom_kernel(data): return data"), RUNNER, reports)
    result = reports.results()["public"]
    assert result["status"] == "timeout" and "time limit" in result["message"]


def test_runner_identity_names_host_pid_and_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker, "_identity", None)
    ident = worker.configure("cuda-h100")
    host, pid, queue = ident.name.split(":")
    assert host and int(pid) > 0 and queue == "cuda-h100" == ident.queue
    with pytest.raises(ValueError):
        worker.configure("control")


def test_heartbeat_info_describes_the_cpu_and_its_ceilings() -> None:
    info = worker.heartbeat_info("cpu")
    assert info["device"] == "cpu" and info["threads"] >= 1 and info["torch"]
    # measured once, in a subprocess, with the threads the judge gives a kernel
    ceilings = info["ceilings"]
    assert ceilings["device"] == "cpu" and ceilings["threads"] == info["threads"]
    assert ceilings["copy_gbps"] > 0 and set(ceilings["matmul_tflops"]) == {"float32", "bfloat16", "float16"}
    assert worker.heartbeat_info("cpu")["ceilings"] is ceilings  # not measured again


def test_a_stopping_runner_sends_a_last_message_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelrank.queue import HEARTBEAT

    sent: list[tuple[str, list[Any]]] = []
    monkeypatch.setattr(worker, "send", lambda task, args, **_: sent.append((task, args)))
    ident = worker.RunnerIdentity("host:1:cpu", "cpu")
    thread = worker.start_heartbeat(ident, {"device": "cpu"})  # its first heartbeat was sent: waits a period
    assert worker.stop_heartbeat(ident) is True
    thread.join(5)
    assert not thread.is_alive()
    assert sent and sent[-1][0] == HEARTBEAT
    name, queue, info, _version, _jobs, online = sent[-1][1]
    assert (name, queue, info, online) == ("host:1:cpu", "cpu", {}, False)
    assert all(len(args) == 5 for _, args in sent[:-1])  # ordinary heartbeats say nothing of stopping


def test_a_starting_runner_says_so_until_its_worker_is_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    """While it runs its self-test, a runner's heartbeats say ``starting: self-test`` (so its device
    queue keeps taking submissions, and the runners page says why it takes none yet); the worker's
    first heartbeat ends them, and a failed self-test ends them before it reports."""
    from kernelrank.queue import HEARTBEAT

    sent: list[tuple[str, list[Any]]] = []
    monkeypatch.setattr(worker, "send", lambda task, args, **_: sent.append((task, args)))
    fast = worker.get_settings().model_copy(update={"heartbeat_seconds": 0.05, "runner_ceilings": False})
    monkeypatch.setattr(worker, "get_settings", lambda: fast)
    monkeypatch.setattr(worker, "_self_test", None)  # restored after: the gate below sets it
    ident = worker.RunnerIdentity("host:1:cpu", "cpu")
    worker.announce_start(ident, "self-test")
    thread = worker._heartbeat_thread
    failed = {"status": "failed", "failures": ["an attack passed"]}
    reported: list[dict[str, Any]] = []
    assert worker.self_test_gate("cpu", run=lambda device: failed, report=lambda i, info: reported.append(info)) is False
    assert not thread.is_alive()  # ended before the failure was reported: nothing overwrites it
    starting = [args[2] for task, args in sent if task == HEARTBEAT]
    assert starting and all(info["state"] == "starting: self-test" and info["device"] == "cpu" for info in starting)
    assert reported[0]["self_test"]["status"] == "failed" and "state" not in reported[0]


def test_reports_name_the_attempt_the_job_was_for(double: Problem) -> None:
    reports = Reports()
    worker.run_job(job(double, submission("double_ok.py"), attempt=2), RUNNER, reports)
    assert reports[0] == (JOB_STARTED, [7, RUNNER, 2])
    assert reports[1][0] == RECORD_RESULT and reports[1][1][4] == 2


def test_a_runner_without_job_cgroups_refuses_leaderboard_jobs_and_still_tests(
        double: Problem, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The start-up check finds no writable cgroup tree (here: a root with nothing in it); the
    problem and its fix are in the heartbeat, a leaderboard job is rejected unrun with them, and a
    test-mode job still runs (docs/security.md: containment is the leaderboard's requirement)."""
    from kernelrank.runner.containment import cgroups

    real = cgroups.containment_problem
    monkeypatch.setattr(cgroups, "containment_problem", lambda: real(str(tmp_path / "read-only")))
    monkeypatch.setattr(worker, "_containment", None)  # restored after
    fast = worker.get_settings().model_copy(update={"runner_ceilings": False, "runner_allow_unisolated_network": False})
    monkeypatch.setattr(worker, "get_settings", lambda: fast)
    found = worker.check_containment()
    assert found["job_cgroups"] is False and "Fix:" in found["problem"]
    assert worker.heartbeat_info("cpu")["containment"] == found
    reports = Reports()
    worker.run_job(job(double, submission("double_ok.py"), mode="leaderboard"), RUNNER, reports)
    public = reports.results()["public"]
    assert public["status"] == "rejected" and "was not run" in public["message"]
    assert "`cgroup: private`" in public["message"]
    reports = Reports()
    worker.run_job(job(double, submission("double_ok.py")), RUNNER, reports)
    assert reports.results()["public"]["status"] == "passed"
    assert worker.containment_refusal("leaderboard", allow_uncontained=True) is None  # the operator's override
    cgroups.detect.cache_clear()


def test_ceilings_are_probed_again_only_when_due_and_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelrank.runner.host import ceiling_probes

    settings = worker.get_settings().model_copy(update={"runner_ceilings_refresh_minutes": 30.0})
    monkeypatch.setattr(worker, "get_settings", lambda: settings)
    monkeypatch.setattr(worker, "_ceilings", {"copy_gbps": 1.0, "probes": 1})
    answers: list[dict | None] = [None, {"copy_gbps": 2.0, "probes": 2}]
    asked: list[str] = []
    monkeypatch.setattr(ceiling_probes, "refresh_if_idle", lambda q, cls, t: asked.append(q) or answers.pop(0))
    assert not worker.refresh_ceilings("cpu", last=0.0, now=29 * 60.0) and asked == []  # not due
    assert not worker.refresh_ceilings("cpu", last=0.0, now=31 * 60.0)  # due, but a job ran
    assert worker.refresh_ceilings("cpu", last=0.0, now=32 * 60.0) and worker._ceilings["probes"] == 2
    assert asked == ["cpu", "cpu"]


# -- the go-ahead beside the judging (runner/goahead.py) ---------------------------------------------
SLEEPS = "import time\n\ndef custom_kernel(data):\n    time.sleep(600)\n    return data\n"


class Judging:
    """``harness.evaluate`` wrapped: ``testing`` is set when the test phase begins (the kernel's
    first call is next), ``ended`` when it returns or raises; ``outcome`` says which."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import threading

        from kernelrank.runner.judge import harness

        self.testing, self.ended, self.outcome = threading.Event(), threading.Event(), ""
        self.calls = 0
        real = harness.evaluate

        def evaluate(spec, source, mode, device, options, on_event=None):  # noqa: ANN001 - the harness's signature
            self.calls += 1

            def event(e: dict[str, Any]) -> None:
                if e.get("event") == "phase" and e.get("phase") == "test":
                    self.testing.set()
                if on_event is not None:
                    on_event(e)
            try:
                result = real(spec, source, mode, device, options, event)
                self.outcome = "returned"
                return result
            except BaseException as e:
                self.outcome = type(e).__name__
                raise
            finally:
                self.ended.set()

        monkeypatch.setattr(harness, "evaluate", evaluate)


def test_a_job_whose_go_ahead_says_no_while_it_runs_is_stopped_and_reports_nothing(
        double: Problem, monkeypatch: pytest.MonkeyPatch) -> None:
    """The job starts at once; the answer (no: cancelled) comes while the kernel runs its first
    call, which would take 600 s: the judging is stopped there, not run to its deadline, and no
    result is sent."""
    judging, reports = Judging(monkeypatch), Reports()

    def cancelled(sid: int, runner: str) -> tuple[bool, str]:
        assert judging.testing.wait(120), "the judging started without waiting for the answer"
        return False, "submission 7 is already finished (cancelled)"

    assert worker.run_job(job(double, SLEEPS), RUNNER, reports, start=cancelled) == []
    assert judging.outcome == "JobStopped" and list(reports) == []


def test_a_no_that_comes_after_the_judging_still_keeps_its_result_back(
        double: Problem, monkeypatch: pytest.MonkeyPatch) -> None:
    judging, reports = Judging(monkeypatch), Reports()

    def late_no(sid: int, runner: str) -> tuple[bool, str]:
        assert judging.ended.wait(120)
        return False, "submission 7 is running on host:2:cpu"

    assert worker.run_job(job(double, submission("double_ok.py")), RUNNER, reports, start=late_no) == []
    assert judging.outcome == "returned" and list(reports) == []


def test_results_leave_only_after_a_yes(double: Problem, monkeypatch: pytest.MonkeyPatch) -> None:
    judging, reports, seen = Judging(monkeypatch), Reports(), []

    def late_yes(sid: int, runner: str) -> tuple[bool, str]:
        assert judging.ended.wait(120)
        seen.append(len(reports))  # what had been reported when the answer came
        return True, ""

    (result,) = worker.run_job(job(double, submission("double_ok.py")), RUNNER, reports, start=late_yes)
    assert seen == [0] and [t for t, _ in reports] == [RECORD_RESULT] and result["status"] == "passed"
    hops = result["hops"]  # the job's hops on the runner's wall clock (bench/latency.py prints them)
    assert hops["received"] <= hops["asked"] <= hops["judging"] <= hops["judged"] <= hops["answered"] <= hops["sent"]
    assert set(hops["phases"]) >= {"compile", "test"}


@pytest.mark.parametrize("how", ["broker", "sweeper"])
def test_a_job_delivered_again_waits_for_its_go_ahead(double: Problem, monkeypatch: pytest.MonkeyPatch,
                                                      how: str) -> None:
    """A job sent again may be one that kills its runner: it is not started before the answer,
    and a no runs nothing."""
    judging, reports = Judging(monkeypatch), Reports()
    refuse = lambda sid, runner: (False, "submission 7 was started 3 times")  # noqa: E731
    again = job(double, submission("double_ok.py"), **({"redelivered": True} if how == "sweeper" else {}))
    assert worker.run_job(again, RUNNER, reports, start=refuse, redelivered=how == "broker") == []
    assert judging.calls == 0 and list(reports) == []
