"""Would a per-core probe of the host's moment steady GEMM's speedup? A feasibility study, no judge.

Section 23 of bench/README.md (issue 14): on this project's Xeon VM each vCPU's bfloat16 matmul
(oneDNN on AMX) runs at one of two speeds a factor of 2 apart, for seconds to minutes, while the
float32 reference moves far less, so a run's speedup depends on how much of it the cores spent
slow. The method this script tries before anyone builds it into the judge: before each request
(``--pairs`` pairs of the submission and the reference alternating on the problem's inputs, in
this process, threads as the children have them), a probe process pinned to each CPU times a
short one-thread bfloat16 matmul (``torch.mm`` on ``[--probe-n, --probe-n]`` operands, the least
of three calls), this process idle meanwhile as the judge's children would be frozen. A core is
"fast" when its probe is within ``--fast-within`` of the least that core has read so far
(the first ``--settle`` requests only learn it). Requests are then grouped by state (every core
fast, or not) and the speedup of each group is taken over blocks of ``--block-s`` seconds, as
if each block were one run.

Printed, per block: the speedup of all its requests (trimmed mean of the logs, as
``runner.stats.trimmed_mean``), of the all-fast requests and of the others, with how many
requests each had; then the max/min of each column over the blocks. If the all-fast column
agrees within a few percent while the all-requests column spreads, conditioning on the probe
would steady the score; if the all-fast column is often empty, a run could not be ranked on it.

Usage: ``python bench/core_states.py [--problem gemm] [--case 0] [--blocks 6] [--block-s 60]``.
Takes ``blocks * block_s`` seconds and a little more. Figures of the machine, printed, never
asserted.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))

# importing host_stretches first sets the children's thread settings before torch is loaded
from host_stretches import add_case_arguments, ready_pair, time_pair  # noqa: E402
from kernelrank.problems import load_problem  # noqa: E402
from kernelrank.runner.stats import trimmed_mean  # noqa: E402


def _probe_worker(conn: Any, cpu: int, n: int) -> None:
    """Pinned to ``cpu`` with one thread; on each request sends the least of three ``torch.mm``
    calls on bfloat16 ``[n, n]`` operands, in µs, until it receives ``False``."""
    import torch

    os.sched_setaffinity(0, {cpu})
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(cpu)
    a = torch.randn(n, n, generator=gen).to(torch.bfloat16)
    b = torch.randn(n, n, generator=gen).to(torch.bfloat16)
    for _ in range(20):
        torch.mm(a, b)
    while conn.recv():
        best = math.inf
        for _ in range(3):
            t0 = time.perf_counter_ns()
            torch.mm(a, b)
            best = min(best, time.perf_counter_ns() - t0)
        conn.send(best / 1000.0)


def _column(logs: list[float]) -> tuple[float, int]:
    """``(speedup, requests)``: the trimmed mean of the logs, exponentiated (nan when empty)."""
    if not logs:
        return math.nan, 0
    return math.exp(trimmed_mean(logs)[0]), len(logs)


def main() -> None:
    """Run the probes and the pairs, print each block's speedups by state and their spread."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_case_arguments(ap)
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--block-s", type=float, default=60.0)
    ap.add_argument("--pairs", type=int, default=5, help="pairs per request")
    ap.add_argument("--probe-n", type=int, default=256)
    ap.add_argument("--fast-within", type=float, default=1.4)
    ap.add_argument("--settle", type=int, default=20)
    a = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    case = load_problem(a.problem).definition.benchmarks["cpu"][a.case].params

    ctx = mp.get_context("spawn")
    probes = []
    for cpu in cpus:
        parent, child = ctx.Pipe()
        ctx.Process(target=_probe_worker, args=(child, cpu, a.probe_n), daemon=True).start()
        probes.append(parent)

    import torch

    torch.set_num_threads(len(cpus))
    kernel, ref_kernel, sets = ready_pair(a.problem, a.example, case, 300, 10)
    label = ", ".join(f"{k}={v}" for k, v in case.items() if k != "seed")
    print(f"{a.problem} case {a.case} ({label}), {a.example} against the reference, {len(cpus)} threads; "
          f"probe: bfloat16 mm {a.probe_n}^2 per CPU, fast within {a.fast_within}x of its least; "
          f"load average {os.getloadavg()[0]:.2f}")

    least = [math.inf] * len(cpus)
    blocks: list[dict[str, list[float]]] = []
    requests = 0
    for _ in range(a.blocks):
        block: dict[str, list[float]] = {"all": [], "fast": [], "other": []}
        end = time.monotonic() + a.block_s
        while time.monotonic() < end:
            time.sleep(0.005)  # this process's OpenMP workers stop spinning, as frozen children would be
            for conn in probes:
                conn.send(True)
            probe = [conn.recv() for conn in probes]
            least = [min(x, y) for x, y in zip(least, probe)]
            sub, ref = [], []
            for i in range(a.pairs):
                time_pair(kernel, ref_kernel, sets[(requests + i) % 4], sub, ref)
            requests += 1
            if requests <= a.settle:
                continue
            log = math.log(statistics.median(ref) / statistics.median(sub))
            fast = all(p <= a.fast_within * m for p, m in zip(probe, least))
            block["all"].append(log)
            block["fast" if fast else "other"].append(log)
        blocks.append(block)
        cols = {k: _column(v) for k, v in block.items()}
        print(f"block {len(blocks)}: all {cols['all'][0]:.3f} ({cols['all'][1]}), all cores fast "
              f"{cols['fast'][0]:.3f} ({cols['fast'][1]}), others {cols['other'][0]:.3f} ({cols['other'][1]}); "
              f"least probe per CPU " + ", ".join(f"{m:.0f}" for m in least) + " µs", flush=True)
    for conn in probes:
        conn.send(False)

    print("\nmax/min over the blocks (blocks with requests in the column):")
    for key, name in (("all", "all requests"), ("fast", "all cores fast"), ("other", "the others")):
        values = [_column(b[key])[0] for b in blocks if b[key]]
        if values:
            print(f"   {name}: {max(values) / min(values):.3f} ({len(values)} of {len(blocks)} blocks; "
                  f"{min(values):.3f} .. {max(values):.3f})")
        else:
            print(f"   {name}: no block had any")


if __name__ == "__main__":
    main()
