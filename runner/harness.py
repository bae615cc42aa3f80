"""The harness: one judge for every problem, mode and device.

:func:`evaluate` is the only place where a verdict or a time is decided. The judge (this process)

1. loads the problem's reference (trusted) and starts a :class:`SubmissionProcess` for the
   submitted code, bounded by the problem's compile budget while it loads and builds;
2. for each case creates the inputs itself (in leaderboard mode from seeds derived from a secret
   the child never sees), computes the reference output, keeps its pristine copy and sends the
   child a copy over the private channel;
3. checks every returned output itself (:func:`~kernelrank.runner.checking.check_output`);
4. in timed modes stages the inputs, then sends each timed call as its own data-free request,
   so its own clock around the call (the *window*) holds only the call and a fixed overhead the
   reference calibrates; each call counts for the child's claim or the window less that overhead,
   whichever is longer (:func:`judged_times`, :func:`_wall_check`); summarises the times
   (:func:`~kernelrank.runner.timing.summarize`) and compares with the reference, timed by this
   same code on the same device (cached);
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
import os
import secrets
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from kernelrank.format import duration, speedup
from kernelrank.problems import Case, Mode, ProblemSpec
from kernelrank.runner import gpuinfo, isolation
from kernelrank.runner.checking import check_output
from kernelrank.runner.child import steady_allocator
from kernelrank.runner.devices import DeviceInfo, cpu_threads, device_info
from kernelrank.runner.limits import SandboxLimits
from kernelrank.runner.refcache import ReferenceCache, ReferenceTiming, case_key
from kernelrank.runner.results import CaseResult, EvalResult, Status
from kernelrank.runner.sandbox import ChildDied, ChildTimeout, ProtocolViolation, SubmissionProcess, tasks_created
from kernelrank.runner.slots import SlotError
from kernelrank.runner.timing import (
    MAX_RUNS,
    REL_STDERR,
    WARMUP_MAX_CALLS,
    WARMUP_MIN_CALLS,
    WARMUP_SECONDS,
    geometric_mean,
    roofline,
    should_stop,
    summarize,
)

Event = Callable[[dict[str, Any]], None]

#: Judge-side timing. Each timed call is one small request (``go``) carrying no data: the judge's
#: clock from just before handing it to the socket to the first byte of the answer (the *window*)
#: holds the call and a fixed overhead (two socket hops, the child's bookkeeping). The reference, whose code
#: is trusted, calibrates that overhead per case: the :data:`OVERHEAD_QUANTILE` quantile of its
#: window - claim, low so that load while the reference was timed does not widen it. A submission's
#: call then counts as ``max(claim, window - overhead - WALL_JITTER_NS)``: a claim shorter than the
#: judge saw buys at most the jitter allowance.
WALL_JITTER_NS = 30_000
OVERHEAD_QUANTILE = 0.1
#: Largest overhead allowance whatever the reference measured (an idle machine: about 0.1 ms).
OVERHEAD_CAP_NS = 500_000
#: A run whose claims leave, on a quarter of its calls or more, more than twice the reference's
#: overhead plus this much unexplained is rejected outright (a clock that lies grossly).
WALL_SLACK_NS = 500_000
#: Quantile of the per-call unexplained time compared with the bound above: load from other
#: processes inflates some calls' windows, a lie inflates all of them.
WALL_QUANTILE = 0.25
#: ... unless the claims still explain this fraction of the windows' total: sustained load
#: stretches the calls with their windows, a gross lie cannot.
MIN_EXPLAINED_FRACTION = 0.5
#: A request during which the child's threads waited for a CPU for more than this share of the
#: window, while the machine's CPUs did something other than the child and the judge for more than
#: this share too, was taken by the machine (on a virtual machine: its virtual CPUs descheduled by
#: the host) and is timed again: measured here, such requests took 3-6x a normal call's window and
#: five leaderboard scores of one submission varied 1.2x with them counted. A normal request's
#: waits stay under a third of its window (the judge's own ~1 ms at the window's ends).
PREEMPTED_SHARE = 0.5
#: Most requests of a case timed again, as a share of its requests so far (at least
#: :data:`PREEMPTED_MIN`); further preempted requests count as they are.
PREEMPTED_MAX_SHARE = 0.25
PREEMPTED_MIN = 2
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
        zygote: a :class:`~kernelrank.runner.zygote.Zygote` to fork children from (warm start:
            torch already imported); ``None`` or one for another device starts each child cold.
        require_containment: refuse (status ``rejected``, nothing of the submission run) when
            the child cannot be put in a cgroup frozen outside its calls
            (:mod:`~kernelrank.runner.cgroups`); runners set it for leaderboard jobs.
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
    zygote: Any = None
    require_containment: bool = False


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
    # the judge allocates inputs, references and check temporaries of up to tens of MiB per timed
    # call: with glibc's moving thresholds each could land in fresh pages (checking a 16 MiB
    # output: 45 ms, 25 ms with fixed thresholds), and the judge's seconds per call bound how many
    # calls fit a case's budget. Process-wide and idempotent; the runner keeps its peak heap.
    steady_allocator()
    return _Evaluation(spec, source, mode, device, options or EvalOptions(), on_event).run()


@dataclass
class _CaseTiming:
    """Raw figures of one case: the child's claim per timed call, and per ``go`` request (one
    call in leaderboard mode, a batch of back-to-back calls in benchmark mode) the judge's window
    and the number of calls it held (ns)."""

    result: CaseResult
    claims: list[int] = field(default_factory=list)
    windows: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    #: per request, CPU time of the child's main thread (which makes the calls) during the window (ns)
    main_cpu: list[int] = field(default_factory=list)
    #: requests left out because the machine took the CPU from the child (:func:`preempted`)
    preempted: int = 0

    def may_drop(self) -> bool:
        """Whether one more preempted request may be left out (see :data:`PREEMPTED_MAX_SHARE`)."""
        return self.preempted < max(PREEMPTED_MIN, PREEMPTED_MAX_SHARE * (len(self.windows) + self.preempted))

    def request_claims(self) -> list[int]:
        """Per request, the sum of its calls' claims (ns)."""
        sizes = self.sizes or [1] * len(self.windows)
        out, i = [], 0
        for k in sizes:
            out.append(sum(self.claims[i:i + k]))
            i += k
        return out

    def main_unexplained(self) -> list[int]:
        """Per request, the main thread's CPU time during the window less the claims (ns): load
        from other processes cannot raise it (a thread waiting for a core uses no CPU time)."""
        return [m - c for m, c in zip(self.main_cpu, self.request_claims())]

    def unexplained(self) -> list[int]:
        """Per request, the judge's window less the claims (ns)."""
        return [w - c for w, c in zip(self.windows, self.request_claims())]


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
            if self.device == "cuda":  # pragma: no cover - GPU-only: [issue 16]
                result.device_info["clocks"]["end"] = gpuinfo.run_clocks(os.environ.get("CUDA_VISIBLE_DEVICES"))
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
                                 hidden=self.options.hidden_paths, zygote=self.options.zygote)

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
        # [issue 17] an imported problem's reference may ship modules and an adapter for submissions
        extra = {k: v for k, v in (("modules", getattr(self.reference, "SUBMISSION_MODULES", None)),
                                   ("adapter", getattr(self.reference, "SUBMISSION_ADAPTER", None))) if v}
        reply = child.request({"op": "load", **extra}, deadline, max_bytes=REPLY_SLACK_BYTES)
        _raise_on_error(reply, self._where)
        _raise_on_tampering(child, reply, self._where)
        child.set_baseline()
        return measured

    def _guard(self, child: SubmissionProcess, reply: dict[str, Any]) -> None:
        """After a call: errors, replaced functions. Threads and processes the submission keeps
        between calls are allowed: frozen with the child, they cannot run outside the window."""
        _raise_on_error(reply, self._where)
        _raise_on_tampering(child, reply, self._where)

    def _go(self, child: SubmissionProcess, layout: dict[str, Any], deadline: float, ref_s: float,
            repeat: int = 1) -> tuple[dict[str, Any], torch.Tensor | None]:
        """One ``go`` request of ``repeat`` calls on the placed inputs, with its own deadline
        (:meth:`~kernelrank.problems.Budgets.call_deadline`); the answer and the output read from
        its slot (``None`` when the output is not a plain tensor).

        Raises:
            _Verdict: ``timeout`` naming the case when the call's own deadline passed.
        """
        first = id(child) not in self._called
        self._called.add(id(child))
        allowed = self.definition.budgets.call_deadline(first, ref_s, repeat)
        own = time.monotonic() + allowed
        try:
            reply = child.request({"op": "go", "inputs": layout, "repeat": repeat, "direct": child.mem_fd is not None,
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
        out = None
        if reply.get("out") is not None:
            try:
                out = child.arena.read_output(reply["out"], child.mem_fd)
            except SlotError as e:
                raise ProtocolViolation(str(e)) from None
        return reply, out

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
        """A fresh input set and the reference's output on it; ``self.ref_s`` is the time the
        reference took (seconds, the judge's clock: the base of the calls' deadlines)."""
        params = dict(case.params, seed=seed)
        data = self.reference.generate_input(device=self.device, **params)
        started = time.perf_counter()
        with torch.no_grad():
            ref = self.reference.ref_kernel(data)
        if self.device == "cuda":  # pragma: no cover - GPU-only
            torch.cuda.synchronize()
        self.ref_s = time.perf_counter() - started
        return data, ref

    def _place(self, child: SubmissionProcess, data: Any, ref: torch.Tensor) -> dict[str, Any]:
        """Write an input set into the child's shared slots (it is frozen) with room for an output
        up to twice the reference's size; the layout for ``go``."""
        return child.arena.place(data, 2 * _nbytes(ref))

    def _check(self, reply: dict[str, Any], out: torch.Tensor | None,
               ref: torch.Tensor) -> tuple[bool, str, dict[str, Any]]:
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
            reply, out = self._go(child, self._place(child, data, ref), deadline, self.ref_s)
            ok, message, figures = self._check(reply, out, ref)
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
            r.wall_check = _wall_check(timed, ref)
            times = judged_times(timed.claims, timed.windows, ref.overhead_ns, timed.sizes)
            stats = summarize(times)
            r.timing = stats.to_dict()
            if not r.wall_check["passed"]:
                self.emit({"event": "case", "case": r})
                raise _Verdict(Status.rejected, f"{r.label}: {r.wall_check['message']}")
            if stats.mean_ns <= 0:  # no call takes no time: the timer in the child was tampered with
                raise _Verdict(Status.rejected, f"{r.label}: the submission's process claimed 0 ns per call")
            r.tflops, r.gbps = roofline(self.reference.flops(case.params), self.reference.bytes(case.params), stats.mean_ns)
            r.ref_mean_ns = ref.mean_ns
            r.speedup = ref.mean_ns / stats.mean_ns
            self.emit({"event": "case", "case": r})
            means.append(stats.mean_ns)
        ref_means = [refs[case_key(c.params)].mean_ns for c in cases]
        result.speedup = geometric_mean(ref_means) / geometric_mean(means)
        if self.mode == "leaderboard":
            result.score_ns = geometric_mean(means)

    def _time_case(self, child: SubmissionProcess, index: int, case: Case, deadline: float) -> _CaseTiming:
        """Warm up, then timed calls until :func:`should_stop`, each its own ``go`` request.

        Every request's inputs are placed in the shared slots while the child is frozen, and its
        output is read from its slot after the child is frozen again. Leaderboard mode places one
        fresh input set before every call and checks every output; benchmark mode places one set
        and checks the outputs of requests 1, 2, 4, 8, ... and the last. Warm-up is ``go``
        requests of one call on the first set (as many as :data:`~kernelrank.runner.timing.WARMUP_SECONDS`
        and the minimum calls ask), its first output checked. The stopping rule looks at the
        claims (the judge's figures are only final once the reference's overhead is applied, see
        :func:`judged_times`).
        """
        budget_s = getattr(self.definition.timing[self.device], self.mode)  # type: ignore[index]
        fresh = self.mode == "leaderboard"
        seed = (lambda it: mix_seed(self.secret, case.seed, it)) if fresh else (lambda it: case.seed)
        data, ref = self._inputs(case, seed(0))
        ref_s = self.ref_s
        timed = _CaseTiming(CaseResult("benchmark", index, case.params, True, "ok"))
        r = timed.result

        layout = self._place(child, data, ref)
        warm: list[int] = []
        started = time.monotonic()
        while (len(warm) < WARMUP_MIN_CALLS or time.monotonic() - started < WARMUP_SECONDS[self.device]) \
                and len(warm) < WARMUP_MAX_CALLS:
            reply, out = self._go(child, layout, deadline, ref_s)
            warm.extend(_ns_list(reply.get("times_ns"), 1))
            if len(warm) == 1:
                ok, message, figures = self._check(reply, out, ref)
                r.checked = 1
                if not ok:
                    r.passed, r.message, = False, f"output of the first call is wrong: {message}"
                    _set_figures(r, figures)
                    return timed
            elif reply.get("alias"):
                r.passed, r.message = False, f"warm-up: {reply['alias']!s:.500}"
                return timed
        start = time.monotonic()  # the case's timing budget is for timed calls, warm-up excluded
        checked_at = 0
        est_call_s = max(sorted(warm)[len(warm) // 2] * 1e-9, 1e-6)
        limit = 1
        out = None
        while not should_stop(timed.claims, REL_STDERR[self.device], time.monotonic() - start, budget_s, MAX_RUNS):
            if fresh:
                # One fresh input set per call: a submission handed several sets at once could
                # compute them all on the first call. (numbered by request: a request timed again
                # gets new inputs too, never a replay)
                data, ref = self._inputs(case, seed(len(timed.windows) + timed.preempted + 1))
                ref_s = self.ref_s
                layout = self._place(child, data, ref)
            sched_before = child.thread_sched()
            # benchmark mode: batches of back-to-back calls (1, 2, 4, ... within the budget), as
            # torch.utils.benchmark.Timer times them; leaderboard mode: one call per request
            remaining = budget_s - (time.monotonic() - start)
            k = 1 if fresh else max(1, min(limit, int(remaining / est_call_s), MAX_RUNS - len(timed.claims)))
            limit *= 2
            judge_cpu, tasks = time.process_time_ns(), tasks_created()
            reply, out = self._go(child, layout, deadline, ref_s, repeat=k)
            window = child.span_ns
            judge_cpu = time.process_time_ns() - judge_cpu
            tasks = tasks_created() - tasks if tasks >= 0 else -1  # unreadable: as if created
            sched_after = child.thread_sched()
            claims = _ns_list(reply.get("times_ns"), k)
            if sum(claims) > window:
                raise _Verdict(Status.rejected, f"{self._where}: the submission's process claimed {sum(claims)} ns for "
                                                f"calls answered after {window} ns")
            # never for a request during which a process or thread was created anywhere (a helper
            # process started inside the call could keep the CPUs from the child's own threads),
            # nor for a child that narrowed its CPU affinity (waiting beside an idle CPU)
            if (tasks == 0 and preempted(window, sched_before, sched_after, judge_cpu, self.cpus)
                    and timed.may_drop() and not child.affinity_narrowed()):
                timed.preempted += 1  # timed again; its output is still checked below
            else:
                main = child.pid
                timed.main_cpu.append(sched_after.get(main, (0, 0))[0] - sched_before.get(main, (0, 0))[0])
                timed.claims.extend(claims)
                timed.windows.append(window)
                timed.sizes.append(k)
            if reply.get("alias"):
                r.passed, r.message = False, f"timed call {len(timed.claims)}: {reply['alias']!s:.500}"
                return timed
            n = len(timed.windows)
            if fresh or n & (n - 1) == 0:
                if not self._check_timed(timed, reply, out, ref):
                    return timed
                checked_at = n
        if timed.windows and checked_at != len(timed.windows):
            self._check_timed(timed, reply, out, ref)
        return timed

    def _check_timed(self, timed: _CaseTiming, reply: dict[str, Any], out: torch.Tensor | None,
                     ref: torch.Tensor) -> bool:
        """Check a timed request's output; ``False`` (the case failed) when wrong."""
        r = timed.result
        ok, message, figures = self._check(reply, out, ref)
        r.checked += 1
        if not ok:
            r.passed, r.message = False, f"output of timed call {len(timed.claims)} is wrong: {message}"
            _set_figures(r, figures)
        return ok

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
                overhead = max(0.0, _quantile(timed.unexplained(), OVERHEAD_QUANTILE))
                # judged as an entry is (claims or the window less the overhead): the same rule
                # for both sides of the speedup
                stats = summarize(judged_times(timed.claims, timed.windows, overhead, timed.sizes))
                measured[case_key(case.params)] = ReferenceTiming(
                    stats.mean_ns, overhead, main_overhead_ns=max(0.0, _median(timed.main_unexplained())))
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
        _raise_on_tampering(child, reply, self._where)
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
            _raise_on_error(reply, self._where)
            _raise_on_tampering(child, reply, self._where)
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


def preempted(window_ns: int, before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]],
              judge_cpu_ns: int, cpus: int) -> bool:
    """Whether the machine took the CPU from the child during one request.

    Args:
        window_ns: the judge's window around the request (ns).
        before, after: per thread of the child, ``(cpu_ns, wait_ns)`` from
            :meth:`SubmissionProcess.thread_sched` before and after the request.
        judge_cpu_ns: CPU time of the judge's process over the request (ns).
        cpus: CPUs the judge and the child may run on.

    True when the child's threads together waited, runnable, for more than
    :data:`PREEMPTED_SHARE` of the window *and* the CPUs spent more than that share on neither the
    child nor the judge. Threads of the child waiting for each other (a submission running more
    threads than CPUs) leave no CPU to anyone else, so such waits never count (the sandbox's other
    processes count as the child: see :meth:`SubmissionProcess.thread_sched`); the caller also
    excludes requests during which any task was created (:func:`~kernelrank.runner.sandbox.tasks_created`)
    and children that narrowed their CPU affinity (:meth:`SubmissionProcess.affinity_narrowed`).
    """
    run = sum(cpu - before.get(t, (0, 0))[0] for t, (cpu, _) in after.items())
    wait = sum(w - before.get(t, (0, 0))[1] for t, (_, w) in after.items())
    elsewhere = cpus * window_ns - run - judge_cpu_ns
    return wait > PREEMPTED_SHARE * window_ns and elsewhere > PREEMPTED_SHARE * window_ns


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


def judged_times(claims: list[int], windows: list[int], overhead_ns: float,
                 sizes: list[int] | None = None) -> list[float]:
    """The time each call counts for (ns): its claim, or its share of what the judge's clock saw.

    ``claims`` are the child's per-call times (``perf_counter_ns`` or CUDA events around each
    call); ``windows`` the judge's windows, one per ``go`` request (from just before it is handed to the socket to the
    first byte of the answer) holding ``sizes[i]`` back-to-back calls (default: one each);
    ``overhead_ns`` the reference's per-request overhead (a low quantile of window - claims on the
    same case), capped at :data:`OVERHEAD_CAP_NS`. A request counts for the larger of its claims'
    sum and its window less the overhead and :data:`WALL_JITTER_NS`; its calls share that in
    proportion to their claims. An honest request's claims are almost always the larger (so the
    figures are the child's fine-grained ones, as ``torch.utils.benchmark.Timer`` takes them); a
    claim the judge's clock does not support is replaced by the judge's figure.
    """
    allowance = min(overhead_ns, OVERHEAD_CAP_NS) + WALL_JITTER_NS
    sizes = sizes or [1] * len(windows)
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


def _median(xs: list[int]) -> float:
    return float(statistics.median(xs)) if xs else 0.0


def _quantile(xs: list[int], q: float) -> float:
    """The ``q`` quantile of ``xs`` (nearest rank, 0 for none)."""
    if not xs:
        return 0.0
    ordered = sorted(xs)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


def _wall_check(timed: _CaseTiming, ref: ReferenceTiming) -> dict[str, Any]:
    """Cross-check the child's claimed times against the judge's clock, per call.

    Each timed call is its own ``go`` request carrying no data, so the judge's window around it
    holds the call plus a fixed overhead, which the reference (trusted code, same path) measured
    as ``ref.overhead_ns`` (a low quantile of window - claim). A claim longer than its window is
    impossible and rejects the run (checked as the calls come). Two gross lies reject the run:

    - a clock that lies: the :data:`WALL_QUANTILE` quantile of window - claim beyond twice the
      reference's overhead plus :data:`WALL_SLACK_NS`, with the claims explaining under
      :data:`MIN_EXPLAINED_FRACTION` of the judged time, and the same quantile of the calling
      thread's CPU time in the window less the claim beyond twice the reference's plus
      :data:`WALL_SLACK_NS` (CPU time, which load cannot raise, tells a lie from a busy machine);
    Work moved out of the call is not looked for: outside its windows the child's cgroup is
    frozen (:class:`~kernelrank.runner.sandbox.SubmissionProcess`), so nothing of it can run.

    Smaller lies gain nothing: each call counts for at least its window less the overhead and
    :data:`WALL_JITTER_NS` (:func:`judged_times`).
    """
    n = len(timed.windows)
    unexplained = timed.unexplained()
    low = _quantile(unexplained, WALL_QUANTILE)
    allowed = 2 * ref.overhead_ns + WALL_SLACK_NS
    allowance = min(ref.overhead_ns, OVERHEAD_CAP_NS) + WALL_JITTER_NS
    replaced = sum(1 for u in unexplained if u > allowance)
    claimed_mean = statistics.fmean(timed.claims) if timed.claims else 0.0
    judged = sum(judged_times(timed.claims, timed.windows, ref.overhead_ns, timed.sizes))
    explained = sum(timed.claims) / max(1.0, judged)
    main_low = _quantile(timed.main_unexplained(), WALL_QUANTILE)
    main_allowed = 2 * ref.main_overhead_ns + WALL_SLACK_NS
    # the wall clock alone cannot tell a lie from load (a child waiting for a core): a rejection
    # also needs the call's own thread to have run, on CPU time, well past the claims
    clock_ok = low <= allowed or explained >= MIN_EXPLAINED_FRACTION or main_low <= main_allowed
    if not clock_ok:
        message = (f"timing claims not supported by the judge's wall clock: on {1 - WALL_QUANTILE:.0%} of the requests "
                   f"or more, at least {low / 1e3:.1f} µs per request outside the claimed kernel time "
                   f"({claimed_mean / 1e3:.1f} µs), allowed {allowed / 1e3:.1f} µs, while the calling thread ran "
                   f"{main_low / 1e3:.1f} µs of CPU past the claim; the claims explain {explained:.0%} of the judged time")
    else:
        message = "ok"
    return {"passed": clock_ok, "calls": len(timed.claims), "requests": n,
            "claimed_mean_ns": claimed_mean,
            "window_mean_ns": statistics.fmean(timed.windows) if timed.windows else 0.0,
            "overhead_ns": ref.overhead_ns, "unexplained_low_ns": low, "allowed_ns": allowed,
            "replaced_requests": replaced, "explained": explained,
            "main_unexplained_low_ns": main_low, "preempted_requests": timed.preempted,
            "message": message}


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
    if result.score_ns is not None:  # the figures as the CLI and the pages write them
        msg += f"; score {duration(result.score_ns)} (geometric mean)"
    if result.speedup is not None:
        msg += f"; {speedup(result.speedup)} the reference"
    return msg
