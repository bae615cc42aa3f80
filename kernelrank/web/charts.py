"""Charts as SVG documents drawn by pygal on the server: nothing is fetched by the browser
(pygal's tooltip script from a CDN is switched off), and pages show them through ``<img>``, so
no script inside an SVG ever runs in a page. User names become series titles, which pygal
escapes as XML text.
"""

from __future__ import annotations

import datetime as dt

import pygal
from pygal.style import Style

_STYLE = Style(
    background="white", plot_background="white", foreground="#222", foreground_strong="#111",
    foreground_subtle="#666", colors=("#1f6feb", "#d1242f", "#1a7f37", "#8250df", "#bf8700", "#0a3069"),
    font_family="system-ui, sans-serif",
)
_COMMON = dict(style=_STYLE, js=[], width=800, height=360, explicit_size=True, legend_at_bottom=True,
               no_data_text="no ranked submissions yet", truncate_legend=24, print_values=False,
               value_formatter=lambda v: f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}")
#: Bars go on a log scale when the slowest case is this many times the fastest.
LOG_SCALE_RATIO = 20.0


def best_score_chart(points: list[tuple[dt.datetime, float]], device: str) -> bytes:
    """The best score (µs) of one board each time it improved, drawn as a step line over time.

    Args:
        points: ``(time, score_ns)`` pairs in time order (see ``queries.best_over_time``).
        device: the device queue, for the title.
    """
    chart = pygal.DateTimeLine(title=f"Best score over time on {device} (µs, lower is better)",
                               x_value_formatter=lambda t: t.strftime("%m-%d %H:%M"), x_label_rotation=25,
                               show_legend=False, interpolate=None, **_COMMON)
    steps: list[tuple[dt.datetime, float]] = []
    for i, (t, ns) in enumerate(points):
        if i:  # hold the previous best until this improvement: a step, not a slope
            steps.append((t, steps[-1][1]))
        steps.append((t, ns / 1e3))
    if steps:
        steps.append((dt.datetime.now(dt.timezone.utc).replace(tzinfo=steps[-1][0].tzinfo), steps[-1][1]))
    chart.add("best", steps)
    return chart.render()


def case_times_chart(case_labels: list[str], entries: list[tuple[str, list[float | None]]], device: str) -> bytes:
    """Each benchmark case's mean time (µs) for the top entries of one board, as grouped bars.

    Args:
        case_labels: one short label per benchmark case.
        entries: ``(user, [mean_ns per case, None where unknown])`` for each top entry, by rank.
        device: the device queue, for the title.
    """
    series = [(user, [t / 1e3 if t else None for t in times]) for user, times in entries]
    values = [v for _, vs in series for v in vs if v]
    wide = bool(values) and max(values) / min(values) >= LOG_SCALE_RATIO
    scale = {"logarithmic": True, "range": (min(values) / 2, max(values) * 1.2)} if wide else {}
    chart = pygal.Bar(title=f"Time per benchmark case on {device}, top entries (µs)", x_label_rotation=15,
                      **scale, **_COMMON)
    chart.x_labels = case_labels
    for user, vs in series:
        chart.add(user, vs)
    return chart.render()
