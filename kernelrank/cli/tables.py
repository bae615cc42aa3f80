"""Tables that fit the terminal: a row per line when they fit, a block per row when they do not.

A :class:`FitTable` is a Rich renderable that decides when it is printed, from the width the
console gives it (the terminal's, or ``COLUMNS``): the usual horizontal table when its minimum
width fits, where figure columns keep their full width (``min_width`` = their widest cell,
never wrapped, never cut to ``35.9…``) and only text columns wrap; otherwise a vertical layout,
one block per row with a ``header  value`` line per column. Rich measures both (``Measurement``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text


#: A text column is never narrower than its longest word, up to this many characters.
TEXT_MIN_WIDTH = 16
_UNBOUNDED = 100_000


@dataclass(frozen=True)
class Column:
    """One column: ``figure`` columns (times, rates, counts) are never wrapped nor cut and are
    right-aligned; other columns wrap where they must."""

    header: str
    figure: bool = False
    #: vertical layout: this column names the block (e.g. the case's index and parameters) instead
    #: of being a line of it
    key: bool = False


def _text(cell: Any) -> Text:
    if isinstance(cell, Text):
        return cell
    return Text.from_markup(cell) if isinstance(cell, str) else Text(str(cell))


class FitTable:
    """A table that is printed horizontally when it fits the console's width, else vertically.

    Cells are strings with Rich markup (``"[green]pass[/]"``) or :class:`~rich.text.Text`.
    """

    def __init__(self, columns: Iterable[Column], title: str | None = None, caption: str | None = None):
        self.columns = list(columns)
        self.title = title
        self.caption = caption
        self.rows: list[list[Text]] = []

    def add_row(self, *cells: Any) -> None:
        """Add a row of ``len(columns)`` cells.

        Raises:
            ValueError: a different number of cells.
        """
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append([_text(c) for c in cells])

    def horizontal(self) -> Table:
        """The usual table: figure columns as wide as their widest cell (header included), text
        columns at least as wide as their longest word (at most :data:`TEXT_MIN_WIDTH`)."""
        table = Table(title=self.title, caption=self.caption)
        for i, col in enumerate(self.columns):
            widest = max([len(col.header)] + [r[i].cell_len for r in self.rows])
            if col.figure:
                table.add_column(col.header, justify="right", no_wrap=True, min_width=widest, overflow="fold")
            else:
                word = max([len(w) for r in self.rows for w in r[i].plain.split()] + [len(col.header)])
                table.add_column(col.header, min_width=min(word, TEXT_MIN_WIDTH, widest), overflow="fold")
        for row in self.rows:
            table.add_row(*row)
        return table

    def vertical(self) -> Group:
        """One block per row: a title line (the ``key`` columns' values), then ``header  value``
        lines; the values wrap as text (figures are short enough for any terminal)."""
        parts: list[Any] = []
        if self.title:
            parts.append(Text(self.title, style="italic"))
        keys = [i for i, c in enumerate(self.columns) if c.key]
        for row in self.rows:
            head = Text(" · ").join(row[i] for i in keys) if keys else None
            grid = Table.grid(padding=(0, 2))
            grid.add_column(style="bold", no_wrap=True)
            grid.add_column(overflow="fold")
            for i, col in enumerate(self.columns):
                if i not in keys:
                    grid.add_row(col.header, row[i])
            parts.append(Group(Text.assemble("── ", head or "", style="bold") if head else Text("──"), grid))
        if not self.rows:
            parts.append(Text("(none)"))
        if self.caption:
            parts.append(Text(self.caption, style="italic"))
        return Group(*parts)

    def fits(self, console: Console, width: int) -> bool:
        """Whether the horizontal table fits ``width`` columns without cutting a figure."""
        # measured without a width limit: Rich clamps a measurement to the width it is given
        unbounded = console.options.update_width(_UNBOUNDED)
        return Measurement.get(console, unbounded, self.horizontal()).minimum <= width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.horizontal() if self.fits(console, options.max_width) else self.vertical()

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.horizontal()).clamp(max_width=options.max_width)
