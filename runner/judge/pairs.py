"""Pairs and requests of a timed case (the judge's side): a prepared input set, each side's processes
and figures per request, and the case timed in pairs, with the rules its judged times come from
(:mod:`kernelrank.runner.judge.judging`) and its interval (:mod:`kernelrank.runner.stats`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelrank.runner.judge import disturbed, judging

from kernelrank.runner import stats
from kernelrank.runner.results import CaseResult
from kernelrank.runner.containment.sandbox import SubmissionProcess
from kernelrank.runner.timing import WARMUP_MAX_REQUESTS, WARM_FAULTS_PER_CALL



@dataclass
class InputSet:
    """One prepared input set of a case: the inputs; the reference's output on them computed by the
    judge (the expected output), or ``None`` for a set derived from the case's pool, whose expected
    output is the reference process's on the same set (:meth:`_Evaluation._check_derived`); the
    base of the calls' deadlines (s: the reference's time in the judge, the case's first set's for
    a derived set, which has its shapes); the memory the set needs in a batch (inputs and expected
    output in the judge, and its outputs held by the children until they are checked, counted as
    the expected output's size); the bytes of the output slot a call on it gets
    (:func:`out_room`); and the judge's thread seconds making the inputs and computing the
    expected output."""

    data: Any
    expected: torch.Tensor | None
    ref_s: float
    nbytes: int
    room: int
    inputs_s: float = 0.0
    expected_s: float = 0.0


@dataclass
class Side:
    """One side of a case's pairs, the submission or the reference: its processes (one per round
    of the case's slices, :data:`~kernelrank.runner.judge.judging.PROCESSES`; ``current`` is the one
    making the next request), per counted call its claim, the judge's window around its ``go``
    request and the CPU time of its main thread in that window (ns)."""

    name: str
    children: list[SubmissionProcess]
    current: int = 0
    claims: list[int] = field(default_factory=list)
    windows: list[int] = field(default_factory=list)
    main_cpu: list[int] = field(default_factory=list)
    #: per counted request, the CPU time of its process's whole cgroup (every thread and process of
    #: the job) in the window (ns; ``None``: not readable)
    job_cpu: list[int | None] = field(default_factory=list)
    #: per request, its calls (input sets); ``claims`` has one entry per call
    sizes: list[int] = field(default_factory=list)
    #: the median claim of its warm-up calls after the first (ns): how many sets a timed request gets
    warm_ns: int = 0
    #: CPU time (ns) the *other* side's cgroups used during this side's windows (``None``: not
    #: readable); 0 is what freezing guarantees
    other_cpu_ns: int | None = 0
    #: per request, which of ``children`` made it
    procs: list[int] = field(default_factory=list)
    #: per counted request, the page faults of its process during it (``None``: not readable)
    faults: list[int | None] = field(default_factory=list)
    #: per process, its timed requests in this case so far, and whether it is warm: one of them
    #: faulted at most :data:`~kernelrank.runner.timing.WARM_FAULTS_PER_CALL` times per call,
    #: or :data:`~kernelrank.runner.timing.WARMUP_MAX_REQUESTS` were made
    requests_made: list[int] = field(default_factory=list)
    warm: list[bool] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.requests_made = [0] * len(self.children)
        self.warm = [False] * len(self.children)

    @property
    def child(self) -> SubmissionProcess:
        """The process making this side's next request."""
        return self.children[self.current]

    @property
    def is_warm(self) -> bool:
        """Whether the process making the next request is warm (its pairs count)."""
        return self.warm[self.current]

    def settle(self, call: "Call") -> None:
        """After a timed request of the current process: it is warm from its next request on
        once this one faulted at most :data:`~kernelrank.runner.timing.WARM_FAULTS_PER_CALL`
        times per call (unreadable faults: after its first request), or after
        :data:`~kernelrank.runner.timing.WARMUP_MAX_REQUESTS` requests (a kernel that faults on
        every call is timed in that steady state)."""
        j = self.current
        self.requests_made[j] += 1
        calm = call.faults is None or call.faults <= WARM_FAULTS_PER_CALL * max(1, len(call.claims))
        self.warm[j] = self.warm[j] or calm or self.requests_made[j] >= WARMUP_MAX_REQUESTS

    def cpu_ns(self) -> int | None:
        """CPU time (ns) used so far by all of this side's processes' cgroups (``None``: not
        readable)."""
        total = 0
        for c in self.children:
            used = c.cpu_ns()
            if used is None:
                return None
            total += used
        return total

    def main_unexplained(self) -> list[int]:
        """Per request, the main thread's CPU time during the window less its claims (ns)."""
        return [m - c for m, c in zip(self.main_cpu, judging.request_claims(self.claims, self.sizes, len(self.windows)))]


@dataclass
class Call:
    """What one timed request gave: the claim (its calls' together) and window (ns), the main
    thread's CPU time in the window (ns), each call's claim (ns) and the process's page faults."""

    claim: int
    window: int
    main_cpu: int
    claims: list[int] = field(default_factory=list)
    #: page faults of the process during the request (``None``: not readable)
    faults: int | None = None
    #: CPU time of the process's whole cgroup in the window (ns; ``None``: not readable)
    job_cpu: int | None = None
    #: what disturbed the request (:data:`~kernelrank.runner.judge.disturbed.KINDS`: the GPU
    #: throttled, work overlapping the flush), or ``None``; its pair is then not counted
    disturbed: str | None = None


@dataclass
class PairedCase:
    """A benchmark case timed in pairs: its result, both sides, and where the case's wall time
    went (s)."""

    result: CaseResult
    sub: Side
    ref: Side
    #: every pair timed, in order: ``(submission's call, reference's call, submission first,
    #: which pair of processes timed it, counted)``; a pair is not counted (timed and checked
    #: all the same) while one of its processes is not warm yet (:meth:`Side.settle`), nor when
    #: one of its requests was disturbed (:attr:`Call.disturbed`)
    raw: list[tuple[Call, Call, bool, int, bool]] = field(default_factory=list)
    #: the case's own wall time so far (s): its warm-up and its slices of the rounds, not the
    #: other cases' slices in between (:meth:`_Evaluation._rounds`)
    wall_s: float = 0.0
    prep_s: float = 0.0
    #: of the sets prepared for its timed pairs, the judge's threads' seconds making the inputs
    #: (the problem's ``generate_input`` or ``derive_input``) and computing the expected outputs
    #: (its reference; none for derived sets, but for any output the reference process disagrees on)
    inputs_s: float = 0.0
    expected_s: float = 0.0
    timed_s: float = 0.0
    check_s: float = 0.0
    #: CPUs the children may run on: CPU time per ns of wall time at most (:meth:`charged`)
    cores: int = 1
    #: where the case's timing stands between its slices (:meth:`_Evaluation._time_slice`): the
    #: case's first input set (its warm-up's), the sets per timed request, the input sets timed
    #: (the next set's seed), the batches timed (with a pair's place in its batch, which side goes
    #: first), the seconds of its timed loop so far (warm-up excluded: the stop rule's ``spent``),
    #: its slices so far, and whether the stop rule ended it (``noisy`` in its result)
    first: InputSet | None = None
    #: the input sets its timed sets are derived from (:meth:`_Evaluation._draw_pool`; empty:
    #: each is drawn by the problem's ``generate_input``)
    pool: list[Any] = field(default_factory=list)
    per_request: int = 1
    number: int = 0
    batches: int = 0
    spent_s: float = 0.0
    slices: int = 0
    done: bool = False

    @property
    def warmup_pairs(self) -> int:
        """Pairs timed and checked but not counted because a process was not warm yet (not
        counted as disturbed: :meth:`disturbed_pairs`)."""
        return sum(1 for p in self.raw if not p[4] and not (p[0].disturbed or p[1].disturbed))

    def disturbed_pairs(self) -> dict[str, Any]:
        """The pairs left out as disturbed (:mod:`~kernelrank.runner.judge.disturbed`): how many
        per cause (a pair whose two requests were disturbed by different causes counts for the
        submission's), their share of the pairs timed, and whether that makes the case noisy
        (:func:`~kernelrank.runner.judge.disturbed.too_disturbed`)."""
        counts = {kind: 0 for kind in disturbed.KINDS}
        for sub, ref, *_rest in self.raw:
            kind = sub.disturbed or ref.disturbed
            if kind is not None:
                counts[kind] += 1
        total = sum(counts.values())
        return {**counts, "share": total / len(self.raw) if self.raw else 0.0,
                "too_many": disturbed.too_disturbed(total, len(self.raw))}

    def judged(self) -> tuple[list[float], list[float], float]:
        """``(submission's, reference's judged times, the reference's overhead)`` (ns), both
        sides by the same two rules, each against the path of this runner measured on the
        reference's requests of the same case (trusted code, same sandbox, freezer and socket):

        - the job's CPU time (:func:`~kernelrank.runner.judge.judging.cpu_charges`): what the whole job
          (every thread and process in its cgroup) used in a batch's windows beyond its claims on
          every core and the path's CPU time (median, spread shrinking by batch) is charged to the
          batch's calls; load cannot widen it, and work on any thread outside the calls pays;
        - the judge's clock (:func:`~kernelrank.runner.judge.judging.judge_batches`): a batch whose windows
          the (charged) claims and the path's median overhead do not explain within the path's
          spread counts for its windows less the path.

        The overhead returned is the low quantile the gross-lie rule starts from
        (:func:`~kernelrank.runner.judge.judging.wall_check`). With fewer than
        :data:`~kernelrank.runner.judge.judging.RUNNER_OVERHEAD_MIN_SAMPLES` reference requests, claims
        stand beside the reference's overhead at :data:`~kernelrank.runner.judge.judging.ALLOWANCE_QUANTILE`
        (:func:`~kernelrank.runner.judge.judging.judged_times`).
        """
        overhead = judging.overhead(self.ref.claims, self.ref.windows, self.ref.sizes)
        if len(self.ref.windows) < judging.RUNNER_OVERHEAD_MIN_SAMPLES:
            allowance = judging.overhead(self.ref.claims, self.ref.windows, self.ref.sizes, judging.ALLOWANCE_QUANTILE)
            return (judging.judged_times(self.sub.claims, self.sub.windows, allowance, self.sub.sizes),
                    judging.judged_times(self.ref.claims, self.ref.windows, allowance, self.ref.sizes), overhead)
        sub, ref = self.charged()
        path = judging.runner_overhead([w - c for w, c in zip(
            self.ref.windows, judging.request_claims(self.ref.claims, self.ref.sizes, len(self.ref.windows)))])
        return (judging.judge_batches(sub, self.sub.windows, path, self.sub.sizes).judged_ns,
                judging.judge_batches(ref, self.ref.windows, path, self.ref.sizes).judged_ns, overhead)

    def _cpu_rule(self) -> tuple[judging.RunnerOverhead, judging.BatchJudgement, judging.BatchJudgement] | None:
        """The path's CPU time (:func:`~kernelrank.runner.judge.judging.cpu_path`) and both sides'
        :func:`~kernelrank.runner.judge.judging.cpu_charges` (submission's, reference's); ``None`` with
        too few reference requests for a path, or a side's job CPU time not readable on every
        request."""
        if len(self.ref.windows) < judging.RUNNER_OVERHEAD_MIN_SAMPLES or not (
                readable(self.sub.job_cpu) and readable(self.ref.job_cpu)):
            return None
        path = judging.cpu_path(self.ref.claims, self.ref.job_cpu, self.cores, self.ref.sizes)  # type: ignore[arg-type]
        return (path, judging.cpu_charges(self.sub.claims, self.sub.job_cpu, path, self.cores, self.sub.sizes),  # type: ignore[arg-type]
                judging.cpu_charges(self.ref.claims, self.ref.job_cpu, path, self.cores, self.ref.sizes))  # type: ignore[arg-type]

    def charged(self) -> tuple[list[float], list[float]]:
        """Both sides' claims (ns per call) with the CPU time their jobs used outside them
        charged (:meth:`_cpu_rule`); the claims as they are where that rule does not apply."""
        rule = self._cpu_rule()
        if rule is None:
            return [float(c) for c in self.sub.claims], [float(c) for c in self.ref.claims]
        return rule[1].judged_ns, rule[2].judged_ns

    def cpu_judgement(self) -> dict[str, Any] | None:
        """The submission's :func:`~kernelrank.runner.judge.judging.cpu_charges` figures (batches charged,
        the allowance and the median unexplained CPU per call in wall ns), for the case's record;
        ``None`` where not judged so."""
        rule = self._cpu_rule()
        if rule is None:
            return None
        path, sub, _ = rule
        return {**sub.to_dict(), "cores": self.cores, "path_median_ns": path.median_ns, "path_spread_ns": path.spread_ns}

    def claims_replaced(self) -> int:
        """The submission's counted claims the judge's clock replaced (:meth:`judged`: the call
        counts for its share of what the windows support, more than its claim, CPU charges
        included)."""
        sub, _ref, _overhead = self.judged()
        if len(self.ref.windows) < judging.RUNNER_OVERHEAD_MIN_SAMPLES:
            base = [float(c) for c in self.sub.claims]
        else:
            base = self.charged()[0]
        return sum(1 for j, c in zip(sub, base) if j > c * (1 + 1e-9) + 1e-6)  # not rounding's last bit

    def paired_times(self) -> tuple[list[float], list[float]]:
        """Per pair (one request of each side on the same input sets), the submission's and the
        reference's judged time (ns): their calls' judged times together."""
        sub, ref, _ = self.judged()
        return (judging.request_claims(sub, self.sub.sizes, len(self.sub.windows)),
                judging.request_claims(ref, self.ref.sizes, len(self.ref.windows)))

    def grouped(self) -> bool:
        """Whether the pairs were timed by several pairs of processes."""
        return len(self.sub.children) > 1

    def group_means(self) -> dict[int, tuple[float, float]]:
        """Per pair of processes, the trimmed mean of its pairs' log ratios and its standard error
        (:func:`~kernelrank.runner.stats.group_means`)."""
        sub, ref = self.paired_times()
        return stats.group_means(ref, sub, self.sub.procs)

    def interval(self) -> stats.Interval | None:
        """The case's speedup so far, with its 95% interval (``None`` before the first pair), the
        pairs grouped by the pair of processes that timed them
        (:func:`~kernelrank.runner.stats.paired_speedup`)."""
        if not self.sub.claims:
            return None
        sub, ref = self.paired_times()
        return stats.paired_speedup(ref, sub, groups=self.sub.procs if self.grouped() else None)


def submission_first(batch: int, pair: int) -> bool:
    """Whether the submission goes first in pair ``pair`` (0-based) of batch ``batch`` (0-based) of
    a case: the order alternates within a batch, and the first pairs of successive batches
    alternate too, so that neither side always follows the judge's preparing and checking of a
    batch (with an even number of pairs per batch, alternating by the pair's number alone put the
    submission first after every batch's preparation)."""
    return (batch + pair) % 2 == 0


def readable(values: list[int | None]) -> bool:
    """Whether every request's figure was read (and there is at least one)."""
    return bool(values) and all(v is not None for v in values)


def judge_cores() -> int:
    """CPUs this judge, and so its children, may run on (its affinity: the runner's cpuset)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except OSError:  # pragma: no cover - every Linux has it
        return max(1, os.cpu_count() or 1)


def pair_record(sub: Call, ref: Call, sub_first: bool, process: int, counted: bool) -> list[int]:
    """One pair's raw figures, as the ``pairs`` event carries them (``bench/record_timings.py``):
    ``[submission first (0/1), its claim, window, main-thread CPU, the reference's claim, window,
    main-thread CPU, calls per request, which pair of processes timed it (0..K-1), counted (0: a
    warm-up pair, :meth:`Side.settle`, or a disturbed one), the submission's page faults, the reference's (-1:
    unreadable), the submission's job CPU time in its window, the reference's (-1: unreadable),
    what disturbed the pair (:func:`~kernelrank.runner.judge.disturbed.pair_code`: 0 nothing)]``,
    times in ns (a request's claim: its calls' together). Recordings made before a field was
    added end before it."""
    return [int(sub_first), sub.claim, sub.window, sub.main_cpu, ref.claim, ref.window, ref.main_cpu,
            max(1, len(sub.claims)), process, int(counted),
            -1 if sub.faults is None else sub.faults, -1 if ref.faults is None else ref.faults,
            -1 if sub.job_cpu is None else sub.job_cpu, -1 if ref.job_cpu is None else ref.job_cpu,
            disturbed.pair_code(sub.disturbed or ref.disturbed)]


def faults_per_call(faults: list[int | None], sizes: list[int]) -> float | None:
    """Page faults per counted call of one side (``None`` when any request's were unreadable)."""
    if not faults or any(f is None for f in faults):
        return None
    return sum(f for f in faults if f is not None) / max(1, sum(sizes))
