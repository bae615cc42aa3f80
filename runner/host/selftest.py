"""``kernelrank runner --self-test``: prove a runner judges correctly before it takes a job.

Everything runs through the harness (:func:`kernelrank.runner.judge.harness.evaluate`), so inside the
sandbox a job's child gets (namespaces, read-only view, cgroup, limits), on the runner's device.
Three scopes (:data:`SCOPES`), each a plan of steps (:meth:`SelfTest.plan`) whose progress a
starting runner's heartbeat shows (``starting: self-test 12/30``):

- **quick** (what a runner runs before its first job, about 2 minutes on a 2-core CPU host:
  ``bench/selftest_times.py``): what can break per host. The device initialises in the sandbox
  (the GEMM PyTorch template in test mode); one Triton kernel JIT-compiles (under Triton's
  interpreter on the CPU); one ``load_inline`` build with the precompiled header (C++ on the
  CPU, CUDA on a GPU); per problem one correct and one wrong example in test mode
  (:func:`quick_files`); the reference against itself in one short paired leaderboard case reads
  1.00 within its interval (:meth:`SelfTest.reference_pair`); the attacks in
  :data:`QUICK_ATTACKS`, one per wall of the sandbox; and the host rows below.
- **full** (``--self-test --full``; it says how long it will take before it starts): every
  template and example of every problem in every mode, each with its expected verdict
  (``correct_*`` and templates pass, ``wrong_*`` fail; files named ``cpp`` run on the CPU only
  and ``cuda`` on CUDA only), both ``load_inline`` builds with and without the precompiled header,
  the whole attack corpus ``reference_kernels/*/attacks/*.py`` in leaderboard mode, each verdict
  within what its docstring expects (:func:`attack_meta`; ``Known gap:`` entries are reported,
  not failed), and the host rows.
- **probes**: the device's initialisation and the host rows alone; what a restarted runner runs
  when this host, device and runner version passed the quick or full self-test before
  (:mod:`~kernelrank.runner.host.selftest_cache`).

The host rows (:mod:`~kernelrank.runner.host.selftest_rows`): the runner's per-request overhead,
the sandbox in force (namespaces, cgroup, freezer), what bounds a child's memory, how outputs are
read and checked, huge pages, the children's priority, what fresh memory costs and, on the CPU,
how much the host's moments move a speedup. On CUDA every scope starts with the GPU's rows
(:mod:`~kernelrank.runner.host.selftest_gpu`) and the reference against itself runs per problem.

It prints a table (Rich) and exits non-zero on any failure. Budgets are shrunk
(:class:`SelfTestOptions`). A runner runs it before it takes a job
(:func:`kernelrank.runner.worker.self_test_gate`) and its heartbeat carries the result and date.

Usage: ``python -m kernelrank.runner.host.selftest [--device cpu|cuda] [--scope probes|quick|full]
[--cached] [--problem NAME]... [--mode MODE]... [--no-attacks] [--json]`` (what ``kernelrank
runner --self-test [--full]`` runs). With ``--json`` it prints one JSON line per step
(``{"progress": [done, total, label]}``) and the summary as the last line.
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

from kernelrank import format as fmt, vocab
from kernelrank.runner.host import selftest_cache, selftest_gpu
from kernelrank.runner.host.selftest_rows import Check, clock_rows

#: The self-test's scopes, smallest first (see the module docstring).
SCOPES = ("probes", "quick", "full")

#: The attacks the quick self-test runs, each against one wall of the sandbox (``problem/attacks/file``).
QUICK_ATTACKS = (
    "softmax/attacks/read_other_submissions.py",  # the hidden, read-only filesystem
    "gemm/attacks/network_exfiltration.py",  # the network namespace
    "softmax/attacks/fork_bomb.py",  # the process limit
    "gemm/attacks/memory_bomb.py",  # the memory bound
    "mla_decode/attacks/escape_process_group.py",  # every process it starts ends with the job
    "softmax/attacks/work_after_the_window.py",  # frozen outside the timed window
)

#: The problem whose first benchmark case times the reference against itself in the quick self-test.
PAIR_PROBLEM = "softmax"

#: Seconds a step of each kind takes where this host has no record of it
#: (:func:`~kernelrank.runner.host.selftest_cache.recorded_seconds`), for the estimate printed
#: before a self-test starts: medians of the quick and full self-tests on a 2-core CPU host
#: (``bench/selftest_times.py``, figures in ``bench/README.md``).
STEP_SECONDS = {"test": 2.5, "benchmark": 10.5, "leaderboard": 10.5, "profile": 4.0, "build": 24.0,
                "build-timed": 105.0, "attack": 3.0, "clock": 12.0, "gpu": 3.0}


def step_kind(path: Path, mode: str) -> str:
    """The :data:`STEP_SECONDS` kind of a template or example run in ``mode``: a C++ file is a
    ``build`` (its ``load_inline`` build dominates), ``build-timed`` in a timed mode (built again
    in each timed process), anything else its mode."""
    if "cpp" in path.stem:
        return "build-timed" if mode in (vocab.Mode.benchmark, vocab.Mode.leaderboard) else "build"
    return mode

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
            return True, f"passed at {fmt.speedup(speedup)}, within {fmt.speedup(bound)}"
        return False, f"the attack PASSED ({fmt.speedup(speedup)}): {message[:200]}"
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


def quick_files(problem_dir: Path, device: str) -> list[Path]:
    """The quick self-test's examples of one problem: ``correct_pytorch.py`` and the first
    ``wrong_*.py`` (by name) that runs on ``device``; those that exist."""
    examples = problem_dir / "examples"
    wrong = [p for p in sorted(examples.glob("wrong_*.py")) if applies(p, device)]
    return [p for p in (examples / "correct_pytorch.py", *wrong[:1]) if p.is_file()]


def pair_reads_one(result: Any) -> tuple[bool, str]:
    """Whether a run of the reference against itself passed with 1 inside its speedup's 95%
    interval (``result.speedup_ci``): ``(ok, what it read)``. The CPU's rule; on CUDA it is 1.00 ±
    3% (:func:`~kernelrank.runner.host.selftest_gpu.identical_kernel_reads_one`)."""

    ci = result.speedup_ci
    if str(result.status) != vocab.Verdict.passed or result.speedup is None or not ci:
        return False, f"{result.status}: {str(result.message)[:200]}"
    got = f"{fmt.speedup(result.speedup)} ({fmt.interval(ci, kind='speedup')})"
    return float(ci[0]) <= 1.0 <= float(ci[1]), got


@dataclass(frozen=True)
class SelfTestOptions:
    """What to run and with which budgets (seconds).

    Args:
        device: ``cpu`` or ``cuda``.
        scope: one of :data:`SCOPES`.
        problems: problem names (default: every problem).
        modes: modes the templates and examples run in, in the full scope (default: every mode).
        attacks: run attacks (the quick scope's :data:`QUICK_ATTACKS`, the full scope's corpus).
        timing_s: timing budget per benchmark case and timed mode (halved outside the full scope,
            which also times only the first benchmark case per device).
        mode_budget_s: budget of a whole evaluation after loading (the problem's own where lower),
            room for a C++ example built again in each timed process (bench/README.md).
        compile_s: budget for loading (C++/CUDA builds).
        scratch_dir: where children's folders go (default: a temporary folder).

    Raises:
        ValueError: an unknown device, scope or mode.
    """

    device: str = "cpu"
    scope: str = "quick"
    problems: tuple[str, ...] = ()
    modes: tuple[str, ...] = vocab.MODES
    attacks: bool = True
    timing_s: float = 0.3
    mode_budget_s: float = 300.0
    compile_s: float = 180.0
    scratch_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.device not in vocab.DEVICE_CLASSES:
            raise ValueError(f"unknown device {self.device!r}")
        if self.scope not in SCOPES:
            raise ValueError(f"unknown scope {self.scope!r}: one of {', '.join(SCOPES)}")
        unknown = set(self.modes) - set(vocab.MODES)
        if unknown:
            raise ValueError(f"unknown modes {sorted(unknown)}")


@dataclass
class SelfTestReport:
    """Every check, and the summary a heartbeat carries (:meth:`summary`). ``cached`` is the
    earlier passing summary a probes-only run stood on (its scope, date and seconds)."""

    device: str
    started: str
    checks: list[Check] = field(default_factory=list)
    scope: str = "quick"
    overhead: dict[str, Any] | None = None
    host_memory: str = ""
    #: how the judge reads the child's outputs (``isolation.output_reads``: ``selftest_rows.output_reads_check``)
    output_reads: str = ""
    #: the children's scheduling priority as the self-test's row shows it (``selftest_rows.priority_check``)
    priority: str = ""
    #: what fresh memory costs a process, as the self-test's row shows it (``selftest_rows.fresh_memory_check``)
    fresh_memory: str = ""
    #: how much the host's moments move a speedup, as the self-test's row shows it (``selftest_rows.host_moments_check``)
    host_moments: str = ""
    seconds: float = 0.0
    cached: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def summary(self) -> dict[str, Any]:
        """What the runners page and API show: status, scope, date, counts, first failures."""
        bad = [c for c in self.checks if not c.passed]
        return {"status": "passed" if self.passed else "failed", "scope": self.scope, "at": self.started,
                "device": self.device, "checks": len(self.checks), "failed": len(bad),
                "failures": [f"{c.group} {c.name} ({c.mode}): {c.got}"[:300] for c in bad[:10]],
                "seconds": round(self.seconds, 1), "overhead": self.overhead, "host_memory": self.host_memory,
                "output_reads": self.output_reads, "priority": self.priority, "fresh_memory": self.fresh_memory,
                "host_moments": self.host_moments, **({"cached": self.cached} if self.cached else {})}

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary(), "rows": [asdict(c) for c in self.checks]}


def shrunk_spec(name: str, timing_s: float, mode_budget_s: float, compile_s: float,
                one_case: bool = False) -> Any:
    """The problem's spec with per-case timing ``timing_s``, its budgets capped at ``mode_budget_s``
    and ``compile_s`` (and, with ``one_case``, only the first benchmark case per device); same
    revision and reference."""
    from kernelrank.problems import ProblemSpec, load_problem

    problem = load_problem(name)
    d = problem.definition
    timing = {k: v.model_copy(update={"leaderboard": timing_s, "benchmark": timing_s}) for k, v in d.timing.items()}
    budgets = d.budgets.model_copy(update={"compile": min(compile_s, d.budgets.compile),
                                           **{m: min(mode_budget_s, getattr(d.budgets, m)) for m in vocab.MODES}})
    update: dict[str, Any] = {"timing": timing, "budgets": budgets}
    if one_case:
        update["benchmarks"] = {k: v[:1] for k, v in d.benchmarks.items()}
    return ProblemSpec(d.model_copy(update=update), problem.reference_source, problem.revision)


Evaluate = Callable[[Any, str, str, str, Any], Any]


@dataclass(frozen=True)
class Step:
    """One planned step: ``label`` names it in progress and timings, ``kind`` (a key of
    :data:`STEP_SECONDS`) prices it where this host has no record, ``run`` adds its rows."""

    label: str
    kind: str
    run: Callable[["SelfTestReport"], Any]


class SelfTest:
    """Plans and runs the checks (see the module docstring); ``evaluate`` is the harness's (tests
    may wrap it); ``on_check`` sees each row as it is added."""

    def __init__(self, options: SelfTestOptions, evaluate: Evaluate | None = None,
                 on_check: Callable[[Check], None] | None = None):
        from kernelrank.runner.judge.harness import evaluate as harness_evaluate

        self.options = options
        self.evaluate = evaluate or harness_evaluate
        self.on_check = on_check or (lambda _c: None)
        self.root = Path(tempfile.mkdtemp(prefix="kr-selftest-", dir=options.scratch_dir))
        self._specs: dict[tuple[str, float | None], Any] = {}

    def _eval_options(self, secret: int = 0) -> Any:
        from kernelrank.runner.judge.harness import EvalOptions

        return EvalOptions(scratch_dir=self.root / "scratch", secret=secret,
                           hidden_paths=(self.root,))

    def _spec(self, name: str, timing_s: float | None = None) -> Any:
        if (name, timing_s) not in self._specs:
            o = self.options
            full = o.scope == "full"
            timing = timing_s if timing_s is not None else (o.timing_s if full else o.timing_s / 2)
            self._specs[(name, timing_s)] = shrunk_spec(name, timing, o.mode_budget_s, o.compile_s, one_case=not full)
        return self._specs[(name, timing_s)]

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

    # -- the plan -----------------------------------------------------------------------------------
    def plan(self) -> list[Step]:
        """The steps of this scope, in order (see the module docstring)."""
        scope, cuda = self.options.scope, self.options.device == vocab.DeviceClass.cuda
        # on CUDA the GPU's rows come first, before this process opens a context on it
        steps = ([Step("the GPU's health and timer", "gpu", self.gpu)] if cuda else []) + [self._device_step()]
        if scope != "probes":
            steps += self._build_steps(with_and_without_pch=scope == "full")
            for name in self.problems():
                steps += self._problem_steps(name, full=scope == "full")
            wanted = scope == "quick" and (not self.options.problems or PAIR_PROBLEM in self.options.problems)
            pairs = self.problems() if cuda else [PAIR_PROBLEM] if wanted else []
            steps += [Step(f"{name}: the reference against itself (leaderboard)", "leaderboard",
                           lambda report, name=name: self.reference_pair(report, name)) for name in pairs]
            if self.options.attacks:
                steps += self._attack_steps(everything=scope == "full")
        steps.append(Step("the judge's clock and the sandbox", "clock", self.clock))
        return steps

    def _gemm_template(self, filename: str) -> str:
        from kernelrank.problems import load_problem

        return (load_problem("gemm").reference_dir / "templates" / filename).read_text(encoding="utf-8")

    def _device_step(self) -> Step:
        label = f"initialise {self.options.device} in the sandbox"
        return Step(label, "test", lambda report: self._judge(
            report, "device", label, self._spec("gemm"), self._gemm_template("pytorch.py"), "test", "passed"))

    def _build_steps(self, with_and_without_pch: bool) -> list[Step]:
        """Triton's JIT (its interpreter on the CPU) and a ``load_inline`` build (C++ on the CPU,
        CUDA on a GPU) with the precompiled header, and without it in the full scope."""
        cpu = self.options.device == vocab.DeviceClass.cpu
        jit = "Triton JIT" + (" (interpreter)" if cpu else "")
        steps = [Step(jit, "test", lambda report: self._judge(
            report, "toolchain", jit, self._spec("gemm"), self._gemm_template("triton.py"), "test", "passed"))]
        label, filename = ("C++ load_inline", "cpp.py") if cpu else ("CUDA load_inline", "cuda.py")
        for pch in (True, False) if with_and_without_pch else (True,):
            name = f"{label}, {'with' if pch else 'without'} PCH"

            def build(report: SelfTestReport, name: str = name, pch: bool = pch) -> None:
                source = self._gemm_template(filename).replace("use_pch=True", f"use_pch={pch}")
                self._judge(report, "toolchain", name, self._spec("gemm"), source, "test", "passed")

            steps.append(Step(name, "build", build))
        return steps

    def _problem_steps(self, name: str, full: bool) -> list[Step]:
        """Full: every template and example of ``name`` for this device in every mode. Quick: its
        :func:`quick_files` in test mode."""
        from kernelrank.problems import load_problem

        directory = load_problem(name).reference_dir
        if full:
            files = [p for p in (*sorted((directory / "templates").glob("*.py")),
                                 *sorted((directory / "examples").glob("*.py"))) if applies(p, self.options.device)]
            modes: tuple[str, ...] = self.options.modes
        else:
            files, modes = quick_files(directory, self.options.device), (vocab.Mode.test.value,)
        steps = []
        for path in files:
            label = f"{name}/{path.parent.name}/{path.name}"
            for mode in modes:
                def judge(report: SelfTestReport, path: Path = path, label: str = label, mode: str = mode) -> None:
                    self._judge(report, "problem", label, self._spec(name), path.read_text(encoding="utf-8"), mode,
                                expected_verdict(path))

                steps.append(Step(f"{label} ({mode})", step_kind(path, mode), judge))
        return steps

    def _attack_steps(self, everything: bool) -> list[Step]:
        from kernelrank.settings import get_settings

        root = get_settings().reference_kernels_dir
        paths = sorted(root.glob("*/attacks/*.py")) if everything else [root / a for a in QUICK_ATTACKS]
        wanted = self.options.problems
        return [Step(f"{p.parent.parent.name}/attacks/{p.name}", "attack",
                     lambda report, p=p: self.attack(report, p))
                for p in paths if p.is_file() and (not wanted or p.parent.parent.name in wanted)]

    # -- the steps -----------------------------------------------------------------------------------
    def run(self, on_step: Callable[[int, int, str], None] | None = None) -> SelfTestReport:
        """Run the plan; ``on_step(done, total, label)`` is called before each step (with the
        step's label) and once at the end (``done == total``)."""
        started = time.monotonic()
        report = SelfTestReport(self.options.device, dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                                scope=self.options.scope)
        steps = self.plan()
        seconds: dict[str, float] = {}
        try:
            for done, step in enumerate(steps):
                if on_step:
                    on_step(done, len(steps), step.label)
                step_started = time.monotonic()
                step.run(report)
                seconds[step.label] = time.monotonic() - step_started
            if on_step:
                on_step(len(steps), len(steps), "done")
        finally:
            import shutil

            shutil.rmtree(self.root, ignore_errors=True)
            report.seconds = time.monotonic() - started
            self.step_seconds = seconds
        return report

    def estimate(self, recorded: dict[str, float] | None = None) -> tuple[int, float, int]:
        """``(steps, seconds, recorded)``: how many steps the plan has, about how long they take
        (each step's recorded seconds on this host where known, else :data:`STEP_SECONDS` of
        its kind) and how many of them were recorded."""
        recorded = recorded or {}
        steps = self.plan()
        known = [s for s in steps if s.label in recorded]
        total = sum(recorded[s.label] if s.label in recorded else STEP_SECONDS[s.kind] for s in steps)
        return len(steps), total, len(known)

    def reference_pair(self, report: SelfTestReport, problem: str = PAIR_PROBLEM) -> None:
        """The reference submitted as the kernel (:func:`~kernelrank.runner.judge.answers.reference_submission`)
        in one short leaderboard case of ``problem``: it must pass with 1 inside its speedup's 95%
        interval (on CUDA, for every problem: 1.00 ± 3%, :mod:`~kernelrank.runner.host.selftest_gpu`). A second run
        decides a first that missed (a 95% interval misses one run in 20), so a sound judge fails
        this row about one start in 400."""
        from kernelrank.runner.judge.answers import reference_submission

        cuda = self.options.device == vocab.DeviceClass.cuda
        spec, started = self._spec(problem), time.monotonic()
        ok, got = False, "not run"
        for _ in range(2):
            try:
                result = self.evaluate(spec, reference_submission(spec), vocab.Mode.leaderboard.value,
                                       self.options.device, self._eval_options())
            except Exception as e:  # noqa: BLE001 - a judge that raises is a failed check
                ok, got = False, f"judge raised: {type(e).__name__}: {e}"[:300]
                break
            ok, got = selftest_gpu.identical_kernel_reads_one(result) if cuda else pair_reads_one(result)
            if ok:
                break
        detail = "" if ok else selftest_gpu.identical_kernel_detail(problem) if cuda else (
            "two runs of the reference against itself did not read 1 within their 95% intervals: the pairing or "
            "the interval is broken here")
        name, expected = ((f"{problem}: the reference against itself",
                           f"1.00× ± {selftest_gpu.IDENTICAL_TOLERANCE:.0%}") if cuda else
                          ("the reference against itself", "1.00× within its interval"))
        self._add(report, Check("judge's clock", name, "leaderboard", expected, got, ok, time.monotonic() - started,
                                detail))

    def gpu(self, report: SelfTestReport) -> None:  # pragma: no cover - GPU-only: NVML and torch.cuda
        """The GPU's rows (:func:`~kernelrank.runner.host.selftest_gpu.run_gpu_rows`)."""
        for row in selftest_gpu.run_gpu_rows():
            self._add(report, row)

    def attack(self, report: SelfTestReport, path: Path) -> None:
        """One attack in leaderboard mode, its verdict within its docstring's."""
        problem = path.parent.parent.name
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
        """The host rows (:func:`~kernelrank.runner.host.selftest_rows.clock_rows`) and the facts
        the summary carries."""
        rows, facts = clock_rows(self.options.device, self.root / "scratch")
        for row in rows:
            self._add(report, row)
        for name, value in facts.items():
            setattr(report, name, value)


# -- presentation ------------------------------------------------------------------------------------
def render(report: SelfTestReport, console: Any = None) -> None:
    """The table (Rich) and a closing line."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    table = Table(title=f"kernelrank {report.scope} self-test on {report.device} ({report.started})")
    for col in ("", "Group", "Check", "Mode", "Expected", "Got", "s"):
        table.add_column(col, overflow="fold")
    for c in report.checks:
        table.add_row("[green]ok[/green]" if c.passed else "[red]FAIL[/red]", c.group, c.name, c.mode, c.expected,
                      c.got + (f"\n{c.detail[:300]}" if c.detail and not c.passed else ""), f"{c.seconds:.1f}",
                      )
    console.print(table)
    s = report.summary()
    console.print(f"self-test {s['status']} ({report.scope}): {s['checks'] - s['failed']} of {s['checks']} checks "
                  f"passed in {s['seconds']:.0f} s; host memory: {report.host_memory or '?'}"
                  + (f"; stands on the {report.cached.get('scope')} self-test passed here at {report.cached.get('at')}"
                     if report.cached else ""), markup=False)


def main(argv: list[str] | None = None) -> int:
    """Run a self-test and print its table (stderr with ``--json``, whose stdout carries one
    progress line per step and the summary last); 0 when it passed. Before it starts it says how
    many steps it has and about how long they take. With ``--cached`` (a runner's start-up), a
    quick self-test becomes the probes alone where this host, device and runner version passed
    before (:mod:`~kernelrank.runner.host.selftest_cache`). Every run records its steps' seconds
    for later estimates; an unfiltered quick or full pass is cached, a failure drops the cache."""
    from dataclasses import replace

    from rich.console import Console


    parser = argparse.ArgumentParser(prog="python -m kernelrank.runner.host.selftest", description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", choices=vocab.DEVICE_CLASSES)
    parser.add_argument("--scope", default="quick", choices=SCOPES)
    parser.add_argument("--cached", action="store_true", help="probes alone where a quick or full pass is cached")
    parser.add_argument("--problem", action="append", default=[])
    parser.add_argument("--mode", action="append", default=[], choices=vocab.MODES)
    parser.add_argument("--no-attacks", action="store_true")
    parser.add_argument("--json", action="store_true", help="progress lines, then the summary as one JSON line last")
    args = parser.parse_args(argv)
    options = SelfTestOptions(device=args.device, scope=args.scope, problems=tuple(args.problem),
                              modes=tuple(args.mode) or vocab.MODES, attacks=not args.no_attacks)
    whole = not (args.problem or args.mode or args.no_attacks)
    cached = selftest_cache.load_pass(args.device) if args.cached and args.scope == "quick" and whole else None
    if cached is not None:
        options = replace(options, scope="probes")
    console = Console(stderr=args.json)
    test = SelfTest(options, on_check=lambda c: console.print(
        f"{'ok  ' if c.passed else 'FAIL'} {c.group}: {c.name} ({c.mode}) -> {c.got} [{c.seconds:.1f} s]",
        markup=False, highlight=False))
    steps, seconds, known = test.estimate(selftest_cache.recorded_seconds(args.device))
    console.print(f"self-test ({options.scope}) on {args.device}: {steps} steps, {fmt.wait(seconds)} "
                  f"({known} of them timed on this host before)"
                  + (f"; the {cached.get('scope')} self-test passed here at {cached.get('at')}" if cached else ""),
                  markup=False, highlight=False)

    def progress(done: int, total: int, label: str) -> None:
        if args.json:
            print(json.dumps({"progress": [done, total, label]}), flush=True)

    report = test.run(progress)
    if cached is not None:
        report.cached = {k: cached.get(k) for k in ("scope", "at", "seconds", "checks")}
    selftest_cache.record_seconds(args.device, test.step_seconds)
    if not report.passed:
        selftest_cache.drop_pass(args.device)
    elif whole and options.scope != "probes":
        selftest_cache.store_pass(args.device, report.summary())
    render(report, console)
    if args.json:
        print(json.dumps(report.summary()), flush=True)
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
