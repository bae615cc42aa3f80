"""Which estimator of a paired speedup, on timings recorded on this project's machines.

Reads recordings of ``bench/record_timings.py`` (``tests/fixtures/timings/*.json`` by default) and,
for every case of every run, estimates the speedup from the pairs as the judge would (both sides'
times judged by :func:`kernelrank.runner.judge.judging.judged_times`) with each candidate:

- ``mean``: exp(mean of the log ratios), t interval;
- ``trim20``: exp(20% trimmed mean of the log ratios), Tukey-McLaughlin interval (the judge's);
- ``median``: exp(median of the log ratios), distribution-free interval from order statistics;
- ``ratio``: mean of the reference's times over mean of the submission's, delta-method interval.

Printed per candidate, over the runs of a kernel *identical to the reference* (true speedup 1):
how far the estimates are from 1 (median and largest |log|), how often the 95% interval holds 1
(coverage; 95% is right, less means intervals that lie), the median half width, and the spread of
each run's geometric mean over cases (max/min over runs: what five scores of one file would
vary by). For the other files, the spread and the half width. Also the order effect (log ratio
when the submission went first minus when the reference did).

Usage: ``python bench/estimators.py [FILE.json ...]``
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from kernelrank.runner import stats
from kernelrank.runner.judge import judging

Estimator = Callable[[list[float], list[float]], stats.Interval]


def judged_pairs(pairs: list[list[int]]) -> tuple[list[float], list[float], list[int]]:
    """``(reference times, submission times, submission-first flags)`` of the counted pairs, as the
    judge counts them (recordings since the warm-up pairs were kept mark them in field 10)."""
    sub_c, sub_w, ref_c, ref_w, order = [], [], [], [], []
    for p in pairs:
        if len(p) >= 10 and not p[9]:
            continue
        first, sc, sw, _sm, rc, rw, _rm = p[:7]
        sub_c.append(sc), sub_w.append(sw), ref_c.append(rc), ref_w.append(rw), order.append(first)
    allowance = judging.overhead(ref_c, ref_w, q=judging.ALLOWANCE_QUANTILE)
    return judging.judged_times(ref_c, ref_w, allowance), judging.judged_times(sub_c, sub_w, allowance), order


def mean_log(ref: list[float], sub: list[float]) -> stats.Interval:
    return stats.paired_speedup(ref, sub, trim=0.0)


def trim20(ref: list[float], sub: list[float]) -> stats.Interval:
    return stats.paired_speedup(ref, sub, trim=0.2)


def median_log(ref: list[float], sub: list[float]) -> stats.Interval:
    """The median of the log ratios; interval between the order statistics ``k`` and ``n + 1 - k``
    with ``k`` from the binomial(n, 1/2) (normal approximation)."""
    logs = sorted(stats.log_ratios(ref, sub))
    n = len(logs)
    med = statistics.median(logs)
    k = max(1, int(math.floor((n + 1) / 2 - stats.Z975 * math.sqrt(n) / 2)))
    if n < 6:
        return stats.Interval(math.exp(med), 0.0, math.inf, math.inf, 0.0, n)
    low, high = logs[k - 1], logs[n - k]
    se = (high - low) / (2 * stats.Z975)
    return stats.Interval(math.exp(med), math.exp(low), math.exp(high), se, float(n - 1), n)


def ratio_of_means(ref: list[float], sub: list[float]) -> stats.Interval:
    """mean(ref) / mean(sub); delta-method standard error of its log (paired: with the covariance)."""
    n = len(ref)
    mr, ms = statistics.fmean(ref), statistics.fmean(sub)
    if n < 2:
        return stats.Interval(mr / ms, 0.0, math.inf, math.inf, 0.0, n)
    vr, vs = statistics.variance(ref), statistics.variance(sub)
    cov = sum((a - mr) * (b - ms) for a, b in zip(ref, sub)) / (n - 1)
    var = (vr / mr**2 + vs / ms**2 - 2 * cov / (mr * ms)) / n
    se = math.sqrt(max(var, 0.0))
    t = stats.t975(n - 1)
    r = mr / ms
    return stats.Interval(r, r * math.exp(-t * se), r * math.exp(t * se), se, float(n - 1), n)


ESTIMATORS: dict[str, Estimator] = {"mean": mean_log, "trim20": trim20, "median": median_log, "ratio": ratio_of_means}


def study(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per file, per estimator: the figures the module docstring names."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    by_file: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        if run["status"] == "passed" and run["cases"] and all(c["pairs"] for c in run["cases"]):
            by_file.setdefault(run["file"], []).append(run)
    for file, file_runs in by_file.items():
        identical = "identical" in file
        out[file] = {}
        for name, estimate in ESTIMATORS.items():
            errors, covered, widths, run_means = [], 0, [], []
            cases = 0
            for run in file_runs:
                intervals = []
                for case in run["cases"]:
                    ref, sub, _ = judged_pairs(case["pairs"])
                    i = estimate(ref, sub)
                    intervals.append(i)
                    cases += 1
                    errors.append(abs(math.log(i.estimate)))
                    covered += i.low <= 1.0 <= i.high
                    widths.append(i.half_width)
                run_means.append(stats.combine(intervals).estimate)
            out[file][name] = {
                "runs": len(file_runs), "cases": cases,
                "median_half_width": statistics.median(widths),
                "run_spread": max(run_means) / min(run_means),
                "run_geomean": stats.geometric_mean(run_means),
                **({"median_abs_log": statistics.median(errors), "max_abs_log": max(errors),
                    "coverage": covered / cases} if identical else {}),
            }
    return out


def order_effect(runs: list[dict[str, Any]]) -> list[float]:
    """Per case, mean log ratio when the submission went first minus when the reference did."""
    effects = []
    for run in runs:
        for case in run["cases"]:
            ref, sub, order = judged_pairs(case["pairs"])
            logs = stats.log_ratios(ref, sub)
            a = [x for x, f in zip(logs, order) if f]
            b = [x for x, f in zip(logs, order) if not f]
            if len(a) > 2 and len(b) > 2:
                effects.append(statistics.fmean(a) - statistics.fmean(b))
    return effects


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args()
    files = args.files or sorted((ROOT / "tests" / "fixtures" / "timings").glob("*.json"))
    for path in files:
        data = json.loads(path.read_text())
        runs = data["runs"]
        loads = [r["load_average"][0] for r in runs]
        print(f"\n{path.name}: {len(runs)} runs, load average {min(loads):.1f}-{max(loads):.1f}, "
              f"hog: {sorted({r['hog'] for r in runs})}")
        for file, figures in study(runs).items():
            print(f"  {file}")
            for name, f in figures.items():
                extra = (f"  |log| median {f['median_abs_log']:.3f} max {f['max_abs_log']:.3f}  "
                         f"coverage {f['coverage']:.0%}" if "coverage" in f else "")
                print(f"    {name:7s} runs {f['runs']}  geomean {f['run_geomean']:.3f}  spread {f['run_spread']:.3f}"
                      f"  half width {f['median_half_width']:.3f}{extra}")
        effects = order_effect(runs)
        if effects:
            print(f"  order effect (log, submission first - reference first): median {statistics.median(effects):+.3f},"
                  f" mean {statistics.fmean(effects):+.3f} over {len(effects)} cases")


if __name__ == "__main__":
    main()
