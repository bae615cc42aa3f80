"""Where a leaderboard submission's wall time goes: its public and secret runs made as a runner makes
them (one after the other, children forked from a warm zygote), each split into readying, input
sets, timed calls, checking and the rest; and, with ``--service``, POST to ranked verdict through a
real ``kernelrank serve`` on its embedded default.

The split of one run (seconds), from its phase events and each benchmark case's ``pairing``:

- readying: loading the submission, starting and loading the timed phase's further processes,
  each case's warm-up and the readying of its processes' memory;
- input sets: preparing each batch's fresh inputs and expected outputs (``prepare_s``);
- timed calls: the calls' own time, both sides (the sum of their claims, ``timed_share x wall``);
- checking: reading and checking the submission's outputs (``check_s``);
- the rest: the judge's path around the timed calls (thaw, socket hops, freeze), the tests,
  closing the processes.

Prints figures, asserts nothing (targets: issue #46 point 1: ranked within 20 s of the POST, both
runs included, at idle; figures: bench/README.md).

Usage: ``python bench/ranked.py [--problem softmax] [--file F] [--repeats 3] [--service]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.service import machine  # noqa: E402
from kernelrank.problems import load_problem  # noqa: E402
from kernelrank.runner.containment.buildcache import BuildCache  # noqa: E402
from kernelrank.runner.host.devices import cpu_threads  # noqa: E402
from kernelrank.runner.judge import timed  # noqa: E402
from kernelrank.runner.judge.harness import EvalOptions, evaluate  # noqa: E402
from kernelrank.runner.submission.zygote import Zygote  # noqa: E402
from kernelrank.settings import get_settings  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
IDENTICAL = ROOT / "bench" / "kernels" / "softmax_identical.py"
PARTS = ("readying", "input sets", "timed calls", "checking", "rest")


def split(result: Any, marks: dict[str, float]) -> dict[str, float]:
    """One run's wall time (s) by part (:data:`PARTS`), from its benchmark cases' ``pairing`` and
    the times (s since the run started) of its phase events in ``marks``."""
    total = result.duration_s
    parts = dict.fromkeys(PARTS, 0.0)
    parts["readying"] = marks.get("test", 0.0) + max(0.0, marks.get("benchmark", 0.0) - marks.get("reference", 0.0))
    for case in result.cases:
        p = case.pairing or {}
        if "wall_s" not in p:
            continue
        timed = p["timed_share"] * p["wall_s"]
        parts["input sets"] += p["prepare_s"]
        parts["timed calls"] += timed
        parts["checking"] += p["check_s"]
        parts["readying"] += max(0.0, p["wall_s"] - p["prepare_s"] - p["timed_phase_s"] - p["check_s"])
    parts["rest"] = max(0.0, total - sum(parts.values()))
    return parts


def one_run(spec: Any, source: str, zygote: Zygote, secret: int | None,
            processes: int | None = None, builds: Any = None) -> tuple[Any, dict[str, float]]:
    """A leaderboard run as a runner makes it (``builds``: the job's ``BuildCache``); ``(result, phase marks)``."""
    settings = get_settings()
    marks: dict[str, float] = {}
    t0 = time.monotonic()

    def on_event(e: dict[str, Any]) -> None:
        if e["event"] == "phase":
            marks[e["phase"]] = time.monotonic() - t0

    options = EvalOptions(threads=settings.cpu_threads, scratch_dir=settings.scratch_dir,
                          log_limit=settings.log_limit_bytes, secret=secret, zygote=zygote, processes=processes,
                          builds=builds)
    return evaluate(spec, source, "leaderboard", "cpu", options, on_event), marks


def with_budget(spec: Any, budget_s: float | None) -> Any:
    """The problem's revision with its CPU leaderboard budget per case set to ``budget_s`` seconds
    (``None``: unchanged), its revision suffixed so that nothing mistakes it for the problem's."""
    if budget_s is None:
        return spec
    d = spec.definition
    cpu = d.timing["cpu"].model_copy(update={"leaderboard": budget_s})
    return spec.__class__(d.model_copy(update={"timing": dict(d.timing, cpu=cpu)}), spec.reference_source,
                          f"{spec.revision}-budget{budget_s}")


def runs(problem: str, source: str, repeats: int, budget_s: float | None = None, processes: int | None = None) -> None:
    spec = with_budget(load_problem(problem).spec(), budget_s)
    zygote = Zygote.start("cpu", cpu_threads(get_settings().cpu_threads))  # as the runner: warm starts
    walls: list[float] = []
    try:
        print(f"{'run':>10} {'status':>7} {'speedup (95%)':>22} " + " ".join(f"{p:>11}" for p in PARTS) + "   wall")
        for n in range(repeats):
            t0 = time.monotonic()
            with BuildCache(get_settings().scratch_dir) as builds:  # one per job, as a runner keeps it
                for kind, secret in (("public", None), ("secret", 7919 * (n + 1))):
                    result, marks = one_run(spec, source, zygote, secret, processes, builds)
                    parts = split(result, marks)
                    ci = result.speedup_ci or [float("nan")] * 2
                    sp = f"{result.speedup or float('nan'):.3f} ({ci[0]:.3f}-{ci[1]:.3f})"
                    print(f"{kind:>10} {result.status:>7} {sp:>22} " + " ".join(f"{parts[p]:>10.2f}s" for p in PARTS)
                          + f"  {result.duration_s:5.1f}s")
            walls.append(time.monotonic() - t0)
        print(f"both runs: median {statistics.median(walls):.1f} s over {repeats} (max {max(walls):.1f} s)")
    finally:
        zygote.close()


def service(problem: str, source: str, repeats: int) -> None:
    import httpx

    from bench.service import API, embedded_service, follow

    with tempfile.TemporaryDirectory() as tmp, embedded_service(Path(tmp)) as svc:
        client = httpx.Client(base_url=svc.url, headers={"Authorization": f"Bearer {svc.admin_token}"}, timeout=30)
        for _ in range(repeats):
            t0 = time.monotonic()
            r = client.post(f"{API}/submissions", json={"problem": problem, "device": "cpu", "mode": "leaderboard",
                                                          "code": source})
            r.raise_for_status()
            sid = r.json()["id"]
            # long-polls: a client polling every 0.1 s cost the API ~10% of a core, into the timed calls
            sub = follow(client, sid, timeout_s=1800.0)
            status = sub.get("status", "none in 30 min")
            # each run's own wall time, so that a slow verdict shows where it waited (a run measured again)
            runs = ", ".join(f"{r['kind']} {r['result'].get('duration_s', 0.0):.1f} s" for r in sub.get("runs", [])
                             if isinstance(r.get("result"), dict))
            print(f"POST to verdict: {time.monotonic() - t0:.1f} s  {status} ranked={sub.get('ranked')} "
                  f"score {sub.get('score_ns')} measurements {sub.get('measurements')} (runs: {runs}) "
                  f"({sub.get('message', '')[:80]})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="softmax")
    ap.add_argument("--file", type=Path, default=None, help="the submission (default: softmax's identical kernel, "
                                                          "else the problem's correct_pytorch example)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=float, default=None, help="CPU leaderboard seconds per case (default: the problem's)")
    ap.add_argument("--processes", type=int, default=None, help="pairs of processes per case (default: the problem's)")
    ap.add_argument("--slices", type=int, default=None,
                    help="slices per pair of processes within a case's budget (timed.SLICES_PER_PROCESS; 1: as before "
                         "2026-12-02, every case ran its whole budget)")
    ap.add_argument("--slice-pairs", type=int, default=None,
                    help="counted pairs at which a CPU slice ends (timed.SLICE_PAIRS; 0: at its time only, as before "
                         "2026-12-03's fourth session)")
    ap.add_argument("--service", action="store_true", help="also POST it to a real kernelrank serve")
    args = ap.parse_args()
    file = args.file or (IDENTICAL if args.problem == "softmax"
                         else ROOT / "reference_kernels" / args.problem / "examples" / "correct_pytorch.py")
    if args.slices is not None:
        timed.SLICES_PER_PROCESS = args.slices
    if args.slice_pairs is not None:
        timed.SLICE_PAIRS["cpu"] = args.slice_pairs or None
    print(f"{machine()}; slice pairs {timed.SLICE_PAIRS['cpu']}; slices per process {timed.SLICES_PER_PROCESS}")
    source = file.read_text()
    runs(args.problem, source, args.repeats, args.budget, args.processes)
    if args.service:
        service(args.problem, source, args.repeats)


if __name__ == "__main__":
    main()
