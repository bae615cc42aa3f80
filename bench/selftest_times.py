"""How long a runner's self-test takes here: the quick one (what a runner runs before its first
job), the probes a restart with a cached pass runs, and optionally the full one.

Each runs as the runner runs it (``python -m kernelrank.runner.host.selftest --json``, a fresh
process, a cache folder of its own), and the script prints its wall time, its steps, its checks,
the slowest steps and the seconds per kind of step (the medians behind
``selftest.STEP_SECONDS``).

Usage: ``python bench/selftest_times.py [--device cpu] [--full]``. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(device: str, scope: str, cache: Path, cached: bool = False) -> tuple[float, dict, dict[str, float]]:
    """One self-test in a new process: ``(wall seconds, summary, seconds per step)``."""
    env = {**os.environ, "KERNELRANK_RUNNER_CACHE_DIR": str(cache)}
    argv = [sys.executable, "-m", "kernelrank.runner.host.selftest", "--device", device, "--scope", scope, "--json"]
    started = time.monotonic()
    out = subprocess.run(argv + (["--cached"] if cached else []), capture_output=True, text=True, env=env)
    wall = time.monotonic() - started
    lines = out.stdout.strip().splitlines()
    summary = json.loads(lines[-1]) if lines else {"status": f"no summary (exit {out.returncode})"}
    seconds = json.loads((cache / f"self-test-seconds-{device}.json").read_text())
    return wall, summary, seconds


def kind(label: str) -> str:
    """A step's kind from its label, as ``SelfTest.plan`` names them."""
    if "/attacks/" in label:
        return "attack"
    if "load_inline" in label:
        return "build"
    mode = label.rsplit("(", 1)[-1].rstrip(")") if label.endswith(")") else ""
    if mode in ("test", "benchmark", "leaderboard", "profile"):
        return ("build-timed" if mode in ("benchmark", "leaderboard") else "build") if "cpp" in label else mode
    return "clock" if "clock" in label else "test"


def report(name: str, wall: float, summary: dict, seconds: dict[str, float], labels: set[str] | None = None) -> None:
    mine = {k: v for k, v in seconds.items() if labels is None or k in labels}
    print(f"\n{name}: {wall:.0f} s wall, status {summary.get('status')}, {summary.get('checks')} checks, "
          f"{len(mine)} steps, scope {summary.get('scope')}")
    for label, s in sorted(mine.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {s:7.1f} s  {label}")
    by_kind: dict[str, list[float]] = {}
    for label, s in mine.items():
        by_kind.setdefault(kind(label), []).append(s)
    print("  median per kind: " + ", ".join(f"{k} {statistics.median(v):.1f} s (n={len(v)})"
                                            for k, v in sorted(by_kind.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--full", action="store_true", help="also the full self-test (half an hour or more on 2 cores)")
    args = parser.parse_args()
    print(f"self-test times on {os.cpu_count()} CPUs, device {args.device}")
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        wall, summary, seconds = run(args.device, "quick", cache)
        report("quick (a runner's first start)", wall, summary, seconds)
        quick_labels = set(seconds)
        wall, summary, after = run(args.device, "quick", cache, cached=True)
        probes = {k for k in after if after[k] != seconds.get(k)} or set(after) - quick_labels
        report("probes (a restart with the quick pass cached)", wall, summary, after, probes)
        if args.full:
            wall, summary, seconds = run(args.device, "full", cache)
            report("full (--self-test --full)", wall, summary, seconds)


if __name__ == "__main__":
    main()
