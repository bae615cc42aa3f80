"""``kernelrank runner --self-test``: prove a runner judges correctly before it takes a job.

Everything runs through the harness (:func:`kernelrank.runner.judge.harness.evaluate`), so inside the
sandbox a job's child gets (namespaces, read-only view, cgroup, limits), on the runner's device:

- **device**: the device initialises in the sandbox (the PyTorch template in test mode);
- **toolchain**: a Triton kernel JIT-compiled (under Triton's interpreter on the CPU), a
  ``load_inline`` C++ build with and without the precompiled header, and on CUDA the same for a
  CUDA build (``cuda_sources``; the GEMM templates, with ``use_pch`` set each way);
- **problems**: every template and example of every problem, in every mode, each with its
  expected verdict (``correct_*`` and templates pass, ``wrong_*`` fail); files named ``cpp``
  run on the CPU only and ``cuda`` on CUDA only;
- **attacks**: the corpus ``reference_kernels/*/attacks/*.py`` in leaderboard mode, each verdict
  within what its docstring expects (:func:`attack_meta`; ``Known gap:`` entries are reported,
  not failed);
- **judge's clock**: the runner's per-request overhead (:func:`measure_overhead`), the base of the
  judge's cross-check of claims at kernel scale (:func:`~kernelrank.runner.judge.judging.judge_batches`),
  and whether outputs are checked in one native pass (:func:`output_check_row`);
- **containment**: what bounds the child's host memory (a cgroup, or not: reported), how the
  judge reads the child's outputs (:func:`output_reads_check`), whether the children's large
  blocks may be huge pages (:func:`huge_pages_check`), whether they run ahead of the host's
  other work (:func:`priority_check`), and what fresh memory costs a process here
  (:func:`fresh_memory_check`); on the CPU, how much the host's moments move a speedup
  (:func:`host_moments_check`).

It prints a table (Rich) and exits non-zero on any failure. Budgets are shrunk
(:class:`SelfTestOptions`; ``--quick`` shrinks them further and times one benchmark case per
problem) so that CI runs it on the CPU in minutes. A runner runs it before it takes a job
(:func:`kernelrank.runner.worker.self_test_gate`) and its heartbeat carries the result and date.

Usage: ``python -m kernelrank.runner.host.selftest [--device cpu|cuda] [--quick] [--problem NAME]...
[--no-attacks] [--json]`` (what ``kernelrank runner --self-test`` runs).
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from kernelrank import vocab
from kernelrank.runner.host.hostprobe import (FRESH_MEMORY_SLOW_MS_PER_MIB, HOST_MOMENTS_NOISY, fresh_memory_in_new_process,
                                        host_moments_in_new_process)

#: Verdicts an attack's docstring may expect.
ATTACK_VERDICTS = frozenset({"failed", "rejected", "error", "timeout", "compile_error", "passed"})
_META_KEYS = ("Class", "Expected", "Message", "Timing", "Known gap", "Max speedup")


def attack_meta(path: Path) -> dict[str, str]:
    """``Class``, ``Expected`` (``failed|rejected``...), ``Message``, ``Timing`` (seconds per case),
    ``Known gap`` and ``Max speedup`` lines of an attack's module docstring (the first of each)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    meta: dict[str, str] = {}
    for line in doc.splitlines():
        key, sep, value = line.strip().partition(":")
        if sep and key in _META_KEYS and key not in meta:
            meta[key] = value.strip()
    return meta


def attack_outcome(meta: dict[str, str], status: str, message: str, speedup: float | None) -> tuple[bool, str]:
    """Whether an attack's verdict is one its docstring allows: ``(ok, why)``.

    A ``passed`` verdict is allowed only where ``Expected`` lists it and the speedup is within
    ``Max speedup`` (the attack is then measured at its real cost); any other verdict must be in
    ``Expected`` and, with ``Message``, its message must contain that text (case-insensitive).
    """
    expected = set(meta.get("Expected", "").split("|"))
    if status == vocab.Verdict.passed:
        bound = float(meta.get("Max speedup", "0") or 0)
        if vocab.Verdict.passed in expected and speedup is not None and speedup <= bound:
            return True, f"passed at {speedup:.2f}x, within {bound:g}x"
        return False, f"the attack PASSED ({speedup if speedup is None else round(speedup, 2)}x): {message[:200]}"
    if status not in expected:
        return False, f"verdict {status}, expected {'|'.join(sorted(expected))}: {message[:200]}"
    if meta.get("Message") and meta["Message"].lower() not in message.lower():
        return False, f"message lacks {meta['Message']!r}: {message[:200]}"
    return True, status


def applies(path: Path, device: str) -> bool:
    """Whether a template or example is for ``device``: names with ``cuda`` are CUDA code, names
    with ``cpp`` are C++ for the CPU; the rest (PyTorch, Triton) run on both."""
    stem = path.stem
    if vocab.DeviceClass.cuda in stem:
        return device == vocab.DeviceClass.cuda
    if "cpp" in stem:
        return device == vocab.DeviceClass.cpu
    return True


def expected_verdict(path: Path) -> str:
    """``failed`` for an example named ``wrong_*``, else ``passed``."""
    return "failed" if path.stem.startswith("wrong") else "passed"


@dataclass(frozen=True)
class SelfTestOptions:
    """What to run and with which budgets (seconds).

    Args:
        device: ``cpu`` or ``cuda``.
        problems: problem names (default: every problem).
        modes: modes the templates and examples run in (default: every mode).
        attacks: run the attack corpus.
        quick: one benchmark case per problem and device, and ``timing_s`` halved.
        timing_s: timing budget per benchmark case and timed mode.
        mode_budget_s: budget of a whole evaluation after loading.
        compile_s: budget for loading (C++/CUDA builds).
        scratch_dir: where children's folders go (default: a temporary folder).
    """

    device: str = "cpu"
    problems: tuple[str, ...] = ()
    modes: tuple[str, ...] = vocab.MODES
    attacks: bool = True
    quick: bool = False
    timing_s: float = 0.3
    mode_budget_s: float = 90.0
    compile_s: float = 180.0
    scratch_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.device not in vocab.DEVICE_CLASSES:
            raise ValueError(f"unknown device {self.device!r}")
        unknown = set(self.modes) - set(vocab.MODES)
        if unknown:
            raise ValueError(f"unknown modes {sorted(unknown)}")


@dataclass
class Check:
    """One row of the self-test's table."""

    group: str
    name: str
    mode: str
    expected: str
    got: str
    passed: bool
    seconds: float
    detail: str = ""


@dataclass
class SelfTestReport:
    """Every check, and the summary a heartbeat carries (:meth:`summary`)."""

    device: str
    started: str
    checks: list[Check] = field(default_factory=list)
    overhead: dict[str, Any] | None = None
    host_memory: str = ""
    #: how the judge reads the child's outputs (``isolation.output_reads``: :func:`output_reads_check`)
    output_reads: str = ""
    #: the children's scheduling priority as the self-test's row shows it (:func:`priority_check`)
    priority: str = ""
    #: what fresh memory costs a process, as the self-test's row shows it (:func:`fresh_memory_check`)
    fresh_memory: str = ""
    #: how much the host's moments move a speedup, as the self-test's row shows it (:func:`host_moments_check`)
    host_moments: str = ""
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def summary(self) -> dict[str, Any]:
        """What the runners page and API show: status, date, counts, first failures."""
        bad = [c for c in self.checks if not c.passed]
        return {"status": "passed" if self.passed else "failed", "at": self.started, "device": self.device,
                "checks": len(self.checks), "failed": len(bad),
                "failures": [f"{c.group} {c.name} ({c.mode}): {c.got}"[:300] for c in bad[:10]],
                "seconds": round(self.seconds, 1), "overhead": self.overhead, "host_memory": self.host_memory,
                "output_reads": self.output_reads, "priority": self.priority, "fresh_memory": self.fresh_memory,
                "host_moments": self.host_moments}

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary(), "rows": [asdict(c) for c in self.checks]}


def shrunk_spec(name: str, timing_s: float, mode_budget_s: float, compile_s: float,
                one_case: bool = False) -> Any:
    """The problem's spec with short budgets and per-case timing (and, with ``one_case``, only the
    first benchmark case per device); same revision and reference."""
    from kernelrank.problems import ProblemSpec, load_problem

    problem = load_problem(name)
    d = problem.definition
    timing = {k: v.model_copy(update={"leaderboard": timing_s, "benchmark": timing_s}) for k, v in d.timing.items()}
    budgets = d.budgets.model_copy(update={"compile": compile_s, "test": mode_budget_s, "benchmark": mode_budget_s,
                                           "leaderboard": mode_budget_s, "profile": mode_budget_s})
    update: dict[str, Any] = {"timing": timing, "budgets": budgets}
    if one_case:
        update["benchmarks"] = {k: v[:1] for k, v in d.benchmarks.items()}
    return ProblemSpec(d.model_copy(update=update), problem.reference_source, problem.revision)


Evaluate = Callable[[Any, str, str, str, Any], Any]


class SelfTest:
    """Runs the checks (see the module docstring); ``evaluate`` is the harness's (tests may wrap it)."""

    def __init__(self, options: SelfTestOptions, evaluate: Evaluate | None = None,
                 on_check: Callable[[Check], None] | None = None):
        from kernelrank.runner.judge.harness import evaluate as harness_evaluate

        self.options = options
        self.evaluate = evaluate or harness_evaluate
        self.on_check = on_check or (lambda _c: None)
        self.root = Path(tempfile.mkdtemp(prefix="kr-selftest-", dir=options.scratch_dir))

    def _eval_options(self, secret: int = 0) -> Any:
        from kernelrank.runner.judge.harness import EvalOptions

        return EvalOptions(scratch_dir=self.root / "scratch", secret=secret,
                           hidden_paths=(self.root,))

    def _spec(self, name: str, timing_s: float | None = None) -> Any:
        o = self.options
        timing = timing_s if timing_s is not None else (o.timing_s / 2 if o.quick else o.timing_s)
        return shrunk_spec(name, timing, o.mode_budget_s, o.compile_s, one_case=o.quick)

    def _add(self, report: SelfTestReport, check: Check) -> None:
        report.checks.append(check)
        self.on_check(check)

    def _judge(self, report: SelfTestReport, group: str, name: str, spec: Any, source: str, mode: str,
               expected: str, secret: int = 0) -> Any:
        started = time.monotonic()
        try:
            result = self.evaluate(spec, source, mode, self.options.device, self._eval_options(secret))
        except Exception as e:  # noqa: BLE001 - a judge that raises is a failed check, not a crash
            self._add(report, Check(group, name, mode, expected, "judge raised", False, time.monotonic() - started,
                                    f"{type(e).__name__}: {e}"[:500]))
            return None
        status = str(result.status)
        self._add(report, Check(group, name, mode, expected, status, status == expected, time.monotonic() - started,
                                "" if status == expected else str(result.message)[:500]))
        return result

    def problems(self) -> list[str]:
        from kernelrank.problems import list_problem_names

        return list(self.options.problems) or list_problem_names()

    # -- the checks --------------------------------------------------------------------------------
    def run(self) -> SelfTestReport:
        started = time.monotonic()
        report = SelfTestReport(self.options.device, dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
        try:
            self.toolchain(report)
            for name in self.problems():
                self.problem(report, name)
            if self.options.attacks:
                self.attacks(report)
            self.clock(report)
        finally:
            import shutil

            shutil.rmtree(self.root, ignore_errors=True)
            report.seconds = time.monotonic() - started
        return report

    def toolchain(self, report: SelfTestReport) -> None:
        """Device initialisation, Triton JIT, C++ (and CUDA) builds with and without the PCH."""
        from kernelrank.problems import load_problem

        gemm = load_problem("gemm")
        spec = self._spec("gemm")
        pytorch = (gemm.reference_dir / "templates" / "pytorch.py").read_text(encoding="utf-8")
        self._judge(report, "device", f"initialise {self.options.device} in the sandbox", spec, pytorch, "test", "passed")
        triton = (gemm.reference_dir / "templates" / "triton.py").read_text(encoding="utf-8")
        jit = "Triton JIT" + (" (interpreter)" if self.options.device == vocab.DeviceClass.cpu else "")
        self._judge(report, "toolchain", jit, spec, triton, "test", "passed")
        builds = [("C++ load_inline", "cpp.py")] if self.options.device == vocab.DeviceClass.cpu else [("CUDA load_inline", "cuda.py")]
        for label, filename in builds:
            source = (gemm.reference_dir / "templates" / filename).read_text(encoding="utf-8")
            for pch in (True, False):
                variant = source.replace("use_pch=True", f"use_pch={pch}")
                self._judge(report, "toolchain", f"{label}, {'with' if pch else 'without'} PCH", spec, variant,
                            "test", "passed")

    def problem(self, report: SelfTestReport, name: str) -> None:
        """Every template and example of ``name`` for this device, in every mode."""
        from kernelrank.problems import load_problem

        problem = load_problem(name)
        spec = self._spec(name)
        files = [*sorted((problem.reference_dir / "templates").glob("*.py")),
                 *sorted((problem.reference_dir / "examples").glob("*.py"))]
        for path in files:
            if not applies(path, self.options.device):
                continue
            source = path.read_text(encoding="utf-8")
            label = f"{name}/{path.parent.name}/{path.name}"
            for mode in self.options.modes:
                self._judge(report, "problem", label, spec, source, mode, expected_verdict(path))

    def attacks(self, report: SelfTestReport) -> None:
        """The attack corpus in leaderboard mode, each verdict within its docstring's."""
        from kernelrank.settings import get_settings

        root = get_settings().reference_kernels_dir
        for path in sorted(root.glob("*/attacks/*.py")):
            problem = path.parent.parent.name
            if self.options.problems and problem not in self.options.problems:
                continue
            meta = attack_meta(path)
            timing = float(meta["Timing"]) if meta.get("Timing") else None
            spec = self._spec(problem, timing)
            started = time.monotonic()
            label = f"{problem}/attacks/{path.name}"
            try:
                result = self.evaluate(spec, path.read_text(encoding="utf-8"), "leaderboard", self.options.device,
                                       self._eval_options(secret=int.from_bytes(path.name.encode()[:7], "little")))
                ok, why = attack_outcome(meta, str(result.status), str(result.message), result.speedup)
            except Exception as e:  # noqa: BLE001
                ok, why = False, f"the judge raised: {type(e).__name__}: {e}"[:500]
            gap = meta.get("Known gap")
            if not ok and gap:
                ok, why = True, f"known gap ({gap[:150]}): {why}"
            self._add(report, Check("attack", label, "leaderboard", meta.get("Expected", "?"), why.split(":")[0],
                                    ok, time.monotonic() - started, "" if why.split(":")[0] == why else why))

    def clock(self, report: SelfTestReport) -> None:
        """The runner's per-request overhead, and what bounds the child's host memory."""
        started = time.monotonic()
        try:
            overhead, measured = measure_overhead(self.options.device, self.root / "scratch")
            memory = str(measured["host_memory"])
            report.overhead, report.host_memory = overhead.to_dict(), memory
            self._add(report, Check("judge's clock", "per-request overhead", "-", "measured",
                                    f"{overhead.median_ns / 1e3:.0f} ± {overhead.spread_ns / 1e3:.0f} µs", True,
                                    time.monotonic() - started))
        except Exception as e:  # noqa: BLE001
            self._add(report, Check("judge's clock", "per-request overhead", "-", "measured", "failed", False,
                                    time.monotonic() - started, f"{type(e).__name__}: {e}"[:500]))
            return
        self._add(report, Check("containment", "host memory", "-", "bounded", memory,
                                memory.startswith("cgroup") or self.options.device == vocab.DeviceClass.cpu, 0.0,
                                "" if memory.startswith("cgroup") else
                                "no cgroup memory controller: on CUDA (no address-space limit) a memory bomb meets "
                                "the host's OOM killer"))
        report.output_reads = str(measured.get("output_reads") or "")
        self._add(report, output_reads_check(self.options.device, report.output_reads or None))
        self._add(report, output_check_row(self.options.device))
        self._add(report, huge_pages_check(str(measured.get("huge_pages") or "unknown")))
        row = priority_check(measured.get("priority"))
        report.priority = row.got
        self._add(report, row)
        from kernelrank.runner.containment.procfs import host_free_page_reporting

        row = fresh_memory_check(fresh_memory_in_new_process(), host_free_page_reporting())
        report.fresh_memory = row.got
        self._add(report, row)
        if self.options.device == vocab.DeviceClass.cpu:
            started = time.monotonic()
            try:
                moments = host_moments_in_new_process()
            except Exception as e:  # noqa: BLE001 - a figure for the operator: the row passes either way
                self._add(report, Check("judge's clock", "host moments", "-", "measured", "not measured", True,
                                        time.monotonic() - started, f"{type(e).__name__}: {e}"[:500]))
            else:
                row = host_moments_check(*moments)
                row.seconds = time.monotonic() - started
                report.host_moments = row.got
                self._add(report, row)


def priority_check(found: dict[str, Any] | None) -> Check:
    """The row for the children's scheduling priority (``isolation.priority`` of the probe's child,
    read from ``/proc`` by the judge: :func:`~kernelrank.runner.containment.procfs.priority`). The nice value
    :data:`~kernelrank.runner.containment.isolation.CHILD_NICE` on the child's thread, and on its autogroup where
    the kernel has autogroups on, is expected. Anything else passes with a note: every verdict
    holds and both sides of a pair are treated alike, but a timed call then shares its CPUs with
    the host's other work as an equal, so scores taken on a busy machine spread more
    (docs/research/bench-history.md, section 16). The usual cause is a judge not running as root (no
    ``CAP_SYS_NICE``)."""
    from kernelrank.runner.containment.isolation import CHILD_NICE

    found = found or {}
    nice, group = found.get("nice"), found.get("autogroup")
    ok = nice == CHILD_NICE and group in (None, CHILD_NICE)
    shown = f"nice {nice}" + (f", autogroup {group}" if group is not None else "")
    return Check("containment", "priority", "-", f"nice {CHILD_NICE}",
                 shown if ok else f"{shown} (not raised: timed calls share their CPUs with other work)", True, 0.0,
                 "" if ok else f"the children could not be given nice {CHILD_NICE} (CAP_SYS_NICE: run the runner "
                               "as root): on a busy machine, timed calls share their CPUs with the host's other "
                               "work as equals, so scores spread more; verdicts are the same")


def host_moments_check(sd: float, steal: float) -> Check:
    """The row for how much the host's moments move a speedup (:func:`measure_host_moments`). It
    passes either way: every verdict holds, and each score's interval carries what its run saw.
    Above :data:`HOST_MOMENTS_NOISY` the row says what that costs: kernels that use the hardware
    differently from their reference (a bfloat16 matmul against a float32 one) see their speedup
    move with the host's other work, by more than pairing cancels and over minutes as well as
    seconds, so one file's scores spread more between runs and more entries tie; a runner whose
    cores are its own (no other tenant on their hyperthreads) avoids it."""
    ok = sd <= HOST_MOMENTS_NOISY
    shown = f"speedup ±{sd * 100:.1f}% a moment, steal {steal * 100:.1f}%"
    return Check("judge's clock", "host moments", "-", f"< ±{HOST_MOMENTS_NOISY * 100:.0f}% a moment",
                 shown if ok else f"{shown} (the host's other work moves speedups)", True, 0.0,
                 "" if ok else "the host's moments move the speedup of kernels that use the hardware differently "
                               "(its other tenants share these cores' hyperthreads, vector and matrix units, clock or "
                               "memory): such kernels' scores spread more between runs and tie more often; give the "
                               "runner cores of its own for steadier figures; verdicts are the same")


def fresh_memory_check(ms_per_mib: float, reporting: bool | None) -> Check:
    """The row for what fresh memory costs a process here (:func:`measure_fresh_memory`) and
    whether the machine hands its free memory back to a hypervisor
    (:func:`~kernelrank.runner.containment.procfs.host_free_page_reporting`). It passes either way: every
    verdict and every paired speedup holds. Above :data:`FRESH_MEMORY_SLOW_MS_PER_MIB`, or with
    free page reporting on, the row says what that costs: each run's readying of its processes
    (their slots and heaps faulted in before the first timed request) takes seconds (3.4 s of a
    softmax leaderboard run), and memory-bound code may run up to 1.6x slower for minutes at a
    time, which moves such kernels' speedups (docs/research/bench-history.md, section 17)."""
    ok = ms_per_mib <= FRESH_MEMORY_SLOW_MS_PER_MIB and not reporting
    shown = f"{ms_per_mib:.2f} ms per MiB" + (", free page reporting on" if reporting else "")
    return Check("containment", "fresh memory", "-", f"< {FRESH_MEMORY_SLOW_MS_PER_MIB} ms per MiB",
                 shown if ok else f"{shown} (a VM whose host backs memory on first touch)", True, 0.0,
                 "" if ok else "fresh memory is backed by the host on first touch (a virtual machine with a memory "
                               "balloon's free page reporting, or memory not preallocated): each run spends seconds "
                               "readying its processes, and such hosts may run memory-bound code at other speeds for "
                               "minutes at a time; give the VM preallocated memory without free page reporting for "
                               "steadier figures; verdicts are the same")


def huge_pages_check(setting: str) -> Check:
    """The row for the host's transparent huge pages (``isolation.huge_pages``,
    :func:`~kernelrank.runner.containment.procfs.host_huge_pages`). ``madvise`` or ``always`` is expected:
    the children's large blocks are then huge pages
    (:func:`~kernelrank.runner.containment.sandbox.child_environment`), and processes run a case at one
    speed. Any other setting passes with a note: every verdict holds, but processes may run the
    bfloat16 cases at one of two speeds, so intervals are wider and scores spread more (1.07
    against 1.04 at idle, docs/research/bench-history.md, section 15)."""
    ok = setting in ("madvise", "always")
    return Check("containment", "huge pages", "-", "madvise or always",
                 setting if ok else f"{setting} (processes may differ in speed: wider intervals)", True, 0.0,
                 "" if ok else "transparent huge pages are off: set /sys/kernel/mm/transparent_hugepage/enabled "
                               "to madvise for steadier timings")


def output_check_row(device: str) -> Check:
    """The row for how this judge decides the quick rule on CPU outputs
    (:func:`kernelrank.runner.judge.native_check.method`): ``native`` is expected (one pass, built with
    the host's C compiler); ``torch`` passes with a note (no compiler built it: the torch passes
    decide, the same verdicts, 3-6x slower, so fewer pairs fit a case's budget). On CUDA outputs
    are checked on the device by torch in any case."""
    from kernelrank.runner.judge import native_check

    if device != vocab.DeviceClass.cpu:
        return Check("judge's clock", "output check", "-", "torch on the device", "torch on the device", True, 0.0)
    got = native_check.method()
    return Check("judge's clock", "output check", "-", "native", got if got == "native" else f"{got} (slower)", True,
                 0.0, "" if got == "native" else
                 f"no C compiler built the native quick rule ({native_check.compiler() or 'none found'}): outputs "
                 "are checked by torch's passes, 3-6x slower, so fewer pairs fit a case's budget; verdicts are the same")


def output_reads_check(device: str, method: str | None) -> Check:
    """The row for how the judge reads a child's outputs (``isolation.output_reads`` of the probe's
    child, :class:`~kernelrank.runner.judge.slots.ChildMemory`). ``process_vm_readv`` is expected: each
    output is read where the child left it. Two fallbacks pass with a note, since every verdict
    holds on them but the checking is slower: ``/proc/<pid>/mem`` (the host refused the call: a
    seccomp profile, ``kernel.yama.ptrace_scope``; 16 MiB read in 4.3 ms instead of 1.7 ms,
    docs/research/bench-history.md, section 14) and ``slots`` (the child's memory unreadable either
    way: the child copies each output into its shared slots after its call; on CUDA outputs are
    device memory shared with the child in any case). Anything else fails."""
    got = method or "unknown"
    # per way that passes: what the row shows after its name, and its detail
    passing = {"process_vm_readv": ("", ""),
              "/proc/<pid>/mem": (" (process_vm_readv refused: about 2.5x slower)",
                                  "process_vm_readv was refused here (a seccomp profile, or ptrace_scope): outputs are "
                                  "read through /proc/<pid>/mem, about 2.5x slower; verdicts are the same"),
              "slots": ("", "") if device != vocab.DeviceClass.cpu else
                       (" (the child's memory unreadable: each output copied by the child, slower)",
                        "the child's memory could not be read: each output is copied into the shared slots by the "
                        "child after its call, a copy per output; verdicts are the same")}
    shown, detail = passing.get(got, ("", f"unknown way of reading outputs: {got}"))
    return Check("containment", "output reads", "-", "process_vm_readv", got + shown, got in passing, 0.0, detail)


#: Requests of a do-nothing call measured for the runner's overhead.
OVERHEAD_REQUESTS = 60
_NOOP = "def custom_kernel(data):\n    return data[0].clone()\n"


def measure_overhead(device: str, scratch: Path, requests: int = OVERHEAD_REQUESTS) -> tuple[Any, dict[str, Any]]:
    """The runner's per-request overhead (:func:`~kernelrank.runner.judge.judging.runner_overhead`) from
    ``go`` requests of a call that only copies a 4-element input, through the same sandbox,
    freezer and socket as a job; and the probe child's isolation record
    (:meth:`~kernelrank.runner.containment.sandbox.SubmissionProcess.start`), its ``host_memory`` what bounds
    the child's host memory (``"cgroup <n> bytes"``, ``"address space <n> bytes"`` or
    ``"unbounded"``), its ``output_reads`` how the judge reads the child's outputs and its
    ``priority`` the child's nice values.

    Raises:
        RuntimeError: the child did not answer as expected.
    """
    import torch

    from kernelrank.runner.containment import isolation_check
    from kernelrank.runner.containment.rlimits import SandboxLimits
    from kernelrank.runner.judge.judging import runner_overhead
    from kernelrank.runner.containment.procfs import host_memory_bound
    from kernelrank.runner.containment.sandbox import SubmissionProcess

    method, _ = isolation_check.choose("auto")
    child = SubmissionProcess(_NOOP, device, 1 if device == vocab.DeviceClass.cpu else 0, scratch_dir=scratch, method=method,
                              limits=SandboxLimits().resolved(device, 120.0))
    try:
        deadline = time.monotonic() + 120
        measured = child.start(deadline)
        reply = child.request({"op": "load"}, deadline)
        if not reply.get("ok"):
            raise RuntimeError(f"loading the probe failed: {reply.get('message')}")
        data = (torch.ones(4, device=device),)
        samples = []
        for _ in range(requests):
            layout = child.arena.place(data, 64)
            reply = child.request({"op": "go", "inputs": layout, "repeat": 1, "direct": child.memory is not None},
                                  deadline)
            if not reply.get("ok"):
                raise RuntimeError(f"the probe's call failed: {reply.get('message')}")
            samples.append(child.span_ns - sum(reply["times_ns"]))
        measured = dict(measured, host_memory=measured.get("host_memory") or host_memory_bound(measured))
        return runner_overhead(samples[len(samples) // 6:]), measured
    finally:
        child.close()


# -- presentation ------------------------------------------------------------------------------------
def render(report: SelfTestReport, console: Any = None) -> None:
    """The table (Rich) and a closing line."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    table = Table(title=f"kernelrank self-test on {report.device} ({report.started})")
    for col in ("", "Group", "Check", "Mode", "Expected", "Got", "s"):
        table.add_column(col, overflow="fold")
    for c in report.checks:
        table.add_row("[green]ok[/green]" if c.passed else "[red]FAIL[/red]", c.group, c.name, c.mode, c.expected,
                      c.got + (f"\n{c.detail[:300]}" if c.detail and not c.passed else ""), f"{c.seconds:.1f}",
                      )
    console.print(table)
    s = report.summary()
    console.print(f"self-test {s['status']}: {s['checks'] - s['failed']} of {s['checks']} checks passed in "
                  f"{s['seconds']:.0f} s; host memory: {report.host_memory or '?'}", markup=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelrank.runner.host.selftest", description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", choices=vocab.DEVICE_CLASSES)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--problem", action="append", default=[])
    parser.add_argument("--mode", action="append", default=[], choices=vocab.MODES)
    parser.add_argument("--no-attacks", action="store_true")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON line last")
    args = parser.parse_args(argv)
    options = SelfTestOptions(device=args.device, problems=tuple(args.problem), modes=tuple(args.mode) or vocab.MODES,
                              attacks=not args.no_attacks, quick=args.quick)
    from rich.console import Console

    console = Console(stderr=args.json)
    report = SelfTest(options, on_check=lambda c: console.print(
        f"{'ok  ' if c.passed else 'FAIL'} {c.group}: {c.name} ({c.mode}) -> {c.got} [{c.seconds:.1f} s]",
        markup=False, highlight=False)).run()
    render(report, console)
    if args.json:
        print(json.dumps(report.summary()))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
