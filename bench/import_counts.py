"""Figures of the importers over real checkouts: how many problems import for CPU and CUDA, for
CUDA only, and how many are refused (by reason); for GPU MODE, whether the sources' own solutions
are judged as they should be (``solutions/correct`` passed, ``solutions/wrong`` failed) on the CPU.

    .venv/bin/python bench/import_counts.py --gpumode ../reference-kernels/problems \\
        --kernelbench ../KernelBench/KernelBench [--commit-gpumode SHA] [--commit-kernelbench SHA] \\
        [--solutions] [--rows]

Problems are written into a temporary folder (the configured ones are not touched). The commit of
each checkout is read with ``git rev-parse HEAD`` when the path is inside a work tree, else taken
from ``--commit-*``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: A solution that compiles GPU code cannot run on a CPU-only machine: counted, not judged.
GPU_CODE = re.compile(r"load_inline|cpp_extension|import triton|from triton")


def _commit(path: Path, given: str | None) -> str:
    if given:
        return given
    p = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else "unknown (pass --commit-...)"


def _solutions(rows, refs: Path) -> Counter:
    """Each imported (CPU) problem's ``examples/correct_*`` and ``wrong_*`` judged in test mode on the CPU."""
    from kernelrank.problems import load_problem
    from kernelrank.runner.judge.harness import EvalOptions, evaluate
    from kernelrank.vocab import Verdict

    out: Counter = Counter()
    with tempfile.TemporaryDirectory() as scratch:
        options = EvalOptions(scratch_dir=Path(scratch) / "s", trace_dir=Path(scratch) / "t", processes=1)
        for row in rows:
            if row.outcome != "imported":
                continue
            spec = load_problem(row.name).spec()
            for path in sorted((refs / row.name / "examples").glob("*.py")):
                kind = "correct" if path.name.startswith("correct_") else "wrong"
                text = path.read_text(encoding="utf-8")
                if GPU_CODE.search(text):
                    out[f"{kind} not run (GPU code: CUDA, Triton)"] += 1
                    continue
                status = evaluate(spec, text, "test", "cpu", options).status
                good = (status is Verdict.passed) == (kind == "correct")
                out[f"{kind} {'as expected' if good else 'NOT as expected'}"] += 1
                if not good:
                    print(f"    {row.name}/{path.name}: {status}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpumode", type=Path, help="GPU MODE reference-kernels' problems folder")
    ap.add_argument("--kernelbench", type=Path, help="KernelBench's KernelBench folder (levels)")
    ap.add_argument("--commit-gpumode")
    ap.add_argument("--commit-kernelbench")
    ap.add_argument("--solutions", action="store_true", help="judge GPU MODE's solutions/ on the CPU")
    ap.add_argument("--rows", action="store_true", help="print every row as it is decided")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kernelrank-imports-"))
    os.environ["KERNELRANK_PROBLEMS_DIR"] = str(work / "problems")
    os.environ["KERNELRANK_REFERENCE_KERNELS_DIR"] = str(work / "reference_kernels")
    from kernelrank.importers.batch import counts, import_tree, reason_class

    for kind, root, commit in (("gpumode", args.gpumode, args.commit_gpumode),
                               ("kernelbench", args.kernelbench, args.commit_kernelbench)):
        if root is None:
            continue
        t0 = time.perf_counter()
        show = (lambda r: print(f"  {r.outcome:9} {r.name} {r.reason[:160]}", flush=True)) if args.rows else None
        rows = import_tree(kind, root, on_row=show)
        n = counts(rows)
        print(f"{kind} {root} @ {_commit(root, commit)}: {len(rows)} sources in {time.perf_counter() - t0:.0f} s")
        print(f"  imported for CPU and CUDA {n['imported']}, CUDA only {n['cuda-only']}, refused {n['refused']}")
        for outcome in ("cuda-only", "refused"):
            for reason, c in Counter(reason_class(r.reason) for r in rows if r.outcome == outcome).most_common():
                print(f"    {outcome}: {reason}: {c}")
        if args.solutions and kind == "gpumode":
            for k, c in sorted(_solutions(rows, work / "reference_kernels").items()):
                print(f"  solutions {k}: {c}")
    print(f"(problems written under {work})")


if __name__ == "__main__":
    main()
