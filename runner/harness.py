"""The harness: one judge for every problem, mode and device.

:func:`evaluate` is the only place where a verdict or a time is decided. The judge (this process)

1. loads the problem's reference (trusted) and starts a :class:`SubmissionProcess` for the
   submitted code, bounded by the problem's compile budget while it loads and builds;
2. for each case creates the inputs itself (in leaderboard mode from seeds derived from a secret
   the child never sees), computes the reference output, keeps its pristine copy and sends the
   child a copy over the private channel;
3. checks every returned output itself (:func:`~kernelrank.runner.checking.check_output`);
4. in timed modes collects the child's per-call times, cross-checks them against its own wall
   clock (:func:`_wall_check`), summarises them (:func:`~kernelrank.runner.timing.summarize`) and
   compares with the reference, timed by this same code on the same device (cached);
5. turns every crash, exit, hang, compile failure or protocol breach into a verdict, kills every
   process of the child's sandbox and removes its folder.

Countermeasures beyond checking values (each ends the run with a reason):

- the child runs isolated (:mod:`~kernelrank.runner.isolation`): no network, a read-only view of
  the system, an unprivileged user, resource limits; the isolation in force, measured from
  ``/proc``, is recorded in the result, and ``require_network_isolation`` refuses to run submitted
  code where the network cannot be cut;
- an output sharing memory with an input or with the previous call's output fails its case;
- threads or processes started by a call and still running when it returns, and functions the
  child's harness relies on found replaced (a tripwire inside the child, see
  :mod:`~kernelrank.runner.integrity`), reject the run;
- a speedup over the reference beyond the problem's ``review_speedup`` marks a passing result
  ``needs_review`` for an administrator.

Modes (GPU MODE's): ``test`` checks every test case; ``benchmark`` also times every benchmark case
on one input set; ``leaderboard`` times with fresh inputs on every call and checks every output,
and scores the geometric mean over cases of each case's mean time; ``profile`` runs the benchmark
cases under ``torch.profiler``.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from kernelrank.problems import Case, Mode, ProblemSpec
from kernelrank.runner import isolation
from kernelrank.runner.checking import check_output
from kernelrank.runner.devices import DeviceInfo, cpu_threads, device_info
from kernelrank.runner.limits import SandboxLimits
from kernelrank.runner.refcache import ReferenceCache, ReferenceTiming, case_key
from kernelrank.runner.results import CaseResult, EvalResult, Status
from kernelrank.runner.sandbox import ChildDied, ChildTimeout, ProtocolViolation, SubmissionProcess
from kernelrank.runner.timing import MAX_RUNS, REL_STDERR, geometric_mean, roofline, should_stop, summarize

Event = Callable[[dict[str, Any]], None]

#: Time a request may take outside the claimed kernel time, per call, beyond moving the inputs in
#: and the outputs out (``MOVE_NS_PER_BYTE``): twice the reference's own (measured the same way),
#: plus this fraction of the claimed mean and this absolute slack for scheduling noise.
WALL_SLACK_FRACTION = 0.20
WALL_SLACK_NS = 1_000_000
MOVE_NS_PER_BYTE = 1.5
#: A case whose claims explain at least this fraction of the judge's measured work time passes
#: the cross-check even past the allowance above.
MIN_EXPLAINED_FRACTION = 0.5
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
        cache_dir: where reference timings are cached (``None``: no cache, time it every run).
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
    """

    threads: int = 0
    scratch_dir: Path | None = None
    cache_dir: Path | None = None
    log_limit: int = 64 * 1024
    secret: int | None = None
    trace_dir: Path | None = None
    isolation: str = "auto"
    require_network_isolation: bool = False
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    hidden_paths: tuple[Path, ...] = ()


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
    return _Evaluation(spec, source, mode, device, options or EvalOptions(), on_event).run()


@dataclass
class _CaseTiming:
    """Raw figures of one case: per-call claims, and the judge's clock around the same requests
    (``answer_ns``: from request sent to first byte of the answer, transfers excluded)."""

    result: CaseResult
    times: list[int] = field(default_factory=list)
    answer_ns: int = 0
    claimed_ns: int = 0
    moved_bytes: int = 0
    #: per request: time per call the claims leave unexplained, after moving the data (ns)
    unexplained: list[float] = field(default_factory=list)

    def least_unexplained(self) -> float:
        """The smallest per-call unexplained time over the requests: work hidden on every call
        shows in every request, while a burst of load from elsewhere inflates only some."""
        return min(self.unexplained) if self.unexplained else 0.0


class _Evaluation:
    def __init__(self, spec: ProblemSpec, source: str, mode: Mode, device: str, options: EvalOptions,
                 on_event: Event | None):
        self.spec, self.source, self.mode, self.device, self.options = spec, source, mode, device, options
        self.definition = spec.definition
        self.reference = spec.reference_module()
        self.threads = cpu_threads(options.threads) if device == "cpu" else 0
        self.info: DeviceInfo = device_info(device, self.threads)
        self.secret = options.secret if options.secret is not None else secrets.randbits(63)
        self.emit = on_event or (lambda _e: None)
        budgets = self.definition.budgets
        self.limits = options.limits.resolved(device, budgets.compile + budgets.for_mode(mode))
        self.method = "none"
        self._rebased: set[int] = set()  # children whose baseline was retaken after a first call

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
        self.method, why = isolation.choose(self.options.isolation)
        result.isolation = {"method": self.method, "network": "none" if self.method == "none" else "netns"}
        if self.options.require_network_isolation and self.method == "none":
            result.status = Status.rejected
            result.message = ("rejected: this evaluation requires the submitted code's network to be isolated, "
                              f"and this machine cannot do it ({why}); the submission was not run")
            return result
        child = self._start(self.source)
        try:
            result.isolation = self._load(child)
            deadline = time.monotonic() + self.definition.budgets.for_mode(self.mode)
            self._phase("test")
            result.cases.extend(self._run_tests(child, deadline))
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
            result.logs = child.logs()
            result.duration_s = time.monotonic() - started
        return result

    _where = "loading the submission"

    def _phase(self, phase: str) -> None:
        self.emit({"event": "phase", "phase": phase})

    def _start(self, source: str) -> SubmissionProcess:
        if self.method != "none" and "use_pch" in source:
            # site-packages is read-only for the child: it can only use a header built beforehand
            isolation.prepare_precompiled_header()
        return SubmissionProcess(source, self.device, self.threads, scratch_dir=self.options.scratch_dir,
                                 log_limit=self.options.log_limit, method=self.method, limits=self.limits,
                                 hidden=self.options.hidden_paths)

    def _load(self, child: SubmissionProcess) -> dict[str, Any]:
        """Wait for the child's isolation, check it, load the submission, take the baseline of
        threads and processes; returns the isolation in force."""
        self._where = "loading the submission"
        self._phase("compile")
        deadline = time.monotonic() + self.definition.budgets.compile
        measured = child.start(deadline)
        if self.options.require_network_isolation and measured.get("network") != "netns":
            raise _Verdict(Status.rejected, "rejected: network isolation is required, and the submission's process "
                                            "was found with network access; the submission was not loaded")
        reply = child.request({"op": "load"}, deadline, max_bytes=REPLY_SLACK_BYTES)
        _raise_on_error(reply, self._where)
        _raise_on_tampering(reply, self._where)
        child.set_baseline()
        return measured

    def _guard(self, child: SubmissionProcess, reply: dict[str, Any]) -> None:
        """After a call: errors, replaced functions, threads or processes left running."""
        _raise_on_error(reply, self._where)
        _raise_on_tampering(reply, self._where)
        if self.device == "cuda" and id(child) not in self._rebased:  # pragma: no cover - GPU-only
            # CUDA libraries (cuBLAS, Triton's compiler, the driver) may start threads on first use:
            # on the GPU the baseline is taken again after the first call
            self._rebased.add(id(child))
            child.set_baseline()
            return
        strays = child.strays()
        if strays:
            raise _Verdict(Status.rejected, f"rejected in {self._where}: {strays}")

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
        params = dict(case.params, seed=seed)
        data = self.reference.generate_input(device=self.device, **params)
        with torch.no_grad():
            ref = self.reference.ref_kernel(data)
        return data, ref

    def _check(self, reply: dict[str, Any], ref: torch.Tensor) -> tuple[bool, str, dict[str, Any]]:
        if reply.get("alias"):
            return False, f"{reply['alias']!s:.500}", {}
        out = reply.get("out")
        if out is None:
            return False, f"output must be a plain torch.Tensor, got {reply.get('out_type')!s:.200}", {}
        tol = self.definition.tolerance_for(str(ref.dtype).removeprefix("torch."))
        c = check_output(out, ref, tol.atol, tol.rtol, out_device=str(reply.get("out_device")))
        figures = {"max_abs_error": c.max_abs_error, "max_rel_error": c.max_rel_error,
                   "mismatches": c.mismatches, "first_mismatch": c.first_mismatch}
        return c.passed, c.message, figures

    # -- test mode ----------------------------------------------------------------------------
    def _run_tests(self, child: SubmissionProcess, deadline: float) -> list[CaseResult]:
        results = []
        for i, case in enumerate(self.definition.tests):
            self._where = f"test case {i} ({case.label()})"
            data, ref = self._inputs(case, case.seed)
            reply = child.request({"op": "call", "data": data}, deadline, max_bytes=_reply_bytes(ref, 1))
            self._guard(child, reply)
            ok, message, figures = self._check(reply, ref)
            r = CaseResult("test", i, case.params, ok, message if not ok else "ok", checked=1, **figures)
            results.append(r)
            self.emit({"event": "case", "case": r})
        return results

    # -- timed modes --------------------------------------------------------------------------
    def _timed_phase(self, child: SubmissionProcess, result: EvalResult, deadline: float) -> None:
        cases = self.definition.benchmark_cases(self.device)  # type: ignore[arg-type]
        self._phase("reference")
        refs = self._reference_timings(cases)
        self._phase("benchmark")
        means = []
        for i, case in enumerate(cases):
            self._where = f"benchmark case {i} ({case.label()})"
            ref = refs[case_key(case.params)]
            timed = self._time_case(child, i, case, deadline)
            r = timed.result
            result.cases.append(r)
            if not r.passed:
                self.emit({"event": "case", "case": r})
                raise _Verdict(Status.failed, f"{r.label}: {r.message}")
            stats = summarize(timed.times)
            r.timing = stats.to_dict()
            if stats.mean_ns <= 0:  # no call takes no time: the timer in the child was tampered with
                raise _Verdict(Status.rejected, f"{r.label}: the submission's process claimed 0 ns per call")
            r.tflops, r.gbps = roofline(self.reference.flops(case.params), self.reference.bytes(case.params), stats.mean_ns)
            r.ref_mean_ns = ref.mean_ns
            r.speedup = ref.mean_ns / stats.mean_ns
            r.wall_check = _wall_check(timed, ref)
            self.emit({"event": "case", "case": r})
            if not r.wall_check["passed"]:
                raise _Verdict(Status.rejected, f"{r.label}: {r.wall_check['message']}")
            means.append(stats.mean_ns)
        ref_means = [refs[case_key(c.params)].mean_ns for c in cases]
        result.speedup = geometric_mean(ref_means) / geometric_mean(means)
        if self.mode == "leaderboard":
            result.score_ns = geometric_mean(means)

    def _time_case(self, child: SubmissionProcess, index: int, case: Case, deadline: float) -> _CaseTiming:
        """Warm up, then timed batches until :func:`should_stop`; every returned output checked."""
        budget_s = getattr(self.definition.timing[self.device], self.mode)  # type: ignore[index]
        fresh = self.mode == "leaderboard"
        start = time.monotonic()
        seed = (lambda it: mix_seed(self.secret, case.seed, it)) if fresh else (lambda it: case.seed)
        t0 = time.perf_counter()
        data0, ref0 = self._inputs(case, seed(0))
        prepare_s = time.perf_counter() - t0
        timed = _CaseTiming(CaseResult("benchmark", index, case.params, True, "ok"))
        r = timed.result

        reply = child.request({"op": "warmup", "data": data0}, deadline, max_bytes=_reply_bytes(ref0, 1))
        self._guard(child, reply)
        ok, message, figures = self._check(reply, ref0)
        r.checked = 1
        if not ok:
            r.passed, r.message, = False, f"output of the first call is wrong: {message}"
            _set_figures(r, figures)
            return timed
        warm = _ns_list(reply.get("times_ns"), None)
        est_call_s = max(sorted(warm)[len(warm) // 2] * 1e-9, 1e-6)
        set_bytes = max(_nbytes(data0), 1)
        limit = 4
        iteration = 1
        while not should_stop(timed.times, REL_STDERR[self.device], time.monotonic() - start, budget_s, MAX_RUNS):
            remaining = budget_s - (time.monotonic() - start)
            per_call = est_call_s + (prepare_s if fresh else 0.0)
            k = max(1, min(limit, int(remaining / per_call) if remaining > 0 else 1, MAX_RUNS - len(timed.times)))
            if fresh:
                # One fresh input set per request: a submission handed several sets at once can
                # reach the later ones (call stack, gc) and compute them all on the first call.
                k = 1
                batch = [self._inputs(case, seed(iteration + j)) for j in range(k)]
                message = {"op": "bench", "sets": [d for d, _ in batch], "return_all": True}
            else:
                batch = [(data0, ref0)]
                message = {"op": "bench", "sets": [data0], "repeat": k, "return_all": False}
            reply = child.request(message, deadline, max_bytes=_reply_bytes(ref0, len(batch)))
            answer, span = child.answer_ns, child.span_ns
            self._guard(child, reply)
            if reply.get("alias"):
                r.passed, r.message = False, f"timed call {r.checked + 1}: {reply['alias']!s:.500}"
                return timed
            times = _ns_list(reply.get("times_ns"), k)
            outputs = reply.get("outputs")
            if not isinstance(outputs, list) or len(outputs) != len(batch):
                raise ProtocolViolation("the child answered a different number of outputs than requested")
            if sum(times) > span:
                raise _Verdict(Status.rejected, f"{self._where}: the submission's process claimed {sum(times)} ns "
                                                f"of kernel time in a request answered after {span} ns")
            for out, (_, ref) in zip(outputs, batch):
                ok, message_, figures = self._check(out if isinstance(out, dict) else {}, ref)
                r.checked += 1
                if not ok:
                    r.passed, r.message = False, f"output of timed call {r.checked} is wrong: {message_}"
                    _set_figures(r, figures)
                    return timed
            timed.times.extend(times)
            moved = _nbytes(ref0) * len(outputs)  # output snapshots; the inputs' transfer is outside ``answer``
            timed.answer_ns += answer
            timed.claimed_ns += sum(times)
            timed.moved_bytes += moved
            timed.unexplained.append(max(0.0, answer - sum(times) - MOVE_NS_PER_BYTE * moved) / k)
            iteration += k
            limit *= 2
        return timed

    def _reference_timings(self, cases: list[Case]) -> dict[str, ReferenceTiming]:
        """The reference's timings on these cases, from the cache or measured now by this harness."""
        cache = ReferenceCache(self.options.cache_dir) if self.options.cache_dir else None
        have = cache.load(self.spec.revision, self.info.key, self.mode) if cache else {}
        missing = [c for c in cases if case_key(c.params) not in have]
        if not missing:
            return have
        measured: dict[str, ReferenceTiming] = {}
        child = self._start(reference_submission(self.spec))
        outer_where = self._where
        try:
            self._load(child)
            deadline = time.monotonic() + self.definition.budgets.for_mode(self.mode)
            for i, case in enumerate(missing):
                self._where = f"reference timing of {case.label()}"
                timed = self._time_case(child, i, case, deadline)
                if not timed.result.passed:
                    raise RuntimeError(f"the reference fails its own check on {case.label()}: {timed.result.message}")
                stats = summarize(timed.times)
                overhead = max(0.0, timed.least_unexplained())
                measured[case_key(case.params)] = ReferenceTiming(stats.mean_ns, overhead)
        except (ChildTimeout, ChildDied, ProtocolViolation, _Verdict) as e:
            raise RuntimeError(f"timing the reference failed: {e}; logs: {child.logs()}") from e
        finally:
            child.close()
            self._where = outer_where
        if cache:
            cache.store(self.spec.revision, self.info.key, self.mode, measured)
        return have | measured

    # -- profile mode -------------------------------------------------------------------------
    def _profile(self, child: SubmissionProcess, deadline: float) -> dict[str, Any]:
        cases = self.definition.benchmark_cases(self.device)  # type: ignore[arg-type]
        self._where = "profiling the benchmark cases"
        sets = [self._inputs(c, c.seed)[0] for c in cases]
        labels = [f"case {i}: {c.label()}" for i, c in enumerate(cases)]
        reply = child.request({"op": "profile", "sets": sets, "labels": labels, "trace_file": "trace.json"}, deadline,
                              max_bytes=REPLY_SLACK_BYTES + 16 * PROFILE_TABLE_LIMIT)
        _raise_on_error(reply, self._where)
        _raise_on_tampering(reply, self._where)
        table = reply.get("table")
        profile: dict[str, Any] = {
            "table": str(table)[:PROFILE_TABLE_LIMIT],
            "sort_by": "self_cuda_time_total" if self.device == "cuda" else "self_cpu_time_total",
            "trace_file": None,
            "proton": "Proton needs a GPU: not run on the cpu device" if self.device == "cpu" else None,
        }
        if self.options.trace_dir is not None:
            stem = f"{self.spec.name}-{self.device}-{int(time.time())}"
            profile["trace_file"] = child.copy_out("trace.json", self.options.trace_dir / f"{stem}.trace.json",
                                                   TRACE_FILE_LIMIT)
            if reply.get("proton"):  # pragma: no cover - GPU-only
                profile["proton"] = child.copy_out("proton.hatchet", self.options.trace_dir / f"{stem}.hatchet",
                                                   TRACE_FILE_LIMIT)
        return profile


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


def _raise_on_tampering(reply: dict[str, Any], where: str) -> None:
    """The child's tripwire found functions the harness relies on replaced (see
    :mod:`~kernelrank.runner.integrity`: a heuristic, not a guarantee)."""
    tampered = reply.get("tampered")
    if tampered:
        names = ", ".join(str(n)[:100] for n in list(tampered)[:10]) if isinstance(tampered, list) else "?"
        raise _Verdict(Status.rejected, f"rejected in {where}: the submission replaced functions the harness "
                                        f"relies on ({names})")


def _reply_bytes(ref: torch.Tensor, outputs: int) -> int:
    """Largest answer accepted for a request returning ``outputs`` outputs like ``ref``."""
    return outputs * 2 * _nbytes(ref) + REPLY_SLACK_BYTES


def _ns_list(value: Any, expected: int | None) -> list[int]:
    if (not isinstance(value, list) or not value or (expected is not None and len(value) != expected)
            or not all(type(t) is int and 0 <= t < 10**15 for t in value)):
        raise ProtocolViolation("the child answered malformed timings")
    return value


def _nbytes(data: Any) -> int:
    if isinstance(data, torch.Tensor):
        return data.numel() * data.element_size()
    if isinstance(data, (tuple, list)):
        return sum(_nbytes(x) for x in data)
    return 0


def _set_figures(r: CaseResult, figures: dict[str, Any]) -> None:
    for k, v in figures.items():
        setattr(r, k, v)


def _wall_check(timed: _CaseTiming, ref: ReferenceTiming) -> dict[str, Any]:
    """Cross-check the child's claimed times against the judge's clock.

    For every timed request the judge measures, on its own clock, the time from handing the whole
    request to the socket to the first byte of the answer: the child's work on the request, input
    transfer excluded. Less the claimed kernel times and the copy of the outputs (1.5 ns per byte,
    i.e. at least 0.67 GB/s), what is left per call is time the claims do not explain (the claims
    must also fit in the request's whole span, transfer included). Work a submission hides outside its timed region (before the start read, in a
    lazy output materialised when it is copied, in a thread that must finish before the answer
    can go) shows there on every request; so the check takes the *least* of the requests, which
    load from other processes cannot inflate unless it lasts through all of them.
    Allowed per call: twice the reference's figure (measured the same way), plus 20% of the
    claimed mean, plus 1 ms; a case past that still passes when its claims explain at least half
    of the judge's measured work time (``MIN_EXPLAINED_FRACTION``), which load from elsewhere
    cannot break. Coarse by design: it stops gross escapes (a 1000x clock, a 1 µs claim, work left
    to a thread), not a lie of less than 2x; timing from a process the submission cannot touch
    would (known gap: ``attacks/wall_slack_calibrated.py``).
    """
    n = len(timed.times)
    mean = timed.claimed_ns / n
    unexplained = timed.least_unexplained()
    allowed = 2 * ref.overhead_ns + WALL_SLACK_FRACTION * mean + WALL_SLACK_NS
    work = max(1.0, timed.answer_ns - MOVE_NS_PER_BYTE * timed.moved_bytes)
    explained = timed.claimed_ns / work
    # Load from other processes stretches the kernel's own timed calls with the rest of the window,
    # so honest claims keep explaining most of it; a lie that hides work cannot.
    passed = unexplained <= allowed or explained >= MIN_EXPLAINED_FRACTION
    message = "ok" if passed else (
        f"timing claims not supported by the judge's wall clock: at least {unexplained / 1e3:.1f} µs per call "
        f"outside the claimed kernel time ({mean / 1e3:.1f} µs) on every request, allowed {allowed / 1e3:.1f} µs; "
        f"the claims explain {explained:.0%} of the judge's measured work time")
    return {"passed": passed, "answer_ns": timed.answer_ns, "claimed_ns": timed.claimed_ns,
            "moved_bytes": timed.moved_bytes, "unexplained_per_call_ns": unexplained,
            "allowed_per_call_ns": allowed, "message": message}


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
    if result.score_ns is not None:
        msg += f"; score {result.score_ns / 1e3:.3f} µs (geometric mean)"
    if result.speedup is not None:
        msg += f"; {result.speedup:.2f}x the reference"
    return msg
