"""The judge's rules over a case's timings: what a child's timed calls count for (its claims against
the judge's clock and the job's CPU time), and when to stop timing a case.

Pure, torch-free functions over recorded numbers (ns), like :mod:`kernelrank.runner.stats`:

- **the stop rule** (:func:`stop_rule`): time a case until its interval is within its target
  (once every process timed it), or (when it is still too wide) its extra time up to a cap is spent;

- per request, the claims or the window less the reference's overhead, whichever is longer
  (:func:`judged_times`; the fallback for cases of few requests), and the rejection of a clock
  that lies grossly (:func:`wall_check`);
- in batches of calls, against the path's median overhead and its spread measured on the
  reference's requests (:func:`runner_overhead`, :func:`judge_batches`);
- the CPU time the job's whole cgroup used beyond what the claims can hold, charged to the calls
  (:func:`cpu_path`, :func:`cpu_charges`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Iterator, Sequence

from kernelrank.runner.stats import Interval, quantile


# -- the stop rule ---------------------------------------------------------------------------------
#: Fewest pairs before an interval may stop a case early (an interval from a handful of pairs is
#: itself uncertain).
MIN_PAIRS = 10
#: Most pairs per case (the field: 100, up to 1000 runs).
MAX_PAIRS = 1000
#: Relative half width of a case's speedup interval at which timing may stop before the budget is
#: spent, per device class.
PRECISION = {"cpu": 0.01, "cuda": 0.002}
#: Pairs of processes (one of each side) that time a case's pairs, one per round of its slices
#: (``harness._Evaluation._rounds``), per device class, unless
#: the problem's ``timing`` says otherwise (``CaseTiming.processes``): the per-process offset
#: (:func:`~kernelrank.runner.stats.paired_speedup`, *Between processes*) is averaged over them and shows in the interval.
#: CPU: 4 (three degrees of freedom for the offsets' part, t = 3.2). CUDA: 1 until measured on a
#: GPU (two groups would give one degree of freedom, t = 12.7: wide intervals at ±0.2% precision).
PROCESSES = {"cpu": 4, "cuda": 1}


def stop_rule(interval: Interval | None, spent_s: float, budget_s: float, noisy_above: float, cap: float,
              precision: float, min_pairs: int = MIN_PAIRS, max_pairs: int = MAX_PAIRS,
              target: float | None = None, settled_s: float | None = None) -> tuple[bool, bool]:
    """Whether to stop timing a case, and whether it is (still) too noisy: ``(stop, noisy)``.

    Args:
        interval: the case's speedup interval so far (``None`` before any pair).
        spent_s: seconds spent timing the case so far (warm-up excluded).
        budget_s: the case's timing budget (the problem's ``timing`` for the device and mode).
        noisy_above: relative half width beyond which a case is too noisy once its time is up.
        cap: most time per case, as a multiple of ``budget_s`` (>= 1).
        precision: relative half width at which the case may stop early (:data:`PRECISION`).
        target: relative half width a case is timed to, past its budget if need be (the
            problem's ``CaseTiming.target``); ``None`` or above ``noisy_above``: ``noisy_above``.
        settled_s: seconds after which a case within ``target`` may stop (``None``: the budget;
            the timed phase passes the time by which each of its processes has timed the case
            once, :data:`~kernelrank.runner.judge.timed.SLICES_PER_PROCESS`, or 0 where a slice
            ends at its counted pairs, :data:`~kernelrank.runner.judge.timed.SLICE_PAIRS`: it
            asks only once every pair of processes had its slice).

    Stops at ``max_pairs``; early, after ``min_pairs``, once the half width is under
    ``precision``; once ``settled_s`` (at most the budget) is spent, when the half width is at
    most ``target``; otherwise timing
    goes on (a case short of its target gets more time) until ``cap * budget_s``, where it stops,
    noisy if wider than ``noisy_above``. A case stops at its budget only with ``min_pairs``
    pairs or more: an interval from fewer is itself unsure; a slow kernel that has fewer gets its extra time, and is judged at the cap like
    any other. ``target`` and ``noisy_above`` are held against the interval without the
    processes' offsets (:attr:`Interval.within_half_width`): more time does not shrink those, nor
    does measuring again (a new run draws new processes); they stay in the interval reported.
    """
    n = 0 if interval is None else interval.n
    if n >= min_pairs and interval is not None and interval.half_width <= precision:
        return True, False
    width = math.inf if interval is None else interval.within_half_width
    if n >= max_pairs:
        return True, width > noisy_above
    enough = noisy_above if target is None else min(target, noisy_above)
    if spent_s >= (budget_s if settled_s is None else min(settled_s, budget_s)) and n >= min_pairs and width <= enough:
        return True, False
    if spent_s >= cap * budget_s and n >= 1:
        return True, width > noisy_above
    return False, False


# -- the wall-clock judging of claims --------------------------------------------------------------
#: A request counts as ``max(its claims, window - allowance - WALL_JITTER_NS)``: a claim shorter
#: than the judge saw buys at most the allowance and this.
WALL_JITTER_NS = 30_000
#: The reference's overhead per request (window - claims: thaw, two socket hops, the child's
#: bookkeeping and tripwire, freeze) that the gross-lie rule (:func:`wall_check`) starts from is
#: this quantile of its requests in the case: low, so that load while the reference was timed
#: does not widen it.
OVERHEAD_QUANTILE = 0.1
#: ... and the allowance a request of either side may leave unexplained before its claims give way
#: to the judge's figure (:func:`judged_times`) is this quantile: high, so that an honest request's
#: claims stand (the path's overhead varies from request to request by ±0.3-2 ms). The judged
#: time of an honest request must not carry the path: that overhead is the same few ms on both
#: sides, so it would pull every speedup towards 1 (claims of 0.36x read 0.48x with the allowance
#: capped at 0.5 ms). A lie gains at most the allowance less its own path's overhead.
ALLOWANCE_QUANTILE = 0.9
#: Most the gross-lie rule allows for the reference's overhead (:func:`wall_check`; an idle
#: machine's path: 0.3-3 ms a request, depending on how fast the child freezes): a machine
#: busy enough to stretch the reference's windows does not make room for a lie there.
OVERHEAD_CAP_NS = 500_000
#: A run whose claims leave, on a quarter of its requests or more, more than twice the reference's
#: overhead plus this much unexplained is rejected outright (a clock that lies grossly)...
WALL_SLACK_NS = 500_000
#: ... looked at through this quantile of the per-request unexplained time: load from other
#: processes inflates some requests' windows, a lie inflates all of them...
WALL_QUANTILE = 0.25
#: ... unless the claims still explain this fraction of the judged time: sustained load stretches
#: the calls with their windows, a gross lie cannot.
MIN_EXPLAINED_FRACTION = 0.5
#: Least CPU time of the child's main thread per request outside its call that the rule allows
#: for (its bookkeeping: the request's JSON, the tripwire's snapshot, describing the output;
#: up to 0.55 ms per request at load 8). The reference's own figure (its main
#: thread's CPU time less its claims) is only a lower bound: a call that waits (a busy machine, a
#: reference that sleeps) claims more than it uses, and an honest fast kernel was rejected beside
#: such a reference.
MAIN_OVERHEAD_FLOOR_NS = 500_000
#: What each call of a request beyond its first adds to both allowances of the gross-lie rule: the
#: child's own work per call outside the claim (building the input set's views, the alias check,
#: describing the output: 190-260 µs of the calling thread's CPU per call, doubled like the other
#: terms; 150 µs rejected an honest fast kernel beside a slow reference). Requests of several calls
#: (the CPU's, ``timed.REQUEST_SECONDS``) would otherwise be held to a single call's allowance. It
#: buys no time: each request still counts for its window less the path, and its job's CPU time.
BOOKKEEPING_PER_CALL_NS = 500_000


def request_claims(claims: Sequence[int], sizes: Sequence[int] | None, requests: int) -> list[int]:
    """Per request, the sum of its calls' claims (ns); ``sizes[i]`` calls in request ``i``
    (default: one call each)."""
    sizes = list(sizes) if sizes else [1] * requests
    out, i = [], 0
    for k in sizes:
        out.append(sum(claims[i:i + k]))
        i += k
    return out


def overhead(claims: Sequence[int], windows: Sequence[int], sizes: Sequence[int] | None = None,
             q: float = OVERHEAD_QUANTILE) -> float:
    """The reference's per-request overhead (ns): the ``q`` quantile (:data:`OVERHEAD_QUANTILE`
    for the gross-lie rule, :data:`ALLOWANCE_QUANTILE` for :func:`judged_times`) of window - claims
    over its requests, at least 0."""
    per_request = request_claims(claims, sizes, len(windows))
    return max(0.0, quantile([w - c for w, c in zip(windows, per_request)], q))


def judged_times(claims: Sequence[int], windows: Sequence[int], allowance_ns: float,
                 sizes: Sequence[int] | None = None) -> list[float]:
    """The time each call counts for (ns): its claim, or its share of what the judge's clock saw.

    ``claims`` are the child's per-call times (``perf_counter_ns`` or CUDA events around each
    call); ``windows`` the judge's windows, one per ``go`` request (thaw to frozen again), holding
    ``sizes[i]`` back-to-back calls (default: one each); ``allowance_ns`` the reference's
    per-request overhead at :data:`ALLOWANCE_QUANTILE` (:func:`overhead`). A request counts for the
    larger of its claims' sum and its window less the allowance and :data:`WALL_JITTER_NS`; its
    calls share that in proportion to their claims. An honest request's claims are almost always
    the larger (so the figures are the child's fine-grained ones, as
    ``torch.utils.benchmark.Timer`` takes them, without the path's overhead); a claim the judge's
    clock does not support is replaced by the judge's figure. Both sides of a pair are judged by
    this same rule.
    """
    allowance = allowance_ns + WALL_JITTER_NS
    sizes = list(sizes) if sizes else [1] * len(windows)
    out: list[float] = []
    i = 0
    for window, k in zip(windows, sizes):
        mine = claims[i:i + k]
        i += k
        total = sum(mine)
        judged = max(float(total), window - allowance)
        if total > 0:
            out.extend(c * judged / total for c in mine)
        else:
            out.extend(judged / len(mine) for _ in mine)
    return out


def wall_check(claims: Sequence[int], windows: Sequence[int], main_cpu: Sequence[int], overhead_ns: float,
               main_overhead_ns: float, sizes: Sequence[int] | None = None) -> dict[str, Any]:
    """Cross-check a submission's claimed times against the judge's clock, per request.

    Args:
        claims: per call, the child's claim (ns).
        windows: per request, the judge's window, thaw to frozen (ns).
        main_cpu: per request, CPU time of the child's main thread in the window (ns), from
            ``/proc/<pid>/task/<tid>/schedstat`` (which the child cannot forge and load cannot raise).
        overhead_ns: the reference's per-request overhead in the same case (:func:`overhead`).
        main_overhead_ns: the median over the reference's requests of its main thread's CPU time
            in the window less its claims (ns).

    A claim longer than its window is impossible (the harness rejects it as the calls come). A
    clock that lies grossly is rejected: the :data:`WALL_QUANTILE` quantile of window - claims
    beyond twice the reference's overhead (at most :data:`OVERHEAD_CAP_NS`) plus
    :data:`WALL_SLACK_NS`, with the claims explaining
    under :data:`MIN_EXPLAINED_FRACTION` of the judged time, and the same quantile of the calling
    thread's CPU time past the claims beyond twice the reference's (at least
    :data:`MAIN_OVERHEAD_FLOOR_NS`) plus :data:`WALL_SLACK_NS`; both allowances grow by
    :data:`BOOKKEEPING_PER_CALL_NS` per call of a request beyond its first. On a machine so busy that a call
    waits longer than the work hidden outside it, the CPU time cannot show the lie (the claims
    then hold waiting too), and the rule lets it pass: it still gains nothing.
    Smaller lies gain little: each request counts for at least its window less the allowance
    (the reference's overhead at :data:`ALLOWANCE_QUANTILE`) and :data:`WALL_JITTER_NS`
    (:func:`judged_times`). Work moved out of the call is not looked for:
    outside its windows the child's cgroup is frozen.

    Returns the figures as a dict (``passed``, ``message``, ...), stored with the case.
    """
    per_request = request_claims(claims, sizes, len(windows))
    unexplained = [w - c for w, c in zip(windows, per_request)]
    main_unexplained = [m - c for m, c in zip(main_cpu, per_request)]
    low = quantile(unexplained, WALL_QUANTILE)
    # the overhead capped: with the reference timed in the same run, a machine
    # busy enough to stretch its windows by 15-20 ms (at load 10) would otherwise allow a
    # lie of that size; then the calling thread's CPU time below is what tells load from a lie
    extra = (max(sizes) - 1) * BOOKKEEPING_PER_CALL_NS if sizes else 0
    allowed = 2 * min(overhead_ns, OVERHEAD_CAP_NS) + WALL_SLACK_NS + extra
    capped = min(overhead_ns, OVERHEAD_CAP_NS)
    allowance = capped + WALL_JITTER_NS
    replaced = sum(1 for u in unexplained if u > allowance)
    claimed_mean = statistics.fmean(claims) if claims else 0.0
    judged = sum(judged_times(claims, windows, capped, sizes))
    explained = sum(claims) / max(1.0, judged)
    main_low = quantile(main_unexplained, WALL_QUANTILE)
    main_allowed = 2 * max(main_overhead_ns, MAIN_OVERHEAD_FLOOR_NS) + WALL_SLACK_NS + extra
    # the wall clock alone cannot tell a lie from load (a child waiting for a core): a rejection
    # also needs the call's own thread to have run, on CPU time, well past the claims
    ok = low <= allowed or explained >= MIN_EXPLAINED_FRACTION or main_low <= main_allowed
    if ok:
        message = "ok"
    else:
        message = (f"timing claims not supported by the judge's wall clock: on {1 - WALL_QUANTILE:.0%} of the requests "
                   f"or more, at least {low / 1e3:.1f} µs per request outside the claimed kernel time "
                   f"({claimed_mean / 1e3:.1f} µs), allowed {allowed / 1e3:.1f} µs, while the calling thread ran "
                   f"{main_low / 1e3:.1f} µs of CPU past the claim; the claims explain {explained:.0%} of the judged time")
    return {"passed": ok, "calls": len(claims), "requests": len(windows), "claimed_mean_ns": claimed_mean,
            "window_mean_ns": statistics.fmean(windows) if windows else 0.0, "overhead_ns": overhead_ns,
            "unexplained_low_ns": low, "allowed_ns": allowed, "replaced_requests": replaced, "explained": explained,
            "main_unexplained_low_ns": main_low, "message": message}


# -- the judge's cross-check of claims at kernel scale -------------------------------------------
# On CUDA, :meth:`~kernelrank.runner.judge.pairs.PairedCase.judged` judges both sides so.
#
# A single request's window (thaw to frozen) carries tens to hundreds of µs of fixed overhead
# (freezer, socket, the child's bookkeeping, the whole-device synchronize) and jitter of the same
# order: per request, the judge's clock cannot tell a 12 µs kernel from a 0 µs claim. Summed over
# a batch of n requests, the overhead is n times its median and the jitter grows only as sqrt(n),
# so the allowance per call shrinks as 1/sqrt(n): with 10 µs of spread and n = 100, four standard
# deviations are 4 µs per call. The overhead is the runner's own, measured on its path with a call
# that does nothing (kernelrank runner --self-test measures it and the heartbeat shows it).

#: Calls per batch judged against the judge's clock (fewer in a case that has fewer).
BATCH_CALLS = 64
#: Standard deviations of the runner's per-request overhead allowed per batch (scaled by sqrt(n)).
BATCH_Z = 4.0
#: Floor of the allowance per request (ns): event resolution (0.5 µs) and clock reads.
BATCH_FLOOR_NS = 1_000
#: Fewest do-nothing requests a runner's overhead is estimated from.
RUNNER_OVERHEAD_MIN_SAMPLES = 5


@dataclass(frozen=True)
class RunnerOverhead:
    """Per-request overhead of a runner's path (ns): the judge's window less the claims for a call
    that does nothing, on this runner, through the same sandbox, freezer and socket.

    ``median_ns`` is subtracted per request; ``spread_ns`` is a robust standard deviation
    (1.4826 x the median absolute deviation), the base of the allowance.
    """

    median_ns: float
    spread_ns: float
    samples: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def runner_overhead(samples_ns: list[int] | list[float]) -> RunnerOverhead:
    """:class:`RunnerOverhead` from per-request ``window - claims`` samples (ns) of a do-nothing call.

    Median and 1.4826 x MAD (the normal-consistent robust spread), so a few requests slowed by the
    machine do not widen the allowance.

    Raises:
        ValueError: fewer than :data:`RUNNER_OVERHEAD_MIN_SAMPLES` samples.
    """
    if len(samples_ns) < RUNNER_OVERHEAD_MIN_SAMPLES:
        raise ValueError("the runner's overhead needs at least 5 samples")
    xs = [float(x) for x in samples_ns]
    med = statistics.median(xs)
    mad = statistics.median(abs(x - med) for x in xs)
    return RunnerOverhead(med, 1.4826 * mad, len(xs))


@dataclass(frozen=True)
class BatchJudgement:
    """What the judge's clock says of a case's claims, in batches of calls.

    ``judged_ns``: per call, the time it counts for (its claim, or its share of what the judge's
    clock supports when that is more); ``replaced``: batches whose windows the claims did not
    explain within the allowance (their calls count for the judge's figure); ``allowance_ns``: the
    largest allowance per call over the batches; ``unexplained_ns``: the median over batches of the
    unexplained time per call (window less claims less overhead).
    """

    judged_ns: list[float]
    batches: int
    replaced: int
    allowance_ns: float
    unexplained_ns: float

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("judged_ns")
        return d


def _batches(sizes: list[int], calls: int) -> list[tuple[int, int]]:
    """``(first request, end request)`` of consecutive requests holding at least ``calls`` calls;
    a short remainder joins the last batch."""
    out: list[tuple[int, int]] = []
    first, held = 0, 0
    for i, k in enumerate(sizes):
        held += k
        if held >= calls:
            out.append((first, i + 1))
            first, held = i + 1, 0
    if first < len(sizes):
        if out:
            out[-1] = (out[-1][0], len(sizes))
        else:
            out.append((first, len(sizes)))
    return out


def _request_batches(claims: Sequence[float], sizes: list[int], batch_calls: int,
                     ) -> Iterator[tuple[int, int, list[float]]]:
    """``(first request, end request, their calls' claims)`` of each batch of :func:`_batches`
    (``sizes[i]`` calls in request ``i``)."""
    starts = [0]
    for k in sizes:
        starts.append(starts[-1] + k)
    for first, end in _batches(sizes, max(1, batch_calls)):
        yield first, end, [float(c) for c in claims[starts[first]:starts[end]]]


def _shares(mine: list[float], total: float) -> list[float]:
    """``total`` (ns) shared among a batch's calls in proportion to their claims ``mine``, evenly
    when they claim nothing."""
    claimed = sum(mine)
    if claimed > 0:
        return [c * total / claimed for c in mine]
    return [total / len(mine) for _ in mine]


def judge_batches(claims: list[int], windows: list[int], overhead: RunnerOverhead,
                  sizes: list[int] | None = None, batch_calls: int = BATCH_CALLS,
                  z: float = BATCH_Z) -> BatchJudgement:
    """Judge claims against the judge's clock in batches of about ``batch_calls`` calls.

    Args:
        claims: the child's per-call times (ns).
        windows: the judge's window per request (ns), holding ``sizes[i]`` calls (default 1 each).
        overhead: the runner's per-request overhead (:func:`runner_overhead`).

    A batch of ``n`` requests holding claims ``C`` in windows ``W`` leaves ``U = W - C - n *
    overhead.median_ns`` unexplained, allowed ``A = z * overhead.spread_ns * sqrt(n) + n *``
    :data:`BATCH_FLOOR_NS`. Where ``U > A`` the batch counts for ``W - n * median - A`` (shared
    among its calls in proportion to their claims), else for its claims: a claim shorter than
    the judge saw gains at most ``A / calls`` per call. Nothing is rejected here: at kernel scale
    load on the host cannot be told from a lie by the clock alone, and replacing the claim makes
    a lie pay for the time the judge saw.

    Raises:
        ValueError: claims and sizes disagree.
    """
    sizes = sizes or [1] * len(windows)
    if sum(sizes) != len(claims) or len(sizes) != len(windows):
        raise ValueError("claims, windows and sizes disagree")
    judged: list[float] = []
    replaced = 0
    allowance = 0.0
    per_call: list[float] = []
    for first, end, mine in _request_batches(claims, sizes, batch_calls):
        n = end - first
        total_claims = sum(mine)
        seen = float(sum(windows[first:end])) - n * overhead.median_ns
        allowed = z * overhead.spread_ns * math.sqrt(n) + n * BATCH_FLOOR_NS
        unexplained = seen - total_claims
        per_call.append(unexplained / len(mine))
        allowance = max(allowance, allowed / len(mine))
        total = total_claims
        if unexplained > allowed:
            replaced += 1
            total = seen - allowed
        judged.extend(_shares(mine, total))
    return BatchJudgement(judged, len(per_call), replaced, allowance,
                          statistics.median(per_call) if per_call else 0.0)


# -- the job's CPU time against the claims -------------------------------------------------------
# A request's window holds the path (thaw, bookkeeping, freeze) besides its calls, and work can hide
# there on threads other than the calling one (a helper woken by a finalizer computes the next
# outputs while the calling thread sleeps). The job's cgroup counts every thread's CPU time and
# nothing of other processes', so load cannot widen it: what the job used beyond what its claims
# can hold on every core (``cores * claims``) and beyond the path's own (OpenMP workers spinning
# through the window, measured on the reference's requests) is work done outside the calls, and
# costs at least ``that / cores`` of wall time however it was spread over threads.

#: Standard deviations of the path's CPU time allowed per batch (scaled by sqrt(n)), as BATCH_Z.
CPU_Z = 4.0


def cpu_charges(claims: Sequence[float], job_cpu: Sequence[int], path: RunnerOverhead, cores: int,
                sizes: Sequence[int] | None = None, batch_calls: int = BATCH_CALLS,
                z: float = CPU_Z) -> BatchJudgement:
    """Per call, its claim plus its share of the CPU time its batch's job used outside every claim.

    Args:
        claims: the child's per-call times (ns).
        job_cpu: per request, CPU time of the job's whole cgroup in the window (ns): every thread
            and process of the job (``cpuacct.usage`` or ``cpu.stat``'s ``usage_usec``).
        path: the path's CPU time per request (:func:`runner_overhead` of the reference's
            ``job_cpu - cores * claims``: trusted code through the same sandbox).
        cores: CPUs the job may run on (its threads' CPU time per ns of wall time at most).
        sizes: calls per request (default 1 each).

    A batch of ``n`` requests (as :func:`judge_batches` forms them) whose job used ``U`` ns of
    CPU with claims ``C`` leaves ``E = U - cores * C - n * path.median_ns`` unexplained, allowed
    ``A = z * path.spread_ns * sqrt(n)``; where ``E > A`` its calls are charged ``(E - A) /
    cores`` more in proportion to their claims (evenly when they claim nothing). An honest
    request's job cannot use more than ``cores`` times its call's wall time in the call, so it is
    charged nothing beyond the path's spread; hidden work pays its CPU time over every core.

    Raises:
        ValueError: claims, job_cpu and sizes disagree.
    """
    sizes = list(sizes) if sizes else [1] * len(job_cpu)
    if sum(sizes) != len(claims) or len(sizes) != len(job_cpu):
        raise ValueError("claims, job CPU times and sizes disagree")
    cores = max(1, int(cores))
    judged: list[float] = []
    replaced = 0
    allowance = 0.0
    per_call: list[float] = []
    for first, end, mine in _request_batches(claims, sizes, batch_calls):
        n = end - first
        total_claims = sum(mine)
        unexplained = float(sum(job_cpu[first:end])) - cores * total_claims - n * path.median_ns
        allowed = z * path.spread_ns * math.sqrt(n)
        per_call.append(unexplained / cores / len(mine))
        allowance = max(allowance, allowed / cores / len(mine))
        extra = 0.0
        if unexplained > allowed:
            replaced += 1
            extra = (unexplained - allowed) / cores
        judged.extend(_shares(mine, total_claims + extra))
    return BatchJudgement(judged, len(per_call), replaced, allowance,
                          statistics.median(per_call) if per_call else 0.0)


def cpu_path(claims: Sequence[float], job_cpu: Sequence[int], cores: int,
             sizes: Sequence[int] | None = None) -> RunnerOverhead:
    """The path's CPU time per request (ns) from the reference's requests: :func:`runner_overhead`
    of ``job_cpu - cores * claims`` per request (the CPU its job used beyond what its calls could
    hold on every core).

    Raises:
        ValueError: fewer than :data:`RUNNER_OVERHEAD_MIN_SAMPLES` requests.
    """
    per_request = request_claims([int(c) for c in claims], sizes, len(job_cpu))
    return runner_overhead([u - max(1, int(cores)) * c for u, c in zip(job_cpu, per_request)])
