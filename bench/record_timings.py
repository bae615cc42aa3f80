"""Record the judge's raw paired timings of real leaderboard runs into a JSON file.

Each run of each file is judged in leaderboard mode on the CPU (``kernelrank.runner.judge.harness``,
child and reference contained as on a runner); every pair the judge timed, counted or not, is
kept as the harness's ``pairs`` event gives it (``[submission first, its claim, window,
main-thread CPU, the reference's claim, window, main-thread CPU]``, ns), with the run's figures. ``tests/fixtures/timings/`` holds such recordings; ``docs/research/studies/estimators.py``
and ``tests/runner/test_stats.py`` read them.

Usage: ``python bench/record_timings.py OUT.json [--problem softmax] [--runs 3] [--hog]
[--file PATH ...]`` (default files: the softmax reference's own computation and the
``correct_pytorch`` example).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from cpu_hog import hog  # noqa: E402

from kernelrank.problems import load_problem  # noqa: E402
from kernelrank.runner.host.devices import cpu_threads, device_info  # noqa: E402
from kernelrank.runner.judge.harness import EvalOptions, evaluate  # noqa: E402
from kernelrank.vocab import CaseKind, DeviceClass, Mode  # noqa: E402

DEFAULT_FILES = (ROOT / "bench" / "kernels" / "softmax_identical.py",
                 ROOT / "reference_kernels" / "softmax" / "examples" / "correct_pytorch.py")


def record(problem: str, path: Path, options: EvalOptions, loaded: bool) -> dict[str, Any]:
    """One leaderboard run of ``path``: its pairs per case and its figures."""
    spec = load_problem(problem).spec()
    cases: dict[int, list[list[int]]] = {}

    def on_event(e: dict[str, Any]) -> None:
        if e["event"] == "pairs":
            cases[e["case"]] = e["pairs"]

    load_before = os.getloadavg()[0]
    started = time.monotonic()
    r = evaluate(spec, path.read_text(encoding="utf-8"), Mode.leaderboard, DeviceClass.cpu, options, on_event)
    bench = [c for c in r.cases if c.kind == CaseKind.benchmark]
    return {
        "file": str(path.relative_to(ROOT)), "problem": problem, "hog": loaded, "status": r.status.value,
        "load_average": [load_before, os.getloadavg()[0]], "seconds": time.monotonic() - started,
        "score_ns": r.score_ns, "speedup": r.speedup, "speedup_ci": r.speedup_ci, "noisy": r.noisy,
        "cases": [{"index": c.index, "params": c.spec, "speedup": c.speedup, "speedup_ci": c.speedup_ci,
                   "reference_ns": c.reference_ns, "pairing": c.pairing, "pairs": cases.get(c.index, [])}
                  for c in bench],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--problem", default="softmax")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hog", action="store_true", help="with bench/cpu_hog.py spinning on one CPU")
    parser.add_argument("--file", type=Path, action="append", help="submission files (default: see above)")
    args = parser.parse_args()
    files = [p.resolve() for p in args.file] if args.file else list(DEFAULT_FILES)
    threads = cpu_threads(0)
    info = device_info("cpu", threads)
    out: dict[str, Any] = {"machine": {"cpu": info.name, "threads": threads, "torch": info.torch,
                                       "python": platform.python_version(), "kernel": platform.release()},
                           "recorded": time.strftime("%Y-%m-%d %H:%M"), "runs": []}
    if args.out.exists():
        out["runs"] = json.loads(args.out.read_text())["runs"]
    with tempfile.TemporaryDirectory() as tmp:
        options = EvalOptions(threads=threads, scratch_dir=Path(tmp) / "scratch")
        with hog() if args.hog else contextlib.nullcontext():
            for i in range(args.runs):
                for path in files:
                    run = record(args.problem, path, options, args.hog)
                    out["runs"].append(run)
                    print(f"{run['file']}: {run['status']} speedup {run['speedup']} {run['speedup_ci']} "
                          f"({run['seconds']:.0f} s, load {run['load_average'][0]:.1f})", flush=True)
                    args.out.write_text(json.dumps(out, separators=(",", ":")))


if __name__ == "__main__":
    main()
