"""Scores re-based on each board's calibration, their intervals, and ties on the leaderboard
(``kernelrank.services.calibration``, ``services.leaderboard.mark_ties``), through the API."""

from __future__ import annotations

import math
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import World, record, submit


def paired_result(speedup: float, half_width: float, reference_ns: list[float], **extra: Any) -> dict[str, Any]:
    """A passing leaderboard run as the harness reports it: per benchmark case this run's
    reference time, the run's speedup with its interval, its own-basis score."""
    low, high = speedup * (1 - half_width), speedup * (1 + half_width)
    basis = math.exp(sum(math.log(t) for t in reference_ns) / len(reference_ns))
    cases = [{"kind": "benchmark", "index": i, "speedup": speedup, "pairing": {"reference_run_ns": t}}
             for i, t in enumerate(reference_ns)]
    return {"status": "passed", "mode": "leaderboard", "message": "", "cases": cases, "speedup": speedup,
            "speedup_ci": [low, high], "score_ns": basis / speedup, "score_ci_ns": [basis / high, basis / low],
            "basis": "run", "logs": {"stdout": "", "stderr": ""}, **extra}


def _entry(client: TestClient, world: World, user: str, public: dict[str, Any],
           secret: dict[str, Any] | None = None) -> int:
    """A leaderboard submission with its two runs; by default a secret run that measured no
    speedup (the score is then the public run's alone)."""
    r = submit(client, world.tokens[user], "softmax", mode="leaderboard")
    assert r.status_code == 202, r.text
    sid = r.json()["id"]
    record(sid, "public", public)
    record(sid, "secret", secret or {"status": "passed", "mode": "leaderboard", "message": "", "cases": []})
    return sid


def _submission(client: TestClient, world: World, sid: int) -> dict[str, Any]:
    r = client.get(f"/api/v1/submissions/{sid}", headers={"Authorization": f"Bearer {world.tokens['root']}"})
    assert r.status_code == 200, r.text
    return r.json()


def _board(client: TestClient) -> list[dict[str, Any]]:
    r = client.get("/api/v1/leaderboards/softmax/cpu")
    assert r.status_code == 200, r.text
    return r.json()["rows"]


def _calibration(world: World) -> Any:
    from kernelrank.db.session import session_scope
    from kernelrank.services import calibration
    from kernelrank.services.problems import get_revision

    with session_scope() as s:
        rev = get_revision(s, "softmax", None, True)
        cal = calibration.get(s, rev.id, "cpu")
        return None if cal is None else (cal.runs, list(cal.reference_ns), cal.final)


def test_scores_are_based_on_the_boards_calibration(client: TestClient, world: World) -> None:
    """The first run sets a provisional calibration (its reference times); each later run until the
    fifth moves it (per case, the median), and every ranked score of the board is re-based on it;
    then it is final. Ranking order is the speedups' order throughout."""
    bob = _entry(client, world, "bob", paired_result(2.0, 0.05, [1000.0, 4000.0]))
    assert _calibration(world) == (1, [1000.0, 4000.0], False)
    rows = _board(client)
    assert rows[0]["score_ns"] == pytest.approx(2000.0 / 2.0)  # G(1000, 4000) = 2000
    assert rows[0]["score_ci_ns"] == pytest.approx([2000.0 / 2.1, 2000.0 / 1.9])

    # the machine was twice as slow for alice's run: her reference times are twice bob's
    alice = _entry(client, world, "alice", paired_result(1.0, 0.05, [2000.0, 8000.0]))
    runs, reference, final = _calibration(world)
    assert (runs, final) == (2, False) and reference == [1500.0, 6000.0]
    basis = 3000.0  # G(1500, 6000)
    rows = _board(client)
    assert [(r["user"], r["submission_id"]) for r in rows] == [("bob", bob), ("alice", alice)]
    assert rows[0]["score_ns"] == pytest.approx(basis / 2.0) and rows[1]["score_ns"] == pytest.approx(basis / 1.0)
    assert rows[0]["score_ci_ns"] == pytest.approx([basis / 2.1, basis / 1.9])
    page = client.get(f"/submissions/{bob}", headers={"Authorization": f"Bearer {world.tokens['bob']}"}).text
    # the page says once why its score moved: the board's calibration is still provisional
    assert page.count('id="rebase-note"') == 1 and "has 2 of its 5 runs" in page

    for i in range(3):  # three more runs: the calibration is final after five
        _entry(client, world, "root", paired_result(0.5, 0.05, [1000.0 * (i + 1), 4000.0]))
    runs, reference, final = _calibration(world)
    # per case the median of the five: (1000, 2000, 1000, 2000, 3000) and (4000, 8000, 4000, 4000, 4000)
    assert (runs, final) == (5, True) and reference == [2000.0, 4000.0]
    _entry(client, world, "root", paired_result(0.5, 0.05, [9e9, 9e9]))  # a sixth run changes nothing
    assert _calibration(world) == (5, [2000.0, 4000.0], True)
    assert _board(client)[0]["score_ns"] == pytest.approx(math.sqrt(2000.0 * 4000.0) / 2.0)
    assert 'id="rebase-note"' not in client.get(f"/submissions/{bob}").text  # final: scores no longer move


def test_entries_whose_intervals_overlap_are_tied(client: TestClient, world: World) -> None:
    ref = [1000.0, 1000.0]
    _entry(client, world, "bob", paired_result(2.0, 0.02, ref))  # 490..510 ns
    _entry(client, world, "alice", paired_result(1.95, 0.02, ref))  # 503..523 ns: overlaps bob's
    _entry(client, world, "root", paired_result(1.0, 0.02, ref))  # 980..1020 ns: clearly behind
    rows = _board(client)
    assert [(r["user"], r["tied"]) for r in rows] == [("bob", False), ("alice", True), ("root", False)]
    page = client.get("/problems/softmax")
    assert page.status_code == 200 and 'class="tied"' in page.text and "95% interval" in page.text


def test_noisy_and_interpreted_runs_pass_unranked(client: TestClient, world: World) -> None:
    noisy = _entry(client, world, "bob", paired_result(2.0, 0.3, [1000.0, 1000.0], noisy=True))
    interpreted = _entry(client, world, "alice", {"status": "passed", "mode": "leaderboard", "message": "interpreted",
                                                  "cases": [], "score_ns": None, "speedup": None, "interpreted": True,
                                                  "logs": {"stdout": "", "stderr": ""}})
    for sid in (noisy, interpreted):
        body = client.get(f"/api/v1/submissions/{sid}", headers={"Authorization": f"Bearer {world.tokens['root']}"}).json()
        assert body["status"] == "passed" and not body["ranked"] and body["score_ns"] is None
    assert _board(client) == []
    assert _calibration(world) is None  # a noisy run calibrates nothing


def test_ranked_runs_with_a_noisy_case_share_the_boards_calibration(client: TestClient, world: World) -> None:
    """A run whose score is known well enough is ranked though one case was flagged noisy
    (stats.run_noisy). It calibrates the board like any ranked run: were it left out, two such
    first entries would each keep their own run's basis and the board would compare times taken
    at two machine speeds."""
    first = paired_result(2.0, 0.05, [1000.0, 4000.0])
    first["cases"][1]["noisy"] = True
    second = paired_result(1.0, 0.05, [3000.0, 12000.0])  # the machine three times as slow
    second["cases"][0]["noisy"] = True
    bob, alice = _entry(client, world, "bob", first), _entry(client, world, "alice", second)
    assert _calibration(world) == (2, [2000.0, 8000.0], False)
    rows = _board(client)
    assert [r["submission_id"] for r in rows] == [bob, alice]
    basis = [r["score_ns"] * r["speedup"] for r in rows]
    assert basis == pytest.approx([4000.0, 4000.0])  # G(2000, 8000), the same for both


def test_reinstating_does_not_count_a_run_twice(client: TestClient, world: World) -> None:
    from sqlalchemy import select

    from kernelrank.db.models import User
    from kernelrank.db.session import session_scope
    from kernelrank.services import submissions

    sid = _entry(client, world, "bob", paired_result(2.0, 0.05, [1000.0, 1000.0]))
    with session_scope() as s:
        admin = s.scalar(select(User).where(User.name == "root"))
        submissions.disqualify(s, admin, sid, "checking")
    assert _board(client) == []
    with session_scope() as s:
        submissions.reinstate(s, sid)
    assert _calibration(world)[0] == 1
    rows = _board(client)
    assert rows[0]["submission_id"] == sid and rows[0]["score_ci_ns"] is not None


def test_the_score_combines_the_public_and_secret_runs(client: TestClient, world: World) -> None:
    """Both runs of a leaderboard submission measured its speedup, one after the other: the score
    is their geometric mean re-based on the board's calibration, with an interval that holds
    both runs' (stats.combine_runs). The run's full interval (``speedup_interval``, as the
    harness reports it, non-finite figures as strings) is read when a result has it."""
    from kernelrank.runner import stats
    from kernelrank.runner.results import json_ready

    ref = [1000.0, 4000.0]
    secret = paired_result(2.2, 0.02, ref)
    secret["speedup_interval"] = json_ready(stats.Interval(2.2, 2.156, 2.244, 0.01, math.inf, 80).to_dict())
    sid = _entry(client, world, "bob", paired_result(2.0, 0.02, ref), secret)
    body = _submission(client, world, sid)
    assert body["ranked"] and body["status"] == "passed"
    assert body["speedup"] == pytest.approx(math.sqrt(2.0 * 2.2))
    rows = _board(client)
    assert rows[0]["score_ns"] == pytest.approx(2000.0 / math.sqrt(2.0 * 2.2))
    low, high = rows[0]["score_ci_ns"]
    assert low < 2000.0 / 2.2 and 2000.0 / 2.0 < high  # it holds both runs' scores
    page = client.get(f"/submissions/{sid}")
    assert page.status_code == 200 and "over its public and secret runs" in page.text


def test_runs_that_disagree_leave_the_submission_passed_and_unranked(client: TestClient, world: World) -> None:
    """The machine's speed changed between the two runs (speedups 2.0 and 3.0, each known to
    +-2%): the verdict stands, the submission is not ranked and says why; a secret run that is
    too noisy to rank also keeps it off the board."""
    ref = [1000.0, 1000.0]
    split = _entry(client, world, "bob", paired_result(2.0, 0.02, ref), paired_result(3.0, 0.02, ref))
    body = _submission(client, world, split)
    assert body["status"] == "passed" and not body["ranked"] and body["score_ns"] is None
    assert "runs disagree" in body["message"] and "2.00× and 3.00×" in body["message"]
    noisy = _entry(client, world, "alice", paired_result(2.0, 0.02, ref), paired_result(2.0, 0.3, ref, noisy=True))
    assert not _submission(client, world, noisy)["ranked"]
    agree = _entry(client, world, "root", paired_result(2.0, 0.02, ref), paired_result(2.1, 0.02, ref))
    assert [r["submission_id"] for r in _board(client)] == [agree]


def test_the_boards_spread_between_runs_is_the_floor_of_a_new_submissions_interval(client: TestClient,
                                                                                     world: World) -> None:
    """Earlier submissions of the board whose two runs differed by 8% (each run known to +-2%,
    not enough to disagree) stored their spread; a new submission whose runs happen to agree
    exactly gets an interval at least as wide as the board's spread says (stats.combine_runs with
    calibration.board_spread), where its two runs alone would say +-1.4%. The first submission,
    on an empty board, had only its own. Another device's board does not count."""
    from kernelrank.runner import stats

    ref = [1000.0, 1000.0]
    first = _entry(client, world, "bob", paired_result(2.0, 0.02, ref), paired_result(2.16, 0.02, ref))
    for user in ("alice", "root"):
        _entry(client, world, user, paired_result(2.0, 0.02, ref), paired_result(2.16, 0.02, ref))
    steady = _entry(client, world, "bob", paired_result(2.0, 0.02, ref), paired_result(2.0, 0.02, ref))
    runs = [stats.Interval.from_bounds(s, s * 0.98, s * 1.02) for s in (2.0, 2.16)]
    own = stats.runs_spread(runs)
    assert own is not None
    alone = stats.combine_runs([stats.Interval.from_bounds(2.0, 1.96, 2.04)] * 2)
    expected = stats.combine_runs([stats.Interval.from_bounds(2.0, 1.96, 2.04)] * 2, (own[0], 3))
    body = _submission(client, world, steady)
    assert body["ranked"] and body["speedup"] == pytest.approx(2.0)
    assert body["speedup_ci"] == pytest.approx([expected.low, expected.high])
    assert expected.half_width > 2 * alone.half_width
    first_body = _submission(client, world, first)  # on an empty board: its runs' own spread
    assert first_body["speedup_ci"] == pytest.approx([stats.combine_runs(runs).low, stats.combine_runs(runs).high])

    from kernelrank.db.models import Submission
    from kernelrank.db.session import session_scope
    from kernelrank.services import calibration

    with session_scope() as s:
        sub = s.get(Submission, steady)
        assert sub.runs_spread == pytest.approx(stats.runs_spread([runs[0], runs[0]])[0])
        assert calibration.board_spread(s, sub.problem_revision_id, "cpu", exclude_id=None) is not None
        assert calibration.board_spread(s, sub.problem_revision_id, "cuda:h100") is None


def test_a_run_reporting_a_score_without_a_speedup_is_recorded(client: TestClient, world: World) -> None:
    """A runner's report is data: a public run with a score and no speedup beside a secret run
    with one is recorded (no error), ranked on the public run's score as it stands."""
    public = paired_result(2.0, 0.02, [1000.0, 1000.0])
    del public["speedup"], public["speedup_ci"]
    sid = _entry(client, world, "bob", public, paired_result(2.0, 0.02, [1000.0, 1000.0]))
    body = _submission(client, world, sid)
    assert body["status"] == "passed" and body["ranked"] and body["speedup"] == pytest.approx(2.0)


def test_the_cli_shows_the_speedup_over_both_runs_and_why_it_is_not_ranked(client: TestClient, world: World) -> None:
    from rich.console import Console

    from kernelrank.cli.views import submission_view

    ref = [1000.0, 1000.0]
    shown = {}
    for user, secret in (("bob", 2.2), ("alice", 3.0)):
        sid = _entry(client, world, user, paired_result(2.0, 0.02, ref), paired_result(secret, 0.02, ref))
        console = Console(width=300, record=True, highlight=False)
        console.print(submission_view(_submission(client, world, sid)))
        shown[user] = console.export_text()
    assert "secret-seed run: passed  speedup 2.20× (2.16–2.24×)" in shown["bob"]
    assert "ranked with score" in shown["bob"] and f"speedup over both runs {math.sqrt(4.4):.2f}×" in shown["bob"]
    assert "not ranked: its runs disagree (speedups 2.00× and 3.00×)" in shown["alice"]


def _record_measuring(sid: int, kind: str, result: dict[str, Any], attempt: int, remeasures: int = 2) -> list[Any]:
    """Record a run as the control worker does (``settings.remeasures``), measuring again at once
    (no back-off: tests/api/test_remeasure.py has it); the jobs of the measurements it started again."""
    from kernelrank.db.session import session_scope
    from kernelrank.judgement import Backoff
    from kernelrank.services.submissions import record_run

    jobs: list[Any] = []
    with session_scope() as s:
        assert record_run(s, sid, kind, dict(result), "runner-cpu-1", attempt, remeasures=remeasures,
                          again=lambda *job: jobs.append(job), backoff=Backoff())
    return jobs


def test_a_submission_whose_runs_disagree_is_measured_again_and_ranked_over_all_its_runs(
        client: TestClient, world: World) -> None:
    """Runs at 2.0x and 2.6x (each +-2%) disagree: instead of a final unranked verdict the service
    queues a second measurement (attempt 2, its job sent with the same submission and the new
    attempt); that measurement's runs (2.3x, 2.3x) are combined with the first's, four runs that
    together agree, so it is ranked on all four (their geometric mean, an interval holding 2.0 and
    2.6 no more than the four runs' spread says). The API lists the four runs by attempt and says
    two measurements."""
    from kernelrank.runner import stats

    ref = [1000.0, 1000.0]
    sid = submit(client, world.tokens["bob"], "softmax", mode="leaderboard").json()["id"]
    assert _record_measuring(sid, "public", paired_result(2.0, 0.02, ref), 1) == []
    jobs = _record_measuring(sid, "secret", paired_result(2.6, 0.02, ref), 1)
    assert len(jobs) == 1
    message, queue, limit = jobs[0]
    assert message["submission_id"] == sid and message["attempt"] == 2 and queue == "cpu" and limit > 0
    assert message["runs"] == ["public", "secret"] and message["secret_seed"] is not None
    body = _submission(client, world, sid)
    assert body["status"] == "queued" and not body["ranked"] and body["measurements"] == 2
    assert "measuring again now (measurement 2 of 3)" in body["message"] and "2.00× and 2.60×" in body["message"]
    assert _board(client) == []
    assert _record_measuring(sid, "public", paired_result(2.3, 0.02, ref), 2) == []
    assert _record_measuring(sid, "secret", paired_result(2.3, 0.02, ref), 2) == []
    body = _submission(client, world, sid)
    assert body["status"] == "passed" and body["ranked"], body["message"]
    assert [(r["attempt"], r["kind"]) for r in body["runs"]] == [(1, "public"), (1, "secret"), (2, "public"), (2, "secret")]
    runs = [stats.Interval.from_bounds(s, s * 0.98, s * 1.02) for s in (2.0, 2.6, 2.3, 2.3)]
    expected = stats.combine_runs(runs)
    assert body["speedup"] == pytest.approx(expected.estimate)
    assert body["speedup_ci"] == pytest.approx([expected.low, expected.high])
    assert expected.low < 2.3 < expected.high
    assert [r["submission_id"] for r in _board(client)] == [sid]


def test_measuring_again_is_bounded_and_a_requeue_judges_afresh(client: TestClient, world: World) -> None:
    """Runs that keep disagreeing are measured again ``remeasures`` times (here 1), then the
    submission stays passed and unranked, its message over both measurements; a noisy secret
    run is measured again too. An admin's requeue starts afresh: its runs alone count. With
    ``remeasures`` 0 nothing is measured again (the verdict as before)."""
    ref = [1000.0, 1000.0]
    sid = submit(client, world.tokens["bob"], "softmax", mode="leaderboard").json()["id"]
    _record_measuring(sid, "public", paired_result(2.0, 0.02, ref), 1, remeasures=1)
    assert len(_record_measuring(sid, "secret", paired_result(3.0, 0.02, ref), 1, remeasures=1)) == 1
    _record_measuring(sid, "public", paired_result(2.0, 0.02, ref), 2, remeasures=1)
    assert _record_measuring(sid, "secret", paired_result(3.0, 0.02, ref), 2, remeasures=1) == []
    body = _submission(client, world, sid)
    assert body["status"] == "passed" and not body["ranked"] and body["measurements"] == 2
    assert "runs disagree after 2 measurements" in body["message"] and "2.00×, 3.00×, 2.00× and 3.00×" in body["message"]

    noisy = submit(client, world.tokens["alice"], "softmax", mode="leaderboard").json()["id"]
    _record_measuring(noisy, "public", paired_result(2.0, 0.02, ref), 1)
    assert len(_record_measuring(noisy, "secret", paired_result(2.0, 0.3, ref, noisy=True), 1)) == 1
    assert "a run was too noisy to rank" in _submission(client, world, noisy)["message"]

    off = submit(client, world.tokens["root"], "softmax", mode="leaderboard").json()["id"]
    _record_measuring(off, "public", paired_result(2.0, 0.02, ref), 1, remeasures=0)
    assert _record_measuring(off, "secret", paired_result(3.0, 0.02, ref), 1, remeasures=0) == []
    assert _submission(client, world, off)["status"] == "passed"

    r = client.post(f"/api/v1/admin/submissions/{sid}/requeue", headers={"Authorization": f"Bearer {world.tokens['root']}"})
    assert r.status_code == 202, r.text
    _record_measuring(sid, "public", paired_result(2.5, 0.02, ref), 3)
    assert _record_measuring(sid, "secret", paired_result(2.5, 0.02, ref), 3) == []
    body = _submission(client, world, sid)
    assert body["ranked"] and body["measurements"] == 1 and body["speedup"] == pytest.approx(2.5)
    assert [r["attempt"] for r in body["runs"]] == [3, 3]


def test_over_measurements_combines_every_run_and_ranks_on_the_latest_measurements_noise() -> None:
    """The rule the service and bench/scores.py share: every passing, timed run of every
    measurement is combined, noisy ones included (a kernel that made its slow runs erratic is not
    scored on its steady fast ones); only the latest measurement's noise keeps it unranked; the
    stored spread is the first measurement's (unselected) two runs'; measuring again stops at
    ``remeasures`` and never starts without a timed run."""
    from kernelrank import judgement
    from kernelrank.runner import stats

    ref = [1000.0]
    fast, slow_noisy = paired_result(2.0, 0.02, ref), paired_result(1.0, 0.4, ref, noisy=True)
    first = judgement.over_measurements([[fast, slow_noisy]], 0.25)
    assert first.noisy and not first.rankable and len(first.runs) == 2
    assert judgement.measure_again(first, 1, 2) and not judgement.measure_again(first, 3, 2)
    both = judgement.over_measurements([[fast, slow_noisy], [fast, paired_result(2.0, 0.02, ref)]], 0.25)
    assert not both.noisy and len(both.runs) == 4
    expected = stats.combine_runs([judgement.run_speedup(r) for r in (fast, slow_noisy, fast, fast)])
    assert both.combined is not None and both.combined.estimate == pytest.approx(expected.estimate)
    assert both.combined.estimate < 2.0  # the noisy slow run counts
    assert both.spread == stats.runs_spread([judgement.run_speedup(fast), judgement.run_speedup(slow_noisy)])
    failed = {"status": "failed", "message": "wrong", "cases": []}
    assert judgement.over_measurements([[fast, failed]], 0.25).spread is None
    interpreted = {"status": "passed", "interpreted": True, "cases": []}
    never = judgement.over_measurements([[interpreted, interpreted]], 0.25)
    assert never.combined is None and not judgement.measure_again(never, 1, 2)
    with pytest.raises(ValueError):
        judgement.over_measurements([], 0.25)
