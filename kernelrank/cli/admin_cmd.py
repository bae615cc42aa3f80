"""Administration commands over the HTTP API (an admin's token): pushing problems, their state,
moderation, and one's own API tokens.

- ``kernelrank problems push problems/NAME [--reference DIR] [--hidden]``
- ``kernelrank problems open|close|hide|unhide NAME [--deadline ISO-8601]``
- ``kernelrank admin disqualify ID --reason TEXT``, ``admin reinstate ID``, ``admin requeue ID [--force]``,
  ``admin clear-review ID``
- ``kernelrank admin limits``, ``admin limit PROBLEM DEVICE MODE PER_HOUR`` (0 removes it)
- ``kernelrank admin too-noisy``: submissions the service could not measure quietly enough
- ``kernelrank tokens list``, ``tokens create [NAME] [--expires 30d|12h|2027-01-01]``, ``tokens revoke ID``

Server and token resolve as for ``submit`` (flags, ``KERNELRANK_SERVER``/``KERNELRANK_TOKEN``, the
``kernelrank login`` config). Exit status: 0 on success, 2 for a usage error or a request the
server refused (its reason is shown), 3 when the server cannot be reached or fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from kernelrank.cli.client import ApiClient, ClientError, JsonOpt, ServerOpt, TokenOpt, fail, path_segment, resolve_target

admin_app = typer.Typer(help="Moderate submissions (admins; over the HTTP API).", no_args_is_help=True)
tokens_app = typer.Typer(help="List, create and revoke your API tokens (over the HTTP API).", no_args_is_help=True)

#: Seconds a push may take: the server runs the reference against its own tests first.
PUSH_TIMEOUT_S = 900.0


def _call(server: str | None, token: str | None, method: str, path: str, timeout_s: float | None = None,
          **kwargs: Any) -> Any:
    """One API request with the resolved server and token; the decoded answer (``None`` for 204).

    Raises:
        typer.Exit: 2 or 3 on failure, with the reason on stderr.
    """
    try:
        target = resolve_target(server, token)
        client = ApiClient(target, timeout_s) if timeout_s else ApiClient(target)
        with client as api:
            return api.request(method, path, **kwargs)
    except ClientError as e:
        raise fail(e) from None


def _say(message: str) -> None:
    from kernelrank.cli.render import make_console

    make_console().print(message, markup=False, soft_wrap=True)


def _print(answer: Any, as_json: bool, message: str) -> None:
    if as_json:
        typer.echo(json.dumps(answer, allow_nan=False, default=str))
    else:
        _say(message)


# -- problems -------------------------------------------------------------------------------------
def push_command(
    folder: Annotated[Path, typer.Argument(help="The problem's folder, holding problem.yaml (e.g. problems/NAME).")],
    reference: Annotated[Optional[Path], typer.Option(
        "--reference", help="The reference folder (default: reference_kernels/NAME next to the problems folder).")] = None,
    hidden: Annotated[bool, typer.Option("--hidden", help="Create a new problem hidden (admins only until opened).")] = False,
    server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False,
) -> None:
    """Upload a problem (definition + reference + templates) as a new problem or a new revision.
    The server refuses it, with the reason, when the definition is invalid or the reference fails
    its own tests."""
    from kernelrank.services.problem_admin import pack_folder

    definition = folder / "problem.yaml"
    ref = reference or folder.resolve().parent.parent / "reference_kernels" / folder.resolve().name
    if not definition.is_file():
        raise fail(ClientError(f"{definition} not found: give the problem's folder (problems/NAME)", 2))
    if not (ref / "reference.py").is_file():
        raise fail(ClientError(f"{ref / 'reference.py'} not found: give the reference folder with --reference", 2))
    try:
        archive = pack_folder(definition, ref)
    except (OSError, ValueError) as e:
        raise fail(ClientError(f"cannot pack {folder}: {e}", 2)) from None
    answer = _call(server, token, "POST", "/admin/problems", timeout_s=PUSH_TIMEOUT_S,
                   files={"archive": (f"{folder.name}.tar.gz", archive, "application/gzip")},
                   data={"hidden": "true" if hidden else "false"})
    what = ("new problem" if answer.get("new_problem") else
            "new revision" if answer.get("new_revision") else "known revision made current again")
    _print(answer, as_json, f"pushed {answer.get('name')}: revision {str(answer.get('revision'))[:12]} ({what}); "
                            f"state {answer.get('state')}")


def _state_message(answer: dict[str, Any]) -> str:
    deadline = f", deadline {answer['deadline']}" if answer.get("deadline") else ""
    return f"{answer.get('name')}: {answer.get('state')}{deadline}"


def open_command(name: Annotated[str, typer.Argument(help="Problem name.")],
                 server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """Open problem NAME: visible, taking leaderboard submissions, no deadline."""
    answer = _call(server, token, "POST", f"/admin/problems/{path_segment(name)}/open")
    _print(answer, as_json, _state_message(answer))


def close_command(
    name: Annotated[str, typer.Argument(help="Problem name.")],
    deadline: Annotated[Optional[str], typer.Option(
        help="When leaderboard submissions stop, ISO 8601 with a time zone (e.g. 2026-12-01T12:00:00Z); "
             "default: now.")] = None,
    server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False,
) -> None:
    """Close problem NAME now or at --deadline: later leaderboard submissions are refused, earlier
    ones are still ranked; test, benchmark and profile runs are still taken."""
    answer = _call(server, token, "POST", f"/admin/problems/{path_segment(name)}/close",
                   json={"deadline": deadline} if deadline else None)
    _print(answer, as_json, _state_message(answer))


def hide_command(name: Annotated[str, typer.Argument(help="Problem name.")],
                 server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """Hide problem NAME: not listed, 404 to anyone but admins."""
    answer = _call(server, token, "POST", f"/admin/problems/{path_segment(name)}/hide")
    _print(answer, as_json, _state_message(answer))


def unhide_command(name: Annotated[str, typer.Argument(help="Problem name.")],
                   server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """Show hidden problem NAME again (its deadline is unchanged)."""
    answer = _call(server, token, "POST", f"/admin/problems/{path_segment(name)}/unhide")
    _print(answer, as_json, _state_message(answer))


# -- moderation -----------------------------------------------------------------------------------
@admin_app.command("disqualify")
def disqualify_command(
    submission: Annotated[int, typer.Argument(help="Submission id.")],
    reason: Annotated[str, typer.Option("--reason", help="Why: shown to the submission's author.")],
    server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False,
) -> None:
    """Take submission ID out of the ranking, with a reason its author sees."""
    answer = _call(server, token, "POST", f"/admin/submissions/{submission}/disqualify", json={"reason": reason})
    _print(answer, as_json, f"submission #{submission} disqualified ({answer.get('user')}, {answer.get('problem')})")


@admin_app.command("clear-review")
def clear_review_command(submission: Annotated[int, typer.Argument(help="Submission id.")],
                         server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """Clear the review mark of submission ID (a speedup beyond its problem's bound, checked and sound)."""
    answer = _call(server, token, "POST", f"/admin/submissions/{submission}/clear-review")
    _print(answer, as_json, f"submission #{submission}: review mark cleared")


@admin_app.command("reinstate")
def reinstate_command(submission: Annotated[int, typer.Argument(help="Submission id.")],
                      server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """Undo a disqualification: ranked again when its runs earn it."""
    answer = _call(server, token, "POST", f"/admin/submissions/{submission}/reinstate")
    _print(answer, as_json, f"submission #{submission} reinstated; ranked: {answer.get('ranked')}")


@admin_app.command("requeue")
def requeue_command(
    submission: Annotated[int, typer.Argument(help="Submission id.")],
    force: Annotated[bool, typer.Option("--force", help="Even while it is queued or running (a lost job).")] = False,
    server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False,
) -> None:
    """Judge submission ID again, as a new attempt (earlier runs are kept as history, never counted)."""
    answer = _call(server, token, "POST", f"/admin/submissions/{submission}/requeue",
                   params={"force": "true"} if force else None)
    _print(answer, as_json, f"submission #{submission} requeued (attempt {answer.get('attempt')})")


@admin_app.command("limits")
def limits_command(server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """The limits of submissions per user per hour set on boards (problem, device, mode)."""
    answer = _call(server, token, "GET", "/admin/limits")
    _print(answer, as_json, _limits_text(answer))


@admin_app.command("limit")
def limit_command(
    problem: Annotated[str, typer.Argument(help="Problem name.")],
    device: Annotated[str, typer.Argument(help="Device queue: cpu or cuda-<model>.")],
    mode: Annotated[str, typer.Argument(help="test | benchmark | leaderboard | profile.")],
    per_hour: Annotated[int, typer.Argument(help="Submissions each user may make per rolling hour; 0 removes it.",
                                            min=0)],
    server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False,
) -> None:
    """Limit each user to PER_HOUR submissions of MODE to PROBLEM on DEVICE per rolling hour
    (admins are exempt); over it a submission is refused with the time the next is allowed."""
    answer = _call(server, token, "PUT", "/admin/limits",
                   json={"problem": problem, "device": device, "mode": mode, "per_hour": per_hour})
    _print(answer, as_json, _limits_text(answer))


@admin_app.command("too-noisy")
def too_noisy_command(server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """Passing leaderboard submissions the service measured again as often as it may, backing off
    from a busy machine, and still could not rank; requeue one once the machine is quieter."""
    answer = _call(server, token, "GET", "/admin/submissions/too-noisy")
    _print(answer, as_json, too_noisy_text(answer))


def too_noisy_text(subs: Any) -> str:
    """One line per submission of ``GET /admin/submissions/too-noisy``."""
    if not subs:
        return "none: no submission is waiting for an admin to measure it afresh"
    return "\n".join(f"#{s.get('id')} {s.get('problem')} on {s.get('device')} by {s.get('user')}: "
                     f"{s.get('measurements')} measurements; requeue with `kernelrank admin requeue {s.get('id')}`"
                     for s in subs)


def _limits_text(rules: Any) -> str:
    if not rules:
        return "no board limits set"
    return "\n".join(f"{r.get('problem')} on {r.get('device')}, {r.get('mode')}: {r.get('per_hour')} per user per hour"
                     for r in rules)


# -- tokens ---------------------------------------------------------------------------------------
@tokens_app.command("list")
def tokens_list(server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """Your API tokens, newest first (their first characters only)."""
    from rich.markup import escape

    from kernelrank.cli.render import make_console
    from kernelrank.cli.tables import Column, FitTable

    answer = _call(server, token, "GET", "/users/me/tokens")
    if as_json:
        typer.echo(json.dumps(answer, default=str))
        return
    table = FitTable([Column("id", figure=True, key=True), Column("name", key=True), Column("prefix", figure=True),
                      Column("created", figure=True), Column("expires", figure=True), Column("last used", figure=True),
                      Column("state")])  # fits the terminal
    for t in answer:
        table.add_row(str(t["id"]), escape(t["name"]), t["prefix"] + "…", str(t["created_at"])[:16],
                      str(t.get("expires_at") or "never")[:16], str(t.get("last_used_at") or "never")[:16],
                      t.get("state") or ("revoked" if t["revoked_at"] else "active"))
    make_console().print(table)


def parse_expiry(text: str, now: "dt.datetime | None" = None) -> "dt.datetime":
    """An expiry as ``--expires`` takes it: a duration from now (``90m``, ``12h``, ``30d``, ``2w``)
    or a date or time in ISO 8601 (``2027-01-01``, ``2027-01-01T12:00:00+02:00``; without a time
    zone, UTC). Returns an aware UTC time.

    Raises:
        ValueError: neither.
    """
    import datetime as dt
    import re

    now = now or dt.datetime.now(dt.timezone.utc)
    m = re.fullmatch(r"\s*(\d{1,6})\s*([mhdw])\s*", text)
    if m:
        unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[m.group(2)]
        return now + dt.timedelta(**{unit: int(m.group(1))})
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"not a duration (30d, 12h, 90m, 2w) nor an ISO 8601 date: {text[:40]!r}") from None
    return (value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)).astimezone(dt.timezone.utc)


@tokens_app.command("create")
def tokens_create(name: Annotated[str, typer.Argument(help="A name to recognise it by.")] = "",
                  expires: Annotated[Optional[str], typer.Option(
                      "--expires", help="When it stops working: a duration (30d, 12h, 90m, 2w) or an ISO 8601 "
                                        "date or time (UTC unless given). Default: never.")] = None,
                  server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Create an API token and print it, once, alone on stdout."""
    from kernelrank.cli.render import make_console

    body: dict[str, Any] = {"name": name}
    if expires is not None:
        try:
            body["expires_at"] = parse_expiry(expires).isoformat()
        except ValueError as e:
            raise fail(ClientError(f"--expires: {e}", 2)) from None
    answer = _call(server, token, "POST", "/users/me/tokens", json=body)
    until = f", expires {str(answer['expires_at'])[:16]}" if answer.get("expires_at") else ""
    make_console(stderr=True).print(f"created token #{answer['id']} {name!r}{until}. It is shown once, below; "
                                    "keep it secret:", markup=False)
    typer.echo(answer["token"])


@tokens_app.command("revoke")
def tokens_revoke(token_id: Annotated[int, typer.Argument(help="Token id (see `kernelrank tokens list`).")],
                  server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Revoke one of your API tokens (at once)."""
    _call(server, token, "DELETE", f"/users/me/tokens/{token_id}")
    _say(f"token #{token_id} revoked")


def register(app: typer.Typer, problems_app: typer.Typer) -> None:
    """Add ``problems push|open|close|hide|unhide``, ``admin ...`` and ``tokens ...`` to the app."""
    problems_app.command("push")(push_command)
    problems_app.command("open")(open_command)
    problems_app.command("close")(close_command)
    problems_app.command("hide")(hide_command)
    problems_app.command("unhide")(unhide_command)
    app.add_typer(admin_app, name="admin")
    app.add_typer(tokens_app, name="tokens")
