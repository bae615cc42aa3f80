"""The judge side of ``tests/runner/test_attacks.py``, run as its own process.

``python -m tests.runner.attack_judge JOB_FILE`` reads a job (JSON) the way a runner holds one:
problem, the attack's source path, the secret seed, scratch and cache folders. It judges the
attack in leaderboard mode with :func:`kernelrank.runner.judge.harness.evaluate`, its children forked
from a zygote as a runner's are (the warm path, where hostile code meets the service), writes the
result, then judges a correct submission (test mode) with the same options and zygote in the same
process, to show the judge is still fine afterwards, and writes that result too.

The judge is a separate process on purpose: an attack that kills, stops or crashes its judge
takes this process down, never pytest, and the test reports it. Budgets are shrunk so a hang
costs seconds, not the problem's ten minutes; the revision stays the problem's own (a cache
the attack may try to poison is keyed by it, as on a real runner).
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any


def fast_spec(name: str, timing_s: float, mode_budget_s: float, compile_s: float) -> Any:
    """The problem's spec with short budgets and per-case timing; same revision and reference."""
    from kernelrank.problems import ProblemSpec, load_problem

    problem = load_problem(name)
    d = problem.definition
    timing = {k: v.model_copy(update={"leaderboard": timing_s, "benchmark": timing_s}) for k, v in d.timing.items()}
    budgets = d.budgets.model_copy(update={"compile": compile_s, "test": mode_budget_s,
                                           "leaderboard": mode_budget_s})
    return ProblemSpec(d.model_copy(update={"timing": timing, "budgets": budgets}), problem.reference_source,
                       problem.revision)


def _write(path: Path, payload: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, default=str), encoding="utf-8")
    tmp.replace(path)


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    from kernelrank.runner.host.devices import cpu_threads
    from kernelrank.runner.judge.harness import EvalOptions, evaluate
    from kernelrank.runner.submission.zygote import Zygote

    spec = fast_spec(job["problem"], job["timing_s"], job["mode_budget_s"], job["compile_s"])
    threads = cpu_threads(0)
    zygote = Zygote.start("cpu", threads) if job.get("start", "warm") == "warm" else None
    # one pair of processes: the verdict is what is checked here, not the timing statistics
    options = EvalOptions(threads=threads, scratch_dir=Path(job["scratch_dir"]), secret=int(job["secret_seed"]),
                          log_limit=int(job["log_limit"]), processes=int(job.get("processes", 1)), zygote=zygote)
    out = Path(job["results_dir"])
    try:
        for key, source_path, mode in (("attack", job["attack"], "leaderboard"), ("correct", job["correct"], "test")):
            source = Path(source_path).read_text(encoding="utf-8")
            try:
                result = evaluate(spec, source, mode, "cpu", options).to_dict()
            except BaseException:  # noqa: BLE001 - the harness must never raise for a submission: record it
                result = {"judge_crashed": traceback.format_exc()}
            _write(out / f"{key}.json", result)
    finally:
        if zygote is not None:
            zygote.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
