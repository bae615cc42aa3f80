"""Charts as SVG documents drawn by pygal on the server: nothing is fetched by the browser
(pygal's tooltip script from a CDN is switched off), and pages show them through ``<img>``, so
no script inside an SVG ever runs in a page. User names become series titles, which pygal
escapes as XML text.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import pygal
from pygal.style import Style

from kernelrank.format import byte_rate, flop_rate, flop_rate_unit, number, time_unit

_STYLE = Style(
    background="white", plot_background="white", foreground="#222", foreground_strong="#111",
    foreground_subtle="#666", colors=("#1f6feb", "#d1242f", "#1a7f37", "#8250df", "#bf8700", "#0a3069"),
    font_family="system-ui, sans-serif",
)
_COMMON = dict(style=_STYLE, js=[], width=800, height=360, explicit_size=True, legend_at_bottom=True,
               no_data_text="no ranked submissions yet", truncate_legend=24, print_values=False,
               value_formatter=number)
#: Headers of every chart response: an SVG shown through ``<img>`` runs nothing and loads nothing.
SVG_HEADERS = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'", "Cache-Control": "no-cache"}
#: Bars go on a log scale when the slowest case is this many times the fastest.
LOG_SCALE_RATIO = 20.0


def best_score_chart(points: list[tuple[dt.datetime, float]], device: str) -> bytes:
    """The best score of one board each time it improved, drawn as a step line over time, in the
    time unit that suits the scores (:func:`kernelrank.format.time_unit`: ns, µs, ms or s).

    Args:
        points: ``(time, score_ns)`` pairs in time order (see ``queries.best_over_time``).
        device: the device queue, for the title.
    """
    unit, scale = time_unit(ns for _, ns in points)
    chart = pygal.DateTimeLine(title=f"Best score over time on {device} ({unit}, lower is better)",
                               x_value_formatter=lambda t: t.strftime("%m-%d %H:%M"), x_label_rotation=25,
                               show_legend=False, interpolate=None, **_COMMON)
    steps: list[tuple[dt.datetime, float]] = []
    for i, (t, ns) in enumerate(points):
        if i:  # hold the previous best until this improvement: a step, not a slope
            steps.append((t, steps[-1][1]))
        steps.append((t, ns / scale))
    if steps:
        steps.append((dt.datetime.now(dt.timezone.utc).replace(tzinfo=steps[-1][0].tzinfo), steps[-1][1]))
    chart.add("best", steps)
    return chart.render()


def case_times_chart(case_labels: list[str], entries: list[tuple[str, list[tuple[float, list[float] | None] | None]]],
                     device: str) -> bytes:
    """Each benchmark case's time for the top entries of one board, as grouped bars with their 95%
    intervals as error bars, in the time unit that suits the times (:func:`kernelrank.format.time_unit`).
    The time is the one the score is built from: the case's reference time over its paired speedup
    (``time_ns``, ``time_ci_ns``). Labels are drawn whole (never truncated), rotated to fit.

    Args:
        case_labels: one label per benchmark case (``#0 M=4096 N=1024 dtype=float32``).
        entries: ``(user, [(time_ns, [low_ns, high_ns] or None) per case, None where unknown])`` for
            each top entry, by rank.
        device: the device queue, for the title.
    """
    unit, scale = time_unit(v[0] for _, cases in entries for v in cases if v)
    series = [(user, [None if v is None else
                      {"value": v[0] / scale, **({"ci": {"low": v[1][0] / scale, "high": v[1][1] / scale}} if v[1] else {})}
                      for v in cases]) for user, cases in entries]
    values = [x for _, cases in entries for v in cases if v for x in (v[0], *(v[1] or ())) if x and math.isfinite(x)]
    values = [x / scale for x in values]
    wide = bool(values) and max(values) / min(values) >= LOG_SCALE_RATIO
    axis = {"logarithmic": True, "range": (min(values) / 2, max(values) * 1.2)} if wide else {}
    chart = pygal.Bar(title=f"Time per benchmark case on {device}, top entries ({unit}, 95% intervals)",
                      x_label_rotation=20, truncate_label=-1, **axis, **{**_COMMON, "height": 420})
    chart.x_labels = case_labels
    for user, vs in series:
        chart.add(user, vs)
    return chart.render()


def _decades(lo: float, hi: float) -> list[float]:
    """Axis labels of a log scale between ``lo`` and ``hi``: 1-2-5 steps when it spans few decades."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    steps = (1, 2, 5) if last - first <= 3 else (1,)
    return [m * 10.0**e for e in range(first, last + 1) for m in steps if lo <= m * 10.0**e <= hi]


def roofline_chart(points: list[tuple[str, float, float, str | None]], ceilings: dict[str, Any], title: str) -> bytes:
    """The roofline of the runner that ran a submission, with its benchmark cases on it: log-log,
    arithmetic intensity (FLOP/byte) against achieved rate; the memory ceiling (copy bandwidth x
    intensity) and the compute ceiling of each dtype the cases use (dense matmul rate) as lines
    meeting at the ridge point. Rates in the unit that suits the ceilings
    (:func:`kernelrank.format.flop_rate_unit`).

    Args:
        points: ``(label, intensity in FLOP/byte, achieved TFLOP/s, dtype of its compute ceiling)``
            per case that has both flops and bytes (see :func:`kernelrank.roofline.case_roofline`).
        ceilings: the runner's ceilings (``copy_gbps``, ``matmul_tflops`` per dtype).
        title: the chart's title.
    """
    from kernelrank import roofline

    bw = float(ceilings.get("copy_gbps") or 0.0)
    rates = {k: float(v) for k, v in (ceilings.get("matmul_tflops") or {}).items() if v}
    dtypes = sorted({d for *_, d in points if d in rates}) or sorted(rates)[:1]
    peaks = [rates[d] for d in dtypes]
    unit, scale = flop_rate_unit(peaks + [p[2] for p in points])
    ridges = [roofline.ridge_intensity(p, bw) for p in peaks] if bw > 0 else []
    xs = [p[1] for p in points] + ridges
    lo, hi = (min(xs) / 4, max(xs) * 4) if xs else (0.01, 100.0)
    ys = [p[2] / scale for p in points] + [p / scale for p in peaks] + ([lo * bw / 1e3 / scale] if bw > 0 else [])
    y_lo, y_hi = (min(ys) / 2, max(ys) * 2) if ys else (0.1, 10.0)
    axis_label = lambda v: f"{v:g}"  # noqa: E731 - axis ticks: 0.01, 20, 500
    chart = pygal.XY(title=title, logarithmic=True, x_title="arithmetic intensity (FLOP/byte)",
                     y_title=f"achieved rate ({unit})", dots_size=4, show_x_guides=True, range=(y_lo, y_hi),
                     xrange=(lo, hi), x_labels=_decades(lo, hi), y_labels=_decades(y_lo, y_hi),
                     x_value_formatter=axis_label,
                     **{**_COMMON, "value_formatter": axis_label, "truncate_legend": -1,
                        "legend_at_bottom_columns": 1, "height": 420,
                        "no_data_text": "no case with both flops and bytes"})
    if bw > 0:
        top = max(peaks) if peaks else hi * bw / 1e3
        chart.add(f"memory ceiling: copy bandwidth {byte_rate(bw)}",
                  [(lo, lo * bw / 1e3 / scale), (min(hi, top * 1e3 / bw), min(hi * bw / 1e3, top) / scale)],
                  show_dots=False, stroke_style={"width": 2})
    for dtype, peak in zip(dtypes, peaks):
        start = roofline.ridge_intensity(peak, bw) if bw > 0 else lo
        chart.add(f"compute ceiling: {dtype} dense matmul {flop_rate(peak)}",
                  [(start, peak / scale), (hi, peak / scale)], show_dots=False,
                  stroke_style={"width": 2, "dasharray": "6, 3"})
    chart.add("benchmark cases", [{"value": (x, tflops / scale), "label": label} for label, x, tflops, _ in points],
              stroke=False)
    return chart.render()
