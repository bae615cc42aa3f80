"""The harness: one judge for every problem, mode and device (:func:`evaluate`).

Read it top to bottom: :func:`evaluate` starts the submission's process (isolated, contained,
bounded by the compile budget) and loads it; then the mode's flow runs, one linear function each
(:func:`test_mode`, :func:`timed_mode` for benchmark and leaderboard, :func:`profile_mode`); every
crash, exit, hang, compile failure or protocol breach becomes a verdict, and every process of the
job is killed and its folder removed. The steps the flows call are the evaluation's, in this room:

- test cases: :meth:`_Evaluation._run_tests` (outputs checked by the judge,
  :func:`~kernelrank.runner.judge.checking.check_output`, against the reference it computes);
- the timed phase (:mod:`~kernelrank.runner.judge.timed`): the reference run *as a submission*
  in children of its own, both sides timed in pairs on fresh input sets
  (:mod:`~kernelrank.runner.judge.inputsets`; leaderboard: from a secret the children never see),
  each request in a window of its own (:mod:`~kernelrank.runner.judge.windows`), outputs read and
  checked where the child left them (:mod:`~kernelrank.runner.judge.outputs`), claims judged
  (:mod:`~kernelrank.runner.judge.judging`), pairs made a speedup with its interval and a score
  (:mod:`~kernelrank.runner.stats`);
- profile: :meth:`_Evaluation._profile`.

Countermeasures beyond checking values: isolation and containment
(:mod:`~kernelrank.runner.containment`), outputs sharing memory with an input fail, the tripwire
(:mod:`~kernelrank.runner.submission.integrity`) and claims the judge's clock cannot support reject
the run, a speedup beyond the problem's ``review_speedup`` marks it ``needs_review``. Triton
kernels on the CPU run under Triton's interpreter: judged for correctness, ``interpreted``, no
score. The method and its guarantees: docs/judging.md; the threat model: docs/security.md.
"""

from __future__ import annotations

import math
import os
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

import torch

from kernelrank import vocab
from kernelrank.format import speedup
from kernelrank.problems import ProblemSpec
from kernelrank.runner.host import gpuinfo
from kernelrank.runner.containment import isolation_check, pch
from kernelrank.runner.containment.buildcache import BuildCache
from kernelrank.runner.judge import devmem
from kernelrank.runner.judge import busy, disturbed, hangs
from kernelrank.runner.judge.answers import (RunEnded, out_room, raise_on_device_memory, raise_on_error,
                                             raise_on_tampering, read_output)
from kernelrank.runner.judge.output_rules import judge_output
from kernelrank.runner.submission.steady import resolve_vector_math, steady_allocator
from kernelrank.runner.host.devices import DeviceInfo, cpu_threads, device_info
from kernelrank.runner.judge.inputsets import InputSets
from kernelrank.runner.judge.options import EvalOptions
from kernelrank.runner.judge.outputs import OutputChecks
from kernelrank.runner.results import CaseResult, EvalResult
from kernelrank.runner.containment.sandbox import ChildDied, ChildTimeout, ProtocolViolation, SubmissionProcess
from kernelrank.runner.judge.timed import TimedPhase
from kernelrank.runner.judge.windows import Requests
from kernelrank.vocab import DEVICE_CLASSES, CaseKind, DeviceClass, Mode, parse_mode

Event = Callable[[dict[str, Any]], None]

PROFILE_TABLE_LIMIT = 64 * 1024
TRACE_FILE_LIMIT = 64 * 1024 * 1024
#: Largest answer accepted beyond the outputs it should carry (tracebacks, timings, headers); an
#: output may be up to twice the reference's size before its answer is refused as oversized.
REPLY_SLACK_BYTES = 4 * 1024 * 1024


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
            ``{"event": "case", "case": CaseResult}`` as the run goes, and per finished timed case
            with its raw ``pairs`` and its judged ``samples`` (``timed.samples_event``).

    Raises:
        ValueError: unknown mode or device.
        RuntimeError: ``cuda`` requested with no CUDA device.
    """
    parse_mode(mode)  # ValueError: not a mode
    if device not in DEVICE_CLASSES:
        raise ValueError(f"unknown device {device!r}")
    if spec.definition.cuda_only and device == DeviceClass.cpu:  # its reference needs a GPU or a package
        return EvalResult(vocab.Verdict.error, str(mode), spec.definition.name, spec.revision, device,
                          f"problem {spec.definition.name!r} runs on CUDA only: {spec.definition.cuda_only}")
    # the judge allocates inputs, references and check temporaries of up to tens of MiB per timed
    # call: with glibc's moving thresholds each could land in fresh pages (checking a 16 MiB
    # output: 45 ms, 25 ms with fixed thresholds), and the judge's seconds per call bound how many
    # calls fit a case's budget. Process-wide and idempotent; the runner keeps its peak heap.
    steady_allocator()
    # the judge computes references and expected outputs, sometimes from several of its threads
    resolve_vector_math()
    return _Evaluation(spec, source, mode, device, options or EvalOptions(), on_event).run()


def start_spare(spec: ProblemSpec, mode: Mode, device: str, options: EvalOptions) -> None:
    """Start, in a thread, the process the next evaluation of ``spec`` in ``mode`` on ``device``
    with ``options`` takes as its first (``options.spare``; nothing without one). The runner calls it
    once a run's result is sent: the start then costs no verdict its time
    (:mod:`~kernelrank.runner.containment.spare`)."""
    if options.spare is None:
        return
    settings = _ChildSettings.of(spec, mode, device, options)
    options.spare.prepare(settings.key(), lambda: settings.new(None))


@dataclass(frozen=True)
class _ChildSettings:
    """How an evaluation's processes start: what :class:`SubmissionProcess` is given besides the
    source (one place for the evaluation and for a process started ahead, :func:`start_spare`)."""

    device: str
    threads: int
    method: str
    limits: dict[str, int | None]
    options: EvalOptions

    @classmethod
    def of(cls, spec: ProblemSpec, mode: Mode, device: str, options: EvalOptions) -> "_ChildSettings":
        return cls(device, cls.threads_for(device, options), isolation_check.choose(options.isolation)[0],
                   cls.limits_for(spec, mode, device, options), options)

    @staticmethod
    def threads_for(device: str, options: EvalOptions) -> int:
        """The child's intra-op threads: ``options.threads`` resolved on the CPU, 0 elsewhere."""
        return cpu_threads(options.threads) if device == DeviceClass.cpu else 0

    @staticmethod
    def limits_for(spec: ProblemSpec, mode: Mode, device: str, options: EvalOptions) -> dict[str, int | None]:
        """The child's resource limits for a life of the compile budget and the mode's."""
        budgets = spec.definition.budgets
        return options.limits.resolved(device, budgets.compile + budgets.for_mode(mode))

    def key(self) -> tuple[Any, ...]:
        """What a process started ahead must have been started with to serve (its zygote alive)."""
        o, zygote = self.options, self.options.zygote
        return (self.device, self.threads, self.method, tuple(sorted(self.limits.items())), o.scratch_dir,
                o.log_limit, o.hidden_paths, id(zygote), zygote is not None and zygote.matches(self.device, self.threads))

    def new(self, source: str | None, runs: str = "submission") -> SubmissionProcess:
        o = self.options
        return SubmissionProcess(source, self.device, self.threads, scratch_dir=o.scratch_dir, log_limit=o.log_limit,
                                 method=self.method, limits=self.limits, hidden=o.hidden_paths, zygote=o.zygote,
                                 runs=runs)


class _Evaluation(TimedPhase, Requests, InputSets, OutputChecks):
    def __init__(self, spec: ProblemSpec, source: str, mode: Mode, device: str, options: EvalOptions,
                 on_event: Event | None):
        self.spec, self.source, self.mode, self.device, self.options = spec, source, mode, device, options
        self.definition = spec.definition
        self.reference = spec.reference_module()
        self.threads = _ChildSettings.threads_for(device, options)
        self.cpus = cpu_threads(0)  # every CPU this process may use
        self.info: DeviceInfo = device_info(device, self.threads)
        self.secret = options.secret if options.secret is not None else secrets.randbits(63)
        self.emit = on_event or (lambda _e: None)
        self.limits = _ChildSettings.limits_for(spec, mode, device, options)
        self.method = "none"
        self._called: set[int] = set()  # children that made their first call
        # CUDA-graph timing where the problem allows it (timing.cuda.cuda_graph)
        self._graphs = device == DeviceClass.cuda and self.definition.timing[DeviceClass.cuda].cuda_graph
        #: prepares a batch's input sets (timed modes, children frozen)
        self._pool: ThreadPoolExecutor | None = None
        self._local = threading.local()
        #: stdout and stderr of the submission's further timed processes, by their number (2..K)
        self._extra_logs: list[tuple[int, dict[str, str]]] = []
        #: where the submission's first process's build is kept for its later ones (:meth:`_load`)
        self._builds = options.builds or BuildCache(options.scratch_dir, self.limits.get("disk_bytes"))
        self._loaded = False  # whether a process of the submission has loaded it
        #: reads the device's memory for every child's budget (``None``: no budget is checked)
        self._meter = options.device_memory
        if self._meter is None and device == DeviceClass.cuda:  # pragma: no cover - GPU-only
            self._meter = devmem.nvml_meter(os.environ.get("CUDA_VISIBLE_DEVICES"))

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
        result = EvalResult(vocab.Verdict.passed, self.mode, self.spec.name, self.spec.revision, self.device,
                            device_info=self.info.to_dict())
        if self.device == DeviceClass.cuda:  # pragma: no cover - GPU-only: clocks recorded with every run
            result.device_info["clocks"] = {"start": gpuinfo.run_clocks(os.environ.get("CUDA_VISIBLE_DEVICES"))}
        self.method, why = isolation_check.choose(self.options.isolation)
        result.isolation = {"method": self.method, "network": "none" if self.method == "none" else "netns"}
        if self.options.require_network_isolation and self.method == "none":
            result.status = vocab.Verdict.rejected
            result.message = ("rejected: this evaluation requires the submitted code's network to be isolated, "
                              f"and this machine cannot do it ({why}); the submission was not run")
            return result
        child = self._start(self.source)
        if self.options.require_containment and child.containment == "none":
            child.close(graceful=False)
            result.status = vocab.Verdict.rejected
            result.message = ("rejected: this evaluation requires the submitted code to be contained (a cgroup frozen "
                              "outside its calls), and this machine offers no writable cgroup; the submission was not run")
            return result
        try:
            result.isolation = self._load(child)
            deadline = time.monotonic() + self.definition.budgets.for_mode(self.mode)
            MODE_FLOWS[Mode(self.mode)](self, child, result, deadline)
            result.message = _summary(result)
            self._review(result)
        except RunEnded as v:
            result.status, result.message = v.status, v.message
        except busy.JudgeBusy as e:  # the machine too busy to time the pair: measured again, no verdict
            busy.unmeasured(result, str(e))
        except ChildTimeout:
            result.status = vocab.Verdict.timeout
            result.message = f"timeout: {self._where} did not finish within its time budget; the process was killed"
        except ChildDied as e:
            result.status = vocab.Verdict.error
            result.message = f"runtime error in {self._where}: {e}"
        except ProtocolViolation as e:
            result.status = vocab.Verdict.rejected
            result.message = f"rejected in {self._where}: {e}"
        finally:
            child.close()
            if self.options.builds is None:  # this evaluation's own
                self._builds.close()
            result.logs = _merged_logs(child.logs(), self._extra_logs)
            result.duration_s = time.monotonic() - started
            if self.device == DeviceClass.cuda:  # pragma: no cover - GPU-only
                result.device_info["clocks"]["end"] = gpuinfo.run_clocks(os.environ.get("CUDA_VISIBLE_DEVICES"))
        return result

    _where = "loading the submission"

    def _phase(self, phase: str) -> None:
        self.emit({"event": "phase", "phase": phase})

    def _start(self, source: str, runs: str = "submission") -> SubmissionProcess:
        settings = _ChildSettings(self.device, self.threads, self.method, self.limits, self.options)
        if self.method != "none" and "use_pch" in source:
            # site-packages is read-only for the child: it can only use a header built beforehand
            pch.prepare_precompiled_header()
        elif runs == "submission" and self.options.spare is not None:
            ahead = self._started_ahead(settings, source)
            if ahead is not None:
                return ahead
        return self._metered(settings.new(source, runs))

    def _metered(self, child: SubmissionProcess) -> SubmissionProcess:
        if self._meter is not None:  # every child, the reference's too, under the problem's budget
            child.device_memory = devmem.DeviceMemoryWatch(self._meter, self.definition.device_memory_mib * devmem.MIB,
                                                           child)
        return child

    def _started_ahead(self, settings: "_ChildSettings", source: str) -> SubmissionProcess | None:
        """The process started ahead (:class:`~kernelrank.runner.containment.spare.Spare`) with
        ``source`` written in its folder and its isolation measured (its ``hello`` answered), or
        ``None``: none was ready, or it failed before answering. Such a process has run no submitted
        code yet (the source is read at ``load``), so its failure is the runner's: a fresh process
        takes its place instead of the submission getting ``error`` (one killed between the take and
        its ``hello`` did that)."""
        assert self.options.spare is not None  # checked by the caller
        child = self.options.spare.take(settings.key())
        if child is None:
            return None
        try:
            child.assign(source)
            self._metered(child).start(time.monotonic() + self.definition.budgets.compile)
        except Exception:  # noqa: BLE001 - any failure before submitted code ran: start afresh
            child.close(graceful=False)
            return None
        except BaseException:
            child.close(graceful=False)
            raise
        return child

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
        measured = child.isolation if child.started else child.start(deadline)  # started ahead: done
        if self.options.require_network_isolation and measured.get("network") != "netns":
            raise RunEnded(vocab.Verdict.rejected, "rejected: network isolation is required, and the submission's "
                                                  "process was found with network access; the submission was not "
                                                  "loaded")
        # an imported problem's reference may ship modules and an adapter for submissions
        extra = {k: v for k, v in (("modules", getattr(self.reference, "SUBMISSION_MODULES", None)),
                                   ("adapter", getattr(self.reference, "SUBMISSION_ADAPTER", None))) if v}
        first = child.runs == "submission" and not self._loaded
        seeded = child.runs == "submission" and self._builds.seed(child, self.source) is not None
        self._guard(child, child.request({"op": "load", **extra}, deadline, max_bytes=REPLY_SLACK_BYTES))
        if first:
            self._loaded = True
            if not seeded:  # its C++ build, so that later processes need not build (docs/judging.md)
                self._builds.keep(child, self.source)
        child.set_baseline()
        return measured

    def _guard(self, child: SubmissionProcess, reply: dict[str, Any]) -> None:
        """After a request (load, calls, reserve, profile): errors, replaced functions. Threads and processes the submission keeps
        between calls are allowed: frozen with the child, they cannot run outside the window.
        First what it holds on the device (the judge's own measure, over the child's account)."""
        raise_on_device_memory(child, self._where)
        raise_on_error(reply, self._where)
        raise_on_tampering(child, reply, self._where)

    def _go(self, child: SubmissionProcess, layout: dict[str, Any], deadline: float, ref_s: float,
            repeat: int = 1, read: bool = True) -> tuple[dict[str, Any], torch.Tensor | None]:
        """One ``go`` request of ``repeat`` calls on the placed inputs, with its own deadline
        (:meth:`~kernelrank.problems.Budgets.call_deadline`); the answer and the output read from
        its slot (``None`` when the output is not a plain tensor, or with ``read=False``).

        Raises:
            RunEnded: ``timeout`` naming the case when the call's own deadline passed.
        """
        first = id(child) not in self._called
        self._called.add(id(child))
        allowed = self.definition.budgets.call_deadline(first, ref_s, repeat)
        watch = hangs.CallWatch(child, time.monotonic(), allowed, self.definition.budgets.compile_call, deadline,
                                self._phase, self._where if first else None)
        try:
            reply = child.request({"op": "go", "inputs": layout, "repeat": repeat, "direct": child.memory is not None,
                                   # every request alike (tests too): graphs where the problem asks for them
                                   **({"graph": True} if self._graphs else {})},
                                  min(deadline, watch.own), max_bytes=REPLY_SLACK_BYTES, late=watch.late,
                                  check_s=hangs.CHECK_S)
        except ChildTimeout:
            if watch.own < deadline:
                raise RunEnded(vocab.Verdict.timeout, f"timeout: {self._where}: the call did not return within its "
                                                     f"deadline of {allowed:.0f} s ("
                                                     f"{'first call' if first else 'calls after the first'}"
                                                     f"; the process was killed){watch.hung_at()}") from None
            raise
        self._guard(child, reply)
        return reply, (read_output(child, reply, 0) if read else None)

    def _review(self, result: EvalResult) -> None:
        """Mark a speedup beyond the problem's ``review_speedup`` for an administrator's review."""
        bound = self.definition.review_speedup
        fast = [c for c in result.cases if c.speedup is not None and c.speedup > bound]
        if result.speedup is not None and result.speedup > bound:
            result.needs_review = True
            result.review_reason = (f"speedup {speedup(result.speedup)} over the reference is beyond this problem's "
                                    f"review bound of {speedup(bound)}")
        elif fast:
            result.needs_review = True
            result.review_reason = (f"{fast[0].label}: speedup {speedup(fast[0].speedup)} over the reference is "
                                    f"beyond this problem's review bound of {speedup(bound)}")


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
        an output (:func:`out_room`: up to twice the reference's size); the layout for ``go``.

        The data path, whatever the device: input sets and expected outputs are made by the judge
        on the run's device before a batch (:meth:`_prepare_batch`); each is placed in each
        child's slots right before that child's call (:meth:`SubmissionProcess.arena`'s ``place``,
        while the child is frozen), the output is checked where the child left it, in its slot or
        its memory, while it is frozen (``output_reader``, piece by piece; ``read_output`` copies
        a failing one whole for its figures), against the expected output where that lives. On
        the CPU the slots are a shared memory file; on CUDA the same calls place into and read
        from device memory shared with the child through a file descriptor (CUDA VMM) (the GPU change), so no tensor
        data crosses the host or the socket."""
        return child.arena.place(data, room, direct=child.memory is not None, dests=self._dests(data))

    def _check(self, reply: dict[str, Any], out: Any, ref: Any, data: Any = None) -> tuple[bool, str, dict[str, Any]]:
        """Check one output by the problem's rule (:func:`~kernelrank.runner.judge.output_rules.judge_output`;
        ``data``: the judge's pristine input set, which a ``source`` check needs): the verdict, its
        message and the error figures."""
        return judge_output(self.definition, self.reference, reply, out, ref, data)

    # -- test mode ----------------------------------------------------------------------------
    def _run_tests(self, child: SubmissionProcess, deadline: float) -> list[CaseResult]:
        results = []
        for i, case in enumerate(self.definition.tests):
            self._where = f"test case {i} ({case.label()})"
            data, ref = self._inputs(case, case.seed)
            reply, out = self._go(child, self._place(child, data, out_room(ref)), deadline, self.ref_s)
            ok, message, figures = self._check(reply, out, ref, data)
            r = CaseResult("test", i, case.params, ok, message if not ok else "ok", checked=1, **figures)
            r.interpreted = bool(reply.get("interpreted"))
            results.append(r)
            self.emit({"event": "case", "case": r})
        return results


    # -- profile mode -------------------------------------------------------------------------
    def _profile(self, child: SubmissionProcess, deadline: float) -> dict[str, Any]:
        """``torch.profiler`` over the benchmark cases: the table and the trace's copy (and Proton's
        on a GPU). Each case's set is placed in the child's slots as a timed set is (:meth:`_profile_sets`)."""
        replies = self._profile_sets(child, "profile", deadline, {"trace_file": "trace.json"},
                                     REPLY_SLACK_BYTES + 16 * PROFILE_TABLE_LIMIT)
        table = replies[-1].get("table") if replies else None
        profile: dict[str, Any] = {
            "table": str(table)[:PROFILE_TABLE_LIMIT],
            "sort_by": "self_cuda_time_total" if self.device == DeviceClass.cuda else "self_cpu_time_total",
            "trace_file": None,
            "proton": "Proton needs a GPU: not run on the cpu device" if self.device == DeviceClass.cpu else None,
        }
        stem = f"{self.spec.name}-{self.device}-{int(time.time())}"
        if self.options.trace_dir is not None:
            profile["trace_file"] = child.copy_out("trace.json", self.options.trace_dir / f"{stem}.trace.json",
                                                   TRACE_FILE_LIMIT)
        if self.device == DeviceClass.cuda:  # pragma: no cover - GPU-only: Proton in a process of its own
            profile["proton"] = self._proton(deadline, stem)
        return profile

    def _profile_sets(self, child: SubmissionProcess, op: str, deadline: float, extra: dict[str, Any],
                      max_bytes: int) -> list[dict[str, Any]]:
        """One ``op`` request (``profile``, ``proton``) per benchmark case, its input set drawn
        then and placed in the child's slots (:meth:`_place`, the child frozen), the request
        carrying only its layout, as a timed request does: never the sets themselves through the
        socket, and one set at a time on the judge's device. The profiler runs from the request
        marked ``first`` to the one marked ``last``, which answers the results; the answers."""
        cases = self.definition.benchmark_cases(self.device)  # type: ignore[arg-type]
        replies = []
        for i, case in enumerate(cases):
            self._where = f"profiling benchmark case {i} ({case.label()})"
            layout = self._place(child, self._draw(case, case.seed), 0)  # outputs are not read
            reply = child.request({"op": op, "inputs": layout, "label": f"case {i}: {case.label()}", "first": i == 0,
                                   "last": i == len(cases) - 1, **extra}, deadline, max_bytes=max_bytes)
            self._guard(child, reply)
            replies.append(reply)
        return replies

    def _proton(self, deadline: float, stem: str) -> str | None:  # pragma: no cover - GPU-only
        """Proton in a second child: CUPTI takes one subscriber, which ``torch.profiler``
        holds in the first. The hatchet file's copy, or what went wrong (profiling is advisory)."""
        outer = self._where
        self._where = "profiling the benchmark cases with Proton"
        child = self._start(self.source)
        try:
            self._load(child)
            replies = self._profile_sets(child, "proton", deadline, {}, REPLY_SLACK_BYTES)
            if self.options.trace_dir is None or not replies or not replies[-1].get("proton"):
                return None
            return child.copy_out("proton.hatchet", self.options.trace_dir / f"{stem}.hatchet", TRACE_FILE_LIMIT)
        finally:
            child.close()
            self._where = outer


# -- the modes: each one linear function over the evaluation's steps -----------------------------
def test_mode(ev: _Evaluation, child: SubmissionProcess, result: EvalResult, deadline: float) -> None:
    """``test``: every test case's output checked against the reference's on the case's seed.

    Raises:
        RunEnded: ``failed`` naming the first failing case (and how many more).
    """
    ev._phase("test")
    result.cases.extend(ev._run_tests(child, deadline))
    result.interpreted = any(c.interpreted for c in result.cases)
    if not all(c.passed for c in result.cases):
        raise RunEnded(vocab.Verdict.failed, _first_failure(result.cases))


def timed_mode(ev: _Evaluation, child: SubmissionProcess, result: EvalResult, deadline: float) -> None:
    """``benchmark`` and ``leaderboard``: the tests, then every benchmark case timed in pairs beside
    the reference on fresh inputs (leaderboard: drawn from secret seeds, and the run scored):
    :meth:`~kernelrank.runner.judge.timed.TimedPhase._timed_phase`."""
    test_mode(ev, child, result, deadline)
    ev._timed_phase(child, result, deadline)


def profile_mode(ev: _Evaluation, child: SubmissionProcess, result: EvalResult, deadline: float) -> None:
    """``profile``: the tests, then the benchmark cases under ``torch.profiler`` (and Proton on a
    GPU); the table and trace in ``result.profile``."""
    test_mode(ev, child, result, deadline)
    ev._phase("profile")
    result.profile = ev._profile(child, deadline)


#: What each mode does once the submission is loaded.
MODE_FLOWS: dict[Mode, Callable[[_Evaluation, SubmissionProcess, EvalResult, float], None]] = {
    Mode.test: test_mode, Mode.benchmark: timed_mode, Mode.leaderboard: timed_mode, Mode.profile: profile_mode}


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
    tests = [c for c in result.cases if c.kind == CaseKind.test]
    msg = f"all {len(tests)} test cases passed"
    bench = [c for c in result.cases if c.kind == CaseKind.benchmark]
    if bench:
        msg += f"; {len(bench)} benchmark cases timed"
    if result.interpreted:
        msg += ("; its Triton kernels ran under Triton's interpreter (the CPU has no Triton backend): the outputs "
                "were checked, the times measure the interpreter, not the kernel, so there is no speedup and no score")
        return msg
    # no figures here: score and speedup are the result's fields, which every view formats once
    # (a submission's headline score is the ranked one, not this run's)
    flagged = [c for c in bench if c.noisy]
    if flagged:
        worst = max(flagged, key=lambda c: (c.pairing or {}).get("half_width", 0.0))
        width = (worst.pairing or {}).get("half_width", math.inf)
        what = f"{worst.label} is known to ±{width:.1%} only after its extra time (the machine was busy)"
        what = next(filter(None, (disturbed.case_note(c.label, c.pairing) for c in flagged)), what)
        if result.noisy:
            msg += f"; too noisy to rank: {what}; not ranked until measured again"
        else:
            msg += f"; {what}, which the score's interval includes"
    elif result.noisy:
        msg += "; too noisy to rank: the score's interval is too wide; not ranked until measured again"
    return msg
