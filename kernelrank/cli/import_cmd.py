"""``kernelrank problems import gpumode PATH`` and ``... kernelbench PATH``: the field's problems as
KernelRank problems, written into the configured folders (``KERNELRANK_PROBLEMS_DIR``,
``KERNELRANK_REFERENCE_KERNELS_DIR``) so that ``kernelrank eval NAME FILE`` finds them at once.

PATH is one problem (a GPU MODE folder with ``task.yml``, a KernelBench file), whose import prints
its report, or a folder of them (``REPO/problems``, ``KernelBench/level1``), whose import prints a
table of outcomes. ``--push`` then uploads each imported problem to a server, as
``kernelrank problems push`` does. Exit status: 0 when every source was imported (CPU and CUDA or
CUDA only) and pushed, 1 when some were refused or a push failed, 2 when nothing could be tried.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from kernelrank.cli.client import ServerOpt, TokenOpt

import_app = typer.Typer(help="Import GPU MODE problem folders or KernelBench problem files (one, or a folder of them).",
                         no_args_is_help=True)

NameOpt = Annotated[Optional[str], typer.Option(
    "--name", help="Name of the new problem (lowercase, digits, _); one problem only. Default: from its path.")]
PrefixOpt = Annotated[Optional[str], typer.Option(
    "--prefix", help="Prefix of names derived from paths (default gm_ for GPU MODE, kb_ for KernelBench).")]
CpuMibOpt = Annotated[float, typer.Option("--cpu-input-mib", min=0.01,
                                          help="Input MiB a CPU benchmark case may hold: larger source cases are scaled down.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace existing problems of those names.")]
PushOpt = Annotated[bool, typer.Option("--push", help="Upload each imported problem to the server (admins).")]


def _run(kind: str, path: Path, name: str | None, prefix: str | None, cpu_input_mib: float, force: bool,
         push: bool, server: str | None, token: str | None) -> None:
    from kernelrank.cli.render import make_console
    from kernelrank.importers import ProblemImportError
    from kernelrank.importers.batch import REFUSED, derive_names, find_sources, import_one, import_tree

    err, out = make_console(stderr=True), make_console()
    cpu_bytes = int(cpu_input_mib * 2**20)
    try:
        sources = find_sources(kind, path.resolve())
        single = len(sources) == 1 and sources[0] == path.resolve()
        if name is not None and not single:
            raise ProblemImportError("--name names one problem: give a problem, not a folder (use --prefix)")
        if single:
            name = name or derive_names(kind, path.resolve(), sources, prefix)[0]
            row, report = import_one(kind, sources[0], name, cpu_input_bytes=cpu_bytes, force=force)
            if report is None:
                raise ProblemImportError(row.reason)
            for line in report.lines():
                out.print(line, highlight=False, markup=False, soft_wrap=True)
            out.print(f"try it: kernelrank eval {name} FILE --mode test", highlight=False, markup=False)
            rows = [row]
        else:
            rows = import_tree(kind, path, prefix=prefix, cpu_input_bytes=cpu_bytes, force=force,
                               on_row=lambda r: err.print(f"{r.outcome:9} {r.name}", highlight=False, markup=False))
    except ProblemImportError as e:
        err.print(f"[red]error:[/] {e}", highlight=False)
        raise typer.Exit(2) from None
    pushed = _push([r.name for r in rows if r.outcome != REFUSED], server, token) if push else {}
    if not single:
        out.print(rows_table(rows, path.resolve(), pushed))
    elif push:
        out.print(f"push: {pushed[rows[0].name]}", highlight=False, markup=False, soft_wrap=True)
    failed = any(r.outcome == REFUSED for r in rows) or any(not v.startswith("pushed") for v in pushed.values())
    if failed:
        raise typer.Exit(1)


def rows_table(rows: list, root: Path, pushed: dict[str, str]):
    """A rich table of a folder's import: source (relative to ``root``), name, outcome, reason
    (and the push), then the counts."""
    from rich.table import Table

    from kernelrank.importers.batch import CUDA_ONLY, IMPORTED, counts

    label = {IMPORTED: "imported (CPU and CUDA)", CUDA_ONLY: "imported (CUDA only)"}
    n = counts(rows)
    table = Table(title=f"{len(rows)} problems under {root}",
                  caption=f"{n[IMPORTED]} imported for CPU and CUDA, {n[CUDA_ONLY]} for CUDA only, {n['refused']} refused")
    for col in ("source", "name", "outcome", "reason") + (("push",) if pushed else ()):
        table.add_column(col, overflow="fold")
    for r in rows:
        src = Path(r.source)
        rel = str(src.relative_to(root)) if src.is_relative_to(root) and src != root else src.name
        table.add_row(rel, r.name, label.get(r.outcome, r.outcome), r.reason,
                      *((pushed.get(r.name, ""),) if pushed else ()))
    return table


def _push(names: list[str], server: str | None, token: str | None) -> dict[str, str]:
    """Upload each problem's folders (as ``kernelrank problems push``); name -> what happened."""
    from kernelrank.cli.admin_cmd import PUSH_TIMEOUT_S
    from kernelrank.cli.client import ApiClient, ClientError, resolve_target
    from kernelrank.importers.common import target_dirs
    from kernelrank.services.problem_admin import pack_folder

    done: dict[str, str] = {}
    try:
        with ApiClient(resolve_target(server, token), PUSH_TIMEOUT_S) as api:
            for name in names:
                pdir, rdir = target_dirs(name)
                try:
                    answer = api.request("POST", "/admin/problems", files={
                        "archive": (f"{name}.tar.gz", pack_folder(pdir / "problem.yaml", rdir), "application/gzip")},
                        data={"hidden": "false"})
                    done[name] = f"pushed: revision {str(answer.get('revision'))[:12]}"
                except ClientError as e:
                    done[name] = f"push refused: {e.message}"
                except (OSError, ValueError) as e:
                    done[name] = f"push failed: cannot pack: {e}"
    except ClientError as e:
        done.update({n: f"push failed: {e.message}" for n in names if n not in done})
    return done


@import_app.command("gpumode")
def gpumode(path: Annotated[Path, typer.Argument(help="A GPU MODE problem folder (with task.yml), or a folder of them "
                                                      "(REPO/problems).")],
            name: NameOpt = None, prefix: PrefixOpt = None, cpu_input_mib: CpuMibOpt = 16.0, force: ForceOpt = False,
            push: PushOpt = False, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Import GPU MODE reference-kernels problems; their submissions run unchanged."""
    _run("gpumode", path, name, prefix, cpu_input_mib, force, push, server, token)


@import_app.command("kernelbench")
def kernelbench(path: Annotated[Path, typer.Argument(help="A KernelBench problem file (Model, get_inputs, get_init_inputs), "
                                                          "or a folder of them (KernelBench/level1).")],
                name: NameOpt = None, prefix: PrefixOpt = None, cpu_input_mib: CpuMibOpt = 16.0,
                force: ForceOpt = False, push: PushOpt = False, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Import KernelBench problems; submissions define ModelNew or custom_kernel(data)."""
    _run("kernelbench", path, name, prefix, cpu_input_mib, force, push, server, token)
