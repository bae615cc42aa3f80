"""A busy machine delays a verdict, never spoils it (:mod:`kernelrank.services.remeasure`): a
leaderboard submission too noisy to rank, or left unmeasured by the judge, is measured again after
a wait that grows (30 s, 2 min, 8 min), its job sent by the sweeper once due; after the last
measurement allowed the admins are told, and the API and the pages say which."""

from __future__ import annotations

import datetime as dt
from typing import Any

from fastapi.testclient import TestClient

from kernelrank.judgement import Backoff
from tests.api.conftest import World, submit
from tests.api.test_calibration import paired_result

REF = [1000.0, 1000.0]
#: The default schedule (settings' remeasure_delay_seconds, remeasure_backoff) and bound.
BACKOFF = Backoff(30.0, 4.0)
REMEASURES = 3


def _record(sid: int, kind: str, result: dict[str, Any], attempt: int) -> list[Any]:
    """Record a run as the control worker does, with the default back-off; the jobs it handed
    over to be sent at once."""
    from kernelrank.db.session import session_scope
    from kernelrank.services.submissions import record_run

    sent: list[Any] = []
    with session_scope() as s:
        assert record_run(s, sid, kind, dict(result), "runner-cpu-1", attempt, remeasures=REMEASURES,
                          again=lambda *job: sent.append(job), backoff=BACKOFF)
    return sent


def _sweep(at: dt.datetime) -> Any:
    """One sweep of the control worker at ``at`` (no job is lost in a queue)."""
    from kernelrank.db.session import session_scope
    from kernelrank.services import jobs

    with session_scope() as s:
        return jobs.sweep(s, max_starts=3, runner_lost_s=120, queued_lost_s=600, pending=lambda _q: set(), now=at)


def _row(sid: int) -> tuple[dt.datetime | None, dt.datetime | None, dt.datetime | None]:
    """``(remeasure_at, dispatched_at, too_noisy_at)`` as stored, in UTC."""
    from kernelrank.db.models import Submission, as_utc
    from kernelrank.db.session import session_scope

    with session_scope() as s:
        sub = s.get(Submission, sid)
        return tuple(None if t is None else as_utc(t) for t in (sub.remeasure_at, sub.dispatched_at, sub.too_noisy_at))


def _get(client: TestClient, world: World, sid: int, user: str = "root") -> dict[str, Any]:
    r = client.get(f"/api/v1/submissions/{sid}", headers={"Authorization": f"Bearer {world.tokens[user]}"})
    assert r.status_code == 200, r.text
    return r.json()


def _noisy() -> dict[str, Any]:
    return paired_result(2.0, 0.3, REF, noisy=True)


def _unmeasured() -> dict[str, Any]:
    """A run as the judge ends it when the machine was too busy to time it (runner.judge.busy)."""
    return {"status": "passed", "mode": "leaderboard", "noisy": True, "cases": [], "speedup": None, "score_ns": None,
            "message": "all 15 test cases passed; not measured: the reference's process did not answer; "
                       "not ranked until measured again"}


def test_the_back_off_grows_by_its_factor_and_the_settings_give_30_s_2_min_8_min() -> None:
    from kernelrank.settings import Settings

    defaults = Settings()
    backoff = Backoff(defaults.remeasure_delay_seconds, defaults.remeasure_backoff)
    assert [backoff.delay_s(k) for k in (1, 2, 3)] == [30.0, 120.0, 480.0]
    assert defaults.remeasures == REMEASURES
    assert Backoff().delay_s(3) == 0.0  # no back-off: measured again at once


def test_a_noisy_submission_waits_longer_each_time_then_the_admins_are_told(client: TestClient, world: World) -> None:
    """Each measurement made again is held (no job sent, no place in the queue) until its wait is
    over, then the sweeper sends it; the waits grow 30 s, 2 min, 8 min; the fourth noisy
    measurement ends it passed, unranked, on the admins' list."""
    sid = submit(client, world.tokens["bob"], "softmax", mode="leaderboard").json()["id"]
    waits = []
    for attempt, (wait, shown) in enumerate(((30, "30 s"), (120, "2 min"), (480, "8 min")), start=1):
        assert _record(sid, "public", paired_result(2.0, 0.02, REF), attempt) == []
        before = dt.datetime.now(dt.timezone.utc)
        assert _record(sid, "secret", _noisy(), attempt) == []  # held: nothing sent now
        remeasure_at, dispatched_at, told = _row(sid)
        assert remeasure_at is not None and dispatched_at is None and told is None
        waits.append(round((remeasure_at - before).total_seconds()))
        body = _get(client, world, sid)
        assert body["status"] == "queued" and not body["ranked"] and body["queue_position"] is None
        assert body["message"] == (f"measuring again in {shown} (at {remeasure_at:%H:%M:%S} UTC; "
                                   f"measurement {attempt + 1} of 4): a run was too noisy to rank")
        assert body["remeasure_at"] is not None and not body["too_noisy"]
        early = _sweep(remeasure_at - dt.timedelta(seconds=1))
        assert early.remeasured == [] and early.requeued == [] and _row(sid)[0] == remeasure_at
        report = _sweep(remeasure_at)
        assert [(j.submission_id, j.message["attempt"], j.queue) for j in report.remeasured] == [(sid, attempt + 1, "cpu")]
        assert report.requeued == [] and _row(sid)[:2] == (None, remeasure_at)
        assert _get(client, world, sid)["remeasure_at"] is None
    assert [w - wait for w, wait in zip(waits, (30, 120, 480))] == [0, 0, 0]

    _record(sid, "public", paired_result(2.0, 0.02, REF), 4)
    assert _record(sid, "secret", _noisy(), 4) == []
    body = _get(client, world, sid)
    assert body["status"] == "passed" and not body["ranked"] and body["too_noisy"] and body["measurements"] == 4
    assert body["message"].endswith("; not ranked: a run still too noisy after 4 measurements; "
                                    "could not be measured quietly enough: an admin was told")
    assert _row(sid)[0] is None and _row(sid)[2] is not None
    assert _sweep(dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)).remeasured == []

    admin = {"Authorization": f"Bearer {world.tokens['root']}"}
    listed = client.get("/api/v1/admin/submissions/too-noisy", headers=admin)
    assert listed.status_code == 200 and [s["id"] for s in listed.json()] == [sid]
    from kernelrank.cli.admin_cmd import too_noisy_text  # what `kernelrank admin too-noisy` prints

    assert too_noisy_text(listed.json()) == (f"#{sid} softmax on cpu by bob: 4 measurements; "
                                             f"requeue with `kernelrank admin requeue {sid}`")
    refused = client.get("/api/v1/admin/submissions/too-noisy", headers={"Authorization": f"Bearer {world.tokens['bob']}"})
    assert refused.status_code == 403
    r = client.post(f"/api/v1/admin/submissions/{sid}/requeue", headers=admin)
    assert r.status_code == 202 and not r.json()["too_noisy"]
    assert client.get("/api/v1/admin/submissions/too-noisy", headers=admin).json() == []


def test_a_run_the_judge_could_not_measure_is_measured_again_and_never_an_error(
        client: TestClient, world: World) -> None:
    """The judge's unmeasured run (the machine too busy) is a passing, noisy run without a
    speedup: measured again like a noisy one, the message saying it could not be measured."""
    sid = submit(client, world.tokens["alice"], "softmax", mode="leaderboard").json()["id"]
    _record(sid, "public", _unmeasured(), 1)
    assert _record(sid, "secret", _unmeasured(), 1) == []
    body = _get(client, world, sid)
    assert body["status"] == "queued" and body["remeasure_at"] is not None
    assert "(the machine was too busy)" in body["message"] and "measurement 2 of 4" in body["message"]
    assert "a run could not be measured" in body["message"]


def test_the_pages_say_which(client: TestClient, world: World) -> None:
    """The submission's page shows the message once (measuring again when, or given up); the
    admin page lists what the service gave up on, and an author's page is not an admin's list."""
    from tests.web.conftest import sign_in

    sid = submit(client, world.tokens["bob"], "softmax", mode="leaderboard").json()["id"]
    _record(sid, "public", paired_result(2.0, 0.02, REF), 1)
    _record(sid, "secret", _noisy(), 1)
    bob = TestClient(client.app)
    sign_in(bob, world.tokens["bob"])
    page = bob.get(f"/submissions/{sid}").text
    assert page.count("measuring again in 30 s") == 1 and "measurement 2 of 4" in page

    from kernelrank.db.models import Submission
    from kernelrank.db.session import session_scope
    from kernelrank.services import remeasure

    with session_scope() as s:  # as after the last measurement allowed
        sub = s.get(Submission, sid)
        sub.status, sub.message = "passed", "all 15 test cases passed; not ranked: a run still too noisy after 4 measurements"
        remeasure.tell_admins(sub, sub.message)
    page = bob.get(f"/submissions/{sid}").text
    assert page.count("could not be measured quietly enough: an admin was told") == 1
    root = TestClient(client.app)
    sign_in(root, world.tokens["root"])
    admin_page = root.get("/admin").text
    assert 'id="too-noisy"' in admin_page and f'href="/submissions/{sid}"' in admin_page
    bob.close()
    root.close()


def test_without_measuring_again_the_admins_are_told_at_once(client: TestClient, world: World) -> None:
    """``remeasures`` 0: nothing is measured again, and a noisy submission is on the admins' list."""
    from kernelrank.db.session import session_scope
    from kernelrank.services.submissions import record_run

    sid = submit(client, world.tokens["alice"], "softmax", mode="leaderboard").json()["id"]
    sent: list[Any] = []
    with session_scope() as s:
        record_run(s, sid, "public", paired_result(2.0, 0.02, REF), "runner-cpu-1", 1, remeasures=0,
                   again=lambda *job: sent.append(job), backoff=BACKOFF)
        record_run(s, sid, "secret", _noisy(), "runner-cpu-1", 1, remeasures=0,
                   again=lambda *job: sent.append(job), backoff=BACKOFF)
    body = _get(client, world, sid)
    assert sent == [] and body["status"] == "passed" and body["too_noisy"] and not body["ranked"]
