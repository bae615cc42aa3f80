"""The timed phase (benchmark and leaderboard modes): every benchmark case timed in pairs beside the
reference, in rounds of slices, each request a window the judge measures; a mixin of
:class:`~kernelrank.runner.judge.harness._Evaluation`, whose state it uses.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

from kernelrank import vocab
from kernelrank.problems import Case, CaseTiming
from kernelrank.runner.judge import disturbed, judging
from kernelrank.runner import stats
from kernelrank.runner.judge.answers import ReferenceFailed, RunEnded, ns_list, reference_submission, set_figures
from kernelrank.runner.judge.pairs import (Call, InputSet, PairedCase, Side, faults_per_call, judge_cores, pair_record,
                                     submission_first)
from kernelrank.runner.results import CaseResult, EvalResult
from kernelrank.runner.containment.sandbox import ChildDied, ChildTimeout, ProtocolViolation, SubmissionProcess
from kernelrank.runner.judge.slots import nbytes as slots_nbytes
from kernelrank.runner.timing import (WARMUP_MAX_CALLS, WARMUP_MAX_REQUESTS, WARMUP_MIN_CALLS, WARMUP_SECONDS,
                                      WARM_FAULTS_PER_CALL, roofline)
from kernelrank.vocab import DeviceClass, Mode


#: Memory for one batch of prepared input sets of a case: their inputs and expected outputs in the
#: judge, and their outputs, which each child holds until they are checked (where it left them,
#: never copied whole). Sets are prepared before a batch, so between its timed requests the judge
#: only places inputs and checks outputs. The children's held outputs count too: counting only the
#: judge's part allows larger requests, which are not neutral (an identical kernel then read 0.985
#: against 1.010; evidence: docs/research/bench-history.md).
BATCH_BYTES = 256 * 1024 * 1024

#: Most input sets per batch (a batch is also cut to what the case's remaining budget holds).
MAX_BATCH = 16


#: On the CPU, a timed request holds several input sets, one call on each, so that the judge's
#: path (thaw, two socket hops, freeze: 1.5-3 ms per request on a 2-core VM, more than the
#: allowance a call's claim may leave unexplained) is paid once per this many seconds of calls
#: rather than once per call. At 20 ms the path is still 15-42% of each window at idle; longer
#: requests leave too few pairs per case, and honest runs are marked too noisy more often
#: (evidence: docs/research/bench-history.md).
REQUEST_SECONDS = 0.02


#: Slices of a case per pair of processes within its budget (:meth:`TimedPhase._rounds`): a case is
#: timed on every pair of processes by ``budget / SLICES_PER_PROCESS`` seconds and may stop there
#: once its interval is within its target (:func:`~kernelrank.runner.judge.judging.stop_rule`'s
#: ``settled_s``); with one slice per process a case always ran its whole budget, which was most
#: of a leaderboard run's wall time (figures: bench/README.md, ``bench/ranked.py``).
SLICES_PER_PROCESS = 2


#: Per device, counted pairs at which a case's slice ends before its time; a case may then stop
#: once every pair of processes had its slice and the interval is within target (``None``: a slice
#: runs its time; a case stops no sooner than ``budget / SLICES_PER_PROCESS``). Figures:
#: bench/README.md, ``bench/ranked.py --slice-pairs``. CUDA keeps its time until measured on a GPU.
SLICE_PAIRS: dict[str, int | None] = {"cpu": 3, "cuda": None}


#: Most input sets (calls) per timed request.
MAX_SETS_PER_REQUEST = 16


#: Share of a case's wall time its timed calls take on the CPU, for sizing requests before any
#: pair is timed (idle: 14-35%, docs/research/bench-history.md). Bigger requests on a short budget left a case a
#: single pair: no interval, and an estimate one disturbed pair decides (the self-test's quick
#: mode, 0.15 s per case, read 3.5x for a kernel doing what the reference does).
TIMED_SHARE_GUESS = 0.25


#: Calls on fresh inputs per benchmark case, each checked, for a submission whose Triton kernels
#: ran under the interpreter (it is judged for correctness; its times measure the interpreter).
INTERPRETED_CALLS = 2


class TimedPhase:
    """The timed phase of an evaluation (a mixin of :class:`~kernelrank.runner.judge.harness._Evaluation`)."""

    # -- timed modes: the submission and the reference in pairs --------------------------------
    @property
    def timing(self) -> CaseTiming:
        """The problem's timing settings for this run's device (``timing.<device>``)."""
        return self.definition.timing[self.device]  # type: ignore[index]

    def processes(self, interpreted: bool = False) -> int:
        """Pairs of processes that time a case's pairs, one per round of its slices
        (:meth:`_rounds`): the problem's ``timing.<device>.processes``
        or the device's default (:data:`~kernelrank.runner.judge.judging.PROCESSES`), unless the options
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
        self._clocks = disturbed.open_watch(self.device)
        k = self.processes(result.interpreted)
        references: list[SubmissionProcess] = []
        subs = [child]
        try:
            self._where = "loading the reference"
            references.extend(self._start(reference_submission(self.spec), "reference") for _ in range(k))
            subs.extend(self._start(self.source) for _ in range(k - 1))
            self._load_all(references, subs[1:], k)
            self._phase("benchmark")
            if self._clocks is not None:
                self._clocks.look(disturbed.own_pids(subs + references))
            done = self._rounds(cases, subs, references, result, deadline, calibration)
        finally:
            if self._clocks is not None:  # the run's record: mean clock, throttled share, other processes
                self._clocks.look(disturbed.own_pids(subs + references))
                (result.device_info or {}).setdefault("clocks", {})["watch"] = self._clocks.summary()
            # two at a time, as they were loaded (each waits for its processes' end)
            self._in_threads(lambda process: process.close(), references + subs[1:])
            self._extra_logs.extend((n, extra.logs()) for n, extra in enumerate(subs[1:], start=2))
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None
        if result.interpreted:
            return  # no speedup, no score: the times measure Triton's interpreter
        if len(done) < len(cases):  # a case had every pair disturbed: no speedup, not ranked
            result.noisy = True
            return
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
        result.noisy = (stats.run_noisy(combined, len(done), self.timing.noisy_above)
                        or any(p.disturbed_pairs()["too_many"] for p, _i, _b in done))
        result.basis = "calibration" if calibration is not None else "run"
        if self.mode == Mode.leaderboard:
            score, low, high = combined.scaled(stats.geometric_mean(bases))
            result.score_ns, result.score_ci_ns = score, [low, high]

    def _load_all(self, references: list[SubmissionProcess], extras: list[SubmissionProcess], k: int) -> None:
        """Load the timed phase's further processes, two at a time (a process's start is mostly its
        own isolating and imports, 40-60 ms): the reference's, then the submission's; the first
        failure in their order is raised once its group is done.

        Raises:
            ReferenceFailed: a reference's process could not be loaded.
            ChildTimeout, ChildDied, ProtocolViolation, RunEnded: a submission's process could not
                be loaded.
        """
        try:
            self._in_threads(lambda child: self._load(child, phase=False), references)
        except (ChildTimeout, ChildDied, ProtocolViolation, RunEnded) as e:
            raise ReferenceFailed(f"the reference could not be loaded: {e}") from e
        if extras:
            self._where = (f"loading the submission's timed process 2 of {k}" if len(extras) == 1
                           else f"loading the submission's timed processes 2-{k}")
            self._in_threads(lambda child: self._load(child, phase=False), extras)

    def _rounds(self, cases: list[Case], subs: list[SubmissionProcess], references: list[SubmissionProcess],
                result: EvalResult, deadline: float,
                calibration: tuple[float, ...] | None) -> list[tuple[PairedCase, stats.Interval, float]]:
        """Time the benchmark cases in rounds: in round ``r`` each case not yet finished gets one
        slice of ``budget / (K x SLICES_PER_PROCESS)`` seconds (:meth:`_time_slice`) on pair of processes ``r % K``
        (:meth:`processes`), so that a case is timed on every pair of processes, each at another
        moment of the run, and the stop rule judges it only after that; a case's warm-up comes
        right before its first slice. The cases' results go to ``result`` in their order, each
        with its ``case``, ``pairs`` and ``samples`` (:func:`samples_event`) events once it is finished; per finished case timed
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
            RunEnded: a case failed (its check, a timing claim); the cases finished before it,
                and it, are in ``result``.
        """
        paireds: list[PairedCase] = []
        finished: dict[int, tuple[PairedCase, stats.Interval, float] | None] = {}
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
                        raise RunEnded(vocab.Verdict.failed, f"{r.label}: {r.message}")
                    if r.interpreted:
                        result.interpreted = True
                        self.emit({"event": "case", "case": r})
                        continue
                    if not paired.sub.claims:  # every pair disturbed (disturbed.py): nothing to judge
                        r.noisy, r.pairing = True, {"pairs": 0, "disturbed": paired.disturbed_pairs()}
                        self.emit({"event": "case", "case": r})
                        continue
                    interval, basis = self._finish_case(paired, case, None if calibration is None else calibration[i])
                    self.emit({"event": "case", "case": r})
                    self.emit({"event": "pairs", "case": i, "pairs": [pair_record(*p) for p in paired.raw]})
                    self.emit(samples_event(i, paired))
                    finished[i] = (paired, interval, basis)
        finally:
            result.cases[first_case:] = [paireds[i].result for i in sorted(finished)]
        return [finished[i] for i in sorted(finished) if finished[i] is not None]  # type: ignore[misc]

    def _finish_case(self, paired: PairedCase, case: Case, calibrated: float | None) -> tuple[stats.Interval, float]:
        """Final figures of a case timed in pairs; its speedup interval and reference time (ns).

        Raises:
            RunEnded: ``rejected`` for timing claims the judge's clock does not support.
        """
        r = paired.result
        sub, ref, overhead = paired.judged()
        main_overhead = statistics.median(paired.ref.main_unexplained()) if paired.ref.main_cpu else 0.0
        r.wall_check = judging.wall_check(paired.sub.claims, paired.sub.windows, paired.sub.main_cpu, overhead,
                                        max(0.0, main_overhead), paired.sub.sizes)
        # the job's CPU time outside the claims, as charged: 0 batches for honest code
        r.wall_check["job_cpu"] = paired.cpu_judgement()
        r.claims_replaced = paired.claims_replaced()
        r.timing = stats.summarize(sub).to_dict()
        r.ref_timing = stats.summarize(ref).to_dict()
        if not r.wall_check["passed"]:
            self.emit({"event": "case", "case": r})
            raise RunEnded(vocab.Verdict.rejected, f"{r.label}: {r.wall_check['message']}")
        if min(sub) <= 0:  # no call takes no time: the timer in the child was tampered with
            raise RunEnded(vocab.Verdict.rejected, f"{r.label}: the submission's process claimed 0 ns for a call")
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
        r.noisy = r.noisy or paired.disturbed_pairs()["too_many"]
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
            # left out: the GPU throttled, or work overlapping the flush (disturbed.py)
            "disturbed": paired.disturbed_pairs(),
            "faults_per_call": {side.name: faults_per_call(side.faults, side.sizes) for side in (paired.sub, paired.ref)},
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
                   case: Case, deadline: float) -> PairedCase:
        """Warm both sides up on the case's first input set, and ready every process for its timed
        requests; the case then is timed in slices (:meth:`_time_slice`), ``done`` already when
        the warm-up failed or ran under Triton's interpreter (its result says which).

        ``subs`` and ``references``: the sides' processes, as many of each; the case's slice of
        round ``r`` is timed by ``subs[r % K]`` and ``references[r % K]`` (:meth:`processes`,
        :meth:`_rounds`), each warmed up here on the case's first input set. Seeds are derived
        from the run's secret and the set's number (every set is new, never a replay)."""
        started = time.monotonic()
        paired = PairedCase(CaseResult("benchmark", index, case.params, True, "ok"), Side("submission", list(subs)),
                         Side("reference", list(references)), cores=judge_cores())
        try:
            self._open(paired, case, deadline)
        finally:
            paired.wall_s += time.monotonic() - started
        return paired

    def _open(self, paired: PairedCase, case: Case, deadline: float) -> None:
        r = paired.result
        subs = paired.sub.children
        first = paired.first = self._prepare(case, self._seed(case, 0))
        warm: dict[str, list[int]] = {"submission": [], "reference": []}
        for j in range(len(subs)):
            paired.sub.current = paired.ref.current = j
            if j == 0 or self.device != DeviceClass.cpu:
                ok = self._warm_up(paired, paired.sub, first, deadline, warm["submission"])
                if ok and not r.interpreted:
                    self._warm_up(paired, paired.ref, first, deadline, warm["reference"])
            else:
                # both sides' processes at once (none is timed now), as they are readied below;
                # the first pair alone: a submission under Triton's interpreter stops there
                ok = all(self._in_threads(lambda side: self._warm_up(paired, side, first, deadline, warm[side.name]),
                                          [paired.sub, paired.ref]))
            if not ok:
                paired.done = True
                return
            if r.interpreted:
                self._time_interpreted(paired, case, deadline)
                paired.done = True
                return
        for side in (paired.sub, paired.ref):
            # the median after each process's first call: one disturbed call must not set the request's shape
            side.warm_ns = int(statistics.median(warm[side.name]))
        paired.per_request = self._sets_per_request(paired, first, getattr(self.timing, self.mode))
        paired.pool = self._draw_pool(case, first)
        if self.device == DeviceClass.cpu:
            # two processes at a time, one per CPU (none is timed now): softmax's first case readied
            # its 8 processes (256 MiB of new pages each) in 2.6 s against 3.4 s one at a time
            # (docs/research/bench-history.md)
            every = [(side, child) for side in (paired.sub, paired.ref) for child in side.children]
            self._in_threads(lambda item: self._reserve(item[0], item[1], first, paired.per_request, deadline), every)

    def _time_slice(self, paired: PairedCase, case: Case, deadline: float) -> None:
        """One slice of a case's timing (:meth:`_rounds`): batches of pairs on pair of processes
        ``s % K`` for its slice ``s`` (every case takes part in every round from the first, so
        ``s`` is the round) for ``budget / (K x SLICES_PER_PROCESS)`` seconds (at least one batch) or its
        :data:`SLICE_PAIRS` counted pairs, or until the stop rule ends the case (``paired.done``).

        Per batch: the input sets and their expected outputs are prepared, then for each set the
        submission and the reference are called once, alternately first
        (:func:`submission_first`), each on its own copy placed while both are frozen, then both
        sides' outputs of that pair are read where the children left them and the submission's
        checked (:meth:`_check_request`). The stop rule looks at the speedup's interval before
        each batch, once the case was timed on every pair of processes (from its ``K``-th slice
        on, and in it once that pair has a counted pair; with :data:`SLICE_PAIRS`, from the
        ``K+1``-th); ``timing.<device>.target``,
        ``noisy_above`` and ``cap`` of the problem say how long a case may be timed and when it
        is too noisy."""
        started, timed_pairs = time.monotonic(), False
        try:
            timed_pairs = self._slice(paired, case, deadline, started)
        finally:
            paired.slices += timed_pairs  # a slice stopped before its first batch is none
            paired.spent_s += time.monotonic() - started
            paired.wall_s += time.monotonic() - started

    def _slice(self, paired: PairedCase, case: Case, deadline: float, started: float) -> bool:
        timing = self.timing
        budget_s = getattr(timing, self.mode)
        r = paired.result
        first, per_request = paired.first, paired.per_request
        assert first is not None  # the case was opened
        k_processes = len(paired.sub.children)
        process = paired.slices % k_processes
        slice_s = budget_s / (k_processes * SLICES_PER_PROCESS)
        slice_pairs = SLICE_PAIRS.get(self.device)
        interval = paired.interval()
        batches = in_slice = 0  # batches and counted pairs in this slice
        while True:
            now = time.monotonic()
            spent = paired.spent_s + now - started
            if slice_pairs:  # judged between slices, each pair of processes' slice whole
                seen_all = paired.slices >= k_processes
            else:
                seen_all = paired.slices >= k_processes or (paired.slices == k_processes - 1 and process in paired.sub.procs)
            if seen_all:
                stop, noisy = judging.stop_rule(interval, spent, budget_s, timing.noisy_above, timing.cap,
                                              judging.PRECISION[self.device], target=timing.target,
                                              settled_s=0.0 if slice_pairs else budget_s / SLICES_PER_PROCESS)
                if interval is None and spent >= timing.cap * budget_s and paired.disturbed_pairs()["share"] > 0:
                    stop = noisy = True  # every pair disturbed through the case's extra time (a slow kernel
                    # whose processes are still warming up goes on: the mode's budget bounds it)
                if stop:
                    r.noisy = noisy
                    paired.done = True
                    return batches > 0
            if batches and (now - started >= slice_s or (slice_pairs and in_slice >= slice_pairs)):
                return True
            t0 = time.monotonic()
            left_s = min(slice_s - (now - started), (budget_s if spent < budget_s else budget_s * timing.cap) - spent)
            k = self._batch_size(paired, first, left_s, per_request)
            if slice_pairs:  # no more sets than the slice's pairs still to come
                k = min(k, max(1, slice_pairs - in_slice) * per_request)
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
                calls: dict[str, Call] = {}
                replies: dict[str, list[dict[str, Any]]] = {}
                for side in order:
                    other = paired.ref if side is paired.sub else paired.sub
                    calls[side.name], replies[side.name] = self._timed_request(side, other, chunk, deadline)
                    if side is paired.sub and any(reply.get("interpreted") for reply in replies[side.name]):
                        r.passed, r.message = False, ("its Triton kernels ran under the interpreter on some calls "
                                                      "and natively on others: not timed")
                        paired.done = True
                        return True
                paired.number += len(chunk)
                # a disturbed request (disturbed.py) leaves its pair out, as a cold process does
                counted = counted and not (calls["submission"].disturbed or calls["reference"].disturbed)
                paired.raw.append((calls["submission"], calls["reference"], first_side, process, counted))
                in_slice += counted
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
                return True
            interval = paired.interval()

    def _reserve(self, side: Side, child: SubmissionProcess, first: InputSet, per_request: int, deadline: float) -> None:
        """Ready one process (``child``, one of ``side``'s) for the case's timed requests of ``per_request``
        input sets, before the first (CPU only): its slots mapped at the size those requests'
        layouts take, their pages faulted in, and its heap given as much free memory, faulted in,
        as such a request's outputs take and room for a call's temporaries (at most
        :data:`BATCH_BYTES`; the child's ``reserve``). Its first timed request then needs no new pages, so it usually counts
        (:meth:`Side.settle`); unreadied, a process's first request or two at a case's shape fault
        on 70-215 MiB (0.1-0.5 s) and go uncounted (``docs/research/bench-history.md``).

        Raises:
            ReferenceFailed: the reference's process failed.
        """
        inputs, output = slots_nbytes(first.data), slots_nbytes(first.expected)
        size = child.arena.grow(per_request * inputs)
        # the request's outputs, held together, and room for a call's temporaries: twice an input
        # set and two outputs (a bfloat16 kernel computing in float32 holds two of twice the size)
        heap = min(per_request * output + 2 * (inputs + 2 * output), BATCH_BYTES)
        with self._reference_failures(side, deadline):
            self._guard(child, child.request({"op": "reserve", "size": size, "heap": heap}, deadline))

    def _sets_per_request(self, paired: PairedCase, first: InputSet, budget_s: float) -> int:
        """Input sets (calls) per timed request: on the CPU as many as :data:`REQUEST_SECONDS`
        of the faster side's warm-up call hold, at most :data:`MAX_SETS_PER_REQUEST`, what
        :data:`BATCH_BYTES` holds, and few enough that the case's budget (``budget_s``, seconds)
        holds :data:`~kernelrank.runner.judge.judging.MIN_PAIRS` pairs (the calls taking
        :data:`TIMED_SHARE_GUESS` of it), so that short budgets still give an interval; one on
        CUDA (its calls are judged in batches of requests, :meth:`PairedCase.judged`)."""
        if self.device != DeviceClass.cpu:
            return 1
        call_ns = min(t for t in (paired.sub.warm_ns, paired.ref.warm_ns, 1 << 62) if t > 0)
        by_time = max(1, math.ceil(REQUEST_SECONDS * 1e9 / call_ns))
        by_memory = max(1, BATCH_BYTES // max(1, first.nbytes))
        by_budget = max(1, int(budget_s * 1e9 * TIMED_SHARE_GUESS / (2 * judging.MIN_PAIRS * call_ns)))
        return max(1, min(by_time, by_memory, by_budget, MAX_SETS_PER_REQUEST))

    def _batch_size(self, paired: PairedCase, first: InputSet, left_s: float, per_request: int = 1) -> int:
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


    def _warm_up(self, paired: PairedCase, side: Side, s: InputSet, deadline: float, warm: list[int]) -> bool:
        """Warm-up calls of one side's current process on the first input set (as many as
        :data:`~kernelrank.runner.timing.WARMUP_SECONDS` and the minimum calls ask, and while the
        last one page-faulted beyond :data:`~kernelrank.runner.timing.WARM_FAULTS_PER_CALL`, up
        to :data:`~kernelrank.runner.timing.WARMUP_MAX_REQUESTS` more), its first output
        checked (:meth:`_output_check`); the claims of the calls after the first that did not fault go to ``warm`` (the
        request shape is sized on them; without such calls, those after the first, or the
        first's when it is the only one); ``False`` when the submission failed (the case's
        result says why).

        Raises:
            ReferenceFailed: the reference's first output is wrong or its child failed.
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
            reply, _ = self._side_go(side, layout, deadline, s.ref_s, read=False)
            after = side.child.faults()
            claims.extend(ns_list(reply.get("times_ns"), 1))
            faulted = before is not None and after is not None and after - before > WARM_FAULTS_PER_CALL
            if calls > 0 and not faulted:
                steady.append(claims[-1])
            calls += 1
            if calls == 1:
                with self._reference_failures(side, deadline):
                    ok, message, figures = self._output_check(side.child, reply, 0, s)
                if not is_sub:
                    if not ok:
                        raise ReferenceFailed(f"the reference fails its own check on {r.label}: {message}")
                    continue
                r.checked += 1
                if not ok:
                    r.passed, r.message = False, f"output of the first call is wrong: {message}"
                    set_figures(r, figures)
                    return False
                if reply.get("interpreted"):
                    r.interpreted = True  # no more warm-up: each interpreted call takes seconds
                    return True
            elif is_sub and reply.get("alias"):
                r.passed, r.message = False, f"warm-up: {reply['alias']!s:.500}"
                return False
        warm.extend(steady or claims[1:] or claims)
        return True

    def _time_interpreted(self, paired: PairedCase, case: Case, deadline: float) -> None:
        """A submission whose Triton kernels run under the interpreter: :data:`INTERPRETED_CALLS`
        calls on fresh inputs, each checked; their claimed times are kept as ``timing`` and
        marked interpreted; no pairs, no speedup."""
        r = paired.result
        claims: list[int] = []
        for i in range(INTERPRETED_CALLS):
            s = self._prepare(case, self._seed(case, i + 1))
            reply, out = self._go(paired.sub.child, self._place(paired.sub.child, s.data, s.room), deadline,
                                  s.ref_s)
            claims.extend(ns_list(reply.get("times_ns"), 1))
            ok, message, figures = self._check(reply, out, s.expected, s.data)
            r.checked += 1
            if not ok:
                r.passed, r.message = False, f"output of timed call {i + 1} is wrong: {message}"
                set_figures(r, figures)
                return
        r.timing = stats.summarize(claims).to_dict()
        r.message = "ok (interpreted: its Triton kernels ran under Triton's interpreter; the times are not ranked)"


def samples_event(case: int, paired: PairedCase) -> dict[str, Any]:
    """The ``samples`` event of a finished case: per counted pair, the submission's and the
    reference's judged request times in ns (:meth:`PairedCase.paired_times`) and, where several
    pairs of processes timed them, which pair timed each (``groups``; else ``None``). From these
    :func:`~kernelrank.runner.stats.paired_speedup` gives the case's interval exactly as the judge
    did, and :func:`~kernelrank.runner.stats.group_means` its part in the run's
    (:func:`~kernelrank.runner.stats.combine`): what a score's reproducibility bundle carries."""
    sub, ref = paired.paired_times()
    return {"event": "samples", "case": case, "submission_ns": list(sub), "reference_ns": list(ref),
            "groups": list(paired.sub.procs) if paired.grouped() else None}
