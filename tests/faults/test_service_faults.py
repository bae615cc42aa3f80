"""The server side failing under a stream of jobs, on Redis and PostgreSQL: the control worker
down (results wait in the queue), the broker killed and restarted, the API restarted, a queued
job's message lost by the broker (the sweeper requeues it), the database briefly unreachable
(the API answers 503 and recovers by itself). Every submission ends with exactly one result."""

from __future__ import annotations

import time

import pytest

from tests.faults.stack import API, FINAL, QUICK, Stack, sleeper
from tests.servers import control_server

pytestmark = [pytest.mark.servers, pytest.mark.timeout(300)]


def _start_all(stack: Stack) -> str:
    for role in ("api", "control", "runner"):
        stack.start(role)
    stack.api_up()
    return stack.runner_online()


def _all_passed_once(stack: Stack, ids: list[int], timeout: float = 150.0) -> None:
    for sid in ids:
        done = stack.wait_status(sid, FINAL, timeout=timeout)
        assert done["status"] == "passed", (sid, done["message"], stack.logs())
        assert [r["kind"] for r in done["runs"]] == ["public"], f"submission {sid}: exactly one result"
        assert len(stack.run_rows(sid)) == 1


def _redis(stack: Stack):
    import redis

    return redis.Redis.from_url(stack.backend.broker_url)


@pytest.mark.slow
def test_results_wait_in_the_queue_while_the_control_worker_is_down(stack: Stack) -> None:
    _start_all(stack)
    stack.kill("control")
    sid = stack.submit(QUICK)
    # the runner gets no go-ahead, runs the job anyway and queues its result
    stack.wait_for("the runner to finish the job", lambda: "public run passed" in (stack.root / "runner.log").read_text(),
                   timeout=90)
    time.sleep(1.0)
    assert stack.get(sid)["status"] == "queued", "nothing is written while the control worker is down"
    with _redis(stack) as r:
        assert r.llen(f"{stack.backend.key_prefix}control") > 0, "the reports wait in the control queue"

    stack.start("control")
    _all_passed_once(stack, [sid], timeout=90)
    assert stack.starts(sid) == 1


def test_no_submission_is_lost_when_the_broker_is_killed_and_restarted(stack: Stack) -> None:
    _start_all(stack)
    ids = [stack.submit(sleeper(3))] + [stack.submit(QUICK) for _ in range(3)]
    stack.wait_status(ids[0], {"running"}, timeout=60)
    try:
        control_server("redis-kill")  # SIGKILL: no clean shutdown; the append-only file has it all
        time.sleep(2.0)
    finally:
        control_server("redis-start")
    _all_passed_once(stack, ids)
    assert all(stack.starts(sid) >= 1 for sid in ids)


@pytest.mark.slow
def test_queued_and_running_submissions_continue_through_an_api_restart(stack: Stack) -> None:
    _start_all(stack)
    ids = [stack.submit(sleeper(3))] + [stack.submit(QUICK) for _ in range(2)]
    stack.wait_status(ids[0], {"running"}, timeout=60)
    stack.kill("api")
    stack.start("api")
    stack.api_up()
    _all_passed_once(stack, ids)
    assert [stack.starts(sid) for sid in ids] == [1, 1, 1]


@pytest.mark.slow
def test_a_queued_job_whose_message_the_broker_lost_is_requeued(stack: Stack) -> None:
    first = _start_all(stack)
    stack.kill("runner")
    sid = stack.submit(QUICK)  # the runner's last heartbeat is recent: the API still takes jobs
    with _redis(stack) as r:
        assert r.delete(f"{stack.backend.key_prefix}cpu") == 1, "the job's message was in the cpu queue"
    stack.start("runner")
    stack.runner_online(exclude={first})
    _all_passed_once(stack, [sid], timeout=90)
    assert "requeued" in (stack.root / "control.log").read_text()
    assert stack.starts(sid) == 1


def test_the_api_answers_503_while_the_database_is_down_and_recovers_by_itself(stack: Stack) -> None:
    _start_all(stack)
    api_pid = stack.procs["api"].pid
    with stack.client() as c:
        assert c.get(f"{API}/problems").status_code == 200
    try:
        control_server("pg-stop")
        with stack.client() as c:
            down = c.get(f"{API}/problems")
            assert down.status_code == 503, down.text
            assert down.json() == {"detail": "the database is unavailable; try again later"}
            sub = c.post(f"{API}/submissions", data={"problem": "double", "device": "cpu", "mode": "test"},
                         files={"file": ("k.py", QUICK, "text/x-python")})
            assert sub.status_code == 503, sub.text
            assert "postgres" not in sub.text.lower() and "password" not in sub.text.lower()
    finally:
        control_server("pg-start")

    def back() -> bool:
        with stack.client() as c:
            return c.get(f"{API}/problems").status_code == 200
    stack.wait_for("the API to answer again", back, timeout=60)
    assert stack.procs["api"].poll() is None and stack.procs["api"].pid == api_pid, "no restart"
    # the control worker and the runner came through too
    sid = stack.submit(QUICK)
    _all_passed_once(stack, [sid], timeout=120)
