"""The judge's statistics, in one torch-free module: pure functions over recorded numbers.

What the harness and the services decide from timings, readable in one place and tested on timings
recorded on real machines (``tests/fixtures/timings/``) without a child, a device or torch (what
a timed call counts for, against the judge's clock and the job's CPU time: :mod:`kernelrank.runner.judge.judging`):

- **summaries** of per-call times (:func:`summarize`) and the **geometric mean** over cases;
- **pairing**: the submission and the reference are timed alternately, call by call, on the same
  fresh inputs; each pair gives a ratio ``reference time / submission time``, and a case's speedup
  is estimated from those ratios with a 95% interval (:func:`paired_speedup`), combined over cases
  with a geometric mean (:func:`combine`);
- whether a run is known too poorly to rank (:func:`run_noisy`; when to stop timing a case:
  :func:`kernelrank.runner.judge.judging.stop_rule`);
- **between runs**: a leaderboard submission's speedup over its public and secret runs, with an
  interval that holds how far they differ (:func:`combine_runs`), and whether they disagree too
  much to rank (:func:`runs_disagree`).

The estimator (see :func:`paired_speedup` and ``docs/research/bench-history.md``, *Choosing the estimator*): the
20% trimmed mean of the pairs' log ratios, with the Tukey-McLaughlin standard error (Wilcox,
*Introduction to Robust Estimation and Hypothesis Testing*, 4th ed., section 4.4) widened for
the pairs' serial correlation, and Student's t. Chosen on recorded timings
(``tests/fixtures/timings/``) against the mean and the median of the log ratios and the
ratio of the means.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

# -- summaries -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimingStats:
    """Summary of one side's timed calls in one case; all times in nanoseconds.

    ``stderr_ns`` is the standard error of the mean, ``std / sqrt(runs)``, with the sample
    standard deviation (n - 1); both are 0 for a single run.
    """

    runs: int
    mean_ns: float
    std_ns: float
    stderr_ns: float
    min_ns: float
    median_ns: float
    max_ns: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(times_ns: Sequence[float]) -> TimingStats:
    """Statistics of per-call times (ns).

    Raises:
        ValueError: no times.
    """
    if not times_ns:
        raise ValueError("no timed runs to summarize")
    xs = [float(t) for t in times_ns]
    n = len(xs)
    mean = statistics.fmean(xs)
    std = statistics.stdev(xs) if n > 1 else 0.0
    return TimingStats(runs=n, mean_ns=mean, std_ns=std, stderr_ns=std / math.sqrt(n), min_ns=min(xs),
                       median_ns=statistics.median(xs), max_ns=max(xs))


def geometric_mean(values: Sequence[float]) -> float:
    """Geometric mean of positive values, ``exp(mean(log v))``; the ranking rule over cases.

    Raises:
        ValueError: no values, or a value that is not positive.
    """
    if not values or any(v <= 0 for v in values):
        raise ValueError("geometric mean needs positive values")
    return math.exp(statistics.fmean(math.log(v) for v in values))


def quantile(xs: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``xs`` (nearest rank, 0 for none)."""
    if not xs:
        return 0.0
    ordered = sorted(xs)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


# -- Student's t -----------------------------------------------------------------------------------
#: Two-sided 95% quantiles of Student's t (``t_{0.975, df}``) for df = 1..30 (any statistics table,
#: e.g. NIST/SEMATECH e-Handbook of Statistical Methods, 1.3.6.7.2).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)
Z975 = 1.959964


def t975(df: float) -> float:
    """``t_{0.975, df}``: the table for df <= 30 (fractional df rounded down, so the interval errs
    wide), beyond it the Cornish-Fisher expansion around the normal quantile (Abramowitz and
    Stegun 26.7.5; within 1e-4 of the exact value for df > 30). ``inf`` for df < 1."""
    if df < 1:
        return math.inf
    if df <= 30:
        return _T975[int(df) - 1]
    z = Z975
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


# -- pairing ---------------------------------------------------------------------------------------
#: Share of the pairs' log ratios cut from each end by the trimmed mean (Wilcox's usual 20%).
TRIM = 0.2


def time_from_speedup(basis_ns: float, speedup: float, low: float | None = None,
                      high: float | None = None) -> tuple[float, float | None, float | None]:
    """A time (ns) and its interval from a speedup (with its 95% interval) and a basis, the
    geometric mean of the reference's times (ns): ``basis / speedup``; the interval's ends swap (a
    higher speedup is a lower time); a zero bound gives an infinite time, an infinite one zero.
    Without bounds the interval is ``(None, None)``. The one formula of a score."""
    if low is None or high is None:
        return basis_ns / speedup, None, None
    return basis_ns / speedup, basis_ns / high if high > 0 else 0.0, basis_ns / low if low > 0 else math.inf


@dataclass(frozen=True)
class Interval:
    """A ratio (a speedup) with its 95% interval, and what it was estimated from.

    ``estimate``, ``low``, ``high``: the ratio and the interval's ends (``low`` 0 and ``high``
    ``inf`` when it cannot be estimated, e.g. from one pair); ``log_se``: the standard error of the
    log of the estimate; ``df``: degrees of freedom of the t quantile used; ``n``: pairs;
    ``between_se``: the part of ``log_se`` that more pairs cannot shrink, the spread between the
    processes that were timed (:func:`paired_speedup` with ``groups``; 0 without).
    """

    estimate: float
    low: float
    high: float
    log_se: float
    df: float
    n: int
    between_se: float = 0.0

    @property
    def half_width(self) -> float:
        """The interval's relative half width, ``(high - low) / (2 * estimate)`` (``inf`` when
        unbounded): 0.02 means about ±2%."""
        if not math.isfinite(self.high) or self.estimate <= 0:
            return math.inf
        return (self.high - self.low) / (2 * self.estimate)

    @property
    def within_half_width(self) -> float:
        """:attr:`half_width` without the processes' offsets (``between_se``), at the interval's
        own t quantile: the part that more pairs shrink."""
        if self.between_se <= 0:
            return self.half_width
        if not math.isfinite(self.high) or self.estimate <= 0:
            return math.inf
        t = math.log(self.high / self.estimate) / self.log_se if self.log_se > 0 else 0.0
        within = math.sqrt(max(self.log_se ** 2 - self.between_se ** 2, 0.0))
        return (math.exp(t * within) - math.exp(-t * within)) / 2

    def scaled(self, basis: float) -> tuple[float, float, float]:
        """``basis / ratio`` and its interval ``(value, low, high)``: a time (ns) from a
        reference time ``basis`` (ns) and this speedup (the faster, the lower)."""
        value, low, high = time_from_speedup(basis, self.estimate, self.low, self.high)
        return value, float(low), float(high)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_bounds(cls, estimate: float, low: float, high: float, n: int = 0) -> "Interval":
        """The interval of a stored result that kept only its ratio and 95% bounds: the standard
        error of the log read back as ``log(high / low) / (2 z)`` with the normal quantile (its
        degrees of freedom are not known; taken as many), nothing known of its processes' part.
        Unbounded (``low`` <= 0 or ``high`` infinite): an unknown standard error.

        Raises:
            ValueError: ``estimate`` is not positive.
        """
        if not estimate > 0:
            raise ValueError("a ratio must be positive")
        if not (low > 0 and math.isfinite(high) and high >= low):
            return cls(estimate, 0.0, math.inf, math.inf, 0.0, n)
        return cls(estimate, low, high, math.log(high / low) / (2 * Z975), math.inf, n)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Interval":
        """Inverse of :meth:`to_dict` (a stored result's ``speedup_interval``; non-finite figures
        may come back as strings, ``"inf"``).

        Raises:
            ValueError, TypeError, KeyError: not such a dict.
        """
        return cls(float(d["estimate"]), float(d["low"]), float(d["high"]), float(d["log_se"]), float(d["df"]),
                   int(d["n"]), float(d.get("between_se", 0.0)))


def log_ratios(reference_ns: Sequence[float], submission_ns: Sequence[float]) -> list[float]:
    """``ln(reference_i / submission_i)`` per pair (ns each; both positive).

    Raises:
        ValueError: unequal lengths or a time that is not positive.
    """
    if len(reference_ns) != len(submission_ns):
        raise ValueError("pairs need as many reference times as submission times")
    if any(t <= 0 for t in reference_ns) or any(t <= 0 for t in submission_ns):
        raise ValueError("paired times must be positive")
    return [math.log(r / s) for r, s in zip(reference_ns, submission_ns)]


def trimmed_mean(xs: Sequence[float], trim: float = TRIM) -> tuple[float, float, float]:
    """``(trimmed mean, its standard error, degrees of freedom)`` of ``xs``.

    ``g = floor(trim * n)`` values are cut from each end; the standard error is Tukey and
    McLaughlin's, ``s_w / ((1 - 2 trim') sqrt(n))`` with ``s_w`` the standard deviation of the
    ``g``-winsorized sample and ``trim' = g / n``; ``df = n - 2g - 1`` (Wilcox, 4th ed., 4.4.3).
    With ``trim = 0`` this is the mean and its usual standard error. ``se`` is ``inf`` for one value.

    Raises:
        ValueError: no values, or ``trim`` outside [0, 0.5).
    """
    n = len(xs)
    if n == 0:
        raise ValueError("no values")
    if not 0 <= trim < 0.5:
        raise ValueError("trim must be in [0, 0.5)")
    ordered = sorted(xs)
    g = int(math.floor(trim * n))
    kept = ordered[g:n - g]
    mean = statistics.fmean(kept)
    if n < 2:
        return mean, math.inf, 0.0
    winsorized = [ordered[g]] * g + ordered[g:n - g] + [ordered[n - g - 1]] * g
    sw = statistics.stdev(winsorized)
    se = sw / ((1 - 2 * g / n) * math.sqrt(n))
    return mean, se, float(n - 2 * g - 1)


#: Largest lag-1 autocorrelation of the pairs' log ratios the interval allows for (beyond it the
#: pairs say too little to be counted on).
MAX_AUTOCORRELATION = 0.8


def lag1_autocorrelation(xs: Sequence[float]) -> float:
    """The lag-1 autocorrelation of a series, ``sum (x_i - m)(x_{i+1} - m) / sum (x_i - m)^2``
    (0 for fewer than 3 values or no spread)."""
    n = len(xs)
    if n < 3:
        return 0.0
    m = statistics.fmean(xs)
    var = sum((x - m) ** 2 for x in xs)
    if var <= 0:
        return 0.0
    return sum((xs[i] - m) * (xs[i + 1] - m) for i in range(n - 1)) / var


def paired_speedup(reference_ns: Sequence[float], submission_ns: Sequence[float], trim: float = TRIM,
                   groups: Sequence[int] | None = None) -> Interval:
    """The speedup of a submission over the reference from paired times, with its 95% interval.

    Args:
        reference_ns, submission_ns: per pair, in the order they were timed, the reference's and
            the submission's time (ns) on the same input set, timed one right after the other
            (either first).
        trim: share of the log ratios trimmed from each end (:data:`TRIM`).
        groups: per pair, which pair of processes (one of each side) timed it, the pairs rotating
            among them (:data:`PROCESSES`); ``None``: one pair of processes. See below.

    The estimate is ``exp(trimmed mean of ln(ref_i / sub_i))``: a geometric mean of the per-pair
    ratios, robust to the pairs that the machine disturbed (on a shared host, calls taken 2-10x
    longer by its other guests) without giving up much where there are none. Each pair's ratio
    already cancels what the machine did to both calls (its speed at that moment); the trimmed
    mean's t interval covers what it did to one of them only.

    Disturbances that last longer than a pair make neighbouring ratios alike (measured on this
    project's machines under load: lag-1 autocorrelations of 0.1-0.6), and an interval that took
    the pairs as independent would be too narrow (it held a speedup of exactly 1 in 67% of the
    cases instead of 95%). So the standard error is inflated by ``sqrt((1 + r) / (1 - r))`` and
    the degrees of freedom shrunk by ``(1 - r) / (1 + r)``, with ``r`` the lag-1 autocorrelation
    of the winsorized log ratios in time order, clipped to ``[0, MAX_AUTOCORRELATION]``: the
    effective sample size of an AR(1) series (Wilks, *Statistical Methods in the Atmospheric
    Sciences*, 3rd ed., 5.2.4). Why this estimator and not the mean, the median or the ratio of
    means: ``docs/research/bench-history.md``, *Choosing the estimator*.

    **Between processes.** Two processes running the same code on one machine differ in speed by
    a few percent for as long as they live (memory placement and the like: Mytkowicz et al.,
    *Producing Wrong Data Without Doing Anything Obviously Wrong!*, ASPLOS 2009; measured with
    ``docs/research/studies/process_effect.py``). Pairs timed by one pair of processes all share that pair's
    offset, which no number of pairs averages and the interval above cannot see. With ``groups`` the pairs were timed by ``K`` pairs of processes in rotation;
    the offsets' variance ``tau^2`` (:func:`process_variance`) is added as
    ``tau^2 / K`` to the squared standard error, the degrees of freedom by Welch-Satterthwaite
    with those of ``tau^2`` for that part. That part is ``between_se``: more pairs do not shrink
    it, more processes would. The judge times each pair of processes' share of a case in its own
    slice of the run (``harness._Evaluation._rounds``), so a group is also a moment: the
    machine's speed moving in stretches of seconds, not alike for both sides' code, shows in
    ``tau^2`` as the processes' offsets do.

    Raises:
        ValueError: no pairs, unequal lengths, a time that is not positive, or ``groups`` not one
            per pair.
    """
    logs = log_ratios(reference_ns, submission_ns)
    n = len(logs)
    mean, se, df = trimmed_mean(logs, trim)
    if n >= 3:
        ordered = sorted(logs)
        g = int(math.floor(trim * n))
        low, high = ordered[g], ordered[n - g - 1]
        r = min(max(lag1_autocorrelation([min(max(x, low), high) for x in logs]), 0.0), MAX_AUTOCORRELATION)
        se *= math.sqrt((1 + r) / (1 - r))
        df = max(1.0, df * (1 - r) / (1 + r))
    between_se = 0.0
    if groups is not None:
        if len(groups) != n:
            raise ValueError("groups need one entry per pair")
        tau2, tau_df = process_variance(_group_means(logs, groups, trim))
        between_se = math.sqrt(tau2 / len(set(groups))) if tau2 > 0 and tau_df >= 1 else 0.0
        if between_se > 0 and math.isfinite(se) and df >= 1:
            within = se
            se = math.sqrt(within ** 2 + between_se ** 2)
            df = se ** 4 / (within ** 4 / df + between_se ** 4 / tau_df)
    t = t975(df)
    if not math.isfinite(se) or not math.isfinite(t):
        return Interval(math.exp(mean), 0.0, math.inf, math.inf, df, n, between_se)
    return Interval(math.exp(mean), math.exp(mean - t * se), math.exp(mean + t * se), se, df, n, between_se)


def group_means(reference_ns: Sequence[float], submission_ns: Sequence[float], groups: Sequence[int],
                trim: float = TRIM) -> dict[int, tuple[float, float]]:
    """Per group of pairs (the pair of processes that timed them, :func:`paired_speedup`) of at
    least two pairs, the trimmed mean of its log ratios and that mean's standard error
    (:func:`trimmed_mean`).

    Raises:
        ValueError: as :func:`log_ratios`, or ``groups`` not one per pair.
    """
    logs = log_ratios(reference_ns, submission_ns)
    if len(groups) != len(logs):
        raise ValueError("groups need one entry per pair")
    return _group_means(logs, groups, trim)


def _group_means(logs: Sequence[float], groups: Sequence[int], trim: float) -> dict[int, tuple[float, float]]:
    by_group: dict[int, list[float]] = {}
    for g, x in zip(groups, logs):
        by_group.setdefault(g, []).append(x)
    return {g: trimmed_mean(xs, trim)[:2] for g, xs in by_group.items() if len(xs) >= 2}


def process_variance(means: dict[int, tuple[float, float]]) -> tuple[float, int]:
    """``(tau^2, degrees of freedom)``: the variance of the log offsets of the pairs of processes
    that timed a case's pairs (:func:`paired_speedup`, *Between processes*), from the groups'
    trimmed means ``m_j`` and their standard errors ``se_j`` (:func:`group_means`): the spread of
    the means beyond what their own errors explain, ``var(m_j) - mean(se_j^2)`` (the method of
    moments of a one-way random-effects model, as DerSimonian and Laird's for balanced groups),
    with ``groups - 1`` degrees of freedom; ``(0, 0)`` from fewer than two groups. May be
    negative: the groups then agree better than their errors say, and no offset is added. From
    three or four groups the intervals built on it hold the true ratio in 0.90-0.92 of simulated
    cases for 0.95 (``tests/runner/test_stats.py``; one group of independent pairs: 0.73-0.78):
    a known shortfall of this estimator with few groups, which Hartung and Knapp's t on the
    groups' own spread would close at the price of ``t_{0.975, K-1}`` (4.3 for three groups) on
    every case."""
    if len(means) < 2:
        return 0.0, 0
    ms = [m for m, _se in means.values()]
    return statistics.variance(ms) - statistics.fmean(se ** 2 for _m, se in means.values()), len(means) - 1


def combine(intervals: Sequence[Interval], group_means: Sequence[dict[int, tuple[float, float]]] | None = None) -> Interval:
    """The geometric mean of per-case ratios, with its 95% interval.

    The log of the geometric mean is the mean of the cases' logs, whose standard error (cases are
    timed independently) is ``sqrt(sum se_c^2) / C``; degrees of freedom by Welch-Satterthwaite,
    ``(sum se_c^2)^2 / sum(se_c^4 / df_c)``.

    With ``group_means`` (per case, :func:`group_means`: the cases were timed by the same ``K``
    pairs of processes) the processes' offsets are not taken as independent between cases: one
    pair of processes can be faster in several cases of a run. Their part is estimated once for the run, from
    each pair of processes' mean over the cases, ``M_j = mean_c m_cj`` with squared standard
    error ``sum_c se_cj^2 / C^2``, as :func:`process_variance` does for one case; the cases' own
    between-process parts (``between_se``) are replaced by it, the degrees of freedom by
    Welch-Satterthwaite with ``K - 1`` for it.

    Raises:
        ValueError: no intervals.
    """
    if not intervals:
        raise ValueError("no cases to combine")
    c = len(intervals)
    log_mean = statistics.fmean(math.log(i.estimate) for i in intervals)
    n = sum(i.n for i in intervals)
    if any(not math.isfinite(i.log_se) or i.df < 1 for i in intervals):
        return Interval(math.exp(log_mean), 0.0, math.inf, math.inf, 0.0, n)
    parts = [(i.log_se ** 2, i.df) for i in intervals]  # per case: (squared standard error, df)
    between_var, between_df = 0.0, 0  # the run's estimate of the processes' part, when it is made
    between = math.sqrt(sum(i.between_se ** 2 for i in intervals)) / c  # the part reported
    if group_means is not None and len(group_means) == c:
        shared = set.intersection(*(set(m) for m in group_means))
        run = {j: (statistics.fmean(m[j][0] for m in group_means),
                   math.sqrt(sum(m[j][1] ** 2 for m in group_means)) / c) for j in shared}
        tau2, between_df = process_variance(run)
        parts = [(i.log_se ** 2 - i.between_se ** 2, i.df) for i in intervals]
        between_var = max(tau2, 0.0) / len(shared) if between_df >= 1 else 0.0
        between = math.sqrt(between_var)
    within_var = sum(v for v, _df in parts) / c ** 2
    var = within_var + between_var
    se = math.sqrt(var)
    denominator = sum((v / c ** 2) ** 2 / df for v, df in parts) + (between_var ** 2 / between_df if between_df >= 1 else 0.0)
    df = var ** 2 / denominator if denominator > 0 else math.inf
    t = t975(df) if math.isfinite(df) else Z975
    return Interval(math.exp(log_mean), math.exp(log_mean - t * se), math.exp(log_mean + t * se), se, df, n, between)


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two intervals ``(low, high)`` share a point: two scores whose 95% intervals overlap
    cannot be told apart (a conservative rule: it calls some real differences ties, never the
    reverse at that level)."""
    return a[0] <= b[1] and b[0] <= a[1]


def run_noisy(combined: Interval, cases: int, noisy_above: float) -> bool:
    """Whether a run is too noisy to rank: its speedup's interval over the cases
    (:func:`combine`), without the processes' offsets (:attr:`Interval.within_half_width`, as
    :func:`~kernelrank.runner.judge.judging.stop_rule` holds a case), is wider than ``noisy_above / sqrt(cases)`` (relative half
    widths), the width of a run whose every case is at the limit.

    A case still wider than ``noisy_above`` after its extra time is flagged (:func:`~kernelrank.runner.judge.judging.stop_rule`),
    but the ranked number is the run's score, a geometric mean over its cases: one case the host
    disturbed while the others are precise leaves a score known well enough to rank, shown with
    its interval (ties marked by overlap). Held case by case instead, the rule refused a third
    of honest runs (``docs/research/bench-history.md``).

    Raises:
        ValueError: ``cases`` < 1.
    """
    if cases < 1:
        raise ValueError("a run has at least one case")
    return combined.within_half_width > noisy_above / math.sqrt(cases)


# -- between runs ----------------------------------------------------------------------------------
def combine_runs(runs: Sequence[Interval], board: tuple[float, int] | None = None) -> Interval:
    """A submission's speedup from ``k`` runs of it (a leaderboard submission's public and secret
    runs), each a run's speedup over its cases with its 95% interval (:func:`combine`): the
    geometric mean of the runs' speedups, with an interval that holds how far the runs disagree.

    A run's interval says how well that run knows the speedup at the machine's speed of the
    moment; it cannot see a change of the machine that lasts the whole run. Their spread is estimated as the processes' offsets are within a run
    (:func:`process_variance`, a one-way random-effects model, DerSimonian and Laird's method of
    moments): ``tau^2 = var(m_i) - mean(se_i^2)`` over the runs' log speedups ``m_i`` and
    standard errors ``se_i``, taken as 0 when negative. With equal weights (each run is one draw
    of the machine's state), the log of the estimate is ``mean(m_i)`` and its squared standard
    error ``sum(se_i^2) / k^2 + tau^2 / k``.

    The runs' part is taken as known, with the normal quantile for it, as in DerSimonian and
    Laird's original method: from two runs its own estimate has one degree of freedom, and its
    t (12.7) would make nearly every entry's interval +-20-40% wide; the degrees of freedom are
    then the runs' own, by Welch-Satterthwaite. That falls short of 95% when the speedup does move
    between runs: simulated with softmax's idle spread (sd 4% of the log between runs, each run
    +-3%), one run's interval holds the long-run speedup in about 52% of cases, two runs'
    combination in about 77% (``tests/runner/test_stats.py``): two runs that happen to agree
    say the machine holds still when it does not. So ``board``, the spread between runs pooled
    over the board's other recent submissions (:func:`pooled_spread` of their
    :func:`runs_spread`: many degrees of freedom), is a floor under the submission's own: the
    runs' part is ``max(own tau^2, board tau^2, 0) / k``. A submission whose runs differ by more
    than the board's keeps its own (its runs saw something); one whose runs happen to agree gets
    the board's. With 30 earlier submissions the same simulation holds the truth in about 95%
    of cases. Whether the runs agree well enough to rank is a separate rule
    (:func:`runs_disagree`), on the submission's own runs.
    ``log_se`` of the result is its half width over its t; ``between_se`` holds the processes'
    part of the runs and the runs' part at that scale, neither of which more pairs shrink (the
    :attr:`Interval.within_half_width` that :func:`run_noisy` holds leaves them out).

    Args:
        runs: the runs' speedups with their 95% intervals, in any order.
        board: ``(tau^2, degrees of freedom)`` of the board's spread between runs (of the log
            speedup; :func:`pooled_spread`), or ``None`` (no other submission measured yet).

    One run: that run's interval unchanged.

    Raises:
        ValueError: no runs, or a run whose speedup is not positive.
    """
    if not runs:
        raise ValueError("no runs to combine")
    if any(not (r.estimate > 0) for r in runs):
        raise ValueError("a run's speedup must be positive")
    if len(runs) == 1:
        return runs[0]
    k = len(runs)
    logs = [math.log(r.estimate) for r in runs]
    log_mean = statistics.fmean(logs)
    n = sum(r.n for r in runs)
    if any(not math.isfinite(r.log_se) or r.df < 1 for r in runs):
        return Interval(math.exp(log_mean), 0.0, math.inf, math.inf, 0.0, n)
    runs_var = _runs_variance(runs)
    if board is not None and board[1] >= 1:
        runs_var = max(runs_var, board[0] / k)
    within_var = sum(r.log_se ** 2 for r in runs) / k ** 2
    denominator = sum((r.log_se ** 2 / k ** 2) ** 2 / r.df for r in runs)
    df = within_var ** 2 / denominator if denominator > 0 else math.inf
    t = t975(df) if math.isfinite(df) else Z975
    # the quantile of each part: the runs' own t for theirs, the normal one for the runs' spread
    half = math.sqrt((t * math.sqrt(within_var)) ** 2 + (Z975 * math.sqrt(runs_var)) ** 2)
    # log_se is the half width over t, so that t * log_se is the interval; the runs' part is
    # carried in it (and in between_se) at the size that gives its normal quantile under that t
    log_se = half / t
    between = math.sqrt(sum(r.between_se ** 2 for r in runs) / k ** 2 + (Z975 / t) ** 2 * runs_var)
    return Interval(math.exp(log_mean), math.exp(log_mean - half), math.exp(log_mean + half), log_se, df, n,
                    min(between, log_se))


def _runs_variance(runs: Sequence[Interval]) -> float:
    """The runs' part of the squared standard error of their mean log speedup, ``max(tau^2, 0) / k``
    from the runs alone (:func:`combine_runs`)."""
    spread = runs_spread(runs)
    return max(spread[0], 0.0) / len(runs) if spread is not None else 0.0


def runs_spread(runs: Sequence[Interval]) -> tuple[float, int] | None:
    """``(tau^2, degrees of freedom)``: one submission's own estimate of how far its runs' speedups
    move between runs beyond their own errors, ``var(log m_i) - mean(se_i^2)`` (of the log speedup;
    :func:`process_variance` over runs) with ``k - 1`` degrees of freedom, *not* floored at 0: an
    unbiased method-of-moments estimate, to be pooled over a board's submissions
    (:func:`pooled_spread`; flooring each first would bias the pool upwards). ``None`` from fewer
    than two runs or a run without a bounded interval (its ``log_se`` infinite) or speedup."""
    if len(runs) < 2 or any(not (r.estimate > 0) or not math.isfinite(r.log_se) for r in runs):
        return None
    tau2, df = process_variance({i: (math.log(r.estimate), r.log_se) for i, r in enumerate(runs)})
    return tau2, df


def pooled_spread(spreads: Iterable[tuple[float, int]]) -> tuple[float, int] | None:
    """``(tau^2, degrees of freedom)`` pooled over submissions' :func:`runs_spread`: their mean
    weighted by degrees of freedom (each submission's spread is one sample of the machine's
    between-run variance on that board; the method of moments pooled as variances are), floored
    at 0, and the sum of the degrees of freedom. ``None`` when there is none (or only
    non-finite ones)."""
    usable = [(t, d) for t, d in spreads if math.isfinite(t) and d >= 1]
    df = sum(d for _t, d in usable)
    if not df:
        return None
    return max(sum(t * d for t, d in usable) / df, 0.0), df


def runs_disagree(runs: Sequence[Interval], cases: int, noisy_above: float) -> bool:
    """Whether a submission's runs disagree too much to rank it: the runs' part of the combined
    interval (:func:`combine_runs`), ``z * sqrt(tau^2 / k)`` as a relative half width, is wider
    than ``noisy_above / sqrt(cases)``, the width at which one run is too noisy to rank
    (:func:`run_noisy`). With two runs each known to +-3% and the problem's default
    ``noisy_above`` (0.25) over four cases, they disagree when their speedups differ by more than
    about 14%. Measured again, the submission gets new runs.

    Raises:
        ValueError: ``cases`` < 1.
    """
    if cases < 1:
        raise ValueError("a run has at least one case")
    if len(runs) < 2 or any(not (r.estimate > 0) or not math.isfinite(r.log_se) for r in runs):
        return False
    s = math.sqrt(_runs_variance(runs))
    return (math.exp(Z975 * s) - math.exp(-Z975 * s)) / 2 > noisy_above / math.sqrt(cases)
