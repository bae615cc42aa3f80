"""What containment costs per call: freeze and thaw latency of a job's cgroup, and the
judge's window less the child's claim, contained (frozen outside requests) and not; and what the
judge's checks of claims cost per request: reading the job's CPU time (twice a request, inside the
window), reading the child's mappings for the output's address (once a request, outside it) and
the CPU-time rule itself (``judging.cpu_charges``, once a case).

Usage: ``.venv/bin/python bench/containment.py [--calls 60]`` (as root, for cgroups). Prints
p10/p50/p90 in µs. The kernel is the softmax example on a 4096x1024 float32 input (16 MiB in,
16 MiB out), the first benchmark case of ``softmax`` on the CPU.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from kernelrank.runner.containment import cgroups, isolation_check
from kernelrank.runner.containment.sandbox import SubmissionProcess

ROOT = Path(__file__).resolve().parent.parent
SOURCE = (ROOT / "reference_kernels" / "softmax" / "examples" / "correct_pytorch.py").read_text()


def _q(xs: list[int], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] / 1e3


def measure(contain: bool, calls: int) -> None:
    method, _ = isolation_check.choose("auto")
    p = SubmissionProcess(SOURCE, "cpu", 2, method=method, contain=contain)
    deadline = time.monotonic() + 120
    try:
        p.start(deadline)
        p.request({"op": "load"}, deadline)
        x = torch.randn(4096, 1024)
        gaps, claims, freeze, thaw, cpu_read, maps_read = [], [], [], [], [], []
        for i in range(calls):
            layout = p.arena.place((x,), 2 * x.numel() * 4)
            reply = p.request({"op": "go", "inputs": layout, "repeat": 1, "direct": p.memory is not None}, deadline)
            t0 = time.perf_counter_ns()
            p.arena.read_output(reply["out"], p.memory)  # the first read of the request reads the mappings
            t1 = time.perf_counter_ns()
            p.arena.read_output(reply["out"], p.memory)
            t2 = time.perf_counter_ns()
            p.cpu_ns()
            t3 = time.perf_counter_ns()
            if i >= 5 and p.memory is not None:
                maps_read.append((t1 - t0) - (t2 - t1))
                cpu_read.append(t3 - t2)
            if i >= 5:  # warm
                gaps.append(p.span_ns - reply["times_ns"][0])
                claims.append(reply["times_ns"][0])
            if contain and p.group is not None and i >= 5:
                t0 = time.perf_counter_ns()
                p.group.thaw()
                t1 = time.perf_counter_ns()
                p.group.freeze()
                t2 = time.perf_counter_ns()
                thaw.append(t1 - t0)
                freeze.append(t2 - t1)
        label = f"contained ({p.containment})" if contain else "uncontained"
        print(f"{label:>22}: claim p50 {statistics.median(claims) / 1e3:8.0f} µs; window - claim "
              f"p10 {_q(gaps, .1):6.0f} p50 {_q(gaps, .5):6.0f} p90 {_q(gaps, .9):6.0f} µs")
        if cpu_read:
            print(f"{'':>22}  job CPU time read p50 {_q(cpu_read, .5):.1f} µs (x2 a request); child's mappings "
                  f"read p50 {_q(maps_read, .5):.0f} p90 {_q(maps_read, .9):.0f} µs (x1 a request, frozen)")
        if freeze:
            print(f"{'':>22}  freeze p50 {_q(freeze, .5):.0f} p90 {_q(freeze, .9):.0f} µs; "
                  f"thaw p50 {_q(thaw, .5):.0f} p90 {_q(thaw, .9):.0f} µs")
    finally:
        p.close()


def rule_cost(requests: int = 1000) -> None:
    """The CPU-time rule's own cost per request (µs): a case of ``requests`` single-call requests."""
    import random

    from kernelrank.runner.judge import judging

    rng = random.Random(0)
    claims = [rng.randint(1_000_000, 2_000_000) for _ in range(requests)]
    cpu = [2 * c + rng.randint(4_000_000, 6_000_000) for c in claims]
    t0 = time.perf_counter_ns()
    path = judging.cpu_path(claims, cpu, 2)
    judging.cpu_charges(claims, cpu, path, 2)
    per = (time.perf_counter_ns() - t0) / requests / 1e3
    print(f"{'':>22}  CPU-time rule: {per:.2f} µs a request ({requests} requests, once a case, after timing)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=60)
    args = ap.parse_args()
    print(f"cgroup layout: {cgroups.detect().name}")
    for contain in (True, False):
        measure(contain, args.calls)
    rule_cost()


if __name__ == "__main__":
    main()
