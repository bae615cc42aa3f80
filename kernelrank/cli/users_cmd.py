"""``kernelrank users``: user administration run on the server's machine, against the database
directly (no HTTP, no token needed: access to the database is the credential).

Exit status: 0 on success, 2 for a refused request (name taken or invalid), 3 when the database
cannot be opened or migrated, or does not exist (the commands create one only with ``--init``:
:mod:`kernelrank.cli.database`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from kernelrank.cli.database import InitOpt

users_app = typer.Typer(help="Manage users (on the server's machine, against its database).", no_args_is_help=True)


@users_app.command("create")
def users_create(
    name: Annotated[str, typer.Argument(help="User name: 1-64 letters, digits, '_', '.' or '-'.")],
    admin: Annotated[bool, typer.Option("--admin", help="Make the user an administrator.")] = False,
    init: InitOpt = False,
) -> None:
    """Create user NAME and print its API token, once, alone on stdout (the message goes to stderr,
    so ``TOKEN=$(kernelrank users create NAME)`` captures just the token). The database is
    migrated to the newest schema first; where there is none, nothing is created unless --init."""
    from sqlalchemy.exc import SQLAlchemyError

    from kernelrank.cli.database import NoDatabase, open_database
    from kernelrank.cli.render import make_console
    from kernelrank.db.session import session_scope
    from kernelrank.services import Conflict, Invalid
    from kernelrank.services.users import create_user

    err = make_console(stderr=True)
    try:
        open_database(init)
        with session_scope() as session:
            user, token = create_user(session, name, admin=admin)
            label = f"{user.name}{' (admin)' if user.is_admin else ''}"
    except NoDatabase as e:
        err.print(f"[red]error:[/] {e.message}", soft_wrap=True, highlight=False)
        raise typer.Exit(3) from None
    except (Conflict, Invalid) as e:
        err.print(f"[red]error:[/] {e.message}", soft_wrap=True)
        raise typer.Exit(2) from None
    except SQLAlchemyError as e:  # the message names the error class only: URLs may hold passwords
        err.print(f"[red]error:[/] cannot use the database ({e.__class__.__name__}); check KERNELRANK_DATABASE_URL "
                  "or KERNELRANK_DATA_DIR", soft_wrap=True)
        raise typer.Exit(3) from None
    err.print(f"created user {label}. Its API token is shown once, below; keep it secret:")
    typer.echo(token)


@users_app.command("passwd")
def users_passwd(
    name: Annotated[str, typer.Argument(help="User name.")],
    password_stdin: Annotated[bool, typer.Option(
        "--password-stdin", help="Read the password from the first line of stdin instead of asking for it.")] = False,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the password: sign-in by API token only.")] = False,
    init: InitOpt = False,
) -> None:
    """Set user NAME's password (for signing in on the web pages and at /api/v1/auth/token),
    asked for twice without echo, or read from stdin. Stored as an Argon2id hash. The database is
    migrated to the newest schema first; where there is none, nothing is created unless --init."""
    import sys

    from sqlalchemy.exc import SQLAlchemyError

    from kernelrank.cli.database import NoDatabase, open_database
    from kernelrank.cli.render import make_console
    from kernelrank.db.session import session_scope
    from kernelrank.services import Invalid, NotFound
    from kernelrank.services.users import clear_password, get_user, set_password

    err = make_console(stderr=True)
    password = ""
    if not clear:
        if password_stdin:
            password = sys.stdin.readline().rstrip("\r\n")
        elif sys.stdin.isatty():
            password = typer.prompt("New password", hide_input=True, confirmation_prompt=True)
        else:
            err.print("[red]error:[/] no terminal to ask for the password: use --password-stdin", soft_wrap=True)
            raise typer.Exit(2)
    try:
        open_database(init)
        with session_scope() as session:
            user = get_user(session, name)
            if clear:
                clear_password(session, user)
            else:
                set_password(session, user, password)
    except NoDatabase as e:
        err.print(f"[red]error:[/] {e.message}", soft_wrap=True, highlight=False)
        raise typer.Exit(3) from None
    except (NotFound, Invalid) as e:
        err.print(f"[red]error:[/] {e.message}", soft_wrap=True, markup=True)
        raise typer.Exit(2) from None
    except SQLAlchemyError as e:  # the message names the error class only: URLs may hold passwords
        err.print(f"[red]error:[/] cannot use the database ({e.__class__.__name__}); check KERNELRANK_DATABASE_URL "
                  "or KERNELRANK_DATA_DIR", soft_wrap=True)
        raise typer.Exit(3) from None
    err.print(f"password of {name} {'removed' if clear else 'set'}", markup=False)
