"""Runners that die: a job whose runner is SIGKILLed mid-run is judged again by another runner and
recorded once; a job whose runner dies on every attempt ends as an error with the reason, and the
runners go on with other work (no redelivery loop)."""

from __future__ import annotations

import os
import signal

import pytest

from tests.faults.stack import QUICK, Stack, make_stack, sleeper
from tests.servers import REAL_BACKEND, Backend

pytestmark = [pytest.mark.servers, pytest.mark.timeout(300)]


def _start_all(stack: Stack) -> str:
    stack.start("api")
    stack.start("control")
    stack.start("runner")
    stack.api_up()
    return stack.runner_online()


@pytest.mark.parametrize("backend", [REAL_BACKEND, "embedded"], indirect=True)
def test_a_runner_killed_mid_job_is_replaced_and_the_job_recorded_once(stack: Stack) -> None:
    first = _start_all(stack)
    sid = stack.submit(sleeper(4))
    stack.wait_status(sid, {"running"}, timeout=60)
    assert stack.runner_of(sid) == first
    stack.kill("runner")  # SIGKILL, the runner and the kernel it was judging

    stack.start("runner")
    second = stack.runner_online(exclude={first})
    done = stack.wait_status(sid, {"passed", "failed", "error", "timeout"}, timeout=120)
    assert done["status"] == "passed", done["message"]
    assert [r["kind"] for r in done["runs"]] == ["public"], "exactly one result"
    assert stack.run_rows(sid) == [("public", second)]
    assert stack.starts(sid) == 2


@pytest.mark.slow
def test_a_job_that_kills_its_runner_every_time_ends_as_an_error(stack: Stack) -> None:
    seen = {_start_all(stack)}
    sid = stack.submit(sleeper(30))
    for attempt in (1, 2, 3):
        stack.wait_for(f"attempt {attempt} to run", lambda: stack.get(sid)["status"] == "running"
                       and stack.starts(sid) == attempt, timeout=90)
        stack.kill("runner")
        stack.start("runner")
        seen.add(stack.runner_online(exclude=seen))
    done = stack.wait_status(sid, {"passed", "failed", "error", "timeout"}, timeout=90)
    assert done["status"] == "error"
    assert "the runner died 3 times running this job" in done["message"]
    assert done["runs"] == [] and stack.starts(sid) == 3

    # the last runner is not stuck with it: it judges the next job
    after = stack.submit(QUICK)
    assert stack.wait_status(after, {"passed", "failed", "error"}, timeout=90)["status"] == "passed"
    assert stack.get(sid)["status"] == "error" and stack.starts(sid) == 3


@pytest.mark.slow
def test_redis_alone_redelivers_the_job_of_a_killed_runner(backend: Backend, tmp_path) -> None:
    """No sweep after the first (``SWEEPER_SECONDS`` an hour): the unacknowledged job comes back
    from Redis after the visibility timeout, and the restarted runner judges it."""
    stack = make_stack(tmp_path, backend, SWEEPER_SECONDS="3600", BROKER_VISIBILITY_TIMEOUT="8")
    try:
        first = _start_all(stack)
        sid = stack.submit(sleeper(4))
        stack.wait_status(sid, {"running"}, timeout=60)
        stack.kill("runner")
        stack.start("runner")
        second = stack.runner_online(exclude={first})
        done = stack.wait_status(sid, {"passed", "failed", "error", "timeout"}, timeout=120)
        assert done["status"] == "passed", done["message"]
        assert stack.run_rows(sid) == [("public", second)] and stack.starts(sid) == 2
        assert "requeued" not in (stack.root / "control.log").read_text(), "Redis redelivered it, not the sweeper"
    finally:
        stack.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", [REAL_BACKEND, "embedded"], indirect=True)
def test_a_pool_process_killed_mid_job_is_retried_by_the_same_runner(stack: Stack) -> None:
    """Only the runner's pool process dies (as when the judge itself crashes): Celery hands the
    job back (``task_reject_on_worker_lost``) and the same runner judges it again."""
    from tests.e2e.conftest import _descendants

    name = _start_all(stack)
    sid = stack.submit(sleeper(4))
    stack.wait_status(sid, {"running"}, timeout=60)
    main = stack.procs["runner"].pid
    pool = [pid for pid in _descendants(main) if _parent(pid) == main]
    assert pool, "the runner has a pool process"
    for pid in pool:
        os.kill(pid, signal.SIGKILL)
    done = stack.wait_status(sid, {"passed", "failed", "error", "timeout"}, timeout=120)
    assert done["status"] == "passed", done["message"]
    assert stack.run_rows(sid) == [("public", name)]
    assert stack.starts(sid) == 2
    assert stack.procs["runner"].poll() is None


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return int(f.read().rsplit(")", 1)[-1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


@pytest.mark.slow
def test_a_frozen_runner_that_wakes_up_late_does_not_count_twice(stack: Stack) -> None:
    """The runner stops answering mid-job (SIGSTOP: no heartbeat, process still there); another
    runner gets the job and its result is recorded. The frozen runner then resumes and reports
    its own, late, result: dropped."""
    first = _start_all(stack)
    sid = stack.submit(sleeper(3))
    stack.wait_status(sid, {"running"}, timeout=60)
    stack.send_signal("runner", signal.SIGSTOP)
    stack.procs["frozen"] = stack.procs.pop("runner")
    try:
        stack.start("runner")
        second = stack.runner_online(exclude={first})
        done = stack.wait_status(sid, {"passed", "failed", "error", "timeout"}, timeout=120)
        assert done["status"] == "passed", done["message"]
        assert stack.run_rows(sid) == [("public", second)]
    finally:
        stack.send_signal("frozen", signal.SIGCONT)
    late = f"result of submission {sid} (public run) not recorded"
    stack.wait_for("the woken runner's late result to be read",
                   lambda: late in (stack.root / "control.log").read_text(), timeout=90)
    assert stack.run_rows(sid) == [("public", second)]
    assert stack.get(sid)["status"] == "passed"
