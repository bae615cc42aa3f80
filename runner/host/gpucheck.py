"""The GPU check: one command that tells a holder of a GPU whether KernelRank judges right on it
(``scripts/gpu-check.sh``, ``kernelrank gpu-check``).

Steps (:func:`plan`), each a subprocess with a time limit, all within :data:`BUDGET_S` (8 minutes
on an H100/H200):

1. **facts**: the GPU's name, driver, clocks, compute and persistence mode, MIG, ECC and retired
   pages, other compute processes (NVML, :mod:`~kernelrank.runner.host.gpuinfo`);
2. **slots**: the ``cuda``-marked tests of the data slots, including a child in its own
   namespaces opening the judge's slot buffer;
3. **cuda tests**: the rest of the ``cuda``-marked tests (timer, tripwire, NVML) but the
   self-test's own, which is step 4;
4. **self-test**: the runner's quick self-test on ``cuda`` (its rows);
5. **gemm, mla_decode**: the reference submitted as the kernel, in leaderboard mode: it must pass
   and read 1.00× within its interval.

It writes one report file (Markdown, with each step's outcome, figures and output tail, and the
facts as JSON) and exits 0 when every step passed, 1 when one failed. Without a GPU it says so on
one line and exits :data:`NO_GPU_EXIT` at once, writing nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

#: The whole check's wall-clock budget (the issue's 8 minutes on an H100/H200), in s.
BUDGET_S = 480
#: Exit status where the machine has no GPU (nothing was checked: not a pass).
NO_GPU_EXIT = 3
#: pytest's ``-k`` expression that picks the slot tests among the ``cuda``-marked ones.
SLOT_TESTS = "slot or ipc or vmm"
#: Problems whose identical-kernel leaderboard run the check makes (the field's heavy two).
PAIR_PROBLEMS = ("gemm", "mla_decode")
#: Lines of a step's output kept in the report (pytest's short summary names each failure).
TAIL_LINES = 60
#: Seconds a step past its limit has to end after its interrupt (its judges close their children
#: and free the GPU) before its whole process group is killed.
INTERRUPT_GRACE_S = 15


@dataclass
class StepResult:
    """One step's outcome: ``ok``, a one-line ``summary``, its wall ``seconds``, its output's tail."""

    name: str
    ok: bool
    summary: str
    seconds: float
    tail: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """A subprocess step: ``argv`` run with at most ``timeout_s``; ``judge(rc, output)`` gives
    ``(ok, summary, data)``."""

    name: str
    argv: list[str]
    timeout_s: int
    judge: Callable[[int, str], tuple[bool, str, dict[str, Any]]]


def no_gpu_reason() -> str | None:
    """Why this machine cannot be checked (no ``nvidia-smi`` GPU, or torch sees no CUDA device),
    or ``None`` when it has a GPU torch can use."""
    import shutil

    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "nvidia-smi not found: no NVIDIA driver on this machine"
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"nvidia-smi -L failed: {e}"
    if "GPU" not in listed:
        return "nvidia-smi lists no GPU"
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                           capture_output=True, text=True, timeout=120)
    if probe.stdout.strip() != "True":
        return "torch sees no CUDA device (a CPU build of torch, or CUDA_VISIBLE_DEVICES empty)"
    return None


def pytest_judge(rc: int, output: str) -> tuple[bool, str, dict[str, Any]]:
    """A pytest run: passed when it exited 0 (5, nothing collected, is a failure: the tests are
    missing); the summary is pytest's last line."""
    last = next((ln.strip("= ") for ln in reversed(output.splitlines()) if ln.startswith("=")), f"exit {rc}")
    return rc == 0, last, {"rc": rc}


def selftest_judge(rc: int, output: str) -> tuple[bool, str, dict[str, Any]]:
    """The self-test's ``--json`` output: its last line is the summary (``passed``, ``checks``)."""
    summary = _last_json(output)
    if summary is None:
        return False, f"no summary (exit {rc})", {"rc": rc}
    failed = [c for c in summary.get("checks", []) if not c.get("passed")]
    text = f"{len(summary.get('checks', [])) - len(failed)} of {len(summary.get('checks', []))} rows passed"
    if failed:
        text += "; failed: " + "; ".join(f"{c.get('group')}: {c.get('name')} -> {c.get('got')}" for c in failed[:5])
    return rc == 0 and bool(summary.get("passed")), text, {"failed": failed}


def pair_judge(rc: int, output: str) -> tuple[bool, str, dict[str, Any]]:
    """``kernelrank eval --json`` of the reference against itself: passed, and 1 inside the speedup's
    interval (:func:`~kernelrank.runner.host.selftest.pair_reads_one`)."""
    from kernelrank.runner.host.selftest import pair_reads_one
    from kernelrank.runner.results import EvalResult

    doc = _last_json(output)
    if doc is None:
        return False, f"no result (exit {rc})", {"rc": rc}
    try:
        result = EvalResult.from_dict(doc)
    except (TypeError, ValueError, KeyError) as e:
        return False, f"unreadable result: {e}", {}
    ok, got = pair_reads_one(result)
    return ok, got, {"status": doc.get("status"), "speedup": doc.get("speedup")}


def _last_json(output: str) -> dict[str, Any] | None:
    for line in reversed(output.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and "progress" not in doc:
                return doc
    return None


def plan(root: Path, workdir: Path) -> list[Step]:
    """The subprocess steps (after the facts), in order; ``workdir`` holds the identical kernels."""
    from kernelrank.problems import load_problem
    from kernelrank.runner.judge.answers import reference_submission

    py = sys.executable
    pytest = [py, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "--tb=short", "-rfE",
              str(root / "tests")]
    steps = [
        Step("slots", pytest + ["-k", SLOT_TESTS], 60, pytest_judge),
        # the self-test's own test is the next step (over 2 minutes on a fresh machine: not twice)
        Step("cuda tests", pytest + ["-k", f"not ({SLOT_TESTS}) and not self_test_on_cuda"], 90, pytest_judge),
        # a fresh machine's first C++ build (the precompiled header) takes about a minute of it
        Step("self-test", [py, "-m", "kernelrank.runner.host.selftest", "--device", "cuda", "--scope", "quick",
                           "--json"], 230, selftest_judge),
    ]
    for name in PAIR_PROBLEMS:
        kernel = workdir / f"{name}_identical.py"
        kernel.write_text(reference_submission(load_problem(name).spec()), encoding="utf-8")
        steps.append(Step(name, [py, "-m", "kernelrank.cli.main", "eval", name, str(kernel), "--mode",
                                 "leaderboard", "--device", "cuda", "--json"], 45, pair_judge))
    return steps


def run_step(step: Step, budget_left: float) -> StepResult:
    """Run ``step`` within ``min(step.timeout_s, budget_left)`` seconds; a timeout is a failure.

    The step runs in a process group of its own. Past its limit the group gets ``SIGINT`` (as
    Ctrl-C: pytest's fixtures and the judges close their children), then ``SIGKILL`` after
    :data:`INTERRUPT_GRACE_S`: a step cut off must not leave processes holding the GPU, which the
    next step's health rows would count as other compute processes (seen on an H200)."""
    import signal

    limit = max(1.0, min(step.timeout_s, budget_left))
    started = time.monotonic()
    proc = subprocess.Popen(step.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=limit)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        _signal_group(proc.pid, signal.SIGINT)
        try:
            output, _ = proc.communicate(timeout=INTERRUPT_GRACE_S)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
        _signal_group(proc.pid, signal.SIGKILL)  # what the interrupt left behind in the group
        return StepResult(step.name, False, f"timed out after {limit:.0f} s", time.monotonic() - started,
                          _tail(output or ""))
    ok, summary, data = step.judge(rc, output)
    return StepResult(step.name, ok, summary, time.monotonic() - started, _tail(output), data)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group has ended


def _tail(output: str) -> str:
    return "\n".join(output.strip().splitlines()[-TAIL_LINES:])


def facts_step() -> StepResult:  # pragma: no cover - GPU-only: NVML of a real GPU
    """The GPU's facts and health from NVML (no CUDA context)."""
    from kernelrank.runner.host import gpuinfo

    started = time.monotonic()
    nvml = gpuinfo.load_nvml()
    if nvml is None:
        return StepResult("facts", False, "NVML unavailable", time.monotonic() - started)
    handle = gpuinfo.handle_for(nvml, os.environ.get("CUDA_VISIBLE_DEVICES"))
    facts = {**gpuinfo.gpu_facts(nvml, handle), "health": gpuinfo.health(nvml, handle),
             "clocks": gpuinfo.clock_snapshot(nvml, handle),
             "other_processes": gpuinfo.other_processes(nvml, handle, {os.getpid()})}
    return facts_result(facts, time.monotonic() - started)


def facts_result(facts: dict[str, Any], seconds: float) -> StepResult:
    """The facts step's row: passes when the GPU is fit to judge on (no uncorrected ECC errors
    since the driver loaded, no retirement pending, compute mode Default, no other compute
    process); the summary names what is not."""
    h = facts.get("health", {})
    problems = []
    if h.get("ecc_uncorrected_volatile"):
        problems.append(f"{h['ecc_uncorrected_volatile']} uncorrected ECC errors")
    if h.get("retired_pending"):
        problems.append("a page retirement pending (reset the GPU)")
    if h.get("compute_mode") not in (None, "default"):
        problems.append(f"compute mode {h['compute_mode']} (set Default: nvidia-smi -c DEFAULT)")
    if facts.get("other_processes"):
        problems.append(f"{len(facts['other_processes'])} other compute processes")
    summary = (f"{facts.get('name')}, driver {facts.get('driver_version')}, SM {facts.get('sm_clock_mhz')}"
               f"/{facts.get('sm_clock_max_mhz')} MHz, MIG {facts.get('mig_mode')}, compute mode "
               f"{h.get('compute_mode')}, persistence {h.get('persistence_mode')}")
    if problems:
        summary += "; " + "; ".join(problems)
    return StepResult("facts", not problems, summary, seconds, data=facts)


def report_markdown(results: list[StepResult], started_at: datetime, total_s: float) -> str:
    """The report file's text: a table of steps, then each step's data and output tail."""
    passed = all(r.ok for r in results)
    lines = [f"# GPU check: {'passed' if passed else 'FAILED'}", "",
             f"Run {started_at.strftime('%Y-%m-%d %H:%M UTC')}, {total_s:.0f} s (budget {BUDGET_S} s).", "",
             "| step | result | seconds | summary |", "| --- | --- | --- | --- |"]
    lines += [f"| {r.name} | {'ok' if r.ok else 'FAIL'} | {r.seconds:.1f} | {r.summary.replace('|', '/')} |"
              for r in results]
    for r in results:
        lines += ["", f"## {r.name}", ""]
        if r.data:
            lines += ["```json", json.dumps(r.data, indent=2, default=str), "```"]
        if r.tail:
            lines += ["", "```", r.tail, "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m kernelrank.runner.host.gpucheck [--out FILE]`` (see the module docstring)."""
    import argparse

    parser = argparse.ArgumentParser(prog="gpu-check", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="the report file (default: gpu-check-<UTC time>.md)")
    args = parser.parse_args(argv)
    reason = no_gpu_reason()
    if reason is not None:
        print(f"gpu-check: no GPU to check here ({reason}); nothing was run", flush=True)
        return NO_GPU_EXIT
    started_at, started = datetime.now(timezone.utc), time.monotonic()  # pragma: no cover - GPU-only from here
    out = args.out or Path(f"gpu-check-{started_at.strftime('%Y%m%dT%H%MZ')}.md")
    root = Path(__file__).resolve().parents[2]
    results = [facts_step()]

    def save() -> None:  # after every row: a check cut off (a lease ending) still leaves its report so far
        out.write_text(report_markdown(results, started_at, time.monotonic() - started), encoding="utf-8")

    save()
    print(f"gpu-check: {results[0].summary}", flush=True)
    with tempfile.TemporaryDirectory(prefix="kr-gpucheck-") as work:
        for step in plan(root, Path(work)):
            left = BUDGET_S - (time.monotonic() - started)
            r = run_step(step, left) if left > 1 else StepResult(step.name, False, "not run: budget spent", 0.0)
            results.append(r)
            print(f"gpu-check: {'ok  ' if r.ok else 'FAIL'} {r.name}: {r.summary} [{r.seconds:.0f} s]", flush=True)
            save()
    print(f"gpu-check: report in {out}", flush=True)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
