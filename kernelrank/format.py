"""How every figure is written for people: times, rates, speedups, roofline shares, error figures.

One module for the terminal (``kernelrank`` CLI tables and messages), the web pages (Jinja
filters, :mod:`kernelrank.api.web.format`), the charts (:mod:`kernelrank.api.web.charts`) and the
judge's verdict message, so that one time reads the same everywhere. Pure functions over plain
numbers (no torch), tested on their own.

Conventions:

- three significant digits, trailing zeros kept (``2.00×``, ``250 µs``, ``35.9 µs``), never cut:
  a number wider than three digits (``1234 s``) is written whole; figures with a unit never
  need an exponent, plain figures take one only far from 1 (an error of ``2.33e-10``);
- the unit is chosen per value so the number is at least 1 and below 1000 (``812 ns``,
  ``35.9 µs``, ``1.23 ms``); rates likewise (``583 GFLOP/s`` rather than ``0.583 TFLOP/s``);
- a figure that is unknown (``None``) or not finite is :data:`MISSING`, except error figures,
  where ``inf`` and ``nan`` are information (see :func:`error_figure`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

#: What an unknown figure reads as.
MISSING = "—"
#: Significant digits of every figure.
DIGITS = 3

#: Time units, smallest first: (name, nanoseconds per unit).
TIME_UNITS: tuple[tuple[str, float], ...] = (("ns", 1.0), ("µs", 1e3), ("ms", 1e6), ("s", 1e9))
#: Compute-rate units, smallest first: (name, TFLOP/s per unit).
FLOP_RATE_UNITS: tuple[tuple[str, float], ...] = (("kFLOP/s", 1e-9), ("MFLOP/s", 1e-6), ("GFLOP/s", 1e-3),
                                                   ("TFLOP/s", 1.0), ("PFLOP/s", 1e3))
#: Memory sizes, smallest first: (name, bytes per unit), binary.
SIZE_UNITS: tuple[tuple[str, float], ...] = (("bytes", 1.0), ("KiB", 2.0**10), ("MiB", 2.0**20), ("GiB", 2.0**30),
                                             ("TiB", 2.0**40))
#: Memory-rate units, smallest first: (name, GB/s per unit); 1 GB = 10^9 bytes.
BYTE_RATE_UNITS: tuple[tuple[str, float], ...] = (("kB/s", 1e-6), ("MB/s", 1e-3), ("GB/s", 1.0), ("TB/s", 1e3))


def finite(value: object) -> float | None:
    """``value`` as a finite float, or ``None`` (unknown, a bool, not a number, NaN or infinite);
    numeric strings are read as numbers (stored results may hold them)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def positive(value: object) -> float | None:
    """:func:`finite` where it is above zero (a rate, a time, a ceiling), else ``None``."""
    x = finite(value)
    return x if x is not None and x > 0 else None


def significant(x: float, digits: int = DIGITS) -> str:
    """``x`` with ``digits`` significant digits in fixed-point notation, trailing zeros kept
    (``2.00``, ``35.9``, ``0.00123``); integers of more digits are written whole (``1234``).

    Raises:
        ValueError: ``x`` is not finite, or ``digits`` < 1.
    """
    if digits < 1:
        raise ValueError("digits must be at least 1")
    if not math.isfinite(x):
        raise ValueError(f"{x} is not finite")
    if x == 0:
        return "0" if digits == 1 else "0." + "0" * (digits - 1)
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    rounded = round(x, decimals)
    if rounded != 0 and math.floor(math.log10(abs(rounded))) > math.floor(math.log10(abs(x))):
        decimals = max(0, decimals - 1)  # 9.996 -> 10.0, not 10.00
    return f"{rounded:.{decimals}f}"


def _unit_for(magnitude: float, units: Sequence[tuple[str, float]]) -> tuple[str, float]:
    """The largest of ``units`` (ascending ``(name, scale)``) in which ``magnitude`` (>= 0) reads
    as at least 1; the smallest unit where none does."""
    chosen = units[0]
    for unit in units:
        if magnitude >= unit[1]:
            chosen = unit
    return chosen


def _scaled(value: float, units: Sequence[tuple[str, float]]) -> tuple[str, str]:
    """(number, unit) with the unit that puts ``|value|`` in [1, 1000) after rounding (the
    smallest or largest unit where none does)."""
    chosen = _unit_for(abs(value), units)
    text = significant(value / chosen[1])
    i = units.index(chosen)
    if abs(float(text)) >= 1000 and i + 1 < len(units):  # 999.7 µs rounds to 1000: write 1.00 ms
        chosen = units[i + 1]
        text = significant(value / chosen[1])
    return text, chosen[0]


def _quantity(value: float | None, units: Sequence[tuple[str, float]]) -> str:
    """``"<number> <unit>"`` (:func:`_scaled`), :data:`MISSING` when unknown or not finite."""
    x = finite(value)
    if x is None:
        return MISSING
    number, unit = _scaled(x, units)
    return f"{number} {unit}"


def _axis_unit(values: Iterable[float | None], units: Sequence[tuple[str, float]],
               default: tuple[str, float]) -> tuple[str, float]:
    """One unit for a set of values (a chart's axis): the one in which the largest finite
    magnitude reads as at least 1 (:func:`_unit_for`); ``default`` when there is none."""
    magnitudes = [abs(x) for x in (finite(v) for v in values) if x is not None]
    return _unit_for(max(magnitudes), units) if magnitudes else default


def duration(ns: float | None) -> str:
    """A time given in nanoseconds: ``"812 ns"``, ``"35.9 µs"``, ``"1.23 ms"``, ``"2.00 s"``;
    :data:`MISSING` when unknown or not finite."""
    return _quantity(ns, TIME_UNITS)


def time_unit(values_ns: Iterable[float | None]) -> tuple[str, float]:
    """One unit for a set of times (a chart's axis): the unit in which the largest finite value
    reads as at least 1 (``("µs", 1e3)``); microseconds when there is none."""
    return _axis_unit(values_ns, TIME_UNITS, TIME_UNITS[1])


def flop_rate(tflops: float | None) -> str:
    """A compute rate given in TFLOP/s (10^12 floating-point operations per second):
    ``"312 TFLOP/s"``, ``"583 GFLOP/s"``; :data:`MISSING` when unknown or not finite."""
    return _quantity(tflops, FLOP_RATE_UNITS)


def byte_rate(gbps: float | None) -> str:
    """A memory rate given in GB/s (10^9 bytes per second): ``"3.35 TB/s"``, ``"18.4 GB/s"``;
    :data:`MISSING` when unknown or not finite."""
    return _quantity(gbps, BYTE_RATE_UNITS)


def flop_rate_unit(values_tflops: Iterable[float | None]) -> tuple[str, float]:
    """One compute-rate unit for a set of rates given in TFLOP/s (a chart's axis): the unit in
    which the largest finite value reads as at least 1, e.g. ``("GFLOP/s", 1e-3)``."""
    return _axis_unit(values_tflops, FLOP_RATE_UNITS, FLOP_RATE_UNITS[3])


def speedup(value: float | None) -> str:
    """Reference time over submission time: ``"2.00×"``, ``"0.513×"``; :data:`MISSING` when unknown."""
    x = finite(value)
    return MISSING if x is None else f"{significant(x)}×"


def interval(value: Sequence[float | str | None] | None, kind: str = "duration") -> str:
    """A 95% interval ``[low, high]``: of times given in ns (``kind="duration"``), in the unit of
    the high end (``"4.51–4.63 ms"``), or of speedups (``kind="speedup"``, ``"0.980–1.05×"``). An
    end that is not finite (stored results write infinity as ``"Infinity"``) reads ``"∞"``;
    :data:`MISSING` when there is no interval or its low end is unknown."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return MISSING
    low = finite(value[0])
    if low is None:
        return MISSING
    high = finite(value[1])
    if kind == "speedup":
        return f"{significant(low)}–{significant(high)}×" if high is not None else f"{significant(low)}×–∞"
    if high is None:
        return f"{duration(low)}–∞"
    top, unit = _scaled(high, TIME_UNITS)
    scale = dict(TIME_UNITS)[unit]
    return f"{significant(low / scale)}–{top} {unit}"


def share(fraction: float | None) -> str:
    """A share of a ceiling (``0.452``) as a percentage: ``"45.2%"``; :data:`MISSING` when unknown."""
    x = finite(fraction)
    return MISSING if x is None else f"{significant(100 * x)}%"


def number(value: float | None) -> str:
    """A plain figure with three significant digits (``"0.00123"``, ``"42.0"``; below 0.001 or
    from 10^6 on in exponent notation, ``"2.33e-10"``, which is shorter); :data:`MISSING` when
    unknown or not finite."""
    x = finite(value)
    if x is None:
        return MISSING
    return significant(x) if x == 0 or 1e-3 <= abs(x) < 1e6 else f"{x:.{DIGITS - 1}e}"


def size(nbytes: float | None) -> str:
    """A memory size in binary units: ``"15.6 GiB"``, ``"256 MiB"``; :data:`MISSING` when unknown."""
    x = finite(nbytes)
    if x is None:
        return MISSING
    number, unit = _scaled(x, SIZE_UNITS)
    return f"{number} {unit}"


def error_figure(value: float | str | None) -> str:
    """A correctness figure (max abs or rel error) with three significant digits: ``"0.00123"``,
    ``"2.33e-10"``, ``"0"``, ``"inf"`` or ``"nan"`` (stored results write those as ``"Infinity"`` and ``"NaN"``:
    :func:`kernelrank.runner.results.json_ready`); :data:`MISSING` when unknown or not a number."""
    if value is None or isinstance(value, bool):
        return MISSING
    try:
        x = float(value)
    except (TypeError, ValueError):
        return MISSING
    if not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return "0" if x == 0 else number(x)


def wait(seconds: float | None) -> str:
    """An expected wait, rounded as a person would say it: ``"under a minute"``, ``"about 3 min"``
    (minutes, rounded up), ``"about 2 h 5 min"``; :data:`MISSING` when unknown."""
    s = finite(seconds)
    if s is None:
        return MISSING
    if s < 60:
        return "under a minute"
    minutes = math.ceil(s / 60)
    if minutes < 60:
        return f"about {minutes} min"
    return f"about {minutes // 60} h {minutes % 60} min"


def waited(seconds: float | None) -> str:
    """How long something has waited, in whole units: ``"12 s"``, ``"3 min"``, ``"2 h 5 min"``
    (rounded down); :data:`MISSING` when unknown."""
    s = finite(seconds)
    if s is None:
        return MISSING
    s = max(0.0, s)
    if s < 60:
        return f"{int(s)} s"
    minutes = int(s // 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def queue_place(position: int | None, seconds_to_start: float | None) -> str:
    """A queued job's place for people: ``"next in its queue"``, ``"3 jobs ahead"``, with the wait
    when known (``"3 jobs ahead; starts in about 2 min"``); ``""`` when not queued."""
    if position is None:
        return ""
    place = "next in its queue" if position == 0 else f"{position} job{'s' if position > 1 else ''} ahead"
    return place if seconds_to_start is None else f"{place}; starts in {wait(seconds_to_start)}"
