"""The ``kernelrank`` command (Typer): ``eval`` and ``problems``."""
