"""The one decision over a submission's runs: its verdict, its speedup with its interval, whether it
is ranked or measured again, and its score, from the run results the runner reported and the
board's spread and calibration. The service (:func:`kernelrank.services.submissions.record_run`),
the CLI's ``kernelrank eval`` and ``bench/scores.py`` all call :func:`judge`.

Pure functions over run results (``EvalResult.to_dict()``): no database, no torch. The method,
with the evidence behind its constants, is in docs/judging.md ("Scores, measurements and ranks").

- **Verdict**: the first failing run's status and message (a secret-seed run's message says so),
  else ``passed`` with the public run's message.
- **Speedup**: every passing, timed run of every measurement combined
  (:func:`~kernelrank.runner.stats.combine_runs`: their geometric mean, with an interval that holds
  how far they differ, never narrower than the board's spread between runs). A run is never
  dropped for being noisy: a kernel that made its slow runs erratic would otherwise be scored on
  its steady fast ones.
- **Ranked**: a passing leaderboard submission that may take a rank (before the deadline, not
  disqualified), none of whose runs measured Triton's interpreter, whose latest measurement has no
  run too noisy to rank (:func:`~kernelrank.runner.stats.run_noisy`) and whose runs agree
  (:func:`~kernelrank.runner.stats.runs_disagree`). One that is not, for noise, a run that could
  not be measured (the machine too busy: no speedup) or disagreement, is measured again while it
  has fewer than ``remeasures`` extra measurements, each after a longer wait (:class:`Backoff`);
  then it has *given up* (:attr:`Judgement.gave_up`), which the service tells the admins.
- **Score** (ns): the board's calibrated reference time (the geometric mean over cases) divided by
  the speedup (:func:`~kernelrank.runner.stats.time_from_speedup`); until the calibration exists, the public run's own
  reference time is the basis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kernelrank.format import speedup
from kernelrank.roofline import FLOOR_REASON
from kernelrank.runner import stats
from kernelrank.runner.stats import Interval, time_from_speedup
from kernelrank.vocab import CaseKind, Mode, RunKind, Verdict, run_kinds

#: A board's spread between runs, ``(tau^2 of the log speedup, degrees of freedom)``.
Spread = tuple[float, int]


def run_speedup(result: dict[str, Any]) -> Interval | None:
    """A stored run result's speedup with its 95% interval (:class:`~kernelrank.runner.stats.Interval`):
    its ``speedup_interval`` as the harness reported it, else read back from ``speedup`` and
    ``speedup_ci`` (:meth:`Interval.from_bounds`; without ``speedup_ci``, a speedup whose interval
    is unknown); ``None`` when it has no positive speedup (not paired, interpreted, failed) or its
    figures are malformed (a runner's report is data)."""
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
              board: Spread | None = None) -> tuple[list[Interval], Interval | None, bool]:
    """Runs' speedups judged together (the first result's benchmark cases are counted):
    ``(the runs' intervals, their combination, whether they disagree)``. The combination is
    :func:`~kernelrank.runner.stats.combine_runs` with ``board`` (the board's spread between runs)
    as a floor; they disagree when that is too wide to rank
    (:func:`~kernelrank.runner.stats.runs_disagree`, against ``noisy_above``, the problem's for the
    device). A run's own interval cannot see a change of the machine's speed that lasts the whole
    run; a second run can. A result without a speedup is left out; ``([], None, False)`` when none
    has one."""
    measured = [i for i in map(run_speedup, results) if i is not None]
    if not measured:
        return measured, None, False
    first = results[0]
    cases = sum(1 for c in first.get("cases") or [] if isinstance(c, dict) and c.get("kind") == CaseKind.benchmark)
    disagree = math.isfinite(noisy_above) and stats.runs_disagree(measured, max(cases, 1), noisy_above)
    return measured, stats.combine_runs(measured, board), disagree


@dataclass(frozen=True)
class Measured:
    """A leaderboard submission's measurements judged together (:func:`over_measurements`).

    ``runs``: every passing, timed run's speedup with its interval, in order; ``combined``: their
    combination (``None`` when none has a speedup); ``disagree``: the runs disagree too much to
    rank; ``noisy``: a run of the latest measurement is too noisy to rank (its ``noisy`` flag);
    ``spread``: the first measurement's own spread between its runs
    (:func:`~kernelrank.runner.stats.runs_spread`), for the board's pool, ``None`` unless every
    run of it passed and was timed."""

    runs: list[Interval]
    combined: Interval | None
    disagree: bool
    noisy: bool
    spread: Spread | None

    @property
    def rankable(self) -> bool:
        """Whether the speed is known well enough to rank: a combination, no noisy run in the
        latest measurement, runs that agree."""
        return self.combined is not None and not self.noisy and not self.disagree


def over_measurements(measurements: list[list[dict[str, Any]]], noisy_above: float,
                      board: Spread | None = None) -> Measured:
    """A submission's speedup over all its measurements, each the list of its run results (public,
    then secret), the earliest first. With more runs the runs' part of the interval narrows as
    ``sqrt(tau^2 / k)``: a machine whose speed moved between two runs is averaged over more of its
    moments rather than read at one (docs/research/bench-history.md). The spread is the first
    measurement's only: a measurement made again is one selected for disagreeing, and the board's
    pool must stay unbiased.

    Raises:
        ValueError: no measurement.
    """
    if not measurements:
        raise ValueError("a submission is judged on at least one measurement")
    passing = [r for m in measurements for r in m if r.get("status") == Verdict.passed]
    runs, combined, disagree = over_runs(passing, noisy_above, board)
    first = [run_speedup(r) for r in measurements[0]]
    timed = [i for i in first if i is not None]
    spread = stats.runs_spread(timed) if len(timed) == len(first) and all(
        r.get("status") == Verdict.passed for r in measurements[0]) else None
    noisy = any(bool(r.get("noisy")) for r in measurements[-1])
    return Measured(runs, combined, disagree, noisy, spread)


def measure_again(measured: Measured, measurements: int, remeasures: int) -> bool:
    """Whether a passing leaderboard submission that is not :attr:`Measured.rankable` after
    ``measurements`` measurements gets another: at most ``remeasures`` more than the first. One
    with a timed run does, and so does one whose latest measurement has a run the judge could not
    time (``noisy`` without a speedup: the machine too busy); one without either (interpreted)
    never does."""
    return measurable(measured) and not measured.rankable and measurements <= remeasures


def measurable(measured: Measured) -> bool:
    """Whether measuring again could make it rankable: it has a timed run, or its latest
    measurement has a noisy one (a run left unmeasured is ``noisy``, without a speedup)."""
    return measured.combined is not None or measured.noisy


@dataclass(frozen=True)
class Backoff:
    """How long a measurement made again waits before its job is sent: ``first_s`` for the first
    made again, each later one ``factor`` times the one before (settings'
    ``remeasure_delay_seconds`` and ``remeasure_backoff``: 30 s, 2 min, 8 min). Load that spoiled
    one measurement often lasts minutes; measuring again at once would meet it again."""

    first_s: float = 0.0
    factor: float = 1.0

    def delay_s(self, made_again: int) -> float:
        """Seconds before measurement ``made_again + 1`` (``made_again`` >= 1: the first made
        again waits ``first_s``)."""
        return self.first_s * self.factor ** max(0, made_again - 1)


@dataclass(frozen=True)
class Judgement:
    """A submission's runs judged (:func:`judge`).

    ``status``, ``message``: the verdict and what the author reads; ``measured``: the runs'
    speedups over every measurement (:class:`Measured`); ``speedup`` and ``speedup_low``/
    ``speedup_high``: the combined speedup and its 95% interval (the bounds ``None`` when
    unbounded); ``ranked``: it takes a rank; ``again``: it is to be measured again (a new attempt);
    ``noisy``: too noisy to rank (or interpreted); ``interpreted``: a run measured Triton's
    interpreter; ``spread``: the submission's own spread between runs for the board's pool;
    ``score_ns``, ``score_low_ns``, ``score_high_ns``: its score on the public run's own basis
    (re-based on the board's calibration by :func:`~kernelrank.runner.stats.time_from_speedup`), ``None`` unless ranked;
    ``needs_review``, ``review_reason``: a speedup beyond the problem's review threshold;
    ``unquiet``: why its noise keeps a rankable submission unranked (its runs disagree, a run too
    noisy, a run not measured), ``None`` when it does not; ``gave_up``: so, and it is not measured
    again (every measurement allowed was made): the service tells the admins."""

    status: str
    message: str
    measured: Measured
    speedup: float | None
    speedup_low: float | None
    speedup_high: float | None
    ranked: bool
    again: bool
    noisy: bool
    interpreted: bool
    spread: float | None
    score_ns: float | None
    score_low_ns: float | None
    score_high_ns: float | None
    needs_review: bool
    review_reason: str | None
    unquiet: str | None = None
    gave_up: bool = False

    @property
    def failed(self) -> bool:
        """Whether a run did not pass."""
        return self.status != Verdict.passed


@dataclass(frozen=True)
class RunRecord:
    """One recorded run: its kind (``public``/``secret``), status (a verdict), its result as the
    runner reported it (``EvalResult.to_dict()``) and its score (ns) as stored."""

    kind: str
    status: str
    result: dict[str, Any]
    score_ns: float | None = None


def failing_runs(measurements: list[list[RunRecord]]) -> list[RunRecord]:
    """The runs that did not pass, in order."""
    return [r for m in measurements for r in m if r.status != Verdict.passed]


def judge(measurements: list[list[RunRecord]], *, mode: str, noisy_above: float, board: Spread | None = None,
          may_rank: bool = True, remeasures: int = 0, review_cleared: bool = False) -> Judgement:
    """Judge a submission over its measurements, each one run of every kind ``mode`` takes
    (:func:`~kernelrank.vocab.run_kinds`), the earliest first; the latest measurement must hold
    them all. ``noisy_above`` is the problem's for the device; ``board`` the board's spread
    between runs (only used where two runs are combined and none failed); ``may_rank``: the
    submission may take a rank at all (made before the deadline, not disqualified);
    ``remeasures``: how many measurements may be made again. A run marked for review marks the
    submission (``needs_review``) unless ``review_cleared`` (an admin looked); one beyond the
    physics floor (:data:`~kernelrank.roofline.FLOOR_REASON`) also holds it unranked.

    Raises:
        ValueError: no measurement, or the latest lacks a run of a kind ``mode`` takes.
    """
    if not measurements:
        raise ValueError("a submission is judged on at least one measurement")
    latest = {r.kind: r for r in measurements[-1]}
    expected = run_kinds(mode)
    if not all(k in latest for k in expected):
        raise ValueError(f"a {mode} measurement takes runs {', '.join(expected)}")
    ordered = [sorted(m, key=lambda r: r.kind != RunKind.public) for m in measurements]
    public = latest[RunKind.public]
    failing = failing_runs(ordered)
    if failing:
        prefix = "secret-seed run: " if failing[0].kind == RunKind.secret else ""
        status, message = failing[0].status, prefix + str(failing[0].result.get("message", ""))
    else:
        status, message = Verdict.passed.value, str(public.result.get("message", ""))
    flagged = [r for m in ordered for r in m if r.result.get("needs_review")]
    needs_review = bool(flagged) and not failing and not review_cleared
    review_reason = str(flagged[0].result.get("review_reason") or "")[:2000] if needs_review else None
    interpreted = any(bool(r.result.get("interpreted")) for m in ordered for r in m)
    # the board's spread only counts where two runs are combined (a failing run leaves one at most)
    board = board if mode == Mode.leaderboard and not failing else None
    measured = over_measurements([[dict(r.result, status=r.status) for r in m] for m in ordered], noisy_above, board)
    combined = measured.combined
    spread = measured.spread[0] if measured.spread is not None and len(expected) > 1 and not interpreted else None
    speedup = _finite(combined.estimate) if combined is not None else _finite(public.result.get("speedup"))
    bounded = combined is not None and combined.low > 0 and math.isfinite(combined.high)
    low, high = (combined.low, combined.high) if bounded else (None, None)
    noisy = interpreted or measured.noisy
    eligible = mode == Mode.leaderboard and not failing and may_rank
    again = eligible and not interpreted and measure_again(measured, len(measurements), remeasures)
    held = needs_review and str(review_reason).startswith(FLOOR_REASON)  # unranked until an admin clears it
    ranked = (eligible and not again and public.score_ns is not None and not noisy and not measured.disagree
              and combined is not None and not held)
    score = score_low = score_high = None
    if ranked and combined is not None:
        own = run_speedup(public.result)
        if own is None:  # a report with a score and no speedup: its score as it stands
            score = public.score_ns
        else:
            score, score_low, score_high = time_from_speedup(float(public.score_ns) * own.estimate, combined.estimate,
                                                          low, high)
    unmeasured = any(r.status == Verdict.passed and r.result.get("noisy") and run_speedup(r.result) is None
                     for r in ordered[-1])
    unquiet = None
    if eligible and not interpreted and not measured.rankable and measurable(measured):
        unquiet = (f"its runs disagree (speedups {speedups_text(measured.runs)})" if measured.disagree else
                   "a run could not be measured (the machine was too busy)" if unmeasured else
                   "a run was too noisy to rank")
    after = f" after {len(measurements)} measurements" if len(measurements) > 1 else ""
    if measured.disagree and not failing:
        message = (f"{message}; not ranked: its runs disagree{after} (speedups {speedups_text(measured.runs)}): "
                   f"the machine's speed changed between them; not ranked until "
                   f"{'an admin measures it afresh' if after else 'measured again'}")[:4000]
    elif noisy and not interpreted and not failing and after:
        message = f"{message}; not ranked: a run still {'not measured' if unmeasured else 'too noisy'}{after}"[:4000]
    elif held and eligible and not again:
        message = f"{message}; not ranked: held for an admin's review ({review_reason})"[:4000]
    return Judgement(status, message, measured, speedup, low, high, ranked, again, noisy, interpreted, spread,
                     score, score_low, score_high, needs_review, review_reason, unquiet=unquiet,
                     gave_up=unquiet is not None and not again)


def speedups_text(runs: list[Interval]) -> str:
    """Runs' speedups for a message: ``"2.00× and 3.00×"``, ``"2.00×, 3.00× and 2.50×"``."""
    texts = [speedup(i.estimate) for i in runs]
    return " and ".join([", ".join(texts[:-1]), texts[-1]] if len(texts) > 2 else texts)


def _finite(value: Any) -> float | None:
    """A stored figure: a finite number, else ``None`` (a runner's report is data)."""
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
