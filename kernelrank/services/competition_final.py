"""Finalizing a competition: its top entries judged again with a new secret seed, and the runner's
reports of those re-judgings.

:func:`finalize` ends the competition at once if it is still open, draws a new secret seed (kept in
``competitions.final_seed``; it leaves the server only in the job messages, never in a page, a
response or a log), and sends each board's top ``final_top`` entries (the window's standings) to be
judged again: one job per entry through the same dispatch as a submission's, on the board's device
queue, in leaderboard mode (the public run and the secret run with the new seed, each paired with
the reference as always). The job's ``attempt`` is minus the :class:`~kernelrank.db.models.Rejudging`
row's id: the control worker (:mod:`kernelrank.control`) routes a report with a negative attempt to
:func:`start_rejudging` and :func:`record_rejudging` instead of the submission, whose own runs,
verdict and leaderboard place never change.

A re-judging's verdict and score are :func:`kernelrank.judgement.judge`'s over its two runs, the
score re-based on the board's calibration like a submission's. The competition is ``final`` when
every re-judging has a verdict; one that did not pass takes its entry out of the final standings of
its board and is listed with the reason. Finalizing again sends the re-judgings still without a
verdict once more (a job lost with its runner: the sweeper watches submissions only).
"""

from __future__ import annotations

import math
import secrets
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelrank import judgement
from kernelrank.db.models import Competition, Rejudging, User, as_utc, utcnow
from kernelrank.judgement import RunRecord
from kernelrank.queue import job_time_limit
from kernelrank.runner.stats import time_from_speedup
from kernelrank.services import Conflict, Invalid, NotFound, calibration
from kernelrank.services.competitions import PENDING, get_competition, window_standings
from kernelrank.services.jobs import StartDecision, died_message, runner_alive
from kernelrank.services.problems import definition
from kernelrank.services.submissions import Dispatch, job_message
from kernelrank.vocab import VERDICTS, Mode, RunKind, SubmissionStatus, Verdict, device_class, run_kinds


def is_rejudging(attempt: Any) -> bool:
    """Whether a runner's report with this ``attempt`` is about a re-judging (a negative attempt,
    minus the re-judging's id) rather than a submission's own attempt."""
    try:
        return attempt is not None and int(attempt) < 0
    except (TypeError, ValueError):
        return False


def rejudging_job(rj: Rejudging, seed: int) -> tuple[dict[str, Any], str, float]:
    """The re-judging's job as a :data:`~kernelrank.services.submissions.Dispatch` takes it: the
    entry's job message in leaderboard mode with the competition's seed and ``attempt`` minus the
    re-judging's id, its board's device queue and its hard time limit (s)."""
    sub = rj.submission
    mode = Mode.leaderboard.value
    message = {**job_message(sub, seed), "mode": mode, "runs": list(run_kinds(mode)), "secret_seed": seed,
               "attempt": -rj.id}
    budgets = definition(sub.problem_revision).budgets.model_dump()
    return message, rj.board.device, job_time_limit(budgets, mode)


def finalize(session: Session, admin: User, name: str, dispatch: Dispatch) -> Competition:
    """Finalize competition ``name`` (see the module's docstring): end it now if still open, draw
    the new secret seed, and dispatch a re-judging of each board's top ``final_top`` entries; a
    competition without any such entry is final at once. Called again before it is final, it sends
    the re-judgings still queued or running once more.

    Raises:
        NotFound: no such competition.
        Conflict: it has not started yet, or it is final already.
    """
    comp = get_competition(session, name, admin)
    now = utcnow()
    if comp.final_at is not None:
        raise Conflict(f"competition {name!r} is final already")
    if comp.finalized_at is None:
        if now < as_utc(comp.starts_at):
            raise Conflict(f"competition {name!r} has not started (it starts at {as_utc(comp.starts_at).isoformat()})")
        if now < as_utc(comp.ends_at):
            comp.ends_at = now
        comp.finalized_at, comp.final_seed = now, secrets.randbits(62)
        for board in window_standings(session, comp):
            for entry in board.entries[:comp.final_top]:
                session.add(Rejudging(competition_id=comp.id, board_id=board.board_id,
                                      submission_id=entry.submission_id, place_before=entry.place,
                                      score_before_ns=entry.score_ns, status=SubmissionStatus.queued.value,
                                      message="", results={}, starts=0, dispatched_at=now))
        session.flush()
    pending = list(session.scalars(select(Rejudging).where(Rejudging.competition_id == comp.id,
                                                           Rejudging.status.in_(PENDING)).order_by(Rejudging.id)))
    if not pending:
        comp.final_at = now
    for rj in pending:
        rj.dispatched_at = now
        dispatch(*rejudging_job(rj, int(comp.final_seed)))
    session.flush()
    return comp


def _get(session: Session, rejudging_id: int, submission_id: int) -> Rejudging:
    rj = session.get(Rejudging, rejudging_id, with_for_update=True)
    if rj is None or rj.submission_id != submission_id:
        raise NotFound(f"no re-judging {rejudging_id} of submission {submission_id}")
    return rj


def start_rejudging(session: Session, attempt: int, submission_id: int, runner: str, max_starts: int,
                    runner_lost_s: float) -> StartDecision:
    """A runner is about to start a re-judging's job (``attempt``: minus its id): may it? The
    rules of :func:`kernelrank.services.jobs.start_job`: no when it has its verdict or runs on
    another runner heard from within ``runner_lost_s``; once started ``max_starts`` times it ends
    as ``error`` with the reason."""
    try:
        rj = _get(session, -int(attempt), submission_id)
    except NotFound as e:
        return StartDecision(False, e.message)
    if rj.status not in PENDING:
        return StartDecision(False, f"re-judging {rj.id} is already finished ({rj.status})")
    if (rj.status == SubmissionStatus.running and rj.runner and rj.runner != runner
            and runner_alive(session, rj.runner, runner_lost_s)):
        return StartDecision(False, f"re-judging {rj.id} is running on {rj.runner}")
    if rj.starts >= max_starts:
        _end(session, rj, Verdict.error.value, died_message(rj.starts))
        return StartDecision(False, rj.message)
    rj.starts += 1
    rj.status, rj.runner = SubmissionStatus.running.value, runner[:255]
    return StartDecision(True)


def record_rejudging(session: Session, attempt: int, submission_id: int, kind: str, result: dict[str, Any],
                     runner: str) -> bool:
    """Store one run of a re-judging (``attempt``: minus its id), once; when both runs are in,
    its verdict and final score (ns, with its 95% interval), and the competition is final when
    every re-judging has its verdict. Logs and samples are not kept. Returns whether anything was
    written.

    Raises:
        NotFound: no such re-judging of that submission.
        Invalid: a run kind a leaderboard job does not take.
    """
    rj = _get(session, -int(attempt), submission_id)
    if kind not in run_kinds(Mode.leaderboard):
        raise Invalid(f"unknown run kind {kind!r}")
    if rj.status not in PENDING or kind in (rj.results or {}):
        return False
    result = {k: v for k, v in result.items() if k not in ("logs", "samples")}
    if str(result.get("status")) not in VERDICTS:
        result["message"] = f"the runner reported an unknown verdict {str(result.get('status'))[:64]!r}"
        result["status"] = Verdict.error.value
    rj.results = {**(rj.results or {}), kind: result}
    rj.runner = runner[:255]
    rj.status = SubmissionStatus.running.value
    if all(k in rj.results for k in run_kinds(Mode.leaderboard)):
        _judge(session, rj)
    session.flush()
    return True


def _score(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _judge(session: Session, rj: Rejudging) -> None:
    """The re-judging's verdict over its two runs, and its score re-based on the board's calibration
    (on the public run's own basis where the board has none)."""
    sub = rj.submission
    runs = [RunRecord(k, str(r["status"]), r, _score(r.get("score_ns"))) for k, r in rj.results.items()]
    try:
        noisy_above = definition(sub.problem_revision).timing[device_class(sub.device)].noisy_above
    except (KeyError, ValueError):
        noisy_above = math.inf
    judged = judgement.judge([runs], mode=Mode.leaderboard.value, noisy_above=noisy_above)
    if judged.failed:
        _end(session, rj, judged.status, judged.message or f"the re-judging's runs did not pass ({judged.status})")
        return
    public = next(r for r in runs if r.kind == RunKind.public)
    cal = calibration.get(session, sub.problem_revision_id, sub.device)
    own = judgement.run_speedup(public.result)
    basis = (calibration.basis_ns(cal) if cal is not None and cal.reference_ns else
             public.score_ns * own.estimate if own is not None and public.score_ns else None)
    if judged.speedup and judged.speedup > 0 and basis:
        rj.final_score_ns, rj.final_score_low_ns, rj.final_score_high_ns = time_from_speedup(
            basis, judged.speedup, judged.speedup_low, judged.speedup_high)
    else:
        rj.final_score_ns = public.score_ns
    if rj.final_score_ns is None:
        _end(session, rj, Verdict.error.value, "the re-judging passed but measured no score")
        return
    _end(session, rj, Verdict.passed.value, judged.message)


def _end(session: Session, rj: Rejudging, status: str, message: str) -> None:
    """Give the re-judging its verdict; the competition is final once none is left pending."""
    rj.status, rj.message, rj.finished_at = status, message[:4000], utcnow()
    session.flush()
    left = session.scalar(select(Rejudging.id).where(Rejudging.competition_id == rj.competition_id,
                                                     Rejudging.status.in_(PENDING)).limit(1))
    if left is None:
        comp = session.get(Competition, rj.competition_id)
        if comp is not None and comp.final_at is None:
            comp.final_at = utcnow()
