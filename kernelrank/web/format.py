"""Jinja filters of the pages: durations in µs or ms, speedups, roofline figures, UTC dates.

Pure functions over plain numbers, so they are tested without a database.
"""

from __future__ import annotations

import datetime as dt
import math


def duration(ns: float | None) -> str:
    """A time given in nanoseconds, in the unit that reads best: ``"812 ns"``, ``"12.3 µs"``,
    ``"4.56 ms"`` or ``"1.20 s"``; ``"—"`` for ``None`` or a value that is not finite."""
    if not isinstance(ns, (int, float)) or not math.isfinite(ns):
        return "—"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def speedup(value: float | None) -> str:
    """Reference time over submission time, e.g. ``"1.52×"``; ``"—"`` when unknown."""
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return "—"
    return f"{value:.3g}×"


def rate(value: float | None, unit: str) -> str:
    """An achieved rate (``TFLOP/s`` or ``GB/s``) with 3 significant digits; ``"—"`` when unknown."""
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return "—"
    return f"{value:.3g} {unit}"


def error_figure(value: float | str | None) -> str:
    """A correctness figure (max abs or rel error) with 3 significant digits: ``"0.00123"``,
    ``"inf"`` or ``"nan"`` (stored results write those as ``"Infinity"`` and ``"NaN"``:
    :func:`kernelrank.runner.results.json_ready`); ``"—"`` when unknown or not a number."""
    if value is None or isinstance(value, bool):
        return "—"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "—"
    return f"{number:.3g}"


def interval(value: list | tuple | None, kind: str = "duration") -> str:
    """A 95% interval ``[low, high]`` as ``"4.51–4.63 ms"`` (``kind="duration"``, ns) or
    ``"0.98–1.05×"`` (``kind="speedup"``); an end that is not a finite number (stored results
    write infinity as ``"Infinity"``) reads ``"∞"``; ``"—"`` when there is none."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return "—"
    ends = []
    for v in value:
        try:
            ends.append(float(v))
        except (TypeError, ValueError):
            return "—"
    low, high = ends
    if kind == "speedup":
        return f"{low:.3g}–{high:.3g}×" if math.isfinite(high) else f"{low:.3g}–∞"
    if not math.isfinite(high):
        return f"{duration(low)}–∞"
    # one unit for both ends: the high end's
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1.0)):
        if abs(high) >= scale or unit == "ns":
            return f"{low / scale:.3g}–{high / scale:.3g} {unit}"
    return "—"  # pragma: no cover - the loop always returns


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


FILTERS = {"duration": duration, "error_figure": error_figure, "speedup": speedup, "rate": rate, "when": when, "iso": iso,
           "interval": interval}
