"""The ``kernelrank`` command: ``eval`` a kernel locally; the client, admin and service commands
registered below (``kernelrank --help`` lists them, ``--version`` prints the version).

Exit status: 0 when the evaluation passed, 1 for any other verdict (a broken problem definition
included: verdict ``error``), 2 for a usage error (unknown problem, unreadable file, bad mode or
device). With ``--json``, ``eval`` prints exactly one JSON object on stdout for every outcome:
the result, or for a usage error or a broken problem an object of the same shape with status
``error``, the reason in ``message`` and no cases.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from kernelrank import vocab
from kernelrank.problems import ProblemError, list_problem_names, load_problem

app = typer.Typer(help="KernelRank: judge and time GPU kernels against a problem's reference.",
                  no_args_is_help=True, add_completion=False)
problems_app = typer.Typer(help="List and inspect problems (on the server; --local: the folders here); import them "
                                "from GPU MODE and KernelBench; push, open, close and hide them on a server (admins).",
                           no_args_is_help=True)
app.add_typer(problems_app, name="problems")
from kernelrank.cli.import_cmd import import_app as _import_app  # noqa: E402 - imports nothing heavy

problems_app.add_typer(_import_app, name="import")


def _version(value: bool) -> None:
    if value:
        import platform

        from kernelrank import __version__

        typer.echo(f"kernelrank {__version__} (Python {platform.python_version()})")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the version and exit.")] = False) -> None:
    """KernelRank: judge and time GPU kernels against a problem's reference."""


def _usage_error(message: str) -> typer.Exit:
    from kernelrank.cli.render import make_console

    make_console(stderr=True).print(f"[red]error:[/] {message}")
    return typer.Exit(2)


class _EvalRefused(Exception):
    """``eval`` cannot judge: ``exit_code`` 2 (usage error) or 1 (broken problem: verdict ``error``)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.message, self.exit_code = message, exit_code


def local_device(device: str, detected: str, gpu_queue: str | None) -> str:
    """The harness device class for ``kernelrank eval --device DEVICE``: ``auto`` (the GPU when
    torch sees one), ``cpu``, ``cuda`` (the local shorthand for this machine's GPU) or a device
    queue ``cuda-<model>``, which must be this machine's GPU (``gpu_queue``).

    Raises:
        ValueError: not one of those, or a GPU this machine does not have.
    """
    if device == vocab.AUTO:
        return detected
    cuda = vocab.DeviceClass.cuda
    if device == vocab.LOCAL_CUDA or (vocab.is_device_queue(device) and vocab.device_class(device) == cuda):
        if detected != cuda:
            raise ValueError(f"--device {device}: torch sees no CUDA device on this machine (use --device cpu)")
        if device != vocab.LOCAL_CUDA and device != gpu_queue:
            raise ValueError(f"--device {device}: this machine's GPU is {gpu_queue} (or use --device cuda)")
        return cuda.value
    if device == vocab.CPU_QUEUE:
        return vocab.DeviceClass.cpu.value
    raise ValueError(f"unknown device {device!r}: cpu, cuda (this machine's GPU), cuda-<model> or auto")


def _gpu_queue() -> str | None:
    import torch

    return vocab.gpu_queue_name(torch.cuda.get_device_name(0)) if torch.cuda.is_available() else None


@app.command("eval")
def eval_command(
    problem: Annotated[str, typer.Argument(help="Problem name (see `kernelrank problems list --local`).")],
    file: Annotated[Path, typer.Argument(help="Submission: a Python file defining custom_kernel(data).")],
    mode: Annotated[str, typer.Option(help=" | ".join(vocab.MODES) + ".")] = vocab.Mode.test.value,
    device: Annotated[str, typer.Option(
        help="cpu | cuda (this machine's GPU) | cuda-<model> (a device queue, e.g. cuda-h100: must be this "
             "machine's GPU) | auto (cuda when available).")] = vocab.AUTO,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object on stdout, whatever the "
                                                         "outcome (status error and a message when it cannot judge).")] = False,
    threads: Annotated[int, typer.Option(help="CPU threads for the kernel (0: all cores).", min=0)] = 0,
    trace_dir: Annotated[Optional[Path], typer.Option(help="Profile mode: where to write the Chrome trace.")] = Path("."),
    roofline: Annotated[bool, typer.Option(
        "--roofline", help="Timed modes: measure this machine's ceilings afterwards (copy bandwidth, matmul rate per "
                           "dtype; a few seconds, as a runner does when it starts) and show each case's share of "
                           "its roofline.")] = False,
) -> None:
    """Judge FILE on PROBLEM exactly as the service would, on this machine."""
    from kernelrank.cli.render import make_console, result_view
    from kernelrank.runner.host.devices import detect_device
    from kernelrank.runner.judge.harness import EvalOptions, evaluate
    from kernelrank.runner.results import EvalResult
    from kernelrank.settings import get_settings

    dev = device
    try:
        try:
            vocab.parse_mode(mode)
        except ValueError as e:
            raise _EvalRefused(str(e), 2) from None
        try:
            detected = detect_device() if device != vocab.CPU_QUEUE else vocab.DeviceClass.cpu.value
            on_gpu_queue = detected == vocab.DeviceClass.cuda and device.startswith(vocab.CUDA_QUEUE_PREFIX)
            dev = local_device(device, detected, _gpu_queue() if on_gpu_queue else None)
        except ValueError as e:
            raise _EvalRefused(str(e), 2) from None
        if problem not in list_problem_names():
            known = ", ".join(list_problem_names()) or "none"
            raise _EvalRefused(f"unknown problem {problem!r} (known: {known})", 2)
        try:
            source = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise _EvalRefused(f"cannot read {file}: {e}", 2) from None
        try:
            spec = load_problem(problem).spec()
        except ProblemError as e:  # a broken problem.yaml or reference folder
            raise _EvalRefused(f"problem {problem!r} is broken: {e}", 1) from None
    except _EvalRefused as e:
        if as_json:
            refused = EvalResult(vocab.Verdict.error, mode, problem, "", dev, message=e.message)
            typer.echo(json.dumps(refused.to_dict(), allow_nan=False, default=str))
        raise (_usage_error(e.message) if e.exit_code == 2 else _broken(e.message)) from None
    settings = get_settings()
    options = EvalOptions(
        threads=threads or settings.cpu_threads,
        scratch_dir=settings.scratch_dir,
        log_limit=settings.log_limit_bytes,
        trace_dir=trace_dir,
    )
    err = make_console(stderr=True)
    try:
        if as_json:
            result = evaluate(spec, source, mode, dev, options)
        else:
            with err.status(f"{problem}: {mode} on {dev}: starting") as status:
                def on_event(e: dict) -> None:
                    if e["event"] == "phase":
                        status.update(f"{problem}: {mode} on {dev}: {e['phase']}")
                    elif e["event"] == "case":
                        c = e["case"]
                        err.print(f"  {'[green]pass[/]' if c.passed else '[red]FAIL[/]'} {c.label}")

                result = evaluate(spec, source, mode, dev, options, on_event)
    except Exception as e:  # noqa: BLE001 - the reference or the judge failed: a verdict, never a traceback
        message = (f"problem {problem!r} is broken: {e}" if isinstance(e, ProblemError)
                   else f"the judge could not evaluate this submission: {type(e).__name__}: {e}")
        result = EvalResult(vocab.Verdict.error, mode, problem, spec.revision, dev, message=message)
        if not as_json:
            raise _broken(message) from None
    if roofline and any(c.kind == vocab.CaseKind.benchmark and c.timing for c in result.cases):
        result = _with_roofline(result, spec, dev, threads or settings.cpu_threads, err)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), allow_nan=False, default=str))
    else:
        make_console().print(result_view(result))
    raise typer.Exit(0 if result.passed else 1)


def _with_roofline(result, spec, device: str, threads: int, err):  # noqa: ANN001, ANN202 - types load lazily
    """``result`` with this machine's measured ceilings and each benchmark case's roofline share
    (:mod:`kernelrank.runner.host.ceilings`, :func:`kernelrank.roofline.attach`); unchanged, with a
    warning on stderr, when the measurement fails."""
    from kernelrank import roofline
    from kernelrank.runner.host.ceilings import measure
    from kernelrank.runner.results import EvalResult

    try:
        with err.status(f"measuring the ceilings of {device}"):
            ceilings = measure(device, threads)
    except Exception as e:  # noqa: BLE001 - the verdict stands without a roofline
        err.print(f"[yellow]warning:[/] ceilings not measured ({type(e).__name__}: {e}); no roofline shares")
        return result
    d = roofline.attach(result.to_dict(), ceilings, spec.definition.contract.output.dtype)
    return EvalResult.from_dict(d)


def _broken(message: str) -> typer.Exit:
    from kernelrank.cli.render import make_console

    make_console(stderr=True).print(f"[red]error:[/] {message}")
    return typer.Exit(1)


__all__ = ["app", "list_problem_names"]


# Client commands (HTTP API) and user administration (database); both modules import nothing heavy.
from kernelrank.cli import admin_cmd as _admin_cmd, client as _client, users_cmd as _users_cmd  # noqa: E402

_client.register(app)
from kernelrank.cli import browse as _browse  # noqa: E402 - submissions, problems list|show (server or --local)

_browse.register(app, problems_app)
_admin_cmd.register(app, problems_app)
app.add_typer(_users_cmd.users_app, name="users")
from kernelrank.cli import export_cmd as _export_cmd  # noqa: E402 - imports nothing heavy

_export_cmd.register(app, problems_app)
from kernelrank.cli import competitions_cmd as _competitions_cmd  # noqa: E402 - imports nothing heavy

_competitions_cmd.register(app)

# Service commands (their heavy imports stay inside the command functions).
from kernelrank.cli import runner_cmd, serve  # noqa: E402

app.command("runner")(runner_cmd.runner)
app.command("serve")(serve.serve)


@app.command("gpu-check")
def gpu_check(out: Annotated[Optional[Path], typer.Option(help="The report file (default: gpu-check-<UTC time>.md here).")] = None,
              ) -> None:
    """Check, in at most 8 minutes, that this machine's GPU judges right: its facts, the data slots from a
    sandboxed child, the GPU tests, the self-test, identical-kernel leaderboard runs of GEMM and MLA decode;
    one report file. Exit 0 passed, 1 a step failed, 3 no GPU here (nothing run)."""
    from kernelrank.runner.host.gpucheck import main as gpucheck_main

    raise typer.Exit(gpucheck_main(["--out", str(out)] if out else []))

if __name__ == "__main__":
    app()
