"""``kernelrank export PROBLEM`` and ``kernelrank problems code-open NAME``: data for the people who
run a competition, on the server's machine against its database (as ``kernelrank users``: access
to the database is the credential).

Exit status: 0 on success, 2 for a refused request (unknown problem, format), 3 when there is no
database where the settings point (these commands never create one), or it cannot be opened or
migrated.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Callable, Optional, TypeVar

import typer

T = TypeVar("T")


class FormatOpt(str, Enum):
    jsonl = "jsonl"
    parquet = "parquet"


def _with_db(fn: Callable[..., T], init: bool = False) -> T:
    """Run ``fn(session)`` in a session of the migrated database (created only when ``init``:
    :func:`kernelrank.cli.database.open_database`); refusals and database errors become exit
    statuses 2 and 3 with a message."""
    from sqlalchemy.exc import SQLAlchemyError

    from kernelrank.cli.database import NoDatabase, open_database
    from kernelrank.cli.render import make_console
    from kernelrank.db.session import session_scope
    from kernelrank.services import ServiceError

    err = make_console(stderr=True)
    try:
        open_database(init)
        with session_scope() as session:
            return fn(session)
    except NoDatabase as e:
        err.print(f"[red]error:[/] {e.message}", soft_wrap=True, highlight=False)
        raise typer.Exit(3) from None
    except ServiceError as e:
        err.print(f"[red]error:[/] {e.message}", soft_wrap=True, highlight=False)
        raise typer.Exit(2) from None
    except SQLAlchemyError as e:  # the class only: URLs may hold passwords
        err.print(f"[red]error:[/] cannot use the database ({e.__class__.__name__}); check KERNELRANK_DATABASE_URL "
                  "or KERNELRANK_DATA_DIR", soft_wrap=True)
        raise typer.Exit(3) from None


def export_command(
    problem: Annotated[str, typer.Argument(help="Problem name.")],
    fmt: Annotated[FormatOpt, typer.Option("--format", help="jsonl | parquet.")] = FormatOpt.jsonl,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="File to write (default: PROBLEM-ranked.FORMAT).")] = None,
    device: Annotated[Optional[str], typer.Option(help="Only this device queue (e.g. cpu).")] = None,
) -> None:
    """Write PROBLEM's ranked submissions (results, revision, device, kernelguard signal; code only
    where the problem's code is open: `kernelrank problems code-open`) for admins."""
    from kernelrank.cli.render import make_console
    from kernelrank.services import export

    path = output or Path(f"{problem}-ranked.{fmt.value}")

    def run(session) -> tuple[int, bool]:
        rows = export.ranked_rows(session, problem, device)
        export.write(rows, path, fmt.value)
        return len(rows), any(r["code"] is not None for r in rows)

    n, with_code = _with_db(run)
    make_console(stderr=True).print(f"wrote {n} ranked submissions of {problem} to {path} "
                                    f"({'with' if with_code or not n else 'without'} code"
                                    f"{'' if with_code or not n else ': the problem code is not open'})",
                                    highlight=False, soft_wrap=True)


def code_open_command(
    name: Annotated[str, typer.Argument(help="Problem name.")],
    off: Annotated[bool, typer.Option("--off", help="Stop publishing the code in exports.")] = False,
) -> None:
    """Publish problem NAME's ranked submissions' code in exports (`kernelrank export`), or stop (--off)."""
    from kernelrank.cli.render import make_console
    from kernelrank.services import export

    _with_db(lambda session: export.set_code_open(session, name, not off))
    make_console(stderr=True).print(f"{name}: code {'closed' if off else 'open'} in exports", highlight=False)


def register(app: typer.Typer, problems_app: typer.Typer) -> None:
    """Add ``export`` and ``problems code-open`` to the app."""
    app.command("export")(export_command)
    problems_app.command("code-open")(code_open_command)
