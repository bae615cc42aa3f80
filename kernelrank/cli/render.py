"""Rich rendering of problems and evaluation results for the terminal (no logic of its own): figures
written by the shared formatter (:mod:`kernelrank.format`), tables that fit the terminal
(:class:`~kernelrank.cli.tables.FitTable`)."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.markdown import Markdown
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from kernelrank.cli.tables import Column, FitTable
from kernelrank.format import MISSING, byte_rate, duration, error_figure, flop_rate, interval, share, speedup
from kernelrank.problems import Problem
from kernelrank.runner.results import CaseResult, EvalResult
from kernelrank.vocab import DEVICE_CLASSES, MODES, CaseKind, Verdict

_STATUS_STYLE = {
    Verdict.passed: "bold green",
    Verdict.failed: "bold red",
    Verdict.error: "bold red",
    Verdict.timeout: "bold yellow",
    Verdict.out_of_memory: "bold yellow",
    Verdict.compile_error: "bold magenta",
    Verdict.rejected: "bold red",
}


def problems_table(problems: list[Problem]) -> FitTable:
    """Local problem folders: name, title, case counts, revision."""
    table = FitTable([Column("name", key=True), Column("title"), Column("tests", figure=True),
                      Column("cpu cases", figure=True), Column("cuda cases", figure=True), Column("revision", figure=True)],
                     title="Problems")
    for p in problems:
        d = p.definition
        table.add_row(escape(p.name), escape(d.title), str(len(d.tests)), str(len(d.benchmarks["cpu"])),
                      str(len(d.benchmarks["cuda"])), p.revision[:12])
    return table


def cases_table(title: str, cases: list[dict[str, Any]]) -> FitTable:
    """Cases (their ``generate_input`` parameters, seed included), one column per parameter."""
    keys: list[str] = []
    for c in cases:
        keys += [k for k in c if k not in keys]
    table = FitTable([Column("#", figure=True, key=True), *(Column(escape(k), figure=True) for k in keys)], title=title)
    for i, c in enumerate(cases):
        table.add_row(str(i), *[escape(str(c.get(k, ""))) for k in keys])
    return table


def problem_document(problem: Problem) -> dict[str, Any]:
    """A local problem in the shape the API answers (``ProblemPublic``: name, title, revision,
    description, contract, tolerances, tests, benchmarks, budgets, ranking), so that
    :func:`problem_detail` shows a server's problem and a local folder alike."""
    d = problem.definition
    return {"name": problem.name, "title": d.title, "revision": problem.revision, "description": d.description,
            "contract": d.contract.model_dump(), "tolerances": {k: v.model_dump() for k, v in d.tolerances.items()},
            "tests": [c.params for c in d.tests],
            "benchmarks": {dev: [c.params for c in d.benchmarks[dev]] for dev in DEVICE_CLASSES},
            "budgets": d.budgets.model_dump(), "ranking": d.ranking}


def problem_detail(problem: Problem | dict[str, Any]) -> Group:
    """Description, data contract, tolerances, budgets and every case of one problem: a local
    :class:`~kernelrank.problems.Problem` or a server's answer (``GET /api/v1/problems/{name}``)."""
    d = problem_document(problem) if isinstance(problem, Problem) else problem
    contract = FitTable([Column("", key=True), Column("name", key=True), Column("shape"), Column("dtype"),
                         Column("description")], title="Data contract: custom_kernel(data) -> output")
    c = d.get("contract") or {}
    # escaped: "tuple[torch.Tensor, ...]" is no Rich markup
    for i, a in enumerate(c.get("data") or []):
        contract.add_row(f"data[{i}]", *(escape(str(a.get(k) or "")) for k in ("name", "shape", "dtype", "description")))
    o = c.get("output") or {}
    contract.add_row("output", *(escape(str(o.get(k) or "")) for k in ("name", "shape", "dtype", "description")))
    tol = FitTable([Column("output dtype", key=True), Column("atol", figure=True), Column("rtol", figure=True)],
                   title="Tolerances: |out - ref| <= atol + rtol * |ref|")
    for dtype, t in (d.get("tolerances") or {}).items():
        tol.add_row(escape(dtype), f"{t['atol']:g}", f"{t['rtol']:g}")
    budgets = FitTable([Column(m, figure=True) for m in ("compile", *MODES)], title="Time budgets (s of wall time)")
    b = d.get("budgets") or {}
    budgets.add_row(*[f"{b[m]:g}" if isinstance(b.get(m), (int, float)) else MISSING for m in ("compile", *MODES)])
    state = f", {d['state']}" if d.get("state") and d.get("state") != "open" else ""
    parts: list[Any] = [
        Panel(Markdown(str(d.get("description") or "")),
              title=escape(f"{d.get('title')} ({d.get('name')}, revision {str(d.get('revision') or '')[:12]}{state})")),
        contract,
    ]
    if c.get("notes"):
        parts.append(Text(str(c["notes"])))
    parts += [tol, budgets, cases_table("Test cases", list(d.get("tests") or []))]
    parts += [cases_table(f"Benchmark cases ({dev})", list(cases)) for dev, cases in (d.get("benchmarks") or {}).items()]
    parts.append(Text(f"Ranking: {d.get('ranking')} over benchmark cases of each case's time: the reference's "
                      "(calibrated) time over the case's speedup, timed side by side with the reference (lower is "
                      "better)."))
    return Group(*parts)


def _case_text(c: CaseResult) -> str:
    return " ".join(f"{k}={v}" for k, v in c.spec.items() if k != "seed")


def _tests_table(r: EvalResult) -> FitTable:
    table = FitTable([Column("#", figure=True, key=True), Column("case", key=True), Column("ok"),
                      Column("max abs err", figure=True), Column("max rel err", figure=True),
                      Column("mismatches", figure=True)], title=f"{r.problem} · test cases · {r.device}")
    for c in r.cases:
        if c.kind != CaseKind.test:
            continue
        table.add_row(str(c.index), escape(_case_text(c)), _ok(c), error_figure(c.max_abs_error),
                      error_figure(c.max_rel_error), str(c.mismatches))
    return table


def _bench_table(r: EvalResult) -> FitTable:
    """Benchmark cases: timing, achieved rates, the share of the runner's roofline, the reference's
    time, the paired speedup with its 95% interval, and the share of the case's wall time spent
    inside timed calls."""
    roof = any(c.roofline for c in r.cases)
    columns = [Column("#", figure=True, key=True), Column("case", key=True), Column("ok"), Column("runs", figure=True),
               Column("mean", figure=True), Column("std", figure=True), Column("min", figure=True),
               Column("max", figure=True), Column("compute", figure=True), Column("memory", figure=True)]
    if roof:
        columns.append(Column("roofline", figure=True))
    columns += [Column("ref mean", figure=True), Column("speedup (95%)", figure=True), Column("in calls", figure=True)]
    table = FitTable(columns, title=f"{r.problem} · {r.mode} · {r.device}")
    for c in r.cases:
        if c.kind != CaseKind.benchmark:
            continue
        t = c.timing or {}
        ci = c.speedup_ci
        if c.interpreted:
            paired = "interpreted"
        else:
            paired = speedup(c.speedup) + (f" ({speedup(ci[0])}-{speedup(ci[1])})" if ci else "")
            paired += " [yellow]noisy[/]" if c.noisy else ""
        in_calls = (c.pairing or {}).get("timed_share")
        cells = [str(c.index), escape(_case_text(c)), _ok(c), str(t.get("runs", MISSING)), duration(t.get("mean_ns")),
                 duration(t.get("std_ns")), duration(t.get("min_ns")), duration(t.get("max_ns")),
                 flop_rate(c.tflops), byte_rate(c.gbps)]
        if roof:
            cells.append(roofline_cell(c.roofline))
        cells += [duration(c.ref_mean_ns), paired, share(in_calls)]
        table.add_row(*cells)
    return table


def roofline_cell(roof: dict[str, Any] | None) -> str:
    """A case's share of its roofline and what bounds it: ``"41.2% mem"`` or ``"8.30% compute"``."""
    if not roof or roof.get("share") is None:
        return MISSING
    bound = {"memory": "mem", "compute": "compute"}.get(str(roof.get("bound")), "")
    return f"{share(roof.get('share'))} {bound}".strip()


def ceilings_line(ceilings: dict[str, Any] | None) -> str | None:
    """The runner's measured ceilings in one line, or ``None`` without them."""
    if not ceilings:
        return None
    rates = ", ".join(f"{dtype} {flop_rate(v)}" for dtype, v in (ceilings.get("matmul_tflops") or {}).items())
    where = f" on {ceilings['name']}" if ceilings.get("name") else ""
    return (f"roofline ceilings{where}: memory copy {byte_rate(ceilings.get('copy_gbps'))}; dense matmul {rates}"
            " (share = achieved / min(peak, intensity x bandwidth))")


def _ok(c: CaseResult) -> str:
    return "[green]pass[/]" if c.passed else "[red]FAIL[/]"


def result_view(r: EvalResult, run: str | None = None) -> Group:
    """The result tables, the verdict and, when present, the profile table and logs. ``run``
    (``"public"``, ``"secret-seed"``): the result is one run of a submission, whose headline
    verdict and score are the submission's; its own figures are then labelled as that run's."""
    parts: list[Any] = []
    if any(c.kind == CaseKind.test for c in r.cases):
        parts.append(_tests_table(r))
    if any(c.kind == CaseKind.benchmark for c in r.cases):
        parts.append(_bench_table(r))
    style = _STATUS_STYLE[r.status]
    parts.append(Text.assemble((f"{run} run: " if run else "verdict: ", "bold"), (r.status.value, style),
                               f"  ({r.problem}, {r.mode}, {r.device}, revision {r.revision[:12]})"))
    of = f"this {run} run's " if run else ""
    if r.score_ns is not None:
        ci = r.score_ci_ns
        basis = "the calibrated reference" if r.basis == "calibration" else "this run's reference"
        parts.append(Text(f"{of}score: {duration(r.score_ns)}"
                          + (f" (95% interval {interval(ci)})" if ci else "")
                          + f": geometric mean over cases of {basis}'s time over the paired speedup"))
    if r.speedup is not None:
        ci = r.speedup_ci
        parts.append(Text(f"{of}speedup over the reference: {speedup(r.speedup)}"
                          + (f" (95% interval {interval(ci, 'speedup')}), timed side by side in this run"
                             if ci else "")))
    line = ceilings_line(r.ceilings) if any(c.roofline for c in r.cases) else None
    if line:
        parts.append(Text(line))
    if r.interpreted:
        parts.append(Text("interpreted: the Triton kernels ran under Triton's interpreter (the CPU has no Triton "
                          "backend); outputs checked, times not comparable with native code, no score", style="yellow"))
    if r.noisy:
        parts.append(Text("too noisy to rank: the score's interval stayed wide after the cases' extra time; measure again",
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
