"""The harness: one judge for every problem, mode and device.

:func:`evaluate` is the only place where a verdict or a time is decided; the numbers it decides
with come from :mod:`~kernelrank.runner.stats` (pure functions, tested on recorded timings): this
module only orchestrates. The judge (this process)

1. loads the problem's reference (trusted) and starts a :class:`SubmissionProcess` for the
   submitted code, bounded by the problem's compile budget while it loads and builds;
2. checks every test case's output itself (:func:`~kernelrank.runner.checking.check_output`)
   against the reference it computes;
3. in timed modes (benchmark, leaderboard) starts children that run the reference *as a
   submission* (:func:`reference_submission`: same protocol, same kind of process, same
   containment), and more of the submission, and times the two sides **in pairs**, the pairs
   timed by several pairs of processes (:meth:`_Evaluation.processes`: a process's lasting
   speed is averaged over them, and the interval sees how much they differ), the cases in rounds
   (:meth:`_Evaluation._rounds`: in round ``r`` each case gets a slice of its budget on pair
   ``r % K``, so every case is timed at several moments of the run, on every pair): per slice of
   a benchmark case, batches of fresh input sets and
   their expected outputs are prepared first (in leaderboard mode from seeds derived from a secret
   the children never see; made by the problem's ``derive_input`` from a pool of a few drawn sets
   where it has one, :data:`POOL_SETS`, and then checked against the reference process's output
   on the same set, the judge's own reference deciding where they disagree:
   :meth:`_Evaluation._check_derived`); then, per group of sets, the submission and the reference each get
   one request holding those sets, one call on each (on the CPU as many sets as
   :data:`REQUEST_SECONDS` of calls hold, so the judge's path of 2-3 ms per request is paid once
   for many calls; one on CUDA), in alternating order (:func:`submission_first`), each placed in
   its own shared slots while both are frozen, each thawed only for its own request (so neither
   can run while the other is timed); after each such pair of requests every output of the
   submission is checked as it is read, piece by piece, where its child left it, and every output
   of the reference is read alike. Before a case's first timed request each process is readied
   for the case's request shape (:meth:`_Evaluation._reserve`: its slots mapped, its heap given
   free memory, all faulted in), and a pair counts only once both of its processes are warm
   (one of their requests page-faulted next to never, :meth:`_Side.settle`): the pairs before
   are timed and checked, not counted. Each request counts for its claims or the
   judge's window less the reference's overhead (:func:`~kernelrank.runner.judging.judged_times`);
   each pair of requests on the same sets gives a ratio,
   and the case's speedup and its 95% interval come from those ratios
   (:func:`~kernelrank.runner.stats.paired_speedup`); a case is timed until the stop rule says
   (:func:`~kernelrank.runner.judging.stop_rule`: precise enough, budget spent, or still too noisy
   at the cap). The case's time is the reference time (the service's calibration for the
   revision and device queue, or this run's) divided by its speedup; the score is their
   geometric mean, not ranked when its interval is too wide
   (:func:`~kernelrank.runner.stats.run_noisy`);
4. turns every crash, exit, hang, compile failure or protocol breach into a verdict, kills every
   process of the children's sandboxes and removes their folders.

Countermeasures beyond checking values (each ends the run with a reason):

- the child runs isolated (:mod:`~kernelrank.runner.isolation`) and contained
  (:mod:`~kernelrank.runner.cgroups`: frozen outside its own requests); the isolation in force,
  measured from ``/proc``, is recorded in the result, and ``require_network_isolation`` refuses to
  run submitted code where the network cannot be cut;
- an output sharing memory with an input or with the previous call's output fails its case;
- functions the child's harness relies on found replaced (a tripwire inside the child, see
  :mod:`~kernelrank.runner.integrity`), or claims the judge's clock cannot support
  (:func:`~kernelrank.runner.judging.wall_check`), reject the run;
- a speedup over the reference beyond the problem's ``review_speedup`` marks a passing result
  ``needs_review`` for an administrator.

Modes (GPU MODE's): ``test`` checks every test case; ``benchmark`` also times every benchmark case
against the reference, in pairs on fresh inputs; ``leaderboard`` does the same with secret seeds
and scores the run; ``profile`` runs the benchmark cases under ``torch.profiler``. Triton kernels
run under Triton's interpreter on the CPU: such a run is judged for correctness, its times are
marked ``interpreted`` and it gets no score.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import random
import secrets
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from kernelrank.format import duration, speedup
from kernelrank.problems import Case, CaseTiming, Mode, ProblemSpec
from kernelrank.runner import gpuinfo, isolation, judging, stats
from kernelrank.runner.checking import check_output, close_in_pieces, close_to_reader, piece_bounds
from kernelrank.runner.child import resolve_vector_math, steady_allocator
from kernelrank.runner.devices import DeviceInfo, cpu_threads, device_info
from kernelrank.runner.limits import SandboxLimits
from kernelrank.runner.results import CaseResult, EvalResult, Status
from kernelrank.runner.sandbox import ChildDied, ChildTimeout, ProtocolViolation, SubmissionProcess
from kernelrank.runner.slots import AliasedOutput, SlotError
from kernelrank.runner.slots import nbytes as slots_nbytes
from kernelrank.runner.timing import (WARM_FAULTS_PER_CALL, WARMUP_MAX_CALLS, WARMUP_MAX_REQUESTS, WARMUP_MIN_CALLS,
                                      WARMUP_SECONDS, roofline)

Event = Callable[[dict[str, Any]], None]

#: Memory for one batch of prepared input sets of a case: their inputs and expected outputs in the
#: judge, and their outputs, which each child holds until they are checked (where it left them,
#: never copied whole). Sets are prepared before a batch, so between its timed requests the judge
#: only places inputs and checks outputs (docs/research/bench-history.md: what a call costs the judge). Counting
#: only the judge's part (8 softmax sets of 16 MiB per request instead of 5) read a kernel
#: identical to the reference 0.985 in 6 idle runs, against 1.010 with the outputs counted
#: (docs/research/bench-history.md, issue 14): larger requests are not neutral.
BATCH_BYTES = 256 * 1024 * 1024
#: Most input sets per batch (a batch is also cut to what the case's remaining budget holds).
MAX_BATCH = 16
#: On the CPU, a timed request holds several input sets, one call on each, so that the judge's
#: path (thaw, two socket hops, freeze: 1.5-3 ms per request on a 2-core VM, more than the
#: allowance a call's claim may leave unexplained) is paid once per this many seconds of calls
#: rather than once per call (docs/research/bench-history.md, issue 14: what the judged times were made of). At
#: 20 ms the path is still 15-42% of each window at idle (it grows with the calls: each output is
#: described and held); 40 ms with room for twice the sets took it to 10-28%, but left 7-24 pairs
#: per case, and more honest runs were marked too noisy (one of five at idle, and a CI run's):
#: tried, not kept.
REQUEST_SECONDS = 0.02
#: Most input sets (calls) per timed request.
MAX_SETS_PER_REQUEST = 16
#: Share of a case's wall time its timed calls take on the CPU, for sizing requests before any
#: pair is timed (idle: 14-35%, docs/research/bench-history.md). Bigger requests on a short budget left a case a
#: single pair: no interval, and an estimate one disturbed pair decides (the self-test's quick
#: mode, 0.15 s per case, read 3.5x for a kernel doing what the reference does).
TIMED_SHARE_GUESS = 0.25
#: Input sets a timed case draws with the problem's ``generate_input`` (its warm-up's and the rest
#: at its opening) when its reference also defines ``derive_input``: every timed set is then made
#: from two of these by that function (:meth:`_Evaluation._derive`), at a tenth of the cost
#: (a 4M-value softmax set: ``torch.randn`` and rounding 11-13 ms of a judge's thread, a mix
#: of two pooled sets 1.2-1.7 ms; docs/research/bench-history.md, issue 14).
POOL_SETS = 3
#: Calls on fresh inputs per benchmark case, each checked, for a submission whose Triton kernels
#: ran under the interpreter (it is judged for correctness; its times measure the interpreter).
INTERPRETED_CALLS = 2
PROFILE_TABLE_LIMIT = 64 * 1024
TRACE_FILE_LIMIT = 64 * 1024 * 1024
#: Largest answer accepted beyond the outputs it should carry (tracebacks, timings, headers); an
#: output may be up to twice the reference's size before its answer is refused as oversized.
REPLY_SLACK_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class EvalOptions:
    """How to run an evaluation (not what: that is the problem, the source, the mode, the device).

    Args:
        threads: intra-op threads on the CPU device (0: every core this process may use).
        scratch_dir: parent of the child's private working folder (default: system temp).
        log_limit: bytes kept of the submission's stdout and of its stderr.
        secret: secret mixed into leaderboard seeds; ``None`` draws a fresh random one.
        trace_dir: where profile mode copies the Chrome trace (``None``: not kept).
        isolation: ``"auto"`` (the strongest method that works here), ``"setuid"``, ``"userns"``
            or ``"none"``; see :mod:`kernelrank.runner.isolation`.
        require_network_isolation: refuse (status ``rejected``, nothing of the submission run)
            when the child's network cannot be cut; runners set it for leaderboard jobs.
        limits: resource limits of the child (:class:`~kernelrank.runner.limits.SandboxLimits`).
        hidden_paths: folders covered in the child's view besides the judge's home and the job
            folders' parent (e.g. the service's data folder).
        zygote: a :class:`~kernelrank.runner.zygote.Zygote` to fork children from (warm start:
            torch already imported); ``None`` or one for another device starts each child cold.
        require_containment: refuse (status ``rejected``, nothing of the submission run) when
            the child cannot be put in a cgroup frozen outside its calls
            (:mod:`~kernelrank.runner.cgroups`); runners set it for leaderboard jobs.
        calibration_ns: per benchmark case of the device, the reference time (ns) the scores of
            this problem revision and device queue are based on (the service's calibration,
            ``kernelrank.services.calibration``); ``None``: this run's own reference times.
        processes: pairs of processes timing each benchmark case, overriding the problem's
            ``timing.<device>.processes`` and the device's default; checks of verdicts rather
            than of timing statistics (the test suite) use 1: one process of each side, so a C++
            submission is built once, in the test phase's process.
    """

    threads: int = 0
    scratch_dir: Path | None = None
    log_limit: int = 64 * 1024
    secret: int | None = None
    trace_dir: Path | None = None
    isolation: str = "auto"
    require_network_isolation: bool = False
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    hidden_paths: tuple[Path, ...] = ()
    zygote: Any = None
    require_containment: bool = False
    calibration_ns: tuple[float, ...] | None = None
    processes: int | None = None


class _Verdict(Exception):
    def __init__(self, status: Status, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def mix_seed(secret: int, seed: int, iteration: int) -> int:
    """A 63-bit seed for iteration ``iteration`` of a case, derived from a secret with BLAKE2b;
    without the secret the child cannot predict it from the case's public seed."""
    digest = hashlib.blake2b(f"{secret}:{seed}:{iteration}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def submission_first(batch: int, pair: int) -> bool:
    """Whether the submission goes first in pair ``pair`` (0-based) of batch ``batch`` (0-based) of
    a case: the order alternates within a batch, and the first pairs of successive batches
    alternate too, so that neither side always follows the judge's preparing and checking of a
    batch (with an even number of pairs per batch, alternating by the pair's number alone put the
    submission first after every batch's preparation)."""
    return (batch + pair) % 2 == 0


def reference_submission(spec: ProblemSpec) -> str:
    """The reference as a submission, so it is timed by exactly the code that times entries."""
    return spec.reference_source + "\n\ncustom_kernel = ref_kernel\n"


def evaluate(spec: ProblemSpec, source: str, mode: Mode, device: str,
             options: EvalOptions | None = None, on_event: Event | None = None) -> EvalResult:
    """Judge ``source`` on ``spec`` in ``mode`` on ``device``; never raises for anything the
    submission does (that is a verdict), only for a broken problem or device.

    Args:
        spec: the problem revision (definition, reference source, revision hash).
        source: the submission's Python source, defining ``custom_kernel(data) -> output``.
        mode: ``test``, ``benchmark``, ``leaderboard`` or ``profile``.
        device: ``cpu`` or ``cuda``.
        on_event: called with ``{"event": "phase", "phase": ...}`` and
            ``{"event": "case", "case": CaseResult}`` as the run goes.

    Raises:
        ValueError: unknown mode or device.
        RuntimeError: ``cuda`` requested with no CUDA device.
    """
    if mode not in ("test", "benchmark", "leaderboard", "profile"):
        raise ValueError(f"unknown mode {mode!r}")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}")
    # the judge allocates inputs, references and check temporaries of up to tens of MiB per timed
    # call: with glibc's moving thresholds each could land in fresh pages (checking a 16 MiB
    # output: 45 ms, 25 ms with fixed thresholds), and the judge's seconds per call bound how many
    # calls fit a case's budget. Process-wide and idempotent; the runner keeps its peak heap.
    steady_allocator()
    # the judge computes references and expected outputs, sometimes from several of its threads
    resolve_vector_math()
    return _Evaluation(spec, source, mode, device, options or EvalOptions(), on_event).run()


@dataclass
class _Set:
    """One prepared input set of a case: the inputs; the reference's output on them computed by the
    judge (the expected output), or ``None`` for a set derived from the case's pool, whose expected
    output is the reference process's on the same set (:meth:`_Evaluation._check_derived`); the
    base of the calls' deadlines (s: the reference's time in the judge, the case's first set's for
    a derived set, which has its shapes); the memory the set needs in a batch (inputs and expected
    output in the judge, and its outputs held by the children until they are checked, counted as
    the expected output's size); the bytes of the output slot a call on it gets
    (:func:`_out_room`); and the judge's thread seconds making the inputs and computing the
    expected output."""

    data: Any
    expected: torch.Tensor | None
    ref_s: float
    nbytes: int
    room: int
    inputs_s: float = 0.0
    expected_s: float = 0.0


@dataclass
class _Side:
    """One side of a case's pairs, the submission or the reference: its processes (one per round
    of the case's slices, :data:`~kernelrank.runner.judging.PROCESSES`; ``current`` is the one
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

    def settle(self, call: "_Call") -> None:
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
class _Call:
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


@dataclass
class _Paired:
    """A benchmark case timed in pairs: its result, both sides, and where the case's wall time
    went (s)."""

    result: CaseResult
    sub: _Side
    ref: _Side
    #: every pair timed, in order: ``(submission's call, reference's call, submission first,
    #: which pair of processes timed it, counted)``; a pair is not counted (timed and checked
    #: all the same) while one of its processes is not warm yet (:meth:`_Side.settle`)
    raw: list[tuple[_Call, _Call, bool, int, bool]] = field(default_factory=list)
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
    first: _Set | None = None
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
        """Pairs timed and checked but not counted."""
        return sum(1 for p in self.raw if not p[4])

    def judged(self) -> tuple[list[float], list[float], float]:
        """``(submission's, reference's judged times, the reference's overhead)`` (ns), both
        sides by the same two rules, each against the path of this runner measured on the
        reference's requests of the same case (trusted code, same sandbox, freezer and socket):

        - the job's CPU time (:func:`~kernelrank.runner.judging.cpu_charges`): what the whole job
          (every thread and process in its cgroup) used in a batch's windows beyond its claims on
          every core and the path's CPU time (median, spread shrinking by batch) is charged to the
          batch's calls; load cannot widen it, and work on any thread outside the calls pays;
        - the judge's clock (:func:`~kernelrank.runner.judging.judge_batches`): a batch whose windows
          the (charged) claims and the path's median overhead do not explain within the path's
          spread counts for its windows less the path.

        The overhead returned is the low quantile the gross-lie rule starts from
        (:func:`~kernelrank.runner.judging.wall_check`). With fewer than
        :data:`~kernelrank.runner.judging.RUNNER_OVERHEAD_MIN_SAMPLES` reference requests, claims
        stand beside the reference's overhead at :data:`~kernelrank.runner.judging.ALLOWANCE_QUANTILE`
        (:func:`~kernelrank.runner.judging.judged_times`).
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

    def charged(self) -> tuple[list[float], list[float]]:
        """Both sides' claims (ns per call) with the CPU time their jobs used outside them
        charged (:func:`~kernelrank.runner.judging.cpu_charges`); the claims as they are where a
        side's job CPU time was not readable on every request."""
        if not (_readable(self.sub.job_cpu) and _readable(self.ref.job_cpu)):
            return [float(c) for c in self.sub.claims], [float(c) for c in self.ref.claims]
        path = judging.cpu_path(self.ref.claims, self.ref.job_cpu, self.cores, self.ref.sizes)  # type: ignore[arg-type]
        return (judging.cpu_charges(self.sub.claims, self.sub.job_cpu, path, self.cores, self.sub.sizes).judged_ns,  # type: ignore[arg-type]
                judging.cpu_charges(self.ref.claims, self.ref.job_cpu, path, self.cores, self.ref.sizes).judged_ns)  # type: ignore[arg-type]

    def cpu_judgement(self) -> dict[str, Any] | None:
        """The submission's :func:`~kernelrank.runner.judging.cpu_charges` figures (batches charged,
        the allowance and the median unexplained CPU per call in wall ns), for the case's record;
        ``None`` where not judged so."""
        if len(self.ref.windows) < judging.RUNNER_OVERHEAD_MIN_SAMPLES or not (
                _readable(self.sub.job_cpu) and _readable(self.ref.job_cpu)):
            return None
        path = judging.cpu_path(self.ref.claims, self.ref.job_cpu, self.cores, self.ref.sizes)  # type: ignore[arg-type]
        j = judging.cpu_charges(self.sub.claims, self.sub.job_cpu, path, self.cores, self.sub.sizes)  # type: ignore[arg-type]
        return {**j.to_dict(), "cores": self.cores, "path_median_ns": path.median_ns, "path_spread_ns": path.spread_ns}

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


class _ReferenceFailed(RuntimeError):
    """The reference's child failed (a problem of the problem or the judge, not of the submission)."""


class _Evaluation:
    def __init__(self, spec: ProblemSpec, source: str, mode: Mode, device: str, options: EvalOptions,
                 on_event: Event | None):
        self.spec, self.source, self.mode, self.device, self.options = spec, source, mode, device, options
        self.definition = spec.definition
        self.reference = spec.reference_module()
        self.threads = cpu_threads(options.threads) if device == "cpu" else 0
        self.cpus = cpu_threads(0)  # every CPU this process may use
        self.info: DeviceInfo = device_info(device, self.threads)
        self.secret = options.secret if options.secret is not None else secrets.randbits(63)
        self.emit = on_event or (lambda _e: None)
        budgets = self.definition.budgets
        self.limits = options.limits.resolved(device, budgets.compile + budgets.for_mode(mode))
        self.method = "none"
        self._called: set[int] = set()  # children that made their first call
        # [issue 16] CUDA-graph timing where the problem allows it (timing.cuda.cuda_graph)
        self._graphs = device == "cuda" and self.definition.timing["cuda"].cuda_graph
        #: prepares a batch's input sets (timed modes, children frozen)
        self._pool: ThreadPoolExecutor | None = None
        self._local = threading.local()
        #: stdout and stderr of the submission's further timed processes, by their number (2..K)
        self._extra_logs: list[tuple[int, dict[str, str]]] = []

    # -- top level ----------------------------------------------------------------------------
    def run(self) -> EvalResult:
        # The judge computes on one thread: idle OpenMP workers of a multi-threaded judge spin on
        # the cores the child is being timed on (seen as 10x noise on a 2-core machine).
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return self._run()
        finally:
            torch.set_num_threads(threads)

    def _run(self) -> EvalResult:
        started = time.monotonic()
        result = EvalResult(Status.passed, self.mode, self.spec.name, self.spec.revision, self.device,
                            device_info=self.info.to_dict())
        if self.device == "cuda":  # pragma: no cover - GPU-only: [issue 16] clocks recorded with every run
            result.device_info["clocks"] = {"start": gpuinfo.run_clocks(os.environ.get("CUDA_VISIBLE_DEVICES"))}
        self.method, why = isolation.choose(self.options.isolation)
        result.isolation = {"method": self.method, "network": "none" if self.method == "none" else "netns"}
        if self.options.require_network_isolation and self.method == "none":
            result.status = Status.rejected
            result.message = ("rejected: this evaluation requires the submitted code's network to be isolated, "
                              f"and this machine cannot do it ({why}); the submission was not run")
            return result
        child = self._start(self.source)
        if self.options.require_containment and child.containment == "none":
            child.close(graceful=False)
            result.status = Status.rejected
            result.message = ("rejected: this evaluation requires the submitted code to be contained (a cgroup frozen "
                              "outside its calls), and this machine offers no writable cgroup; the submission was not run")
            return result
        try:
            result.isolation = self._load(child)
            deadline = time.monotonic() + self.definition.budgets.for_mode(self.mode)
            self._phase("test")
            result.cases.extend(self._run_tests(child, deadline))
            result.interpreted = any(c.interpreted for c in result.cases)
            if not all(c.passed for c in result.cases):
                raise _Verdict(Status.failed, _first_failure(result.cases))
            if self.mode in ("benchmark", "leaderboard"):
                self._timed_phase(child, result, deadline)
            elif self.mode == "profile":
                self._phase("profile")
                result.profile = self._profile(child, deadline)
            result.message = _summary(result)
            self._review(result)
        except _Verdict as v:
            result.status, result.message = v.status, v.message
        except ChildTimeout:
            result.status = Status.timeout
            result.message = f"timeout: {self._where} did not finish within its time budget; the process was killed"
        except ChildDied as e:
            result.status = Status.error
            result.message = f"runtime error in {self._where}: {e}"
        except ProtocolViolation as e:
            result.status = Status.rejected
            result.message = f"rejected in {self._where}: {e}"
        finally:
            child.close()
            result.logs = _merged_logs(child.logs(), self._extra_logs)
            result.duration_s = time.monotonic() - started
            if self.device == "cuda":  # pragma: no cover - GPU-only: [issue 16]
                result.device_info["clocks"]["end"] = gpuinfo.run_clocks(os.environ.get("CUDA_VISIBLE_DEVICES"))
        return result

    _where = "loading the submission"

    def _phase(self, phase: str) -> None:
        self.emit({"event": "phase", "phase": phase})

    def _start(self, source: str, runs: str = "submission") -> SubmissionProcess:
        if self.method != "none" and "use_pch" in source:
            # site-packages is read-only for the child: it can only use a header built beforehand
            isolation.prepare_precompiled_header()
        return SubmissionProcess(source, self.device, self.threads, scratch_dir=self.options.scratch_dir,
                                 log_limit=self.options.log_limit, method=self.method, limits=self.limits,
                                 hidden=self.options.hidden_paths, zygote=self.options.zygote, runs=runs)

    def _load(self, child: SubmissionProcess, phase: bool = True, where: str | None = None) -> dict[str, Any]:
        """Wait for the child's isolation, check it, load the submission, take the baseline of
        threads and processes; returns the isolation in force. ``phase``: announce the compile
        phase (not for the timed phase's further processes); ``where``: what errors name (the
        reference's processes keep the caller's)."""
        if where is not None or phase:
            self._where = where or "loading the submission"
        if phase:
            self._phase("compile")
        deadline = time.monotonic() + self.definition.budgets.compile
        measured = child.start(deadline)
        if self.options.require_network_isolation and measured.get("network") != "netns":
            raise _Verdict(Status.rejected, "rejected: network isolation is required, and the submission's process "
                                            "was found with network access; the submission was not loaded")
        # [issue 17] an imported problem's reference may ship modules and an adapter for submissions
        extra = {k: v for k, v in (("modules", getattr(self.reference, "SUBMISSION_MODULES", None)),
                                   ("adapter", getattr(self.reference, "SUBMISSION_ADAPTER", None))) if v}
        self._guard(child, child.request({"op": "load", **extra}, deadline, max_bytes=REPLY_SLACK_BYTES))
        child.set_baseline()
        return measured

    def _guard(self, child: SubmissionProcess, reply: dict[str, Any]) -> None:
        """After a request (load, calls, reserve, profile): errors, replaced functions. Threads and processes the submission keeps
        between calls are allowed: frozen with the child, they cannot run outside the window."""
        _raise_on_error(reply, self._where)
        _raise_on_tampering(child, reply, self._where)

    def _go(self, child: SubmissionProcess, layout: dict[str, Any], deadline: float, ref_s: float,
            repeat: int = 1, read: bool = True) -> tuple[dict[str, Any], torch.Tensor | None]:
        """One ``go`` request of ``repeat`` calls on the placed inputs, with its own deadline
        (:meth:`~kernelrank.problems.Budgets.call_deadline`); the answer and the output read from
        its slot (``None`` when the output is not a plain tensor, or with ``read=False``).

        Raises:
            _Verdict: ``timeout`` naming the case when the call's own deadline passed.
        """
        first = id(child) not in self._called
        self._called.add(id(child))
        allowed = self.definition.budgets.call_deadline(first, ref_s, repeat)
        own = time.monotonic() + allowed
        try:
            reply = child.request({"op": "go", "inputs": layout, "repeat": repeat, "direct": child.memory is not None,
                                   # [issue 16] every request alike (tests too): graphs where the problem asks for them
                                   **({"graph": True} if self._graphs else {})},
                                  min(deadline, own),
                                  max_bytes=REPLY_SLACK_BYTES)
        except ChildTimeout:
            if own < deadline:
                raise _Verdict(Status.timeout, f"timeout: {self._where}: the call did not return within its deadline "
                                               f"of {allowed:.0f} s ({'first call' if first else 'calls after the first'}"
                                               f"; the process was killed)") from None
            raise
        self._guard(child, reply)
        return reply, (_read_output(child, reply, 0) if read else None)

    def _review(self, result: EvalResult) -> None:
        """Mark a speedup beyond the problem's ``review_speedup`` for an administrator's review."""
        bound = self.definition.review_speedup
        fast = [c for c in result.cases if c.speedup is not None and c.speedup > bound]
        if result.speedup is not None and result.speedup > bound:
            result.needs_review = True
            result.review_reason = (f"speedup {result.speedup:.1f}x over the reference is beyond this problem's "
                                    f"review bound of {bound:g}x")
        elif fast:
            result.needs_review = True
            result.review_reason = (f"{fast[0].label}: speedup {fast[0].speedup:.1f}x over the reference is beyond "
                                    f"this problem's review bound of {bound:g}x")

    # -- inputs and references ----------------------------------------------------------------
    def _inputs(self, case: Case, seed: int) -> tuple[Any, torch.Tensor]:
        """A fresh input set, the problem's ``generate_input`` for ``seed``, and the reference's
        output on it (:meth:`_expected`). Called in the judge's threads when a batch is prepared
        (:meth:`_prepare_batch`); the thread's :attr:`inputs_s` is the seconds the set took."""
        generating = time.perf_counter()
        data = self._draw(case, seed)
        self._local.inputs_s = time.perf_counter() - generating
        return data, self._expected(data)

    def _derive(self, pool: list[Any], seed: int) -> Any:
        """A fresh input set derived from a timed case's ``pool`` (its sets drawn by
        ``generate_input``, :data:`POOL_SETS`, :meth:`_draw_pool`): the reference's
        ``derive_input(first, second, seed=seed)`` of two of them chosen by ``seed``, a set with
        ``generate_input``'s distribution and shapes and values no call saw before, made at a
        fraction of the cost (the problem's docstring says how; ``kernelrank.problems``); the
        thread's :attr:`inputs_s` is the seconds it took."""
        generating = time.perf_counter()
        first, second = random.Random(seed).sample(range(len(pool)), 2)
        data = self.reference.derive_input(pool[first], pool[second], seed=seed)
        self._local.inputs_s = time.perf_counter() - generating
        return data

    def _expected(self, data: Any) -> torch.Tensor:
        """The reference's output on ``data``, computed by the judge (the trusted expected output);
        :attr:`ref_s` is the seconds it took (the judge's clock: the base of the calls' deadlines)."""
        started = time.perf_counter()
        with torch.no_grad():
            ref = self.reference.ref_kernel(data)
        if self.device == "cuda":  # pragma: no cover - GPU-only
            torch.cuda.synchronize()
        self._local.ref_s = time.perf_counter() - started
        return ref

    @property
    def ref_s(self) -> float:
        """Seconds the last :meth:`_expected` of this thread took to compute the reference's output."""
        return float(getattr(self._local, "ref_s", 0.0))

    @property
    def inputs_s(self) -> float:
        """Seconds the last :meth:`_inputs` or :meth:`_derive` of this thread took to make its set."""
        return float(getattr(self._local, "inputs_s", 0.0))

    def _place(self, child: SubmissionProcess, data: Any, room: int) -> dict[str, Any]:
        """Write an input set into the child's shared slots (it is frozen) with ``room`` bytes for
        an output (:func:`_out_room`: up to twice the reference's size); the layout for ``go``.

        The data path, whatever the device: input sets and expected outputs are made by the judge
        on the run's device before a batch (:meth:`_prepare_batch`); each is placed in each
        child's slots right before that child's call (:meth:`SubmissionProcess.arena`'s ``place``,
        while the child is frozen), the output is checked where the child left it, in its slot or
        its memory, while it is frozen (``output_reader``, piece by piece; ``read_output`` copies
        a failing one whole for its figures), against the expected output where that lives. On
        the CPU the slots are a shared memory file; on CUDA the same calls place into and read
        from device memory shared with the child through CUDA IPC (the GPU change), so no tensor
        data crosses the host or the socket."""
        return child.arena.place(data, room, direct=child.memory is not None)

    def _check(self, reply: dict[str, Any], out: torch.Tensor | None,
               ref: torch.Tensor) -> tuple[bool, str, dict[str, Any]]:
        """Check one output (:func:`~kernelrank.runner.checking.check_output`): the verdict, its
        message and the error figures."""
        if reply.get("alias"):
            return False, f"{reply['alias']!s:.500}", {}
        if out is None:
            return False, f"output must be a plain torch.Tensor, got {reply.get('out_type')!s:.200}", {}
        tol = self.definition.tolerance_for(str(ref.dtype).removeprefix("torch."))
        c = check_output(out, ref, tol.atol, tol.rtol, out_device=str(reply.get("out_device")))
        figures = {"max_abs_error": c.max_abs_error, "max_rel_error": c.max_rel_error,
                   "mismatches": c.mismatches, "first_mismatch": c.first_mismatch,
                   "nan_mismatches": c.nan_mismatches, "inf_mismatches": c.inf_mismatches}
        return c.passed, c.message, figures

    # -- test mode ----------------------------------------------------------------------------
    def _run_tests(self, child: SubmissionProcess, deadline: float) -> list[CaseResult]:
        results = []
        for i, case in enumerate(self.definition.tests):
            self._where = f"test case {i} ({case.label()})"
            data, ref = self._inputs(case, case.seed)
            reply, out = self._go(child, self._place(child, data, _out_room(ref)), deadline, self.ref_s)
            ok, message, figures = self._check(reply, out, ref)
            r = CaseResult("test", i, case.params, ok, message if not ok else "ok", checked=1, **figures)
            r.interpreted = bool(reply.get("interpreted"))
            results.append(r)
            self.emit({"event": "case", "case": r})
        return results

    # -- timed modes: the submission and the reference in pairs --------------------------------
    @property
    def timing(self) -> CaseTiming:
        """The problem's timing settings for this run's device (``timing.<device>``)."""
        return self.definition.timing[self.device]  # type: ignore[index]

    def processes(self, interpreted: bool = False) -> int:
        """Pairs of processes that time a case's pairs, one per round of its slices
        (:meth:`_rounds`): the problem's ``timing.<device>.processes``
        or the device's default (:data:`~kernelrank.runner.judging.PROCESSES`), unless the options
        set them; one for a submission run under Triton's interpreter (no pairs are timed)."""
        if interpreted:
            return 1
        return self.options.processes or self.timing.processes or judging.PROCESSES[self.device]  # type: ignore[index]

    def _timed_phase(self, child: SubmissionProcess, result: EvalResult, deadline: float) -> None:
        """Time every benchmark case in pairs with the reference (module docstring, step 3), then
        the run's speedup and, in leaderboard mode, its score, each with its 95% interval.

        The pairs are timed by :meth:`processes` pairs of processes: the test phase's process and
        new ones of the submission, and as many of the reference, all started together (each
        frozen outside its own requests), one pair per round of the cases' slices
        (:meth:`_rounds`), so that no one process's lasting speed, nor one stretch of the
        machine's, decides a score and the interval sees how much they differ
        (:func:`~kernelrank.runner.stats.paired_speedup`, *Between processes*)."""
        cases = self.definition.benchmark_cases(self.device)  # type: ignore[arg-type]
        calibration = self.options.calibration_ns
        if calibration is not None and len(calibration) != len(cases):
            raise ValueError(f"the calibration has {len(calibration)} reference times for {len(cases)} benchmark cases")
        self._phase("reference")
        k = self.processes(result.interpreted)
        references: list[SubmissionProcess] = []
        subs = [child]
        try:
            self._where = "loading the reference"
            references.extend(self._start(reference_submission(self.spec), "reference") for _ in range(k))
            subs.extend(self._start(self.source) for _ in range(k - 1))
            try:
                for reference in references:
                    self._load(reference, phase=False)
            except (ChildTimeout, ChildDied, ProtocolViolation, _Verdict) as e:
                raise _ReferenceFailed(f"the reference could not be loaded: {e}") from e
            for n, extra in enumerate(subs[1:], start=2):
                self._load(extra, phase=False, where=f"loading the submission's timed process {n} of {k}")
            self._phase("benchmark")
            done = self._rounds(cases, subs, references, result, deadline, calibration)
        finally:
            for reference in references:
                reference.close()
            for n, extra in enumerate(subs[1:], start=2):
                extra.close()
                self._extra_logs.append((n, extra.logs()))
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None
        if result.interpreted:
            return  # no speedup, no score: the times measure Triton's interpreter
        if not done:
            return
        # the cases share their pairs of processes: their offsets are estimated once for the run
        grouped = [paired.group_means() for paired, _i, _b in done] if done[0][0].grouped() else None
        combined = stats.combine([interval for _p, interval, _b in done], grouped)
        bases = [basis for _p, _i, basis in done]
        result.speedup = combined.estimate
        result.speedup_ci = [combined.low, combined.high]
        result.speedup_interval = combined.to_dict()
        # ranked or not by how well the score is known, not by its worst case (stats.run_noisy)
        result.noisy = stats.run_noisy(combined, len(done), self.timing.noisy_above)
        result.basis = "calibration" if calibration is not None else "run"
        if self.mode == "leaderboard":
            score, low, high = combined.scaled(stats.geometric_mean(bases))
            result.score_ns, result.score_ci_ns = score, [low, high]

    def _rounds(self, cases: list[Case], subs: list[SubmissionProcess], references: list[SubmissionProcess],
                result: EvalResult, deadline: float,
                calibration: tuple[float, ...] | None) -> list[tuple[_Paired, stats.Interval, float]]:
        """Time the benchmark cases in rounds: in round ``r`` each case not yet finished gets one
        slice of ``budget / K`` seconds (:meth:`_time_slice`) on pair of processes ``r % K``
        (:meth:`processes`), so that a case is timed on every pair of processes, each at another
        moment of the run, and the stop rule judges it only after that; a case's warm-up comes
        right before its first slice. The cases' results go to ``result`` in their order, each
        with its ``case`` and ``pairs`` events once it is finished; per finished case timed
        natively, ``(its pairs, speedup interval, reference time in ns)``.

        Why rounds: on a shared host the machine's speed moves in stretches of seconds, and not
        alike for all code (the GEMM reference ran 2x slower for 10-15 s at a time while the
        bfloat16 submission's matmul moved by 10%, the slowdown in its float32 conversions, 5.7x:
        docs/research/bench-history.md, sections 7 and 8). A case timed in one stretch of 5-15 s got a narrow interval around that stretch's
        ratio: pairing cannot cancel a shift that differs between the two sides' code. Spread
        over the run, a case averages several stretches, and their differences show as the
        pairs of processes' offsets, which its interval and the run's carry
        (:func:`~kernelrank.runner.stats.paired_speedup`, *Between processes*;
        :func:`~kernelrank.runner.stats.combine`).

        Raises:
            _Verdict: a case failed (its check, a timing claim); the cases finished before it,
                and it, are in ``result``.
        """
        paireds: list[_Paired] = []
        finished: dict[int, tuple[_Paired, stats.Interval, float] | None] = {}
        first_case = len(result.cases)
        try:
            while len(finished) < len(cases):
                for i, case in enumerate(cases):
                    if i in finished:
                        continue
                    self._where = f"benchmark case {i} ({case.label()})"
                    if i == len(paireds):
                        paireds.append(self._open_case(subs, references, i, case, deadline))
                    paired = paireds[i]
                    if not paired.done:
                        self._time_slice(paired, case, deadline)
                    if not paired.done:
                        continue
                    r = paired.result
                    finished[i] = None
                    if not r.passed:
                        self.emit({"event": "case", "case": r})
                        raise _Verdict(Status.failed, f"{r.label}: {r.message}")
                    if r.interpreted:
                        result.interpreted = True
                        self.emit({"event": "case", "case": r})
                        continue
                    interval, basis = self._finish_case(paired, case, None if calibration is None else calibration[i])
                    self.emit({"event": "case", "case": r})
                    self.emit({"event": "pairs", "case": i, "pairs": [_pair_record(*p) for p in paired.raw]})
                    finished[i] = (paired, interval, basis)
        finally:
            result.cases[first_case:] = [paireds[i].result for i in sorted(finished)]
        return [finished[i] for i in sorted(finished) if finished[i] is not None]  # type: ignore[misc]

    def _finish_case(self, paired: _Paired, case: Case, calibrated: float | None) -> tuple[stats.Interval, float]:
        """Final figures of a case timed in pairs; its speedup interval and reference time (ns).

        Raises:
            _Verdict: ``rejected`` for timing claims the judge's clock does not support.
        """
        r = paired.result
        sub, ref, overhead = paired.judged()
        main_overhead = statistics.median(paired.ref.main_unexplained()) if paired.ref.main_cpu else 0.0
        r.wall_check = judging.wall_check(paired.sub.claims, paired.sub.windows, paired.sub.main_cpu, overhead,
                                        max(0.0, main_overhead), paired.sub.sizes)
        # the job's CPU time outside the claims, as charged (issue 43): 0 batches for honest code
        r.wall_check["job_cpu"] = paired.cpu_judgement()
        r.timing = stats.summarize(sub).to_dict()
        r.ref_timing = stats.summarize(ref).to_dict()
        if not r.wall_check["passed"]:
            self.emit({"event": "case", "case": r})
            raise _Verdict(Status.rejected, f"{r.label}: {r.wall_check['message']}")
        if min(sub) <= 0:  # no call takes no time: the timer in the child was tampered with
            raise _Verdict(Status.rejected, f"{r.label}: the submission's process claimed 0 ns for a call")
        interval = paired.interval()
        assert interval is not None  # a case reaches its figures with at least one pair
        # the reference time a case's time is based on: the service's calibration, or this run's
        # (the trimmed mean of the reference's times, the same estimator as the speedup's)
        measured = math.exp(stats.trimmed_mean([math.log(t) for t in ref])[0])
        basis = calibrated if calibrated is not None else measured
        r.ref_mean_ns = r.ref_timing["mean_ns"]
        r.reference_ns = basis
        time_ns, low, high = interval.scaled(basis)
        r.speedup, r.speedup_ci = interval.estimate, [interval.low, interval.high]
        r.time_ns, r.time_ci_ns = time_ns, [low, high]
        r.tflops, r.gbps = roofline(self.reference.flops(case.params), self.reference.bytes(case.params),
                                    r.timing["mean_ns"])
        wall = paired.wall_s
        inside = sum(sub) + sum(ref)
        r.pairing = {
            "pairs": interval.n, "order": "alternating", "processes": len(paired.sub.children),
            # slices of the run's rounds the case was timed in, each on one pair of processes
            "slices": paired.slices,
            # timed and checked before both of their processes were warm (page faults): not counted
            "warm_up_pairs": paired.warmup_pairs,
            "faults_per_call": {side.name: _per_call(side.faults, side.sizes) for side in (paired.sub, paired.ref)},
            # the log standard error of the processes' offsets (stats.paired_speedup): more pairs do not shrink it
            "between_processes_log_se": interval.between_se,
            "calls_per_pair": max(paired.sub.sizes) if paired.sub.sizes else 1,
            "reference_run_ns": measured,
            "half_width": interval.half_width,
            "timed_share": inside / 1e9 / wall if wall > 0 else 0.0,
            "wall_s": wall, "prepare_s": paired.prep_s, "timed_phase_s": paired.timed_s, "check_s": paired.check_s,
            # the preparing's parts, in the judge's threads' seconds (several threads: more than prepare_s)
            "inputs_thread_s": paired.inputs_s, "expected_thread_s": paired.expected_s,
            # CPU time of each side's cgroup while the other was timed: 0 when freezing holds
            "submission_cpu_in_reference_windows_ns": paired.ref.other_cpu_ns,
            "reference_cpu_in_submission_windows_ns": paired.sub.other_cpu_ns,
        }
        return interval, basis

    def _open_case(self, subs: list[SubmissionProcess], references: list[SubmissionProcess], index: int,
                   case: Case, deadline: float) -> _Paired:
        """Warm both sides up on the case's first input set, and ready every process for its timed
        requests; the case then is timed in slices (:meth:`_time_slice`), ``done`` already when
        the warm-up failed or ran under Triton's interpreter (its result says which).

        ``subs`` and ``references``: the sides' processes, as many of each; the case's slice of
        round ``r`` is timed by ``subs[r % K]`` and ``references[r % K]`` (:meth:`processes`,
        :meth:`_rounds`), each warmed up here on the case's first input set. Seeds are derived
        from the run's secret and the set's number (every set is new, never a replay)."""
        started = time.monotonic()
        paired = _Paired(CaseResult("benchmark", index, case.params, True, "ok"), _Side("submission", list(subs)),
                         _Side("reference", list(references)), cores=_cores())
        try:
            self._open(paired, case, deadline)
        finally:
            paired.wall_s += time.monotonic() - started
        return paired

    def _open(self, paired: _Paired, case: Case, deadline: float) -> None:
        r = paired.result
        subs = paired.sub.children
        first = paired.first = self._prepare(case, self._seed(case, 0))
        warm: dict[str, list[int]] = {"submission": [], "reference": []}
        for j in range(len(subs)):
            paired.sub.current = paired.ref.current = j
            if not self._warm_up(paired, paired.sub, first, deadline, warm["submission"]):
                paired.done = True
                return
            if r.interpreted:
                self._time_interpreted(paired, case, deadline)
                paired.done = True
                return
            self._warm_up(paired, paired.ref, first, deadline, warm["reference"])
        for side in (paired.sub, paired.ref):
            # the median after each process's first call: one disturbed call must not set the request's shape
            side.warm_ns = int(statistics.median(warm[side.name]))
        paired.per_request = self._sets_per_request(paired, first, getattr(self.timing, self.mode))
        paired.pool = self._draw_pool(case, first)
        if self.device == "cpu":
            # two processes at a time, one per CPU (none is timed now): softmax's first case readied
            # its 8 processes (256 MiB of new pages each) in 2.6 s against 3.4 s one at a time
            # (docs/research/bench-history.md, issue 14)
            every = [(side, child) for side in (paired.sub, paired.ref) for child in side.children]
            self._in_threads(lambda item: self._reserve(item[0], item[1], first, paired.per_request, deadline), every)

    def _time_slice(self, paired: _Paired, case: Case, deadline: float) -> None:
        """One slice of a case's timing (:meth:`_rounds`): batches of pairs on pair of processes
        ``s % K`` for its slice ``s`` (every case takes part in every round from the first, so
        ``s`` is the round) for ``budget / K`` seconds (at least one batch), or until the stop rule
        ends the case (``paired.done``).

        Per batch: the input sets and their expected outputs are prepared, then for each set the
        submission and the reference are called once, alternately first
        (:func:`submission_first`), each on its own copy placed while both are frozen, then both
        sides' outputs of that pair are read where the children left them and the submission's
        checked (:meth:`_check_request`). The stop rule looks at the speedup's interval before
        each batch, once the case was timed on every pair of processes (from its ``K``-th slice
        on, and in it once that pair has a counted pair); ``timing.<device>.target``,
        ``noisy_above`` and ``cap`` of the problem say how long a case may be timed and when it
        is too noisy."""
        started = time.monotonic()
        try:
            self._slice(paired, case, deadline, started)
        finally:
            paired.slices += 1
            paired.spent_s += time.monotonic() - started
            paired.wall_s += time.monotonic() - started

    def _slice(self, paired: _Paired, case: Case, deadline: float, started: float) -> None:
        timing = self.timing
        budget_s = getattr(timing, self.mode)
        r = paired.result
        first, per_request = paired.first, paired.per_request
        assert first is not None  # the case was opened
        k_processes = len(paired.sub.children)
        process = paired.slices % k_processes
        slice_s = budget_s / k_processes
        interval = paired.interval()
        batches = 0  # in this slice
        while True:
            now = time.monotonic()
            spent = paired.spent_s + now - started
            seen_all = paired.slices >= k_processes or (paired.slices == k_processes - 1 and process in paired.sub.procs)
            if seen_all:
                stop, noisy = judging.stop_rule(interval, spent, budget_s, timing.noisy_above, timing.cap,
                                              judging.PRECISION[self.device], target=timing.target)
                if stop:
                    r.noisy = noisy
                    paired.done = True
                    return
            if batches and now - started >= slice_s:
                return
            t0 = time.monotonic()
            left_s = min(slice_s - (now - started), (budget_s if spent < budget_s else budget_s * timing.cap) - spent)
            k = self._batch_size(paired, first, left_s, per_request)
            sets = self._prepare_batch(case, [self._seed(case, paired.number + 1 + j) for j in range(k)], paired)
            t1 = time.monotonic()
            paired.inputs_s += sum(s.inputs_s for s in sets)
            paired.expected_s += sum(s.expected_s for s in sets)
            check_s = 0.0
            for in_batch, lo in enumerate(range(0, len(sets), per_request)):
                chunk = sets[lo:lo + per_request]
                paired.sub.current = paired.ref.current = process
                counted = paired.sub.is_warm and paired.ref.is_warm
                first_side = submission_first(paired.batches, in_batch)
                order = (paired.sub, paired.ref) if first_side else (paired.ref, paired.sub)
                calls: dict[str, _Call] = {}
                replies: dict[str, list[dict[str, Any]]] = {}
                for side in order:
                    other = paired.ref if side is paired.sub else paired.sub
                    calls[side.name], replies[side.name] = self._timed_request(side, other, chunk, deadline)
                    if side is paired.sub and any(reply.get("interpreted") for reply in replies[side.name]):
                        r.passed, r.message = False, ("its Triton kernels ran under the interpreter on some calls "
                                                      "and natively on others: not timed")
                        paired.done = True
                        return
                paired.number += len(chunk)
                paired.raw.append((calls["submission"], calls["reference"], first_side, process, counted))
                for side in (paired.sub, paired.ref):
                    call = calls[side.name]
                    side.settle(call)
                    if not counted:
                        continue
                    side.claims.extend(call.claims)
                    side.sizes.append(len(call.claims))
                    side.windows.append(call.window)
                    side.main_cpu.append(call.main_cpu)
                    side.job_cpu.append(call.job_cpu)
                    side.procs.append(side.current)
                    side.faults.append(call.faults)
                checked = time.monotonic()
                self._check_request(paired, chunk, replies, paired.number - len(chunk), order)
                check_s += time.monotonic() - checked
                if not r.passed:
                    break
            paired.batches += 1
            batches += 1
            paired.prep_s += t1 - t0
            paired.timed_s += time.monotonic() - t1 - check_s
            paired.check_s += check_s
            if not r.passed:
                paired.done = True
                return
            interval = paired.interval()

    def _reserve(self, side: _Side, child: SubmissionProcess, first: _Set, per_request: int, deadline: float) -> None:
        """Ready one process (``child``, one of ``side``'s) for the case's timed requests of ``per_request``
        input sets, before the first (CPU only): its slots mapped at the size those requests'
        layouts take, their pages faulted in, and its heap given as much free memory, faulted in,
        as such a request's outputs take and room for a call's temporaries (at most
        :data:`BATCH_BYTES`; the child's ``reserve``). Its first timed request then needs no new pages, so it usually counts
        (:meth:`_Side.settle`): before this, each process's first request or two at a case's
        shape faulted on 70-215 MiB (0.1-0.5 s) and went uncounted, and a process's heap,
        fragmented by the outputs a request holds, still grew in faults now and then
        (``docs/research/bench-history.md``, issue 14).

        Raises:
            _ReferenceFailed: the reference's process failed.
        """
        inputs, output = slots_nbytes(first.data), slots_nbytes(first.expected)
        size = child.arena.grow(per_request * inputs)
        # the request's outputs, held together, and room for a call's temporaries: twice an input
        # set and two outputs (a bfloat16 kernel computing in float32 holds two of twice the size)
        heap = min(per_request * output + 2 * (inputs + 2 * output), BATCH_BYTES)
        with self._reference_failures(side, deadline):
            self._guard(child, child.request({"op": "reserve", "size": size, "heap": heap}, deadline))

    def _sets_per_request(self, paired: _Paired, first: _Set, budget_s: float) -> int:
        """Input sets (calls) per timed request: on the CPU as many as :data:`REQUEST_SECONDS`
        of the faster side's warm-up call hold, at most :data:`MAX_SETS_PER_REQUEST`, what
        :data:`BATCH_BYTES` holds, and few enough that the case's budget (``budget_s``, seconds)
        holds :data:`~kernelrank.runner.judging.MIN_PAIRS` pairs (the calls taking
        :data:`TIMED_SHARE_GUESS` of it), so that short budgets still give an interval; one on
        CUDA (its calls are judged in batches of requests, :meth:`_Paired.judged`)."""
        if self.device != "cpu":
            return 1
        call_ns = min(t for t in (paired.sub.warm_ns, paired.ref.warm_ns, 1 << 62) if t > 0)
        by_time = max(1, math.ceil(REQUEST_SECONDS * 1e9 / call_ns))
        by_memory = max(1, BATCH_BYTES // max(1, first.nbytes))
        by_budget = max(1, int(budget_s * 1e9 * TIMED_SHARE_GUESS / (2 * judging.MIN_PAIRS * call_ns)))
        return max(1, min(by_time, by_memory, by_budget, MAX_SETS_PER_REQUEST))

    def _batch_size(self, paired: _Paired, first: _Set, left_s: float, per_request: int = 1) -> int:
        """Input sets to prepare for the next batch: what :data:`BATCH_BYTES` holds, at most
        :data:`MAX_BATCH`, and no more than the time left (of the budget, or of the extra time
        once the budget is spent) seems to hold, from the pairs so far; a whole number of
        requests of ``per_request`` sets (at least one request)."""
        by_memory = max(1, BATCH_BYTES // max(1, first.nbytes))
        done = len(paired.sub.claims)
        spent = paired.prep_s + paired.timed_s + paired.check_s
        by_time = max(1, math.ceil(left_s / (spent / done))) if done and spent > 0 else 2 * per_request
        k = max(1, min(by_memory, max(MAX_BATCH, per_request), by_time))
        return max(per_request, k // per_request * per_request)

    def _seed(self, case: Case, number: int) -> int:
        """The seed of the case's input set ``number`` (0: its warm-up's), from the run's secret
        (:func:`mix_seed`)."""
        return mix_seed(self.secret, case.seed, number)

    def _prepare(self, case: Case, seed: int, paired: _Paired | None = None) -> _Set:
        """A fresh input set: drawn, with its expected output (:meth:`_inputs`); or, where the
        ``paired`` case has a pool (:meth:`_draw_pool`), derived from it (:meth:`_derive`), its
        expected output the reference process's (:meth:`_check_derived`), its deadline base and
        sizes the case's first set's (a derived set has its shapes and dtypes)."""
        if paired is not None and paired.pool:
            first = paired.first
            assert first is not None  # the pool is drawn once the case's first set is
            data = self._derive(paired.pool, seed)
            return _Set(data, None, first.ref_s, first.nbytes, first.room, self.inputs_s)
        data, expected = self._inputs(case, seed)
        return _Set(data, expected, self.ref_s, _nbytes(data) + 2 * _nbytes(expected), _out_room(expected),
                    self.inputs_s, self.ref_s)

    def _draw_pool(self, case: Case, first: _Set) -> list[Any]:
        """The input sets a timed case's sets are derived from when its reference defines
        ``derive_input`` (empty otherwise): the case's first set (its warm-up's) and
        :data:`POOL_SETS` - 1 more drawn by ``generate_input`` from seeds of the run's secret
        (numbers -1, -2...: never a timed set's), in the judge's threads."""
        if not callable(getattr(self.reference, "derive_input", None)):
            return []
        seeds = [self._seed(case, -n) for n in range(1, POOL_SETS)]
        return [first.data, *self._in_threads(lambda s: self._draw(case, s), seeds)]

    def _draw(self, case: Case, seed: int) -> Any:
        """The problem's ``generate_input`` for ``case`` with ``seed``, on the run's device."""
        return self.reference.generate_input(device=self.device, **dict(case.params, seed=seed))

    def _in_threads(self, work: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        """``work`` of each item, in order, in the judge's threads where there are several items
        and CPUs (an item's exception is raised when its result is reached)."""
        if len(items) < 2 or self.cpus < 2:
            return [work(item) for item in items]
        return list(self._workers().map(work, items))

    def _prepare_batch(self, case: Case, seeds: list[int], paired: _Paired | None = None) -> list[_Set]:
        """The input sets of a batch, prepared in the judge's threads (one per CPU: both children
        are frozen meanwhile, and each set is its own work). A reference that draws from torch's
        global generator (KernelBench's ``get_inputs`` under ``manual_seed``) may then get inputs
        that are not exactly those of their seed: still fresh and random, and each expected output
        is computed from its own inputs (its model, built under its own seed, is built on the
        case's first input set, which is prepared alone before any batch)."""
        return self._in_threads(lambda s: self._prepare(case, s, paired), seeds)

    def _copy(self, pending: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """The copies of a request's placing (:meth:`~kernelrank.runner.slots.Arena.place_sets`),
        in the judge's threads: both children are frozen, and ``copy_`` releases the GIL."""
        self._in_threads(lambda item: item[0].copy_(item[1]), pending)

    def _workers(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.cpus, thread_name_prefix="kernelrank-judge")
        return self._pool

    def _warm_up(self, paired: _Paired, side: _Side, s: _Set, deadline: float, warm: list[int]) -> bool:
        """Warm-up calls of one side's current process on the first input set (as many as
        :data:`~kernelrank.runner.timing.WARMUP_SECONDS` and the minimum calls ask, and while the
        last one page-faulted beyond :data:`~kernelrank.runner.timing.WARM_FAULTS_PER_CALL`, up
        to :data:`~kernelrank.runner.timing.WARMUP_MAX_REQUESTS` more), its first output
        checked; the claims of the calls after the first that did not fault go to ``warm`` (the
        request shape is sized on them; without such calls, those after the first, or the
        first's when it is the only one); ``False`` when the submission failed (the case's
        result says why).

        Raises:
            _ReferenceFailed: the reference's first output is wrong or its child failed.
        """
        r = paired.result
        is_sub = side is paired.sub
        layout = self._place(side.child, s.data, s.room)
        calls, started, claims, steady = 0, time.monotonic(), [], []
        faulted = True  # the last call page-faulted beyond WARM_FAULTS_PER_CALL (or none was made yet)
        extra = 0  # calls past the warm-up's time because the last one faulted
        while calls < WARMUP_MAX_CALLS:
            if calls >= WARMUP_MIN_CALLS and time.monotonic() - started >= WARMUP_SECONDS[self.device]:
                if not faulted or extra >= WARMUP_MAX_REQUESTS:
                    break
                extra += 1
            before = side.child.faults()
            reply, out = self._side_go(side, layout, deadline, s.ref_s, read=calls == 0)
            after = side.child.faults()
            claims.extend(_ns_list(reply.get("times_ns"), 1))
            faulted = before is not None and after is not None and after - before > WARM_FAULTS_PER_CALL
            if calls > 0 and not faulted:
                steady.append(claims[-1])
            calls += 1
            if calls == 1:
                ok, message, figures = self._check(reply, out, s.expected)
                if not is_sub:
                    if not ok:
                        raise _ReferenceFailed(f"the reference fails its own check on {r.label}: {message}")
                    continue
                r.checked += 1
                if not ok:
                    r.passed, r.message = False, f"output of the first call is wrong: {message}"
                    _set_figures(r, figures)
                    return False
                if reply.get("interpreted"):
                    r.interpreted = True  # no more warm-up: each interpreted call takes seconds
                    return True
            elif is_sub and reply.get("alias"):
                r.passed, r.message = False, f"warm-up: {reply['alias']!s:.500}"
                return False
        warm.extend(steady or claims[1:] or claims)
        return True

    def _time_interpreted(self, paired: _Paired, case: Case, deadline: float) -> None:
        """A submission whose Triton kernels run under the interpreter: :data:`INTERPRETED_CALLS`
        calls on fresh inputs, each checked; their claimed times are kept as ``timing`` and
        marked interpreted; no pairs, no speedup."""
        r = paired.result
        claims: list[int] = []
        for i in range(INTERPRETED_CALLS):
            s = self._prepare(case, self._seed(case, i + 1))
            reply, out = self._go(paired.sub.child, self._place(paired.sub.child, s.data, s.room), deadline,
                                  s.ref_s)
            claims.extend(_ns_list(reply.get("times_ns"), 1))
            ok, message, figures = self._check(reply, out, s.expected)
            r.checked += 1
            if not ok:
                r.passed, r.message = False, f"output of timed call {i + 1} is wrong: {message}"
                _set_figures(r, figures)
                return
        r.timing = stats.summarize(claims).to_dict()
        r.message = "ok (interpreted: its Triton kernels ran under Triton's interpreter; the times are not ranked)"

    def _side_go(self, side: _Side, layout: dict[str, Any], deadline: float, ref_s: float,
                 read: bool = True, calls: int = 1) -> tuple[dict[str, Any], torch.Tensor | None]:
        """:meth:`_go` for either side (``calls``: the input sets of a layout of several, for the
        request's deadline); a failure of the reference's child is the judge's
        (:class:`_ReferenceFailed`), never a verdict on the submission."""
        with self._reference_failures(side, deadline):
            return self._go(side.child, layout, deadline, ref_s, repeat=calls, read=read)

    @contextlib.contextmanager
    def _reference_failures(self, side: _Side, deadline: float) -> Iterator[None]:
        """Around a request of ``side``'s process: a failure of the reference's child is the
        judge's (:class:`_ReferenceFailed`), never a verdict on the submission; the submission's
        failures pass as they are.

        Raises:
            ChildTimeout: as raised, from the submission, or from the reference once the run's
                ``deadline`` has passed (the submission's calls, slow or many, spent the budget:
                the run's timeout, not the judge's failure).
            _ReferenceFailed: any other failure of the reference's child.
        """
        if side.name == "submission":
            yield
            return
        try:
            yield
        except ChildTimeout:
            if time.monotonic() >= deadline:
                raise
            raise _ReferenceFailed(f"the reference failed in {self._where}: it did not answer") from None
        except (ChildDied, ProtocolViolation, _Verdict) as e:
            raise _ReferenceFailed(f"the reference failed in {self._where}: {e}") from e

    def _timed_request(self, side: _Side, other: _Side, sets: list[_Set],
                       deadline: float) -> tuple[_Call, list[dict[str, Any]]]:
        """One timed request of one side's current process, one call on its copy of each of ``sets``
        (one set: the plain layout; several: :meth:`~kernelrank.runner.slots.Arena.place_sets`),
        every other process frozen throughout (the other side's CPU time in the window is counted);
        the request's figures (its process's page faults among them, which decide when the process
        is warm: :meth:`_Side.settle`), and per call the answer about its output (the outputs stay
        where the child left them until :meth:`_check_request` reads them)."""
        child = side.child
        if len(sets) == 1:
            layout = self._place(child, sets[0].data, sets[0].room)
        else:
            layout = child.arena.place_sets([s.data for s in sets], sets[0].room, direct=child.memory is not None,
                                            copy=self._copy)
        main_before = child.main_cpu_ns()
        job_before = child.cpu_ns()
        other_before = other.cpu_ns()
        faults_before = child.faults()
        reply, _ = self._side_go(side, layout, deadline, max(s.ref_s for s in sets), read=False, calls=len(sets))
        window = child.span_ns
        faults_after = child.faults()
        other_after = other.cpu_ns()
        job_after = child.cpu_ns()
        main_cpu = child.main_cpu_ns() - main_before
        job_cpu = None if job_before is None or job_after is None else job_after - job_before
        claims = _ns_list(reply.get("times_ns"), len(sets))
        if sum(claims) > window:
            message = (f"{self._where}: the {side.name}'s process claimed {sum(claims)} ns for "
                       f"{'a call' if len(sets) == 1 else f'{len(sets)} calls'} answered after {window} ns")
            if side.name == "submission":
                raise _Verdict(Status.rejected, message)
            raise _ReferenceFailed(message)
        if side.other_cpu_ns is not None and other_before is not None and other_after is not None:
            side.other_cpu_ns += other_after - other_before
        else:
            side.other_cpu_ns = None
        if len(sets) == 1:
            replies = [reply]
        else:
            replies = reply.get("outs")
            if not isinstance(replies, list) or len(replies) != len(sets) or not all(isinstance(x, dict) for x in replies):
                raise (ProtocolViolation if side.name == "submission" else _ReferenceFailed)(
                    f"{self._where}: the {side.name}'s answer does not describe one output per input set")
        faults = None if faults_before is None or faults_after is None else faults_after - faults_before
        return _Call(sum(claims), window, main_cpu, claims, faults, job_cpu), replies

    def _check_request(self, paired: _Paired, sets: list[_Set], replies: dict[str, list[dict[str, Any]]],
                       number: int, order: tuple[_Side, _Side]) -> None:
        """Check the submission's outputs of one request of each side on ``sets`` (timed calls
        ``number + 1`` on), both children frozen, in the judge's own thread, each output as it is
        read (:meth:`_quick_check`); an output that fails the quick rule is read
        whole and given the full check, its verdict and figures. The first wrong output fails the
        case, naming its call.

        The reference's outputs are read alike, piece by piece, and dropped (its output on the
        first set of the case was checked in its warm-up): reading a side's outputs leaves their
        pages in the caches its next outputs are written to, and reading only the submission's
        favoured it (+10% on a case of a kernel identical to the reference: docs/research/bench-history.md,
        issue 14). The sides' outputs are read in ``order``, the order their requests ran, which
        alternates (:func:`submission_first`): neither side's always read last.

        Sets derived from the case's pool have no expected output of the judge's: each output of
        the submission is checked against the reference's on the same set (:meth:`_check_derived`).
        """
        if sets[0].expected is None:  # a case's timed sets are all derived, or all drawn
            self._check_derived(paired, sets, replies, number, order)
            return
        r = paired.result
        items = [(side, j, reply, s) for side in order for j, (reply, s) in enumerate(zip(replies[side.name], sets))]

        def quick(item: tuple[_Side, int, dict[str, Any], _Set]) -> bool:
            side, j, reply, s = item
            if side is paired.ref:
                return self._read_through(side.child, reply, j)
            return self._quick_check(side.child, reply, j, s.expected)

        # in this thread: in the judge's two threads a 16 MiB output's compare took 13 ms instead
        # of 4.3 and its read 4.1 ms instead of 2.2 (many short torch calls and reads, each taking
        # and giving back the GIL), and a softmax set's checking 13.1 ms instead of 10.5
        for (side, j, reply, s), passed in zip(items, map(quick, items)):
            if side is paired.sub:
                r.checked += 1
            if passed:
                continue
            if side is paired.ref:
                raise _ReferenceFailed(f"the reference's output of timed call {number + j + 1} could not be read "
                                       f"in {self._where}")
            ok, message, figures = self._check(reply, _read_output(side.child, reply, j), s.expected)
            if ok:
                continue
            r.passed, r.message = False, f"output of timed call {number + j + 1} is wrong: {message}"
            _set_figures(r, figures)
            return

    def _check_derived(self, paired: _Paired, sets: list[_Set], replies: dict[str, list[dict[str, Any]]],
                       number: int, order: tuple[_Side, _Side]) -> None:
        """:meth:`_check_request` for sets derived from the case's pool: each output of the
        submission is compared, piece by piece, with the reference process's output on the same
        set, both read where their children left them (each piece read in ``order``), by the
        quick rule (:func:`~kernelrank.runner.checking.close_to_reader`). The judge does not
        compute those sets' expected outputs: the reference process ran the reference's own code
        on its own copy of the set, isolated from the submission's processes
        (:mod:`~kernelrank.runner.isolation`: another sandbox user, its own PID namespace and
        slots) and frozen while they ran, and its output on the case's first set was checked
        against the judge's own in its warm-up (:meth:`_warm_up`).

        Where the two disagree by that rule, the judge computes the expected output itself
        (:meth:`_expected`) and that decides: a submission's output that fails against it fails
        the case, naming its call; one that passes while the reference process's fails is the
        judge's failure (:class:`_ReferenceFailed`), never a verdict on the submission. So no
        output fails on the reference process's word alone, and the only way it could make a
        wrong output pass is to agree with it, which the submission cannot make it do.
        GEMM's cases spent 84-85% of their preparing on the judge's own reference call per set
        (docs/research/bench-history.md, issue 14).

        Raises:
            _ReferenceFailed: the reference's output is unreadable, not of the first set's dtype
                and shape, or wrong where the submission's is right.
        """
        r = paired.result
        first = paired.first
        assert first is not None and first.expected is not None  # the first set is drawn
        template = first.expected
        ref_first = order[0] is paired.ref
        sub_child, ref_child = paired.sub.child, paired.ref.child

        def quick(j: int) -> bool | str:
            """Set ``j``'s quick rule; a string: why the reference's output is not usable."""
            call, ref_reply = number + j + 1, replies["reference"][j]
            try:
                dtype, shape, read_ref = ref_child.arena.output_reader(ref_reply.get("out"), ref_child.memory, j,
                                                                       scratch=1)
            except SlotError as e:
                return f"the reference's output of timed call {call} could not be read in {self._where}: {e}"
            if ref_reply.get("alias") or dtype != template.dtype or shape != list(template.shape):
                return (f"the reference's output of timed call {call} in {self._where} is not "
                        f"of its first output's dtype and shape ({str(template.dtype).removeprefix('torch.')}, "
                        f"{list(template.shape)})")
            return self._quick_check(sub_child, replies["submission"][j], j, template, read_ref, ref_first)

        # the sets in the judge's threads, one per CPU (both children are frozen): the reads
        # (process_vm_readv) and the native rule release the GIL, so two sets are read and
        # compared at once (docs/research/bench-history.md, issue 14); their answers are taken in call order
        for j, (s, passed) in enumerate(zip(sets, self._in_threads(quick, list(range(len(sets)))))):
            if isinstance(passed, str):
                raise _ReferenceFailed(passed)
            call = number + j + 1
            r.checked += 1
            if passed:
                continue
            sub_reply, ref_reply = replies["submission"][j], replies["reference"][j]
            s.expected = expected = self._expected(s.data)
            ok, message, figures = self._check(sub_reply, _read_output(sub_child, sub_reply, j), expected)
            if not ok:
                r.passed, r.message = False, f"output of timed call {call} is wrong: {message}"
                _set_figures(r, figures)
                return
            with self._reference_failures(paired.ref, math.inf):
                theirs = _read_output(ref_child, ref_reply, j)
            ok, message, _ = self._check(ref_reply, theirs, expected)
            if not ok:
                raise _ReferenceFailed(f"the reference's process gave a wrong output on timed call {call} in "
                                       f"{self._where}, where the submission's was right: {message}")

    @staticmethod
    def _read_through(child: SubmissionProcess, reply: dict[str, Any], index: int) -> bool:
        """Read an output piece by piece as :meth:`_quick_check` would, and drop it; ``False`` when
        it could not be read."""
        desc = reply.get("out")
        if not isinstance(desc, dict):
            return False
        try:
            _dtype, shape, read = child.arena.output_reader(desc, child.memory, index)
            for start, stop in piece_bounds(math.prod(shape)):
                read(start, stop)
        except SlotError:
            return False
        return True

    def _quick_check(self, child: SubmissionProcess, reply: dict[str, Any], index: int, expected: torch.Tensor,
                     read_ref: Callable[[int, int], torch.Tensor] | None = None, ref_first: bool = False) -> bool:
        """Whether an output passes by the quick rule, read piece by piece from where the child
        left it (:meth:`~kernelrank.runner.slots.Arena.output_reader`,
        :func:`~kernelrank.runner.checking.close_in_pieces`): never copied whole, never held.
        ``False`` for anything the full check must look at (not a plain tensor, another dtype,
        shape or device, an aliased output, a value outside the quick rule, a malformed
        description). Given ``read_ref`` (the reference process's output on the same set, read
        alike, :meth:`_check_derived`), the values are compared with it, ``expected`` giving only
        the dtype, shape and device (:func:`~kernelrank.runner.checking.close_to_reader`, each
        piece of the reference's read first where ``ref_first``)."""
        desc = reply.get("out")
        if reply.get("alias") or not isinstance(desc, dict) or reply.get("out_device") is None:
            return False
        try:
            dtype, shape, read = child.arena.output_reader(desc, child.memory, index)
            if (dtype != expected.dtype or shape != list(expected.shape)
                    or torch.device(str(reply["out_device"])).type != expected.device.type):
                return False
            tol = self.definition.tolerance_for(str(expected.dtype).removeprefix("torch."))
            if read_ref is not None:
                return close_to_reader(read, read_ref, expected.numel(), dtype, expected.device.type, tol.atol,
                                       tol.rtol, ref_first=ref_first)
            return close_in_pieces(read, expected, tol.atol, tol.rtol)
        except (SlotError, RuntimeError):
            return False  # the full check says why (a malformed description is a protocol violation)

    # -- profile mode -------------------------------------------------------------------------
    def _profile(self, child: SubmissionProcess, deadline: float) -> dict[str, Any]:
        cases = self.definition.benchmark_cases(self.device)  # type: ignore[arg-type]
        self._where = "profiling the benchmark cases"
        sets = [self._draw(c, c.seed) for c in cases]
        labels = [f"case {i}: {c.label()}" for i, c in enumerate(cases)]
        reply = child.request({"op": "profile", "sets": sets, "labels": labels, "trace_file": "trace.json"}, deadline,
                              max_bytes=REPLY_SLACK_BYTES + 16 * PROFILE_TABLE_LIMIT)
        self._guard(child, reply)
        table = reply.get("table")
        profile: dict[str, Any] = {
            "table": str(table)[:PROFILE_TABLE_LIMIT],
            "sort_by": "self_cuda_time_total" if self.device == "cuda" else "self_cpu_time_total",
            "trace_file": None,
            "proton": "Proton needs a GPU: not run on the cpu device" if self.device == "cpu" else None,
        }
        stem = f"{self.spec.name}-{self.device}-{int(time.time())}"
        if self.options.trace_dir is not None:
            profile["trace_file"] = child.copy_out("trace.json", self.options.trace_dir / f"{stem}.trace.json",
                                                   TRACE_FILE_LIMIT)
        if self.device == "cuda":  # pragma: no cover - GPU-only: [issue 16] Proton in a process of its own
            profile["proton"] = self._proton(sets, labels, deadline, stem)
        return profile

    def _proton(self, sets: list[Any], labels: list[str], deadline: float, stem: str) -> str | None:  # pragma: no cover - GPU-only
        """[issue 16] Proton in a second child: CUPTI takes one subscriber, which ``torch.profiler``
        holds in the first. The hatchet file's copy, or what went wrong (profiling is advisory)."""
        outer = self._where
        self._where = "profiling the benchmark cases with Proton"
        child = self._start(self.source)
        try:
            self._load(child)
            reply = child.request({"op": "proton", "sets": sets, "labels": labels}, deadline,
                                  max_bytes=REPLY_SLACK_BYTES)
            self._guard(child, reply)
            if self.options.trace_dir is None or not reply.get("proton"):
                return None
            return child.copy_out("proton.hatchet", self.options.trace_dir / f"{stem}.hatchet", TRACE_FILE_LIMIT)
        finally:
            child.close()
            self._where = outer


# -- helpers -----------------------------------------------------------------------------------
def _raise_on_error(reply: dict[str, Any], where: str) -> None:
    if reply.get("ok"):
        return
    kind = reply.get("kind")
    message = str(reply.get("message", ""))[:4096]
    tb = str(reply.get("traceback", ""))[-8192:]
    detail = f"{message}\n{tb}".strip()
    if kind == "compile_error":
        raise _Verdict(Status.compile_error, f"compile error while {where}: {detail}" if where.startswith("load")
                       else f"compile error in {where}: {detail}")
    if kind == "runtime_error":
        raise _Verdict(Status.error, f"runtime error in {where}: {detail}")
    raise ProtocolViolation(f"unexpected answer: {message}")


def _raise_on_tampering(child: SubmissionProcess, reply: dict[str, Any], where: str) -> None:
    """The child's tripwire found functions the harness relies on replaced, or the objects it
    watches are no longer those of its ``hello`` answer, before the submission was imported
    (the record inside the child re-taken). See :mod:`~kernelrank.runner.integrity`: a heuristic,
    not a guarantee; the judge's wall clock does not depend on it."""
    tampered = reply.get("tampered")
    if tampered:
        names = ", ".join(str(n)[:100] for n in list(tampered)[:10]) if isinstance(tampered, list) else "?"
        raise _Verdict(Status.rejected, f"rejected in {where}: the submission replaced functions the harness "
                                        f"relies on ({names})")
    if child.integrity is None or reply.get("integrity") != child.integrity:
        raise _Verdict(Status.rejected, f"rejected in {where}: the functions the harness relies on are no longer "
                                        f"those it started with (replaced, and the child's tripwire record re-taken)")


def _ns_list(value: Any, expected: int | None) -> list[int]:
    if (not isinstance(value, list) or not value or (expected is not None and len(value) != expected)
            or not all(type(t) is int and 0 <= t < 10**15 for t in value)):
        raise ProtocolViolation("the child answered malformed timings")
    return value


def _out_room(ref: torch.Tensor) -> int:
    """Bytes of the output slot a call gets: up to twice the reference's output."""
    return 2 * _nbytes(ref)


def _read_output(child: SubmissionProcess, reply: dict[str, Any], index: int) -> torch.Tensor | None:
    """The output an answer (or, in a request of several input sets, the ``index``-th call's
    part of it) describes, from the child's slot or memory; ``None`` when it is not a plain tensor.

    Raises:
        ProtocolViolation: an output description that does not fit its slot.
        _Verdict: ``failed``, an output in a mapping of the input slots (the child's own alias
            rule, :func:`~kernelrank.runner.child._alias`, seen through another mapping).
    """
    if reply.get("out") is None or reply.get("alias"):  # an alias the child saw fails by its message
        return None
    try:
        return child.arena.read_output(reply["out"], child.memory, index)
    except AliasedOutput as e:
        raise _Verdict(Status.failed, f"{child.runs}'s output {e}") from None
    except SlotError as e:
        raise ProtocolViolation(str(e)) from None


def _per_call(faults: list[int | None], sizes: list[int]) -> float | None:
    """Page faults per counted call of one side (``None`` when any request's were unreadable)."""
    if not faults or any(f is None for f in faults):
        return None
    return sum(f for f in faults if f is not None) / max(1, sum(sizes))


def _nbytes(data: Any) -> int:
    if isinstance(data, torch.Tensor):
        return data.numel() * data.element_size()
    if isinstance(data, (tuple, list)):
        return sum(_nbytes(x) for x in data)
    return 0


def _set_figures(r: CaseResult, figures: dict[str, Any]) -> None:
    for k, v in figures.items():
        setattr(r, k, v)


def _readable(values: list[int | None]) -> bool:
    """Whether every request's figure was read (and there is at least one)."""
    return bool(values) and all(v is not None for v in values)


def _cores() -> int:
    """CPUs this judge, and so its children, may run on (its affinity: the runner's cpuset)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except OSError:  # pragma: no cover - every Linux has it
        return max(1, os.cpu_count() or 1)


def _pair_record(sub: _Call, ref: _Call, sub_first: bool, process: int, counted: bool) -> list[int]:
    """One pair's raw figures, as the ``pairs`` event carries them (``bench/record_timings.py``):
    ``[submission first (0/1), its claim, window, main-thread CPU, the reference's claim, window,
    main-thread CPU, calls per request, which pair of processes timed it (0..K-1), counted (0: a
    warm-up pair, :meth:`_Side.settle`), the submission's page faults, the reference's (-1:
    unreadable), the submission's job CPU time in its window, the reference's (-1: unreadable)]``,
    times in ns (a request's claim: its calls' together). Recordings made before a field was
    added end before it."""
    return [int(sub_first), sub.claim, sub.window, sub.main_cpu, ref.claim, ref.window, ref.main_cpu,
            max(1, len(sub.claims)), process, int(counted),
            -1 if sub.faults is None else sub.faults, -1 if ref.faults is None else ref.faults,
            -1 if sub.job_cpu is None else sub.job_cpu, -1 if ref.job_cpu is None else ref.job_cpu]


def _merged_logs(first: dict[str, str], extra: list[tuple[int, dict[str, str]]]) -> dict[str, str]:
    """The submission's stdout and stderr: its first process's, then each further timed process's
    that wrote anything, under a line naming it."""
    logs = dict(first)
    for n, more in extra:
        for stream, text in more.items():
            if text:
                logs[stream] = f"{logs.get(stream, '')}\n--- timed process {n} ---\n{text}"
    return logs


def _first_failure(cases: list[CaseResult]) -> str:
    bad = [c for c in cases if not c.passed]
    first = bad[0]
    more = f" ({len(bad) - 1} more failing case{'s' if len(bad) > 2 else ''})" if len(bad) > 1 else ""
    return f"{first.label}: {first.message}{more}"


def _summary(result: EvalResult) -> str:
    tests = [c for c in result.cases if c.kind == "test"]
    msg = f"all {len(tests)} test cases passed"
    bench = [c for c in result.cases if c.kind == "benchmark"]
    if bench:
        msg += f"; {len(bench)} benchmark cases timed"
    if result.interpreted:
        msg += ("; its Triton kernels ran under Triton's interpreter (the CPU has no Triton backend): the outputs "
                "were checked, the times measure the interpreter, not the kernel, so there is no speedup and no score")
        return msg
    # the figures as the CLI and the pages write them (kernelrank.format)
    if result.score_ns is not None and result.score_ci_ns is not None:
        low, high = result.score_ci_ns
        msg += f"; score {duration(result.score_ns)} (95% interval {duration(low)} .. {duration(high)})"
    if result.speedup is not None and result.speedup_ci is not None:
        msg += (f"; {speedup(result.speedup)} the reference "
                f"({speedup(result.speedup_ci[0])} .. {speedup(result.speedup_ci[1])})")
    flagged = [c for c in bench if c.noisy]
    if flagged:
        worst = max(flagged, key=lambda c: (c.pairing or {}).get("half_width", 0.0))
        width = (worst.pairing or {}).get("half_width", math.inf)
        what = f"{worst.label} is known to ±{width:.1%} only after its extra time (the machine was busy)"
        if result.noisy:
            msg += f"; too noisy to rank: {what}; not ranked until measured again"
        else:
            msg += f"; {what}, which the score's interval includes"
    elif result.noisy:
        msg += "; too noisy to rank: the score's interval is too wide; not ranked until measured again"
    return msg
