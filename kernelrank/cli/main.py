"""The ``kernelrank`` command: ``eval`` a kernel locally, list and show ``problems``.

Exit status: 0 when the evaluation passed, 1 for any other verdict, 2 for a usage error
(unknown problem, unreadable file, bad option).
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from kernelrank.problems import ProblemError, list_problem_names, load_all, load_problem

app = typer.Typer(help="KernelRank: judge and time GPU kernels against a problem's reference.",
                  no_args_is_help=True, add_completion=False)
problems_app = typer.Typer(help="List and inspect problems (local folders); push, open, close and hide them on a "
                                "server (admins).", no_args_is_help=True)
app.add_typer(problems_app, name="problems")
from kernelrank.cli.import_cmd import import_app as _import_app  # noqa: E402 - issue 17: imports nothing heavy

problems_app.add_typer(_import_app, name="import")


class ModeOpt(str, Enum):
    test = "test"
    benchmark = "benchmark"
    leaderboard = "leaderboard"
    profile = "profile"


class DeviceOpt(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


def _usage_error(message: str) -> typer.Exit:
    from kernelrank.cli.render import make_console

    make_console(stderr=True).print(f"[red]error:[/] {message}")
    return typer.Exit(2)


@app.command("eval")
def eval_command(
    problem: Annotated[str, typer.Argument(help="Problem name (see `kernelrank problems list`).")],
    file: Annotated[Path, typer.Argument(help="Submission: a Python file defining custom_kernel(data).")],
    mode: Annotated[ModeOpt, typer.Option(help="test | benchmark | leaderboard | profile.")] = ModeOpt.test,
    device: Annotated[DeviceOpt, typer.Option(help="cpu | cuda | auto (cuda when available).")] = DeviceOpt.auto,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object on stdout.")] = False,
    threads: Annotated[int, typer.Option(help="CPU threads for the kernel (0: all cores).", min=0)] = 0,
    trace_dir: Annotated[Optional[Path], typer.Option(help="Profile mode: where to write the Chrome trace.")] = Path("."),
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Re-time the reference instead of using cached timings.")] = False,
) -> None:
    """Judge FILE on PROBLEM exactly as the service would, on this machine."""
    from kernelrank.cli.render import make_console, result_view
    from kernelrank.runner.devices import detect_device
    from kernelrank.runner.harness import EvalOptions, evaluate
    from kernelrank.settings import get_settings

    try:
        spec = load_problem(problem).spec()
    except ProblemError as e:
        raise _usage_error(str(e)) from None
    try:
        source = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise _usage_error(f"cannot read {file}: {e}") from None
    dev = detect_device() if device is DeviceOpt.auto else device.value
    if dev == "cuda" and detect_device() != "cuda":
        raise _usage_error("--device cuda: torch sees no CUDA device on this machine (use --device cpu)")
    settings = get_settings()
    options = EvalOptions(
        threads=threads or settings.cpu_threads,
        scratch_dir=settings.scratch_dir,
        cache_dir=None if no_cache else settings.cache_dir,
        log_limit=settings.log_limit_bytes,
        trace_dir=trace_dir,
    )
    err = make_console(stderr=True)
    if as_json:
        result = evaluate(spec, source, mode.value, dev, options)
        typer.echo(json.dumps(result.to_dict(), allow_nan=False, default=str))
    else:
        with err.status(f"{problem}: {mode.value} on {dev}: starting") as status:
            def on_event(e: dict) -> None:
                if e["event"] == "phase":
                    status.update(f"{problem}: {mode.value} on {dev}: {e['phase']}")
                elif e["event"] == "case":
                    c = e["case"]
                    err.print(f"  {'[green]pass[/]' if c.passed else '[red]FAIL[/]'} {c.label}")

            result = evaluate(spec, source, mode.value, dev, options, on_event)
        make_console().print(result_view(result))
    raise typer.Exit(0 if result.passed else 1)


@problems_app.command("list")
def problems_list() -> None:
    """Every problem under problems/, with its case counts and revision."""
    from kernelrank.cli.render import make_console, problems_table

    try:
        make_console().print(problems_table(load_all()))
    except ProblemError as e:
        raise _usage_error(str(e)) from None


@problems_app.command("show")
def problems_show(name: Annotated[str, typer.Argument(help="Problem name.")]) -> None:
    """Description, data contract, cases, tolerances and budgets of one problem."""
    from kernelrank.cli.render import make_console, problem_detail

    try:
        make_console().print(problem_detail(load_problem(name)))
    except ProblemError as e:
        raise _usage_error(f"{e}") from None


__all__ = ["app", "list_problem_names"]


# Client commands (HTTP API) and user administration (database); both modules import nothing heavy.
from kernelrank.cli import admin_cmd as _admin_cmd, client as _client, users_cmd as _users_cmd  # noqa: E402

_client.register(app)
_admin_cmd.register(app, problems_app)
app.add_typer(_users_cmd.users_app, name="users")
from kernelrank.cli import export_cmd as _export_cmd  # noqa: E402 - issue 17: imports nothing heavy

_export_cmd.register(app, problems_app)

# Service commands (their heavy imports stay inside the command functions).
from kernelrank.cli import runner_cmd, serve  # noqa: E402

app.command("runner")(runner_cmd.runner)
app.command("serve")(serve.serve)

if __name__ == "__main__":
    app()
