"""Jinja filters of the pages: the shared figure formatters (:mod:`kernelrank.format`: times,
rates, speedups, roofline shares, error figures, as the CLI writes them) and UTC dates.

Pure functions over plain numbers, so they are tested without a database.
"""

from __future__ import annotations

import datetime as dt

from kernelrank.format import (byte_rate, duration, error_figure, flop_rate, interval, number, share, size, speedup,
                               waited)

__all__ = ["FILTERS", "byte_rate", "duration", "error_figure", "flop_rate", "interval", "iso", "rate", "share", "size", "speedup", "when"]


def rate(value: float | None, unit: str) -> str:
    """An achieved rate given in ``TFLOP/s`` or ``GB/s`` (``unit``), written in the unit that reads
    best (:func:`kernelrank.format.flop_rate`, :func:`~kernelrank.format.byte_rate`); any other
    ``unit`` (``''``): the bare figure with three significant digits."""
    if unit == "TFLOP/s":
        return flop_rate(value)
    if unit == "GB/s":
        return byte_rate(value)
    return number(value)


def when(value: dt.datetime | None) -> str:
    """A stored time as ``YYYY-MM-DD HH:MM UTC`` (SQLite returns naive UTC, Postgres aware)."""
    if value is None:
        return "—"
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc)
    return value.strftime("%Y-%m-%d %H:%M UTC")


def iso(value: dt.datetime | None) -> str:
    """A stored time in ISO 8601 with its UTC offset (for ``<time datetime=...>``)."""
    if value is None:
        return ""
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return value.isoformat()


FILTERS = {"duration": duration, "error_figure": error_figure, "speedup": speedup, "rate": rate,
           "flop_rate": flop_rate, "byte_rate": byte_rate, "share": share, "size": size, "when": when, "iso": iso, "waited": waited,
           "interval": interval}
