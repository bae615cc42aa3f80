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
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelrank.db.models import Calibration, Submission
from kernelrank.runner import stats
from kernelrank.runner.stats import Interval
from kernelrank.vocab import Verdict

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
    cases = sorted((c for c in result.get("cases") or [] if isinstance(c, dict) and c.get("kind") == "benchmark"),
                   key=lambda c: c.get("index", 0))
    times = [((c.get("pairing") or {}).get("reference_run_ns")) for c in cases]
    if not times or not all(isinstance(t, (int, float)) and math.isfinite(t) and t > 0 for t in times):
        return None
    return [float(t) for t in times]


def run_speedup(result: dict[str, Any]) -> Interval | None:
    """A stored run result's speedup with its 95% interval (:class:`~kernelrank.runner.stats.Interval`):
    its ``speedup_interval`` as the harness reported it, else read back from ``speedup`` and
    ``speedup_ci`` (:meth:`Interval.from_bounds`: a runner that does not report the former; without
    ``speedup_ci``, a speedup whose interval is unknown); ``None``
    when it has no positive speedup (not paired, interpreted, failed) or its figures are malformed
    (a runner's report is data)."""
    try:
        d = result.get("speedup_interval")
        if isinstance(d, dict):
            interval = Interval.from_dict(d)
        else:
            speedup, bounds = result.get("speedup"), result.get("speedup_ci")
            if not isinstance(speedup, (int, float)):
                return None
            low, high = bounds[:2] if isinstance(bounds, list) and len(bounds) >= 2 else (0.0, math.inf)
            interval = Interval.from_bounds(float(speedup), float(low), float(high))
    except (ValueError, TypeError, KeyError):
        return None
    if not (math.isfinite(interval.estimate) and interval.estimate > 0):
        return None
    return interval


def over_runs(results: list[dict[str, Any]], noisy_above: float,
              board: tuple[float, int] | None = None) -> tuple[list[Interval], Interval | None, bool]:
    """A submission's speedup over its runs (a leaderboard submission's public and secret runs,
    timed one after the other by the same runner; the first result's benchmark cases are
    counted): ``(the runs' intervals, their combination, whether they disagree)``. The
    combination is the geometric mean of the runs' speedups with an interval that holds how far
    they differ (:func:`~kernelrank.runner.stats.combine_runs`); they disagree when that is too
    wide to rank (:func:`~kernelrank.runner.stats.runs_disagree`, against ``noisy_above``, the
    problem's for the device). A run's own interval cannot see a change of the machine's speed
    that lasts the whole run; a second run can (issue 14). ``board`` is the board's spread between
    runs (:func:`board_spread`), a floor under the submission's own in the interval. A result
    without a speedup (one that carries no timing) is left out; ``([], None, False)`` when none
    has one."""
    measured = [i for i in map(run_speedup, results) if i is not None]
    if not measured:
        return measured, None, False
    first = results[0]
    cases = sum(1 for c in first.get("cases") or [] if isinstance(c, dict) and c.get("kind") == "benchmark")
    disagree = math.isfinite(noisy_above) and stats.runs_disagree(measured, max(cases, 1), noisy_above)
    return measured, stats.combine_runs(measured, board), disagree


@dataclass(frozen=True)
class Measured:
    """A leaderboard submission's measurements judged together (:func:`over_measurements`).

    ``runs``: every run's speedup with its interval (passing, timed runs, in order);
    ``combined``: their combination (``None`` when none has a speedup); ``disagree``: the runs
    disagree too much to rank (:func:`~kernelrank.runner.stats.runs_disagree`); ``noisy``: a run
    of the latest measurement is too noisy to rank (its ``noisy`` flag); ``spread``: the first
    measurement's own spread between its runs (:func:`~kernelrank.runner.stats.runs_spread`), for
    the board's pool, ``None`` unless every run of it passed and was timed."""

    runs: list[Interval]
    combined: Interval | None
    disagree: bool
    noisy: bool
    spread: tuple[float, int] | None

    @property
    def rankable(self) -> bool:
        """Whether the speed is known well enough to rank: a combination, no noisy run in the
        latest measurement, runs that agree."""
        return self.combined is not None and not self.noisy and not self.disagree


def over_measurements(measurements: list[list[dict[str, Any]]], noisy_above: float,
                      board: tuple[float, int] | None = None) -> Measured:
    """A leaderboard submission's speedup over all its measurements, each the list of its run
    results (public, then secret), the earliest first: the one rule the service
    (:func:`kernelrank.services.submissions.record_run`) and ``bench/scores.py`` rank by.

    Every passing, timed run of every measurement is combined (:func:`over_runs`), noisy ones
    too: a run is never dropped for being noisy, since a kernel that made its slow runs erratic
    would otherwise be scored on its steady fast ones. A submission is measured again
    (:func:`measure_again`) while it is not :attr:`Measured.rankable`; it then ranks once its
    latest measurement has no noisy run and all its runs together agree. With more runs the
    runs' part of the interval narrows as ``sqrt(tau^2 / k)``, so a machine whose speed moved
    between two runs is averaged over more of its moments rather than read at one (issue 14:
    the GEMM reference's modes lasting minutes, docs/research/bench-history.md section 11). The stored spread
    is the first measurement's only: a measurement made again is one selected for disagreeing,
    and the board's pool (:func:`board_spread`) must stay unbiased.

    Raises:
        ValueError: no measurement.
    """
    if not measurements:
        raise ValueError("a submission is judged on at least one measurement")
    every = [r for m in measurements for r in m]
    passing = [r for r in every if r.get("status") == Verdict.passed]
    runs, combined, disagree = over_runs(passing, noisy_above, board)
    first = [run_speedup(r) for r in measurements[0]]
    timed = [i for i in first if i is not None]
    spread = stats.runs_spread(timed) if len(timed) == len(first) and all(
        r.get("status") == Verdict.passed for r in measurements[0]) else None
    noisy = any(bool(r.get("noisy")) for r in measurements[-1])
    return Measured(runs, combined, disagree, noisy, spread)


def measure_again(measured: Measured, measurements: int, remeasures: int) -> bool:
    """Whether a passing leaderboard submission that is not rankable (:attr:`Measured.rankable`)
    after ``measurements`` measurements gets another: at most ``remeasures`` more than the first
    (``settings.remeasures``). One without any timed run (interpreted) never does."""
    return measured.combined is not None and not measured.rankable and measurements <= remeasures


def board_spread(session: Session, revision_id: int, device: str, exclude_id: int | None = None) -> tuple[float, int] | None:
    """The board's spread between runs: ``(tau^2, degrees of freedom)`` of the log speedup,
    pooled (:func:`~kernelrank.runner.stats.pooled_spread`) over the :data:`SPREAD_SUBMISSIONS`
    most recently finished submissions of the board (``exclude_id`` left out) that stored their
    own (``submissions.runs_spread``, one degree of freedom each: a leaderboard submission's two
    runs); ``None`` when none did. Two runs estimate their spread from one difference; a board's
    many submissions, each such a difference on the same machine and reference, estimate it
    well (docs/research/bench-history.md)."""
    query = (select(Submission.runs_spread)
             .where(Submission.problem_revision_id == revision_id, Submission.device == device,
                    Submission.runs_spread.is_not(None))
             .order_by(Submission.finished_at.desc(), Submission.id.desc()).limit(SPREAD_SUBMISSIONS))
    if exclude_id is not None:
        query = query.where(Submission.id != exclude_id)
    return stats.pooled_spread((float(t), 1) for t in session.scalars(query))


def get(session: Session, revision_id: int, device: str) -> Calibration | None:
    """The board's calibration, if any run contributed yet."""
    return session.scalar(select(Calibration).where(Calibration.problem_revision_id == revision_id,
                                                    Calibration.device == device))


def contribute(session: Session, revision_id: int, device: str, result: dict[str, Any]) -> tuple[Calibration | None, bool]:
    """Add a passing run's reference times to the board's calibration while it is not final;
    ``(calibration, changed)``. A run too noisy to rank adds nothing. Every run that is ranked
    adds its times, a case flagged noisy included (the per-case median absorbs one wild time):
    so a board with a ranked score always has a calibration, and every ranked score of a board
    is on the same one. A run whose case count differs from the calibration's is ignored (cannot
    happen within one revision)."""
    times = run_reference_times(result)
    cal = get(session, revision_id, device)
    if times is None or result.get("noisy") or (cal is not None and (cal.final or len(cal.samples) != len(times))):
        return cal, False
    if cal is None:
        cal = Calibration(problem_revision_id=revision_id, device=device, runs=0, samples=[[] for _ in times],
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
    board's calibration; a submission without a speedup or a board without a calibration keeps
    what it has."""
    if cal is None or not cal.reference_ns or not sub.speedup or sub.speedup <= 0:
        return
    basis = basis_ns(cal)
    sub.score_ns = basis / sub.speedup
    if sub.speedup_low is not None and sub.speedup_high is not None:
        sub.score_low_ns = basis / sub.speedup_high if sub.speedup_high > 0 else 0.0
        sub.score_high_ns = basis / sub.speedup_low if sub.speedup_low > 0 else math.inf


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
