"""Rich rendering of problems and evaluation results for the terminal (no logic of its own)."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.markdown import Markdown
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kernelrank.problems import DEVICE_CLASSES, Problem
from kernelrank.runner.results import CaseResult, EvalResult, Status
from kernelrank.vocab import MODES

_STATUS_STYLE = {
    Status.passed: "bold green",
    Status.failed: "bold red",
    Status.error: "bold red",
    Status.timeout: "bold yellow",
    Status.compile_error: "bold magenta",
    Status.rejected: "bold red",
}


def format_ns(ns: float | None) -> str:
    """A time in ns as the most readable of ns, µs, ms, s."""
    if ns is None:
        return "-"
    if ns < 1e3:
        return f"{ns:.0f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.2f} µs"
    if ns < 1e9:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e9:.3f} s"


def problems_table(problems: list[Problem]) -> Table:
    table = Table(title="Problems")
    for col in ("name", "title", "tests", "cpu cases", "cuda cases", "revision"):
        table.add_column(col)
    for p in problems:
        d = p.definition
        table.add_row(p.name, d.title, str(len(d.tests)), str(len(d.benchmarks["cpu"])),
                      str(len(d.benchmarks["cuda"])), p.revision[:12])
    return table


def _cases_table(title: str, cases: list[Any]) -> Table:
    keys: list[str] = []
    for c in cases:
        keys += [k for k in c.params if k not in keys]
    table = Table(title=title)
    table.add_column("#", justify="right")
    for k in keys:
        table.add_column(k, justify="right")
    for i, c in enumerate(cases):
        table.add_row(str(i), *[str(c.params.get(k, "")) for k in keys])
    return table


def problem_detail(problem: Problem) -> Group:
    """Description, data contract, tolerances, budgets and every case of one problem."""
    d = problem.definition
    contract = Table(title="Data contract: custom_kernel(data) -> output")
    for col in ("", "name", "shape", "dtype", "description"):
        contract.add_column(col)
    for i, a in enumerate(d.contract.data):  # escaped: "tuple[torch.Tensor, ...]" is no Rich markup
        contract.add_row(f"data[{i}]", *(escape(x) for x in (a.name, a.shape or "", a.dtype, a.description)))
    o = d.contract.output
    contract.add_row("output", *(escape(x) for x in (o.name, o.shape or "", o.dtype, o.description)))
    tol = Table(title="Tolerances: |out - ref| <= atol + rtol * |ref|")
    for col in ("output dtype", "atol", "rtol"):
        tol.add_column(col)
    for dtype, t in d.tolerances.items():
        tol.add_row(dtype, f"{t.atol:g}", f"{t.rtol:g}")
    budgets = Table(title="Time budgets (s of wall time)")
    for col in ("compile", *MODES):
        budgets.add_column(col, justify="right")
    b = d.budgets
    budgets.add_row(*[f"{getattr(b, m):g}" for m in ("compile", *MODES)])
    parts: list[Any] = [
        Panel(Markdown(d.description), title=f"{d.title} ({problem.name}, revision {problem.revision[:12]})"),
        contract,
    ]
    if d.contract.notes:
        parts.append(Text(d.contract.notes))
    parts += [tol, budgets, _cases_table("Test cases", d.tests)]
    parts += [_cases_table(f"Benchmark cases ({dev})", d.benchmarks[dev]) for dev in DEVICE_CLASSES]
    parts.append(Text(f"Ranking: {d.ranking} over benchmark cases of each case's time: the reference's (calibrated) "
                      "time over the case's speedup, timed side by side with the reference (lower is better)."))
    return Group(*parts)


def _case_text(c: CaseResult) -> str:
    return " ".join(f"{k}={v}" for k, v in c.spec.items() if k != "seed")


def _tests_table(r: EvalResult) -> Table:
    table = Table(title=f"{r.problem} · test cases · {r.device}")
    for col in ("#", "case", "ok", "max abs err", "max rel err", "mismatches"):
        table.add_column(col, justify="left" if col in ("case", "ok") else "right")
    for c in r.cases:
        if c.kind != "test":
            continue
        table.add_row(str(c.index), _case_text(c), _ok(c), _num(c.max_abs_error), _num(c.max_rel_error),
                      str(c.mismatches))
    return table


def _bench_table(r: EvalResult) -> Table:
    table = Table(title=f"{r.problem} · {r.mode} · {r.device}")
    for col in ("#", "case", "ok", "runs", "mean", "std", "min", "max", "TFLOP/s", "GB/s", "ref mean",
                "speedup (95%)", "in calls"):
        table.add_column(col, justify="left" if col in ("case", "ok") else "right")
    for c in r.cases:
        if c.kind != "benchmark":
            continue
        t = c.timing or {}
        ci = c.speedup_ci
        if c.interpreted:
            speedup = "interpreted"
        else:
            speedup = "-" if c.speedup is None else f"{c.speedup:.2f}x"
            speedup += f" ({ci[0]:.2f}-{ci[1]:.2f})" if ci else ""
            speedup += " [yellow]noisy[/]" if c.noisy else ""
        share = (c.pairing or {}).get("timed_share")
        table.add_row(str(c.index), _case_text(c), _ok(c), str(t.get("runs", "")), format_ns(t.get("mean_ns")),
                      format_ns(t.get("std_ns")), format_ns(t.get("min_ns")), format_ns(t.get("max_ns")),
                      _num(c.tflops), _num(c.gbps), format_ns(c.ref_mean_ns), speedup,
                      "-" if share is None else f"{share:.0%}")
    return table


def _ok(c: CaseResult) -> str:
    return "[green]pass[/]" if c.passed else "[red]FAIL[/]"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def result_view(r: EvalResult) -> Group:
    """The result tables, the verdict and, when present, the profile table and logs."""
    parts: list[Any] = []
    if any(c.kind == "test" for c in r.cases):
        parts.append(_tests_table(r))
    if any(c.kind == "benchmark" for c in r.cases):
        parts.append(_bench_table(r))
    style = _STATUS_STYLE[r.status]
    parts.append(Text.assemble(("verdict: ", "bold"), (r.status.value, style), f"  ({r.problem}, {r.mode}, "
                               f"{r.device}, revision {r.revision[:12]})"))
    if r.score_ns is not None:
        ci = r.score_ci_ns
        basis = "the calibrated reference" if r.basis == "calibration" else "this run's reference"
        parts.append(Text(f"score: {format_ns(r.score_ns)}"
                          + (f" (95% interval {format_ns(ci[0])} .. {format_ns(ci[1])})" if ci else "")
                          + f": geometric mean over cases of {basis}'s time over the paired speedup"))
    if r.speedup is not None:
        ci = r.speedup_ci
        parts.append(Text(f"speedup over the reference: {r.speedup:.2f}x"
                          + (f" (95% interval {ci[0]:.2f} .. {ci[1]:.2f}), timed side by side in this run" if ci else "")))
    if r.interpreted:
        parts.append(Text("interpreted: the Triton kernels ran under Triton's interpreter (the CPU has no Triton "
                          "backend); outputs checked, times not comparable with native code, no score", style="yellow"))
    if r.noisy:
        parts.append(Text("too noisy to rank: a case's interval stayed wide after its extra time; measure again",
                          style="yellow"))
    parts.append(Text(r.message))
    if r.profile:
        parts.append(Panel(Text(r.profile.get("table", "")), title=f"profile: kernels by {r.profile.get('sort_by')}"))
        if r.profile.get("trace_file"):
            parts.append(Text(f"Chrome trace: {r.profile['trace_file']}"))
    for stream in ("stdout", "stderr"):
        if r.logs.get(stream, "").strip():
            parts.append(Panel(Text(r.logs[stream]), title=f"submission {stream}"))
    return Group(*parts)


def make_console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False)
