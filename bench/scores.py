"""Figures of the harness itself, printed (never asserted), at idle and with a CPU hog on one core.

The problem is ``--problem`` (default softmax, memory-bound on the CPU; gemm and mla_decode are
compute-bound there).

1. Wall time of a ``test``-mode eval of the problem's examples (process start, load, every test case).
2. Accuracy of the timer: the harness's mean for the problem's reference against
   ``torch.utils.benchmark.Timer`` (``blocked_autorange``, same threads) on the same case and input
   (``--case`` for softmax, else the first CPU benchmark case). Target ratio 0.95 to 1.05.
   2b: the example's speedup per case by ``Timer`` in one process.
3. Per condition (idle; ``bench/cpu_hog.py`` spinning on one CPU), ``--repeats`` leaderboard runs
   of one file (``--example``, default the problem's ``correct_pytorch``) and of a kernel identical
   to the reference (softmax: ``bench/kernels/softmax_identical.py``; other problems: the
   reference's own source as a submission, ``answers.reference_submission``):

   - max/min of the file's five scores, each made as the service makes it: from two leaderboard
     runs in a row (its public and secret runs; ``--runs-per-score``), measured again while not
     rankable (``--remeasures``, as the service does), every run's speedup combined
     (``kernelrank.judgement.judge``: the geometric mean, an interval that holds how far they
     differ, unranked when they disagree or the latest measurement is noisy) and re-based on a calibration (per case, the median of the
     runs' reference times): goals < 1.03 idle, < 1.10 with the hog; beside it, the spread of
     the single runs;
   - the identical kernel's speedup per score, with its 95% interval: goal 0.95 to 1.05;
   - per case, the median of the file's speedups beside ``torch.utils.benchmark.Timer``'s (2b);
   - per case: pairs, the share of the case's wall time inside timed calls (goal >= 50%), where the
     rest went, and the half width of the speedup's interval.

Usage: ``python bench/scores.py [--problem softmax] [--repeats 5] [--example correct_pytorch]
[--conditions idle,hog] [--skip-basics] [--runs-per-score 2] [--remeasures 2] [--budget-scale 1]
[--record FILE.json]``
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import statistics
import sys
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils import benchmark

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from cpu_hog import hog  # noqa: E402

from kernelrank import judgement  # noqa: E402
from kernelrank.problems import Case, load_problem  # noqa: E402
from kernelrank.runner import stats  # noqa: E402
from kernelrank.runner.host.devices import cpu_threads, device_info  # noqa: E402
from kernelrank.runner.judge.answers import reference_submission  # noqa: E402
from kernelrank.runner.judge.harness import EvalOptions, evaluate  # noqa: E402
from kernelrank.runner.results import json_ready  # noqa: E402
from kernelrank.runner.stats import geometric_mean  # noqa: E402
from kernelrank.settings import get_settings  # noqa: E402
from kernelrank.vocab import CaseKind, Mode, RunKind  # noqa: E402

KERNELS = ROOT / "reference_kernels"
IDENTICAL = ROOT / "bench" / "kernels" / "softmax_identical.py"


def identical_source(spec) -> tuple[str, str]:
    """``(label, source)`` of a kernel identical to the problem's reference: for softmax the
    reference's computation written as a submission (``bench/kernels/softmax_identical.py``),
    else the reference's own source (``answers.reference_submission``)."""
    if spec.definition.name == "softmax":
        return str(IDENTICAL.relative_to(ROOT)), IDENTICAL.read_text()
    return f"{spec.definition.name}'s reference as a submission", reference_submission(spec)


def _cpu_timed_spec(spec, suffix: str, benchmark_s: float, leaderboard_s: float, **update):
    """The problem's revision with its CPU timing budgets per case (seconds) in benchmark and
    leaderboard mode set, and the definition's other fields in ``update``; its revision
    ``suffix``-ed so that nothing mistakes it for the problem's."""
    d = spec.definition
    cpu = d.timing["cpu"].model_copy(update={"benchmark": benchmark_s, "leaderboard": leaderboard_s})
    return spec.__class__(d.model_copy(update={**update, "timing": dict(d.timing, cpu=cpu)}), spec.reference_source,
                          spec.revision + suffix)


def _one_case_spec(spec, case: Case, mode_budget_s: float):
    """The problem's revision restricted to one CPU benchmark case, with a longer timing budget."""
    return _cpu_timed_spec(spec, "-bench", mode_budget_s, mode_budget_s,
                           benchmarks=dict(spec.definition.benchmarks, cpu=[case]))


def test_mode_wall_time(spec, examples: Path, options: EvalOptions) -> None:
    print(f"\n1. test-mode eval wall time ({spec.definition.name}, all test cases, process start included)")
    for name in ("correct_pytorch", "correct_triton"):
        src = (examples / f"{name}.py").read_text()
        t0 = time.perf_counter()
        r = evaluate(spec, src, "test", "cpu", options)
        dt = time.perf_counter() - t0
        print(f"   {name:18s} {r.status.value:8s} {dt:6.2f} s  ({len(r.cases)} cases)")


def timer_agreement(spec, case: Case, options: EvalOptions, threads: int) -> None:
    print(f"\n2. harness vs torch.utils.benchmark.Timer, the {spec.definition.name} reference, case {case.label()}")
    one = _one_case_spec(spec, case, 5.0)
    r = evaluate(one, reference_submission(one), "benchmark", "cpu", options)
    bench = [c for c in r.cases if c.kind == CaseKind.benchmark][0]
    harness_mean = bench.ref_timing["mean_ns"]
    ref = spec.reference_module()
    data = ref.generate_input(device="cpu", **case.params)
    t = benchmark.Timer("ref_kernel(data)", globals={"ref_kernel": ref.ref_kernel, "data": data},
                        num_threads=threads).blocked_autorange(min_run_time=3.0)
    ratio = harness_mean / (t.mean * 1e9)
    print(f"   harness: the reference's mean {harness_mean / 1e3:10.2f} µs over {bench.ref_timing['runs']} calls on "
          f"fresh inputs (median {bench.ref_timing['median_ns'] / 1e3:.2f} µs)")
    print(f"   Timer   mean {t.mean * 1e6:10.2f} µs over {t.number_per_run * len(t.raw_times)} calls on one input "
          f"(median {t.median * 1e6:.2f} µs)")
    print(f"   ratio harness/Timer = {ratio:.3f}   (target 0.95 .. 1.05)")


def timer_speedups(problem: str, example: Path, threads: int) -> list[float]:
    """Per CPU benchmark case, the example's speedup over the reference as
    ``torch.utils.benchmark.Timer`` sees it: both kernels on one input, in alternating blocks of
    ``blocked_autorange`` (0.3 s each, 4 of each), the ratio of their median times; measured in a
    fresh process set up as the judge's children are (OpenMP threads bound one per CPU, glibc's
    fixed thresholds), since this process's own threads are not (it read the reference 2.3x
    slower than the children do on one bfloat16 case). Not the judge's conditions (one input,
    warm in the caches, against a fresh input per call), but no path, no freezing and no
    processes: a check the judge's speedups are of the right size (the judge's path
    once pulled them towards 1, 0.36x read 0.48x)."""
    import json
    import subprocess

    from kernelrank.runner.containment.childenv import child_environment

    # the children's thread settings, from where the sandbox sets them
    bound = {k: v for k, v in child_environment(ROOT, "cpu", threads).items()
             if k.startswith("OMP_") or k.endswith("_NUM_THREADS")}
    env = dict(os.environ, **bound)
    done = subprocess.run([sys.executable, __file__, "--problem", problem, "--timer-speedups", str(example)], env=env,
                          check=True, capture_output=True, text=True)
    print(f"\n2b. {example.name} against the reference by torch.utils.benchmark.Timer (a fresh process set up as "
          f"the children are, one input per case, alternating blocks): the size the judge's speedups should have")
    out = []
    for line in done.stdout.splitlines():
        row = json.loads(line)
        out.append(row["ratio"])
        print(f"   {row['case']:32s} {row['ratio']:.3f}x   (reference {row['ref_us']:.0f} µs, {example.stem} "
              f"{row['sub_us']:.0f} µs)")
    return out


def _timer_speedups_here(problem: str, example: Path, blocks: int = 4) -> None:
    """:func:`timer_speedups`'s measurement, in the process it starts: one JSON line per case."""
    import importlib.util
    import json

    from kernelrank.runner.submission.steady import steady_allocator

    steady_allocator()
    spec = load_problem(problem).spec()
    loaded = importlib.util.spec_from_file_location("bench_example", example)
    assert loaded is not None and loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    ref = spec.reference_module()
    for case in spec.definition.benchmark_cases("cpu"):
        data = ref.generate_input(device="cpu", **case.params)
        times: dict[str, list[float]] = {"ref": [], "sub": []}
        for _ in range(blocks):
            for name, fn in (("sub", module.custom_kernel), ("ref", ref.ref_kernel)):
                t = benchmark.Timer("fn(data)", globals={"fn": fn, "data": data},
                                    num_threads=torch.get_num_threads()).blocked_autorange(min_run_time=0.3)
                times[name].append(t.median)
        r, sub = statistics.median(times["ref"]), statistics.median(times["sub"])
        print(json.dumps({"case": case.label(), "ratio": r / sub, "ref_us": r * 1e6, "sub_us": sub * 1e6}))


def _runs(spec, src: str, options: EvalOptions, repeats: int) -> list:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = evaluate(spec, src, "leaderboard", "cpu", options)
        r.duration_s = time.perf_counter() - t0
        out.append(r)
    return out


@dataclass
class Score:
    """One leaderboard score as the service makes it: a submission's measurements, each its runs
    (public, then secret, one after the other), made again while the score is not rankable up
    to ``--remeasures`` times, all runs combined and judged by the service's rule
    (:func:`kernelrank.judgement.judge`)."""

    measurements: list
    judged: Any

    @property
    def runs(self) -> list:
        return [r for m in self.measurements for r in m]

    @property
    def combined(self) -> Any:
        return self.judged.measured.combined

    @property
    def disagree(self) -> bool:
        return self.judged.measured.disagree

    @property
    def ranked(self) -> bool:
        return self.judged.ranked


def _records(runs: list) -> list:
    """A measurement's results as the service records them: the first run public, the rest secret."""
    return [judgement.RunRecord(RunKind.public if i == 0 else RunKind.secret, r.status.value, r.to_dict(), r.score_ns)
            for i, r in enumerate(runs)]


def _scores(spec, src: str, options: EvalOptions, repeats: int, per_score: int, remeasures: int = 0) -> list[Score]:
    """``repeats`` scores of ``src``, each from ``per_score`` leaderboard runs in a row, measured
    again (``per_score`` more runs) while not rankable, at most ``remeasures`` times
    (:func:`kernelrank.judgement.judge`, as the service does); as on a board, the earlier scores'
    first measurements' spreads between their runs are the floor of the next one's interval
    (``stats.pooled_spread``, as ``calibration.board_spread`` pools a board's)."""
    noisy_above = spec.definition.timing["cpu"].noisy_above
    out, spreads = [], []
    for _ in range(repeats):
        measurements: list[list] = []
        while True:
            measurements.append(_runs(spec, src, options, per_score))
            judged = judgement.judge([_records(m) for m in measurements], mode=Mode.leaderboard,
                                     noisy_above=noisy_above, board=stats.pooled_spread(spreads),
                                     remeasures=remeasures)
            if not judged.again:
                break
        spread = judged.measured.spread
        spreads += [spread] if spread is not None else []
        out.append(Score(measurements, judged))
    return out


def _cases_line(r) -> str:
    parts = []
    for c in (c for c in r.cases if c.kind == CaseKind.benchmark):
        p = c.pairing or {}
        parts.append(f"{p.get('pairs', 0)} pairs, in calls {p.get('timed_share', 0):.0%}, ±{p.get('half_width', math.inf):.1%}"
                     f" (processes' offsets: se {p.get('between_processes_log_se', 0):.1%})")
    return "; ".join(parts)


def _print_score(i: int, score: Score, basis: float | None) -> None:
    for j, r in enumerate(score.runs):
        per = len(score.measurements[0])
        name = (f"measurement {j // per + 1}, " if len(score.measurements) > 1 else "") + (
            ("public", "secret")[j % per] if per == 2 else f"run {j % per + 1}")
        if not (r.passed and r.speedup):
            print(f"   score {i + 1}, {name}: {r.status.value}: {r.message[:200]}")
            continue
        lo, hi = r.speedup_ci
        print(f"   score {i + 1}, {name}: speedup {r.speedup:.3f} ({lo:.3f} .. {hi:.3f}){' NOISY' if r.noisy else ''}"
              f"  {r.duration_s:5.1f} s   {_cases_line(r)}")
    c = score.combined
    if c is None:
        return
    what = "ranked" if score.ranked else ("NOT RANKED: the runs disagree" if score.disagree else "NOT RANKED")
    if len(score.measurements) > 1:
        what += f" (after {len(score.measurements)} measurements)"
    time_part = f"score {basis / c.estimate / 1e3:9.1f} µs  " if basis else ""
    print(f"   score {i + 1}: {time_part}speedup {c.estimate:.3f} ({c.low:.3f} .. {c.high:.3f}, ±{c.half_width:.1%})  {what}")


def record(path: Path, problem: str, label: str, file: str, scores: list[Score]) -> None:
    """Append the scores' runs (speedup intervals, noisy, benchmark cases) to a JSON recording
    (``tests/fixtures/timings/runs_*.json``: what ``tests/runner/test_stats.py`` combines)."""
    data = json.loads(path.read_text()) if path.exists() else {"machine": device_info("cpu", cpu_threads(0)).name,
                                                               "conditions": []}
    data["conditions"].append({
        "problem": problem, "condition": label, "file": file, "recorded": time.strftime("%Y-%m-%d %H:%M"),
        "scores": [[{"status": r.status.value, "speedup_interval": r.speedup_interval, "noisy": r.noisy,
                     "benchmark_cases": sum(c.kind == CaseKind.benchmark for c in r.cases), "duration_s": round(r.duration_s, 1)}
                    for r in s.runs] for s in scores]})
    path.write_text(json.dumps(json_ready(data), indent=1) + "\n")


def condition(spec, options: EvalOptions, example: Path, repeats: int, label: str,
              timer: list[float] | None = None, per_score: int = 2, recording: Path | None = None,
              remeasures: int = 0) -> None:
    print(f"\n3. {label} (load average {os.getloadavg()[0]:.2f}): {repeats} leaderboard scores each, "
          f"each from {per_score} runs in a row (the service's public and secret runs), measured again "
          f"up to {remeasures} times while not rankable")
    scores = _scores(spec, example.read_text(), options, repeats, per_score, remeasures)
    runs = [r for s in scores for r in s.runs]
    passed = [r for r in runs if r.passed and r.speedup]
    cases = len(spec.definition.benchmark_cases("cpu"))
    calibration_ns = [statistics.median(r.cases[len(spec.definition.tests) + i].pairing["reference_run_ns"]
                                        for r in passed) for i in range(cases)] if passed else []
    basis = geometric_mean(calibration_ns) if calibration_ns else math.nan
    print(f"   {example.relative_to(ROOT)} (calibration: per case the median of these runs' reference times, "
          f"geometric mean {basis / 1e3:.1f} µs)")
    for i, score in enumerate(scores):
        _print_score(i, score, basis)
    combined = [s.combined.estimate for s in scores if s.combined is not None]
    if len(combined) > 1:
        ranked = [s.combined.estimate for s in scores if s.ranked]
        line = (f"; the {len(ranked)} ranked {max(ranked) / min(ranked):.3f}" if 1 < len(ranked) < len(combined)
                else "" if len(ranked) == len(combined) else f"; {len(ranked)} ranked")
        single = [r.speedup for r in passed]
        print(f"   max/min of the scores = {max(combined) / min(combined):.3f}{line}   (goal < 1.03 idle, < 1.10 loaded); "
              f"of the {len(single)} single runs' {max(single) / min(single):.3f}")
    if passed:
        per_case = [statistics.median(next(c.speedup for c in r.cases if c.kind == CaseKind.benchmark and c.index == i)
                                      for r in passed) for i in range(cases)]
        line = "; ".join(f"{s:.3f}x" + (f" (Timer {t:.3f}x)" if timer else "") for s, t in zip(per_case, timer or per_case))
        print(f"   per case, the median of the runs' speedups: {line}")
    same_label, same_source = identical_source(spec)
    same_scores = _scores(spec, same_source, options, repeats, per_score, remeasures)
    same = [r for s in same_scores for r in s.runs]
    print(f"   {same_label} (identical to the reference: speedup 1 by construction)")
    for i, score in enumerate(same_scores):
        _print_score(i, score, None)
    ok = [s.combined for s in same_scores if s.combined is not None]
    if ok:
        held = sum(c.low <= 1.0 <= c.high for c in ok)
        print(f"   speedups {min(c.estimate for c in ok):.3f} .. {max(c.estimate for c in ok):.3f}   (goal 0.95 .. 1.05); "
              f"{held} of {len(ok)} intervals hold 1; {sum(s.ranked for s in same_scores)} ranked")
    if recording is not None:
        record(recording, spec.definition.name, label, str(example.relative_to(ROOT)), scores)
        record(recording, spec.definition.name, label, same_label, same_scores)
    shares = [c.pairing["timed_share"] for r in runs + same for c in r.cases if c.kind == CaseKind.benchmark and c.pairing]
    if shares:
        print(f"   share of a case's wall time inside timed calls: median {statistics.median(shares):.0%}, "
              f"{min(shares):.0%} .. {max(shares):.0%} (goal >= 50%)")
    walls = [(c.pairing["prepare_s"], c.pairing["timed_phase_s"], c.pairing["check_s"], c.pairing["wall_s"])
             for r in runs + same for c in r.cases if c.kind == CaseKind.benchmark and c.pairing]
    if walls:
        p, t, k, w = (sum(x[i] for x in walls) for i in range(4))
        print(f"   where a case's wall time went: preparing inputs and expected outputs {p / w:.0%}, the timed "
              f"phase (placing, calls, reading) {t / w:.0%}, checking {k / w:.0%}, warm-up and the rest {1 - (p + t + k) / w:.0%}")
    parts = [(c.pairing.get("inputs_thread_s", 0.0), c.pairing.get("expected_thread_s", 0.0))
             for r in runs + same for c in r.cases if c.kind == CaseKind.benchmark and c.pairing]
    made, expected = sum(x for x, _ in parts), sum(y for _, y in parts)
    if made + expected > 0:
        print(f"   of the preparing (the judge's threads' time): the inputs (generate_input or derive_input) "
              f"{made / (made + expected):.0%}, the expected outputs (the reference in the judge; for derived sets "
              f"the reference process's, the judge's only where they disagree) {expected / (made + expected):.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", default="softmax", help="softmax, gemm or mla_decode")
    parser.add_argument("--case", default="4096,1024,float32", help="softmax only: M,N,dtype for the Timer comparison")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--example", default="correct_pytorch")
    parser.add_argument("--conditions", default="idle,hog", help="idle, hog, or both (comma-separated)")
    parser.add_argument("--skip-basics", action="store_true", help="leave out figures 1 and 2")
    parser.add_argument("--runs-per-score", type=int, default=2,
                        help="leaderboard runs per score (the service: 2, its public and secret runs)")
    parser.add_argument("--remeasures", type=int, default=get_settings().remeasures,
                        help="times a score not rankable is measured again (default: the service's, settings.remeasures)")
    parser.add_argument("--budget-scale", type=float, default=1.0,
                        help="multiply the problem's CPU timing budget per case (leaderboard and benchmark mode)")
    parser.add_argument("--record", type=Path, help="append the scores' runs to this JSON recording")
    parser.add_argument("--timer-speedups", type=Path, help=argparse.SUPPRESS)  # figure 2b's own process
    args = parser.parse_args()
    if args.timer_speedups:
        _timer_speedups_here(args.problem, args.timer_speedups)
        return
    threads = cpu_threads(0)
    info = device_info("cpu", threads)
    print(f"machine: {info.name}, {threads} threads, {info.memory_bytes / 2**30:.0f} GiB, torch {info.torch}, "
          f"triton {info.triton}, Python {platform.python_version()}, load average {os.getloadavg()[0]:.2f}")
    spec = load_problem(args.problem).spec()
    if args.budget_scale != 1.0:
        cpu = spec.definition.timing["cpu"]
        spec = _cpu_timed_spec(spec, f"-budget-x{args.budget_scale:g}", cpu.benchmark * args.budget_scale,
                               cpu.leaderboard * args.budget_scale)
        print(f"timing budget per case on the CPU: {spec.definition.timing['cpu'].leaderboard:g} s "
              f"(the problem's x {args.budget_scale:g})")
    if args.problem == "softmax":
        m, n, dtype = args.case.split(",")
        case = Case(M=int(m), N=int(n), dtype=dtype, seed=4242)
    else:
        case = spec.definition.benchmark_cases("cpu")[0]
    examples = KERNELS / args.problem / "examples"
    with tempfile.TemporaryDirectory() as tmp:
        options = EvalOptions(threads=threads, scratch_dir=Path(tmp) / "scratch")
        timer = None
        if not args.skip_basics:
            test_mode_wall_time(spec, examples, options)
            timer_agreement(spec, case, options, threads)
            timer = timer_speedups(args.problem, examples / f"{args.example}.py", threads)
        for name in args.conditions.split(","):
            with hog() if name == "hog" else contextlib.nullcontext():
                label = "with bench/cpu_hog.py spinning on one CPU" if name == "hog" else "idle (no hog of ours)"
                condition(spec, options, examples / f"{args.example}.py", args.repeats, label, timer,
                          args.runs_per_score, args.record, args.remeasures)
    torch.set_num_threads(threads)


if __name__ == "__main__":
    main()
