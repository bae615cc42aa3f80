"""Competitions over the HTTP API: reading them (anyone) and running them (admins).

- ``kernelrank competitions list``, ``competitions show NAME``
- ``kernelrank competitions create NAME --title TEXT --board PROBLEM/DEVICE [--board ...] [--start WHEN]
  --end WHEN [--final-top N]`` (WHEN: a duration from now, ``12h``, ``14d``, or an ISO 8601 time)
- ``kernelrank competitions accept-late NAME SUBMISSION_ID``, ``competitions finalize NAME``

Server and token resolve as for ``submit``. Exit status: 0 on success, 2 for a usage error or a
request the server refused (its reason is shown), 3 when the server cannot be reached or fails.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from kernelrank.cli.admin_cmd import parse_expiry
from kernelrank.cli.client import ApiClient, ClientError, JsonOpt, ServerOpt, TokenOpt, fail, path_segment, resolve_target

competitions_app = typer.Typer(help="Competitions: list, show; create, accept a late entry, finalize (admins).",
                               no_args_is_help=True)


def _call(server: str | None, token: str | None, method: str, path: str, **kwargs: Any) -> Any:
    """One API request with the resolved server and token; the decoded answer.

    Raises:
        typer.Exit: 2 or 3 on failure, with the reason on stderr.
    """
    try:
        with ApiClient(resolve_target(server, token)) as api:
            return api.request(method, path, **kwargs)
    except ClientError as e:
        raise fail(e) from None


def _when(option: str, text: str) -> str:
    try:
        return parse_expiry(text).isoformat()
    except ValueError as e:
        raise fail(ClientError(f"{option}: {e}", 2)) from None


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def render(c: dict[str, Any]) -> str:
    """A competition as ``show`` prints it: state and times, each board's entries (with their
    re-judged place and score once final), the overall standing, failures and tau."""
    lines = [f"{c['name']}: {c['title']} ({c['state']}{', final' if c['final'] else ''})",
             f"  from {c['starts_at']} to {c['ends_at']}; top {c['final_top']} of each board re-judged at the end",
             f"  standing: {c['rule']}"]
    for b in c["competition_boards"]:
        tau = "" if b.get("tau") is None else f" (Kendall tau-b {b['tau']:.3f})"
        lines.append(f"  {b['problem']}/{b['device']}{tau}")
        for e in b["entries"]:
            mark = (" late" if e["late"] else "") + (" tied" if e["tied"] else "")
            final = ""
            if e.get("rejudging"):
                final = f"  re-judging {e['rejudging']}"
            if e.get("final_place") is not None:
                final += f"  final #{e['final_place']} {_figure(e.get('final_score_ns') or e['score_ns'])} ns"
            lines.append(f"    #{e['place']} {e['user']} {_figure(e['score_ns'])} ns "
                         f"(submission {e['submission_id']}){mark}{final}")
    lines.append("  overall" + (" (window)" if c.get("final_standings") else ""))
    lines += [f"    {s['rank']}. {s['user']} {s['total']}" for s in c["standings"]]
    if c.get("final_standings"):
        tau = (c.get("stability") or {}).get("tau")
        lines.append("  final" + ("" if tau is None else f" (Kendall tau-b {tau:.3f})"))
        lines += [f"    {s['rank']}. {s['user']} {s['total']}" for s in c["final_standings"]]
    for f in c.get("failures") or []:
        lines.append(f"  re-judging failed: {f['board']} {f['user']} (submission {f['submission_id']}): "
                     f"{f['status']}: {f['message']}")
    return "\n".join(lines)


def _print(answer: Any, as_json: bool, text: str) -> None:
    from kernelrank.cli.render import make_console

    if as_json:
        typer.echo(json.dumps(answer, allow_nan=False, default=str))
    else:
        make_console().print(text, markup=False, soft_wrap=True)


@competitions_app.command("list")
def list_command(server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """Every competition, the latest start first."""
    answer = _call(server, token, "GET", "/competitions")
    text = "\n".join(f"{c['name']}  {c['state']:<10} {str(c['starts_at'])[:16]} to {str(c['ends_at'])[:16]}  "
                     f"{c['title']}  ({', '.join(c['boards'])})" for c in answer) or "no competitions"
    _print(answer, as_json, text)


@competitions_app.command("show")
def show_command(name: Annotated[str, typer.Argument(help="The competition's name.")],
                 server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """A competition's boards, entries and standings (final ones once re-judged)."""
    answer = _call(server, token, "GET", f"/competitions/{path_segment(name)}")
    _print(answer, as_json, render(answer))


@competitions_app.command("create")
def create_command(
    name: Annotated[str, typer.Argument(help="Its name: lower-case letters, digits, '-', '_'.")],
    title: Annotated[str, typer.Option("--title", help="Its title.")],
    board: Annotated[list[str], typer.Option("--board", help="PROBLEM/DEVICE, e.g. softmax/cpu; repeat for each.")],
    end: Annotated[str, typer.Option("--end", help="When entries stop counting: a duration from now (14d) or ISO 8601.")],
    start: Annotated[str, typer.Option("--start", help="When entries start counting (default: now).")] = "0m",
    final_top: Annotated[int, typer.Option("--final-top", help="Entries of each board re-judged at the end.")] = 10,
    server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False,
) -> None:
    """Create a competition (admins) over boards, each the problem's current revision on a device queue."""
    boards = []
    for b in board:
        problem, sep, device = b.partition("/")
        if not sep or not problem or not device:
            raise fail(ClientError(f"--board: give PROBLEM/DEVICE, e.g. softmax/cpu (got {b!r})", 2))
        boards.append({"problem": problem, "device": device})
    body = {"name": name, "title": title, "boards": boards, "starts_at": _when("--start", start),
            "ends_at": _when("--end", end), "final_top": final_top}
    answer = _call(server, token, "POST", "/admin/competitions", json=body)
    _print(answer, as_json, f"created competition {answer['name']}: {', '.join(answer['boards'])}, "
                            f"{answer['starts_at']} to {answer['ends_at']}")


@competitions_app.command("accept-late")
def accept_late_command(name: Annotated[str, typer.Argument(help="The competition's name.")],
                        submission_id: Annotated[int, typer.Argument(help="A submission made after the end.")],
                        server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """Count a submission made after the end (admins); it is recorded as late."""
    answer = _call(server, token, "POST", f"/admin/competitions/{path_segment(name)}/late-entries",
                   json={"submission_id": submission_id})
    _print(answer, as_json, f"submission {submission_id} accepted into {name} as a late entry")


@competitions_app.command("finalize")
def finalize_command(name: Annotated[str, typer.Argument(help="The competition's name.")],
                     server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """End it now if still open and re-judge each board's top entries with a new secret seed
    (admins); `show` gives the final standings once every re-judging is in. Run again before then
    to send the re-judgings still pending once more."""
    answer = _call(server, token, "POST", f"/admin/competitions/{path_segment(name)}/finalize")
    sent = sum(1 for b in answer["competition_boards"] for e in b["entries"] if e.get("rejudging"))
    _print(answer, as_json, f"{name}: {'final' if answer['final'] else 'finalizing'}; {sent} entries re-judged")


def register(app: typer.Typer) -> None:
    """Add ``competitions list|show|create|accept-late|finalize`` to the app."""
    app.add_typer(competitions_app, name="competitions")
