"""``kernelrank problems import gpumode DIR`` and ``... kernelbench FILE``: the field's problems as
KernelRank problems, written into the configured folders (``KERNELRANK_PROBLEMS_DIR``,
``KERNELRANK_REFERENCE_KERNELS_DIR``) so that ``kernelrank eval NAME FILE`` finds them at once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Callable

import typer

import_app = typer.Typer(help="Import a GPU MODE problem folder or a KernelBench problem file as a problem.",
                         no_args_is_help=True)

NameOpt = Annotated[str, typer.Option("--name", help="Name of the new problem (lowercase, digits, _).")]
CpuMibOpt = Annotated[float, typer.Option("--cpu-input-mib", min=0.01,
                                          help="Input MiB a CPU benchmark case may hold: larger source cases are scaled down.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace an existing problem of that name.")]


def _run(fn: Callable[..., object], source: Path, name: str, cpu_input_mib: float, force: bool) -> None:
    from kernelrank.cli.render import make_console
    from kernelrank.importers import ProblemImportError

    err = make_console(stderr=True)
    try:
        report = fn(source, name, cpu_input_bytes=int(cpu_input_mib * 2**20), force=force)
    except ProblemImportError as e:
        err.print(f"[red]error:[/] {e}", highlight=False)
        raise typer.Exit(2) from None
    out = make_console()
    for line in report.lines():  # type: ignore[attr-defined]
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    out.print(f"try it: kernelrank eval {name} FILE --mode test", highlight=False, markup=False)


@import_app.command("gpumode")
def gpumode(directory: Annotated[Path, typer.Argument(help="GPU MODE problem folder (with task.yml).")],
            name: NameOpt, cpu_input_mib: CpuMibOpt = 16.0, force: ForceOpt = False) -> None:
    """Import a GPU MODE reference-kernels problem folder; its submissions run unchanged."""
    from kernelrank.importers import import_gpumode

    _run(import_gpumode, directory, name, cpu_input_mib, force)


@import_app.command("kernelbench")
def kernelbench(file: Annotated[Path, typer.Argument(help="KernelBench problem file (Model, get_inputs, get_init_inputs).")],
                name: NameOpt, cpu_input_mib: CpuMibOpt = 16.0, force: ForceOpt = False) -> None:
    """Import a KernelBench problem file; submissions define ModelNew or custom_kernel(data)."""
    from kernelrank.importers import import_kernelbench

    _run(import_kernelbench, file, name, cpu_input_mib, force)
