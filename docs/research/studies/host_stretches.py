"""Whether a kernel's speed on this machine moves with the host's moment or with the process.

Two questions that decide what more timing can buy (issue 14's spread of five scores):

1. **Moment or process?** ``--processes`` worker processes, forked from one parent, take turns
   (one runs while the others wait on their pipes), each turn ``--calls`` calls of the
   submission's kernel on its own four input sets; each turn prints every process's median
   (µs). From the table's logs, a two-way split: the standard deviation of the turns' means
   (the host's moment: every process moves together) and of the processes' means (a process's
   own speed for its life), beside the residual. A moment's effect is averaged away by timing
   over more of the run; a process's effect only by more processes.
2. **Does the moment move the speedup?** In one process, the submission and the reference
   alternate call by call on the same inputs, ``--turns`` turns of ``--calls`` pairs; per turn
   the ratio of their medians (the speedup), then the spread of those speedups and the lag-1
   autocorrelation of their logs (near 0: moments shorter than a turn; near 1: stretches of
   many turns). Pairing cancels a moment that slows both sides alike; where the speedup itself
   moves, only a case timed over more moments settles it.
3. **Whose moment: the host's, or one core's?** One process per CPU, each pinned to its CPU with
   one thread, all at once (as the children's threads run), alternate the submission and the
   reference call by call in turns of ``--turn-s`` seconds that start at the same instants on
   every CPU; per turn and CPU the two medians. Printed: per CPU the spread of each side's logs,
   and the correlation of the CPUs' submission logs turn by turn (near 1: the whole host's
   moment; near 0: each core's own, e.g. the core's other hyperthread running another guest's
   work on a unit the two share, such as Intel's AMX for bfloat16 matmul).

The kernels are the problem's own (``reference_kernels/<problem>/reference.py``: ``generate_input``
and ``ref_kernel``; the submission ``--example``, default ``correct_pytorch``), the case is the
problem's CPU benchmark case ``--case``, threads as the judge's children have them (OpenMP bound
one per CPU, huge-page allocations: ``runner.containment.childenv.child_environment``'s settings). No judge, no
sandbox: a figure of the machine, printed, never asserted. Beside each part, the share of the
CPUs' time the hypervisor gave to others while this guest wanted it (steal, ``/proc/stat``): a
moment with little steal is the host's shared hardware (caches, memory, a core's other
hyperthread, its clock), not this guest's vCPUs waiting.

Usage: ``python bench/host_stretches.py [--problem gemm] [--case 0] [--processes 6] [--turns 25]
[--calls 30] [--turn-s 0.25] [--example correct_pytorch]``. Takes about a minute and a half for
GEMM's CPU cases.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

#: The judge's children's thread settings (``runner.containment.childenv.child_environment``), set before
#: torch is first imported (below, through ``kernelrank.problems``) so that OpenMP reads them.
CHILD_THREADS = {"OMP_PROC_BIND": "close", "OMP_PLACES": "threads", "THP_MEM_ALLOC_ENABLE": "1"}
for _key, _value in CHILD_THREADS.items():
    os.environ.setdefault(_key, _value)

from kernelrank.problems import load_problem  # noqa: E402
from kernelrank.runner.host.hostprobe import cpu_ticks, steal_share  # noqa: E402
from kernelrank.runner.stats import lag1_autocorrelation  # noqa: E402


def _module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _kernels(problem: str, example: str) -> tuple[Any, Callable, Callable]:
    """``(reference module, submission's kernel, reference's kernel)`` for ``problem``."""
    folder = ROOT / "reference_kernels" / problem
    reference = _module(folder / "reference.py", f"bench_{problem}_reference")
    submission = _module(folder / "examples" / f"{example}.py", f"bench_{problem}_{example}")
    return reference, submission.custom_kernel, reference.ref_kernel


def ready_pair(problem: str, example: str, case: dict, seed: int, warm_up: int) -> tuple[Callable, Callable, list]:
    """``(submission's kernel, reference's kernel, sets)``: four input sets of ``case`` (seeds
    ``seed`` to ``seed + 3``), after ``warm_up`` calls of each kernel on them in turn."""
    reference, kernel, ref_kernel = _kernels(problem, example)
    sets = [reference.generate_input(**{**case, "seed": seed + i}) for i in range(4)]
    for i in range(warm_up):
        kernel(sets[i % 4])
        ref_kernel(sets[i % 4])
    return kernel, ref_kernel, sets


def add_case_arguments(ap: argparse.ArgumentParser) -> None:
    """``--problem``, ``--case`` and ``--example``: which kernels and which CPU benchmark case."""
    ap.add_argument("--problem", default="gemm")
    ap.add_argument("--case", type=int, default=0, help="index among the problem's CPU benchmark cases")
    ap.add_argument("--example", default="correct_pytorch")


def time_pair(kernel: Callable, ref_kernel: Callable, data: Any, sub: list[int], ref: list[int]) -> None:
    """One call of ``kernel`` then one of ``ref_kernel`` on ``data``; appends their times (ns,
    ``perf_counter_ns``) to ``sub`` and ``ref``."""
    t0 = time.perf_counter_ns()
    kernel(data)
    t1 = time.perf_counter_ns()
    ref_kernel(data)
    ref.append(time.perf_counter_ns() - t1)
    sub.append(t1 - t0)


def _median_us(fn: Callable, sets: list, calls: int) -> float:
    """Median time of ``calls`` calls of ``fn`` over ``sets`` in turn, µs (``perf_counter_ns``)."""
    times = []
    for i in range(calls):
        data = sets[i % len(sets)]
        started = time.perf_counter_ns()
        fn(data)
        times.append(time.perf_counter_ns() - started)
    return statistics.median(times) / 1000.0


def _worker(conn: Any, problem: str, example: str, case: dict, threads: int, seed: int, calls: int) -> None:
    import torch

    torch.set_num_threads(threads)
    reference, kernel, _ = _kernels(problem, example)
    sets = [reference.generate_input(**{**case, "seed": seed * 10 + i}) for i in range(4)]
    _median_us(kernel, sets, 10)  # warm-up
    while conn.recv():
        conn.send(_median_us(kernel, sets, calls))


def moment_or_process(problem: str, example: str, case: dict, processes: int, turns: int, calls: int,
                      threads: int) -> list[list[float]]:
    """Part 1: ``turns`` rows of ``processes`` medians (µs), the processes taking turns."""
    ctx = mp.get_context("fork")
    pipes, workers = [], []
    for p in range(processes):
        parent, child = ctx.Pipe()
        worker = ctx.Process(target=_worker, args=(child, problem, example, case, threads, p + 1, calls))
        worker.start()
        pipes.append(parent)
        workers.append(worker)
    rows = []
    try:
        for _ in range(turns):
            row = []
            for conn in pipes:
                conn.send(True)
                row.append(conn.recv())
            rows.append(row)
    finally:
        for conn in pipes:
            conn.send(False)
        for worker in workers:
            worker.join()
    return rows


def two_way(rows: list[list[float]]) -> tuple[float, float, float]:
    """Standard deviations of the logs' turn means, process means and residual (additive two-way
    split of ``log(rows)``, each as a fraction: 0.10 is about 10%)."""
    logs = [[math.log(v) for v in row] for row in rows]
    grand = statistics.mean(v for row in logs for v in row)
    turn_means = [statistics.mean(row) for row in logs]
    proc_means = [statistics.mean(col) for col in zip(*logs)]
    residual = [v - tm - pm + grand for row, tm in zip(logs, turn_means) for v, pm in zip(row, proc_means)]
    return statistics.pstdev(turn_means), statistics.pstdev(proc_means), statistics.pstdev(residual)


def speedup_by_turn(problem: str, example: str, case: dict, turns: int, calls: int,
                    threads: int) -> list[tuple[float, float]]:
    """Part 2 (in this process): per turn ``(submission's median, reference's median)`` in µs,
    the two alternating call by call on the same inputs."""
    import torch

    torch.set_num_threads(threads)
    kernel, ref_kernel, sets = ready_pair(problem, example, case, 100, 10)
    out = []
    for _ in range(turns):
        sub, ref = [], []
        for i in range(calls):
            time_pair(kernel, ref_kernel, sets[i % 4], sub, ref)
        out.append((statistics.median(sub) / 1000.0, statistics.median(ref) / 1000.0))
    return out


def _per_cpu_worker(conn: Any, cpu: int, problem: str, example: str, case: dict, start: float, turns: int,
                    turn_s: float) -> None:
    """Part 3's worker: pinned to ``cpu`` with one thread, ``turns`` turns that end at
    ``start + (k + 1) * turn_s`` (``time.monotonic``); sends per turn ``(submission's median,
    reference's median)`` in µs, then the CPU it ran its last call on (``/proc/self/stat``)."""
    import torch

    os.sched_setaffinity(0, {cpu})
    torch.set_num_threads(1)
    kernel, ref_kernel, sets = ready_pair(problem, example, case, 200 + 10 * cpu, 6)
    time.sleep(max(0.0, start - time.monotonic()))
    out = []
    for k in range(turns):
        deadline, sub, ref, i = start + (k + 1) * turn_s, [], [], 0
        while time.monotonic() < deadline or not sub:
            time_pair(kernel, ref_kernel, sets[i % 4], sub, ref)
            i += 1
        out.append((statistics.median(sub) / 1000.0, statistics.median(ref) / 1000.0))
    last_cpu = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[36])
    conn.send((out, last_cpu))


def per_cpu(problem: str, example: str, case: dict, cpus: list[int], turns: int,
            turn_s: float) -> dict[int, list[tuple[float, float]]]:
    """Part 3: per CPU of ``cpus``, its turns' ``(submission, reference)`` medians
    (µs), every CPU's process running at once (spawned, so none inherits this process's OpenMP).

    Raises:
        RuntimeError: a worker's last call ran on another CPU than the one it was pinned to."""
    ctx = mp.get_context("spawn")
    start = time.monotonic() + 15.0  # spawned processes import torch and warm up first
    pipes, workers = {}, []
    for cpu in cpus:
        parent, child = ctx.Pipe()
        worker = ctx.Process(target=_per_cpu_worker, args=(child, cpu, problem, example, case, start, turns, turn_s))
        worker.start()
        pipes[cpu] = parent
        workers.append(worker)
    found = {}
    for cpu, conn in pipes.items():
        rows, last_cpu = conn.recv()
        if last_cpu != cpu:
            raise RuntimeError(f"part 3's process for CPU {cpu} ran on CPU {last_cpu}: not pinned")
        found[cpu] = rows
    for worker in workers:
        worker.join()
    return found


def correlation(xs: list[float], ys: list[float]) -> float:
    """Pearson's correlation of two equally long series (``statistics.correlation``), 0.0 where
    either is constant."""
    try:
        return statistics.correlation(xs, ys)
    except statistics.StatisticsError:
        return 0.0


def main() -> None:
    """Parse the options, run both parts on the chosen case and print their figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_case_arguments(ap)
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--turns", type=int, default=25)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--turn-s", type=float, default=0.25, help="part 3: seconds a turn")
    a = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))  # before part 2's OpenMP binds this process to one
    case = load_problem(a.problem).definition.benchmarks["cpu"][a.case].params
    label = ", ".join(f"{k}={v}" for k, v in case.items() if k != "seed")
    print(f"{a.problem} case {a.case} ({label}), {a.example} against the reference, {a.threads} threads; "
          f"load average {os.getloadavg()[0]:.2f}")

    ticks = cpu_ticks()
    rows = moment_or_process(a.problem, a.example, case, a.processes, a.turns, a.calls, a.threads)
    steal_1, ticks = steal_share(ticks, cpu_ticks()), cpu_ticks()
    print(f"\n1. {a.processes} processes taking turns, {a.calls} calls of {a.example} a turn: medians, µs")
    for t, row in enumerate(rows):
        print(f"   turn {t:2d}: " + " ".join(f"{v:7.0f}" for v in row))
    moment, process, rest = two_way(rows)
    print(f"   sd of the log: the host's moment (turns) {moment * 100:.1f}%, the process (columns) "
          f"{process * 100:.1f}%, the rest {rest * 100:.1f}%; steal {steal_1 * 100:.1f}% of the CPUs' time")

    pairs = speedup_by_turn(a.problem, a.example, case, a.turns, a.calls, a.threads)
    steal_2 = steal_share(ticks, cpu_ticks())
    speedups = [r / s for s, r in pairs]
    q = statistics.quantiles(speedups, n=4)
    print(f"\n2. one process, {a.example} and the reference alternating, {a.calls} pairs a turn")
    for t, (s, r) in enumerate(pairs):
        print(f"   turn {t:2d}: submission {s:7.0f} µs  reference {r:7.0f} µs  speedup {r / s:5.2f}")
    logs = [math.log(x) for x in speedups]
    print(f"   speedup per turn: {min(speedups):.2f} / {q[0]:.2f} / {q[1]:.2f} / {q[2]:.2f} / {max(speedups):.2f} "
          f"(min, quartiles, max); sd of the log {statistics.pstdev(logs) * 100:.1f}%, lag-1 autocorrelation "
          f"{lag1_autocorrelation(logs):.2f}; steal {steal_2 * 100:.1f}% of the CPUs' time")

    ticks = cpu_ticks()
    found = per_cpu(a.problem, a.example, case, cpus, 2 * a.turns, a.turn_s)
    steal_3 = steal_share(ticks, cpu_ticks())
    print(f"\n3. one process per CPU, pinned, one thread each, all at once: {a.example} and the reference "
          f"alternating in turns of {a.turn_s:g} s; medians, µs (submission / reference)")
    for t in range(len(found[cpus[0]])):
        print(f"   turn {t:2d}: " + "   ".join(f"CPU {c}: {found[c][t][0]:7.0f} / {found[c][t][1]:7.0f}" for c in cpus))
    logs = {c: [math.log(s) for s, _ in found[c]] for c in cpus}  # the submission's, per CPU
    for c in cpus:
        ref = [math.log(r) for _, r in found[c]]
        subs = [s for s, _ in found[c]]
        print(f"   CPU {c}: sd of the log: submission {statistics.pstdev(logs[c]) * 100:.1f}%, reference "
              f"{statistics.pstdev(ref) * 100:.1f}%, speedup {statistics.pstdev([r - s for s, r in zip(logs[c], ref)]) * 100:.1f}%; "
              f"submission min {min(subs):.0f}, median {statistics.median(subs):.0f}, max {max(subs):.0f} µs")
    if len(cpus) > 1:
        pairs = [(x, y) for i, x in enumerate(cpus) for y in cpus[i + 1:]]
        print("   correlation of the CPUs' submission logs turn by turn: "
              + ", ".join(f"CPU {x} and {y} {correlation(logs[x], logs[y]):.2f}" for x, y in pairs)
              + f"; steal {steal_3 * 100:.1f}% of the CPUs' time")


if __name__ == "__main__":
    main()
