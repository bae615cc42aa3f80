"""Opening the server's database from an admin command (``users``, ``export``, ``problems
code-open``): an existing database is migrated to the newest schema; a missing one is created only
when asked (``--init``), so a command run from another folder does not silently make a new, empty
database that the running server never reads (with a token it does not know).
"""

from __future__ import annotations

from typing import Annotated

import typer

InitOpt = Annotated[bool, typer.Option(
    "--init", help="Create the database when there is none yet (a new, empty one: the running server reads "
                   "its own, in its KERNELRANK_DATA_DIR or KERNELRANK_DATABASE_URL).")]


class NoDatabase(Exception):
    """No KernelRank database where the settings point; ``message`` says where that is."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def where() -> str:
    """Where the settings point, for people: the SQLite file and its data folder, or (never the URL
    itself, which may hold a password) ``the database at KERNELRANK_DATABASE_URL``."""
    from kernelrank.db.session import sqlite_path
    from kernelrank.settings import get_settings

    settings = get_settings()
    path = sqlite_path(settings.resolved_database_url())
    if path is None:
        return "the database at KERNELRANK_DATABASE_URL"
    if settings.database_url:
        return f"{path} (KERNELRANK_DATABASE_URL)"
    return f"{path} (data folder {settings.data_dir.resolve()}, KERNELRANK_DATA_DIR)"


def open_database(init: bool) -> None:
    """Migrate the configured database to the newest schema; without ``init``, only if it exists.

    Raises:
        NoDatabase: there is none and ``init`` is false.
        sqlalchemy.exc.SQLAlchemyError: it cannot be reached or migrated.
    """
    from kernelrank.db.session import database_exists, migrate

    if not init and not database_exists():
        raise NoDatabase(f"no KernelRank database in {where()}: run this where the server runs (its working "
                         "folder), or set KERNELRANK_DATA_DIR or KERNELRANK_DATABASE_URL to the server's; "
                         "--init creates a new, empty database there")
    migrate()
