"""How the client shows what the server answers: a submission's verdict and cases, a leaderboard, a
job's progress while it is queued and running (Rich renderables, written by :mod:`kernelrank.format`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import fields
from typing import Any

from kernelrank import vocab
from kernelrank.format import interval, queue_place
from kernelrank.format import speedup as format_speedup


def eval_result(d: dict[str, Any]) -> "EvalResult":
    """An :class:`~kernelrank.runner.results.EvalResult` from a run's stored ``result``, tolerant of
    keys the server added or removed (unknown keys dropped; non-dict logs dropped; a case without
    its kind, index, spec, verdict or message gets an empty one, not passed)."""
    from kernelrank.runner.results import CaseResult, EvalResult

    known = {f.name for f in fields(EvalResult)}
    case_keys = {f.name for f in fields(CaseResult)}
    d = {k: v for k, v in d.items() if k in known}
    if not isinstance(d.get("logs"), dict):
        d.pop("logs", None)
    case_defaults = {"kind": "", "index": 0, "spec": {}, "passed": False, "message": ""}
    d["cases"] = [{**case_defaults, **{k: v for k, v in c.items() if k in case_keys}}
                  for c in d.get("cases") or [] if isinstance(c, dict)]
    defaults = (("mode", ""), ("problem", ""), ("revision", ""), ("device", ""), ("status", vocab.Verdict.error.value))
    for key, default in defaults:
        d.setdefault(key, default)
    return EvalResult.from_dict(d)


def _run_of(sub: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((r for r in sub.get("runs") or [] if r.get("kind") == kind), None)


def _measured_again(sub: dict[str, Any]) -> list[Any]:
    """A line per measurement the service made again (runs of a later attempt than the first
    shown): each run's status and speedup."""
    from rich.text import Text

    runs = [r for r in sub.get("runs") or [] if isinstance(r, dict)]
    attempts = sorted({r["attempt"] for r in runs if isinstance(r.get("attempt"), int)})
    lines = []
    for attempt in attempts[1:]:
        said = []
        for r in (r for r in runs if r.get("attempt") == attempt):
            result = r.get("result") if isinstance(r.get("result"), dict) else {}
            figure = _speedup_text(result.get("speedup"), result.get("speedup_ci"), "speedup")
            said.append(f"{r.get('kind')} {r.get('status')}" + (f" {figure}" if figure else "")
                        + (" (noisy)" if result.get("noisy") else ""))
        lines.append(Text.assemble((f"measured again (attempt {attempt}): ", "bold"), "; ".join(said)))
    return lines


def submission_view(sub: dict[str, Any]) -> Any:
    """The public run's result tables (as ``kernelrank eval`` prints them), the secret run's status
    in leaderboard mode, and the submission's verdict line."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    from kernelrank.cli.render import result_view
    from kernelrank.format import duration

    parts: list[Any] = []
    public = _run_of(sub, vocab.RunKind.public)
    if public and isinstance(public.get("result"), dict):
        parts.append(result_view(eval_result(public["result"]), run="public"))
    if sub.get("mode") == vocab.Mode.leaderboard:
        secret = _run_of(sub, vocab.RunKind.secret)
        if secret is None:
            parts.append(Text("secret-seed run: not run"))
        else:
            result = secret.get("result") or {}
            msg = result.get("message", "") if secret.get("status") != vocab.Verdict.passed else _speedup_text(
                result.get("speedup"), result.get("speedup_ci"), "speedup")
            parts.append(Text.assemble(("secret-seed run: ", "bold"),
                                       (str(secret.get("status")), status_style(secret.get("status"))),
                                       f"  {msg}" if msg else ""))
        parts.extend(_measured_again(sub))
    if sub.get("logs") and not (public and isinstance((public.get("result") or {}).get("logs"), dict)):
        parts.append(Panel(Text(str(sub["logs"])), title="submission logs"))
    status = str(sub.get("status"))
    line = Text.assemble((f"submission #{sub.get('id')}: ", "bold"), (status, status_style(status)),
                         f"  ({sub.get('problem')}, {sub.get('mode')}, {sub.get('device')}, {sub.get('language')})")
    timed = sum(1 for r in sub.get("runs") or [] if isinstance(r, dict) and r.get("status") == vocab.Verdict.passed)
    over_runs = _speedup_text(sub.get("speedup"), sub.get("speedup_ci"),
                              f"speedup over its {timed} runs" if timed > 2 else "speedup over both runs")
    if sub.get("ranked"):
        ci = sub.get("score_ci_ns")
        line.append(f"  ranked with score {duration(sub.get('score_ns'))}"
                    + (f" ({interval(ci)})" if ci else "")
                    + (f", {over_runs}" if over_runs else ""))
    elif sub.get("mode") == vocab.Mode.leaderboard and status in vocab.FINAL_STATUSES:
        why = str(sub.get("message") or "")
        at = why.find("not ranked:")  # e.g. the runs disagree (services.submissions)
        line.append("  not ranked" + (why[at + len("not ranked"):] if at >= 0 else ""))
    parts.append(line)
    if sub.get("message") and not public:
        parts.append(Text(str(sub["message"])))
    return Group(*parts)


def _speedup_text(speedup: Any, ci: Any, label: str) -> str:
    """``"<label> 1.23× (1.20–1.26×)"``, or ``""`` without a speedup (a report is data)."""
    if not isinstance(speedup, (int, float)) or isinstance(speedup, bool):
        return ""
    text = f"{label} {format_speedup(speedup)}"
    if isinstance(ci, list) and len(ci) == 2 and all(isinstance(v, (int, float)) for v in ci):
        text += f" ({interval(ci, 'speedup')})"
    return text


def status_style(status: Any) -> str:
    S = vocab.SubmissionStatus
    return {S.passed: "bold green", S.timeout: "bold yellow", S.out_of_memory: "bold yellow",
            S.compile_error: "bold magenta",
            S.queued: "cyan", S.running: "cyan", S.cancelled: "yellow"}.get(str(status), "bold red")


def leaderboard_table(board: dict[str, Any]) -> Any:
    """One leaderboard (a :class:`~kernelrank.cli.tables.FitTable`): rank (``=`` where the entry
    cannot be told apart from the one above: tied), user, score, its 95% interval, speedup,
    language, submitted."""
    from rich.markup import escape

    from kernelrank.cli.tables import Column, FitTable
    from kernelrank.format import MISSING, duration, speedup

    rev = str(board.get("revision") or "")[:12]
    table = FitTable([Column("rank", figure=True, key=True), Column("user", key=True), Column("score", figure=True),
                      Column("95% interval", figure=True), Column("speedup", figure=True), Column("language"),
                      Column("submitted", figure=True)],
                     title=f"{board.get('problem')} · {board.get('device')} · revision {rev}",
                     caption=("= tied: its 95% interval overlaps the one above"
                              if any(r.get("tied") for r in board.get("rows") or []) else None))
    for row in board.get("rows") or []:
        review = " [yellow](under review)[/]" if row.get("needs_review") else ""
        ci = row.get("score_ci_ns")
        table.add_row(("= " if row.get("tied") else "") + str(row.get("rank")), escape(str(row.get("user"))) + review,
                      duration(row.get("score_ns")), interval(ci) if ci else MISSING,
                      speedup(row.get("speedup")), escape(str(row.get("language") or "—")), when(row.get("submitted_at")))
    return table


def when(value: Any) -> str:
    """An ISO timestamp as ``YYYY-MM-DD HH:MM`` (as given when it is not one)."""
    if not value:
        return "—"
    try:
        t = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return str(value)
    return t.strftime("%Y-%m-%d %H:%M") + (" UTC" if t.utcoffset() == dt.timedelta(0) or t.tzinfo is None else "")


def queue_text(sub: dict[str, Any], now: dt.datetime | None = None) -> str:
    """A queued submission's place as the server gave it (``queue_position``, ``estimated_start``),
    for people (:func:`kernelrank.format.queue_place`); ``""`` when not queued or not said."""
    position = sub.get("queue_position")
    if not isinstance(position, int):
        return ""
    seconds = None
    try:
        start = dt.datetime.fromisoformat(str(sub["estimated_start"])) if sub.get("estimated_start") else None
    except ValueError:
        start = None
    if start is not None:
        start = start if start.tzinfo else start.replace(tzinfo=dt.timezone.utc)
        seconds = max(0.0, (start - (now or dt.datetime.now(dt.timezone.utc))).total_seconds())
    return queue_place(position, seconds)


class Progress:
    """What ``submit`` shows on stderr while it waits: the status, each run as it arrives with its
    cases, and what the runner reports in ``progress`` (a phase, cases) when it does."""

    def __init__(self, console: "Console", status: Any):
        self.console = console
        self.status = status
        self.seen: set[Any] = set()

    def update(self, sub: dict[str, Any], waited_s: float) -> None:
        progress = sub.get("progress") if isinstance(sub.get("progress"), dict) else {}
        phase = progress.get("phase")
        state = str(sub.get("status"))
        queue = queue_text(sub)
        text = (f"submission #{sub.get('id')}: {state}" + (f" · {queue}" if queue else "")
                + (f" · {phase}" if phase else "") + f" · {waited_s:.0f} s")
        self.status.update(text)
        measurement = sub.get("measurements") if isinstance(sub.get("measurements"), int) else 1
        first = min((r["attempt"] for r in sub.get("runs") or [] if isinstance(r.get("attempt"), int)), default=None)
        for run in sub.get("runs") or []:  # the runs in first: a measurement's end comes before what follows it
            result = run.get("result") if isinstance(run.get("result"), dict) else {}
            label = self._label(str(run.get("kind")), run.get("attempt"), first)
            for case in result.get("cases") or []:
                if isinstance(case, dict):
                    self._case(label, case)
            if ("run", label) not in self.seen:
                self.seen.add(("run", label))
                self.console.print(f"  {label} run: [{status_style(run.get('status'))}]{run.get('status')}[/]")
        if measurement > 1 and ("measurement", measurement) not in self.seen:  # the service measures it again
            self.seen.add(("measurement", measurement))
            self.console.print(f"  [yellow]{str(sub.get('message') or f'measurement {measurement}')[:300]}[/]")
        if ("status", state, measurement) not in self.seen and state not in vocab.FINAL_STATUSES:
            self.seen.add(("status", state, measurement))
            self.console.print(f"  [{status_style(state)}]{state}[/]")
        for case in progress.get("cases") or []:
            if isinstance(case, dict):
                self._case(self._label(str(progress.get("run", vocab.RunKind.public.value)), sub.get("attempt"), first), case)
        # no verdict line here: the submission's view that follows states it, once

    @staticmethod
    def _label(kind: str, attempt: Any, first: Any) -> str:
        """A run's name in the view: its kind, and its attempt when it is a measurement made again."""
        return f"{kind} (attempt {attempt})" if isinstance(attempt, int) and isinstance(first, int) and attempt > first else kind

    def _case(self, kind: str, case: dict[str, Any]) -> None:
        key = ("case", kind, case.get("kind"), case.get("index"))
        if key in self.seen:
            return
        self.seen.add(key)
        params = " ".join(f"{k}={v}" for k, v in (case.get("spec") or {}).items() if k != "seed")
        mark = "[green]pass[/]" if case.get("passed") else "[red]FAIL[/]"
        self.console.print(f"  {mark} {kind}: {case.get('kind')} case {case.get('index')} ({params})")
