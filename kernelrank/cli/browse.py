"""Client commands that read a server: ``submissions list | show | wait`` (one's own submissions,
re-attaching to a running one with ``submit``'s progress view) and ``problems list | show``
(the server's problems; ``--local`` reads the problem folders here instead).

Exit status as :mod:`kernelrank.cli.client`: 0 success (``wait``, ``show``: the submission
passed), 1 any other verdict (or ``--timeout`` ran out), 2 usage error or a 4xx, 3 the server
cannot be reached or fails. Nothing heavy is imported at module level.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Optional

import typer

from kernelrank import vocab
from kernelrank.cli.client import (ApiClient, ClientError, JsonOpt, ServerOpt, Target, TokenOpt, fail, follow,
                                   path_segment, resolve_target, show_verdict)
from kernelrank.cli.views import status_style, submission_view, when

submissions_app = typer.Typer(help="Your submissions on the server: list them, show one, wait for one.",
                              no_args_is_help=True)

#: Rows ``submissions list`` asks for by default.
LIST_LIMIT = 20


def _echo_json(value: Any) -> None:
    typer.echo(json.dumps(value, allow_nan=False, default=str))


def submissions_table(subs: list[dict[str, Any]]) -> Any:
    """Submissions, newest first: id, problem, device, mode, status, score, speedup, submitted."""
    from rich.markup import escape

    from kernelrank.cli.tables import Column, FitTable
    from kernelrank.format import duration, speedup

    table = FitTable([Column("id", figure=True, key=True), Column("problem", key=True), Column("device"),
                      Column("mode"), Column("status"), Column("score", figure=True), Column("speedup", figure=True),
                      Column("submitted", figure=True)], title="Your submissions")
    for s in subs:
        status = str(s.get("status"))
        mark = " [yellow](disqualified)[/]" if s.get("disqualified") else ""
        table.add_row(str(s.get("id")), escape(str(s.get("problem"))), escape(str(s.get("device"))),
                      escape(str(s.get("mode"))), f"[{status_style(status)}]{escape(status)}[/]{mark}",
                      duration(s.get("score_ns")) if s.get("ranked") else "—", speedup(s.get("speedup")),
                      when(s.get("created_at")))
    return table


@submissions_app.command("list")
def submissions_list(
    problem: Annotated[Optional[str], typer.Option(help="Only this problem.")] = None,
    device: Annotated[Optional[str], typer.Option(help="Only this device queue (cpu, cuda-<model>).")] = None,
    status: Annotated[Optional[str], typer.Option(help=" | ".join(vocab.STATUSES) + ".")] = None,
    limit: Annotated[int, typer.Option(help="At most this many, newest first.", min=1, max=200)] = LIST_LIMIT,
    server: ServerOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Your submissions, newest first (`submissions show ID` for one's results)."""
    from kernelrank.cli.render import make_console

    if status is not None and status not in vocab.STATUSES:
        raise fail(ClientError(f"unknown status {status!r}; one of {', '.join(vocab.STATUSES)}", 2))
    params = {k: v for k, v in (("problem", problem), ("device", device), ("status", status)) if v}
    try:
        with ApiClient(resolve_target(server, token)) as api:
            subs = api.request("GET", "/submissions", params={**params, "limit": limit})
    except ClientError as e:
        raise fail(e) from None
    if as_json:
        _echo_json(subs)
        return
    console = make_console()
    if not subs:
        console.print("no submissions" + (" matching " + ", ".join(f"{k}={v}" for k, v in params.items())
                                          if params else ""))
        return
    console.print(submissions_table(subs))


@submissions_app.command("show")
def submissions_show(
    submission: Annotated[int, typer.Argument(help="Submission id.", min=1)],
    server: ServerOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One submission: its status, then (once judged) every case's correctness, timing, rates and
    roofline share, and the verdict; exits 0 only when it passed."""
    from kernelrank.cli.render import make_console

    try:
        with ApiClient(resolve_target(server, token)) as api:
            sub = api.request("GET", f"/submissions/{submission}")
    except ClientError as e:
        raise fail(e) from None
    if as_json:
        _echo_json(sub)
    else:
        make_console().print(submission_view(sub))
    raise typer.Exit(0 if sub.get("status") == vocab.Verdict.passed else 1)


@submissions_app.command("wait")
def submissions_wait(
    submission: Annotated[int, typer.Argument(help="Submission id (as `submit` printed it).", min=1)],
    server: ServerOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
    timeout: Annotated[float, typer.Option(
        "--timeout", help="Seconds to wait for the verdict before giving up (exit 1; the job goes on).", min=1)] = 3600.0,
) -> None:
    """Re-attach to a submission: the same progress view as `submit` (status, runs and cases as
    they arrive) until its verdict, then its results; exits 0 only when it passed."""
    from kernelrank.cli.render import make_console

    err = make_console(stderr=True)
    try:
        target = resolve_target(server, token)
        with ApiClient(target) as api:
            sub = follow(api, submission, timeout, err, None if as_json else (
                f"waiting for submission #{submission} on {target.server}", f"submission #{submission}"))
    except ClientError as e:
        raise fail(e) from None
    except KeyboardInterrupt:
        err.print(f"stopped waiting: submission #{submission} goes on")
        raise typer.Exit(130) from None
    show_verdict(sub, timeout, as_json, err, f"`kernelrank submissions wait {submission}`")


# -- problems ----------------------------------------------------------------------------------
def server_problems_table(problems: list[dict[str, Any]], server: str) -> Any:
    """A server's problems: name, title, state, case counts, revision."""
    from rich.markup import escape

    from kernelrank.cli.tables import Column, FitTable

    table = FitTable([Column("name", key=True), Column("title"), Column("state"), Column("tests", figure=True),
                      Column("cpu cases", figure=True), Column("cuda cases", figure=True),
                      Column("revision", figure=True)], title=f"Problems on {server}")
    for p in problems:
        bench = p.get("benchmarks") or {}
        table.add_row(escape(str(p.get("name"))), escape(str(p.get("title"))), escape(str(p.get("state", ""))),
                      str(p.get("tests", "—")), str(bench.get("cpu", 0)), str(bench.get("cuda", 0)),
                      str(p.get("revision") or "")[:12])
    return table


def _from_server(path: str, server: str | None) -> tuple[Any, str]:
    """``GET path`` on the server (public: no token sent, as ``leaderboard``); (answer, server URL).

    Raises:
        ClientError: as :meth:`ApiClient.request`; an unreachable server's message names ``--local``.
    """
    target = resolve_target(server, None)
    try:
        with ApiClient(Target(target.server, None)) as api:
            return api.request("GET", path), target.server
    except ClientError as e:
        if e.exit_code == 3:
            e.message += " (use --local for the problem folders on this machine)"
        raise


LocalOpt = Annotated[bool, typer.Option(
    "--local", help="Read the problem folders on this machine (KERNELRANK_PROBLEMS_DIR) instead of the server.")]


def problems_list(local: LocalOpt = False, server: ServerOpt = None, as_json: JsonOpt = False) -> None:
    """The server's problems (`--local`: the folders under problems/ here), with case counts and revision."""
    from kernelrank.cli.render import make_console, problems_table
    from kernelrank.problems import ProblemError, load_all

    console = make_console()
    if local:
        try:
            problems = load_all()
        except ProblemError as e:
            raise fail(ClientError(str(e), 2)) from None
        if as_json:
            _echo_json([{"name": p.name, "title": p.definition.title, "revision": p.revision,
                         "tests": len(p.definition.tests),
                         "benchmarks": {d: len(c) for d, c in p.definition.benchmarks.items()}} for p in problems])
        else:
            console.print(problems_table(problems))
        return
    try:
        problems, url = _from_server("/problems", server)
    except ClientError as e:
        raise fail(e) from None
    if as_json:
        _echo_json(problems)
    elif not problems:
        console.print(f"no problems on {url}")
    else:
        console.print(server_problems_table(problems, url))


def problems_show(
    name: Annotated[str, typer.Argument(help="Problem name.")],
    local: LocalOpt = False,
    revision: Annotated[Optional[str], typer.Option(
        help="An earlier revision on the server: its hash or a 6+ digit prefix.")] = None,
    server: ServerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Description, data contract, cases, tolerances and budgets of one problem, from the server
    (`--local`: from the folders here)."""
    from kernelrank.cli.render import make_console, problem_detail, problem_document
    from kernelrank.problems import ProblemError, load_problem

    if local:
        try:
            document: Any = problem_document(load_problem(name))
        except ProblemError as e:
            raise fail(ClientError(str(e), 2)) from None
    else:
        try:
            document, _ = _from_server(f"/problems/{path_segment(name)}" + (f"?revision={path_segment(revision)}" if revision else ""),
                                       server)
        except ClientError as e:
            raise fail(e) from None
    if as_json:
        _echo_json(document)
    else:
        make_console().print(problem_detail(document))


def register(app: typer.Typer, problems_app: typer.Typer) -> None:
    """Add ``submissions`` and ``problems list | show`` to the app."""
    app.add_typer(submissions_app, name="submissions")
    problems_app.command("list")(problems_list)
    problems_app.command("show")(problems_show)
