"""Calibrations: the reference times that every score of a board (problem revision × device queue)
is based on.

A leaderboard run times the submission and the reference in pairs and reports, per benchmark case,
the paired speedup with its 95% interval and the reference's time in that run
(``pairing.reference_run_ns``). A time measured on a shared machine at one moment says as much about
the machine as about the kernel; the speedup does not (both sides were timed alike, side by side).
So the ranked score is a time at the board's *calibrated* machine speed:

    score = geometric mean over cases of (calibrated reference time / paired speedup)
          = G(calibrated reference times) / G(speedups)

The calibration of a board is established from its first :data:`CALIBRATION_RUNS` ranked
leaderboard runs (whichever submission they judged: the reference side is the same code in each),
per case the median of their reference times (one run's case taken by a busy moment moves it
little); it is stored with the revision (table ``calibrations``) and then no longer changes.
While it has fewer runs it is provisional: each new run is added, and the board's ranked scores
are rescaled to it (their order never changes: on one board, ranking by score is ranking by
speedup). The runner needs no database: the control worker does all this when it records a run
(:func:`kernelrank.services.submissions.record_run`).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelrank.db.models import Calibration, Submission
from kernelrank.runner import stats
from kernelrank.runner.stats import time_from_speedup
from kernelrank.vocab import CaseKind

#: Runs that establish a board's calibration (the median of this many runs' reference times per
#: case: one run taken by a busy machine moves it little).
CALIBRATION_RUNS = 5
#: Submissions whose spread between their two runs makes a board's (:func:`board_spread`): the most
#: recent ones, so that the figure follows the machine; 50 degrees of freedom put the pooled
#: variance within about +-40% (95%), where one submission's own is a chi-square on one.
SPREAD_SUBMISSIONS = 50


def run_reference_times(result: dict[str, Any]) -> list[float] | None:
    """Per benchmark case (in order), the reference time (ns) a stored run result measured, or
    ``None`` when the run has none for every case (not paired, interpreted, failed)."""
    cases = sorted((c for c in result.get("cases") or [] if isinstance(c, dict) and c.get("kind") == CaseKind.benchmark),
                   key=lambda c: c.get("index", 0))
    times = [((c.get("pairing") or {}).get("reference_run_ns")) for c in cases]
    if not times or not all(isinstance(t, (int, float)) and math.isfinite(t) and t > 0 for t in times):
        return None
    return [float(t) for t in times]


def board_spread(session: Session, revision_id: int, device_queue: str, exclude_id: int | None = None) -> tuple[float, int] | None:
    """The board's spread between runs: ``(tau^2, degrees of freedom)`` of the log speedup,
    pooled (:func:`~kernelrank.runner.stats.pooled_spread`) over the :data:`SPREAD_SUBMISSIONS`
    most recently finished submissions of the board (``exclude_id`` left out) that stored their
    own (``submissions.runs_spread``, one degree of freedom each: a leaderboard submission's two
    runs); ``None`` when none did. Two runs estimate their spread from one difference; a board's
    many submissions, each such a difference on the same machine and reference, estimate it
    well (docs/research/bench-history.md)."""
    query = (select(Submission.runs_spread)
             .where(Submission.problem_revision_id == revision_id, Submission.device == device_queue,
                    Submission.runs_spread.is_not(None))
             .order_by(Submission.finished_at.desc(), Submission.id.desc()).limit(SPREAD_SUBMISSIONS))
    if exclude_id is not None:
        query = query.where(Submission.id != exclude_id)
    return stats.pooled_spread((float(t), 1) for t in session.scalars(query))


def rebase_note(session: Session, sub: Submission) -> str:
    """What a ranked submission's page says about re-basing: while its board's calibration is
    provisional (fewer than :data:`CALIBRATION_RUNS` runs), each new run may re-base every ranked
    score of the board (its speedup does not move); empty once final or where not ranked."""
    if not sub.ranked:
        return ""
    cal = get(session, sub.problem_revision_id, sub.device)
    if cal is None or cal.final:
        return ""
    return (f"provisional: this board's calibration (the reference's time on this device, which scores are based "
            f"on) has {cal.runs} of its {CALIBRATION_RUNS} runs, so ranked scores are re-based as runs arrive; "
            "the speedup does not change")


def get(session: Session, revision_id: int, device_queue: str) -> Calibration | None:
    """The board's calibration, if any run contributed yet."""
    return session.scalar(select(Calibration).where(Calibration.problem_revision_id == revision_id,
                                                    Calibration.device == device_queue))


def contribute(session: Session, revision_id: int, device_queue: str, result: dict[str, Any]) -> tuple[Calibration | None, bool]:
    """Add a passing run's reference times to the board's calibration while it is not final;
    ``(calibration, changed)``. A run too noisy to rank adds nothing. Every run that is ranked
    adds its times, a case flagged noisy included (the per-case median absorbs one wild time):
    so a board with a ranked score always has a calibration, and every ranked score of a board
    is on the same one. A run whose case count differs from the calibration's is ignored (cannot
    happen within one revision)."""
    times = run_reference_times(result)
    cal = get(session, revision_id, device_queue)
    if times is None or result.get("noisy") or (cal is not None and (cal.final or len(cal.samples) != len(times))):
        return cal, False
    if cal is None:
        cal = Calibration(problem_revision_id=revision_id, device=device_queue, runs=0, samples=[[] for _ in times],
                          reference_ns=[], final=False)
        session.add(cal)
    samples = [list(s) + [t] for s, t in zip(cal.samples, times)]
    cal.samples = samples  # a new list: JSON columns see assignments, not in-place changes
    cal.runs += 1
    cal.reference_ns = [statistics.median(s) for s in samples]
    cal.final = cal.runs >= CALIBRATION_RUNS
    session.flush()
    return cal, True


def basis_ns(cal: Calibration) -> float:
    """The geometric mean of the calibrated reference times (ns): a score is this / speedup."""
    return math.exp(statistics.fmean(math.log(t) for t in cal.reference_ns))


def apply(sub: Submission, cal: Calibration | None) -> None:
    """Set a ranked submission's score and its interval from its speedup (and interval) and the
    board's calibration (:func:`kernelrank.runner.stats.time_from_speedup`); a submission without a
    speedup or a board without a calibration keeps what it has."""
    if cal is None or not cal.reference_ns or not sub.speedup or sub.speedup <= 0:
        return
    score, low, high = time_from_speedup(basis_ns(cal), sub.speedup, sub.speedup_low, sub.speedup_high)
    sub.score_ns = score
    if low is not None:
        sub.score_low_ns, sub.score_high_ns = low, high


def rescale(session: Session, cal: Calibration) -> int:
    """Re-base every ranked score of the calibration's board on it (after a provisional
    calibration changed); returns how many submissions were updated."""
    subs = session.scalars(select(Submission).where(Submission.problem_revision_id == cal.problem_revision_id,
                                                    Submission.device == cal.device, Submission.ranked))
    n = 0
    for sub in subs:
        apply(sub, cal)
        n += 1
    return n
