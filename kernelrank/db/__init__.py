"""The database: models (``models``), engine and sessions (``session``). Migrations: ``migrations/``."""
