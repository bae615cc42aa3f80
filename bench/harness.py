"""Figures of the harness itself, printed (never asserted): run on an idle machine.

1. Wall time of a ``test``-mode eval of the softmax examples (process start, load, every test case).
2. Accuracy of the timer: the harness's mean for the reference softmax against
   ``torch.utils.benchmark.Timer`` (``blocked_autorange``, same threads) on the same case and input.
   Target ratio 0.95 to 1.05.
3. Repeatability: max/min of five leaderboard scores of one submission. Target under 1.05.
4. The machine's own floor for figure 3: the same submission's five scores taken in this process
   without the harness (no child, no judge, inputs made between calls), each case timed for its
   leaderboard budget. A harness cannot be steadier than the machine it times on.

Usage: ``python bench/harness.py [--case M,N,dtype] [--repeats 5] [--example correct_pytorch]``
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch.utils import benchmark

from kernelrank.problems import Case, load_problem
from kernelrank.runner.child import steady_allocator
from kernelrank.runner.devices import cpu_threads, device_info
from kernelrank.runner.harness import EvalOptions, evaluate, reference_submission
from kernelrank.runner.timing import geometric_mean

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "reference_kernels" / "softmax" / "examples"


def _one_case_spec(spec, case: Case, mode_budget_s: float):
    """The softmax revision restricted to one CPU benchmark case, with a longer timing budget."""
    d = spec.definition
    timing = dict(d.timing)
    timing["cpu"] = timing["cpu"].model_copy(update={"benchmark": mode_budget_s, "leaderboard": mode_budget_s})
    benchmarks = dict(d.benchmarks, cpu=[case])
    return spec.__class__(d.model_copy(update={"benchmarks": benchmarks, "timing": timing}), spec.reference_source,
                          spec.revision + "-bench")


def test_mode_wall_time(spec, options: EvalOptions) -> None:
    print("\n1. test-mode eval wall time (softmax, all test cases, process start included)")
    for name in ("correct_pytorch", "correct_triton"):
        src = (EXAMPLES / f"{name}.py").read_text()
        t0 = time.perf_counter()
        r = evaluate(spec, src, "test", "cpu", options)
        dt = time.perf_counter() - t0
        print(f"   {name:18s} {r.status.value:8s} {dt:6.2f} s  ({len(r.cases)} cases)")


def timer_agreement(spec, case: Case, options: EvalOptions, threads: int) -> None:
    print(f"\n2. harness vs torch.utils.benchmark.Timer, reference softmax, case {case.label()}")
    one = _one_case_spec(spec, case, 5.0)
    r = evaluate(one, reference_submission(one), "benchmark", "cpu", options)
    bench = [c for c in r.cases if c.kind == "benchmark"][0]
    harness_mean = bench.timing["mean_ns"]
    ref = spec.reference_module()
    data = ref.generate_input(device="cpu", **case.params)
    t = benchmark.Timer("ref_kernel(data)", globals={"ref_kernel": ref.ref_kernel, "data": data},
                        num_threads=threads).blocked_autorange(min_run_time=3.0)
    ratio = harness_mean / (t.mean * 1e9)
    w = bench.wall_check
    print(f"   harness mean {harness_mean / 1e3:10.2f} µs over {bench.timing['runs']} runs "
          f"(median {bench.timing['median_ns'] / 1e3:.2f} µs; claimed mean {w['claimed_mean_ns'] / 1e3:.2f} µs, "
          f"judge's overhead {w['overhead_ns'] / 1e3:.1f} µs, {w['replaced_requests']} of {w['requests']} requests at the judge's figure)")
    print(f"   Timer   mean {t.mean * 1e6:10.2f} µs over {t.number_per_run * len(t.raw_times)} calls "
          f"(median {t.median * 1e6:.2f} µs)")
    print(f"   ratio harness/Timer = {ratio:.3f}   (target 0.95 .. 1.05)")


def repeatability(spec, options: EvalOptions, example: str, repeats: int) -> None:
    print(f"\n3. {repeats} leaderboard scores of softmax/{example}")
    src = (EXAMPLES / f"{example}.py").read_text()
    scores = []
    for i in range(repeats):
        t0 = time.perf_counter()
        r = evaluate(spec, src, "leaderboard", "cpu", options)
        scores.append(r.score_ns)
        cases = " ".join(f"{c.timing['mean_ns'] / 1e3:.0f}/{c.timing['runs']}" for c in r.cases if c.kind == "benchmark")
        print(f"   run {i + 1}: {r.status.value:7s} score {r.score_ns / 1e3:10.2f} µs  ({time.perf_counter() - t0:5.1f} s)"
              f"  case mean µs/runs: {cases}")
    print(f"   max/min = {max(scores) / min(scores):.3f}   (target < 1.05)")


def machine_floor(spec, example: str, repeats: int, threads: int) -> None:
    print(f"\n4. the machine's floor: {repeats} scores of softmax/{example} timed in this process, no harness")
    loaded = importlib.util.spec_from_file_location("floor_example", EXAMPLES / f"{example}.py")
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    ref = spec.reference_module()
    cases = spec.definition.benchmark_cases("cpu")
    budget_s = spec.definition.timing["cpu"].leaderboard
    torch.set_num_threads(threads)
    steady_allocator()
    scores = []
    for i in range(repeats):
        means: list[float] = []
        calls: list[int] = []
        for case in cases:
            times: list[int] = []
            end = time.monotonic() + budget_s
            while time.monotonic() < end:  # a new input set before every call, as leaderboard mode
                data = ref.generate_input(device="cpu", **dict(case.params, seed=case.seed * 10_000 + len(times)))
                t0 = time.perf_counter_ns()
                out = module.custom_kernel(data)
                times.append(time.perf_counter_ns() - t0)
                assert out is not None  # freed here, after the clock stopped
            means.append(statistics.fmean(times))
            calls.append(len(times))
        scores.append(geometric_mean(means))
        print(f"   run {i + 1}: score {scores[-1] / 1e3:10.2f} µs  case mean µs/calls: "
              + " ".join(f"{m / 1e3:.0f}/{n}" for m, n in zip(means, calls)))
    print(f"   max/min = {max(scores) / min(scores):.3f}   (no harness: what this machine allows figure 3)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", default="4096,1024,float32", help="M,N,dtype for the Timer comparison")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--example", default="correct_pytorch")
    args = parser.parse_args()
    threads = cpu_threads(0)
    info = device_info("cpu", threads)
    print(f"machine: {info.name}, {threads} threads, {info.memory_bytes / 2**30:.0f} GiB, torch {info.torch}, "
          f"triton {info.triton}, Python {platform.python_version()}, load average {os.getloadavg()[0]:.2f}")
    spec = load_problem("softmax").spec()
    m, n, dtype = args.case.split(",")
    case = Case(M=int(m), N=int(n), dtype=dtype, seed=4242)
    with tempfile.TemporaryDirectory() as tmp:
        options = EvalOptions(threads=threads, scratch_dir=Path(tmp) / "scratch", cache_dir=Path(tmp) / "cache")
        test_mode_wall_time(spec, options)
        timer_agreement(spec, case, options, threads)
        repeatability(spec, options, args.example, args.repeats)
    machine_floor(spec, args.example, args.repeats, threads)
    torch.set_num_threads(threads)


if __name__ == "__main__":
    main()
