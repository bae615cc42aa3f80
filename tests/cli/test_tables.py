"""Tables that fit the terminal (kernelrank.cli.tables.FitTable) and the eval result view
at 200, 80 and 60 columns: horizontal when the table fits, one block per row when it does not,
and never a number cut to "35.9…"."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from kernelrank.cli.render import result_view
from kernelrank.cli.tables import Column, FitTable
from kernelrank.runner.results import CaseResult, EvalResult
from kernelrank.vocab import Verdict

TIMING = {"runs": 41, "mean_ns": 35_912.0, "std_ns": 1_204.0, "min_ns": 33_100.0, "median_ns": 35_800.0,
          "max_ns": 41_277.0}


def _render(renderable, width: int) -> str:
    console = Console(width=width, record=True, highlight=False, color_system=None)
    console.print(renderable)
    return console.export_text()


def _result() -> EvalResult:
    cases = [CaseResult("test", 0, {"M": 1, "N": 4096, "dtype": "float32", "seed": 1}, True, max_abs_error=2.33e-10,
                        max_rel_error=1.64e-7)]
    for i, (m, n) in enumerate(((4096, 1024), (160, 20000))):
        cases.append(CaseResult("benchmark", i, {"M": m, "N": n, "dtype": "float32", "seed": 10 + i}, True,
                                timing=dict(TIMING), tflops=0.000583, gbps=18.41, ref_mean_ns=71_824.0, speedup=2.0,
                                roofline={"share": 0.4523, "bound": "memory", "intensity": 0.625}))
    return EvalResult(Verdict.passed, "benchmark", "softmax", "2b8dd3ca8512", "cpu", "all passed", cases,
                      speedup=2.0, ceilings={"name": "test cpu", "copy_gbps": 40.7, "matmul_tflops": {"float32": 0.0781}})


FIGURES = ("35.9 µs", "1.20 µs", "33.1 µs", "41.3 µs", "583 MFLOP/s", "18.4 GB/s", "45.2% mem", "2.00×")


def test_wide_terminal_gets_the_horizontal_table() -> None:
    out = _render(result_view(_result()), 200)
    assert "┃ # ┃ case" in out and re.search(r"┃\s+mean\s+┃", out)
    for figure in FIGURES:
        assert figure in out, figure
    assert "memory copy 40.7 GB/s; dense matmul float32 78.1 GFLOP/s" in out


@pytest.mark.parametrize("width", [80, 60])
def test_narrow_terminals_get_one_block_per_case_with_every_figure_whole(width: int) -> None:
    out = _render(result_view(_result()), width)
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= width
    assert "── 0 · M=4096 N=1024 dtype=float32\n" in out and "── 1 · M=160 N=20000 dtype=float32\n" in out
    for figure in FIGURES:  # each benchmark block has every figure, uncut
        assert len(re.findall(re.escape(figure), out)) >= 2, figure
    assert re.search(r"^roofline +45\.2% mem *$", out, re.M)
    # the test table (6 narrow columns) still fits horizontally, its case column wrapping
    assert "softmax · test cases · cpu" in out and "2.33e-10" in out and "1.64e-07" in out


def test_fit_table_measures_the_table_it_would_print() -> None:
    table = FitTable([Column("name", key=True), Column("title"), Column("mean", figure=True)], title="T")
    table.add_row("mla_decode", "MLA decode (DeepSeek multi-head latent attention, paged KV cache)", "35.9 µs")
    console = Console(width=200)
    assert table.fits(console, 40)  # the title wraps; the figure keeps its 7 columns
    assert not table.fits(console, 25)
    narrow = _render(table, 40)
    assert "35.9 µs" in narrow and "┃ name" in narrow
    vertical = _render(table, 25)
    assert "── mla_decode" in vertical and re.search(r"^mean +35\.9 µs", vertical, re.M)
    assert max(len(line) for line in vertical.splitlines()) <= 25 and "…" not in vertical


def test_fit_table_refuses_a_row_of_the_wrong_length() -> None:
    table = FitTable([Column("a"), Column("b")])
    with pytest.raises(ValueError, match="1 cells for 2 columns"):
        table.add_row("x")
    assert "(none)" in _render(table.vertical(), 20)


def test_the_tie_legend_shows_only_where_an_entry_is_tied() -> None:
    from kernelrank.cli.views import leaderboard_table

    def board(*tied: bool) -> dict:
        rows = [{"rank": i + 1, "user": f"u{i}", "score_ns": 1000.0 * (i + 1), "score_ci_ns": [900.0, 1100.0 * (i + 1)],
                 "speedup": 1.0, "tied": t, "language": "pytorch", "submitted_at": "2026-12-01T10:00:00"}
                for i, t in enumerate(tied)]
        return {"problem": "softmax", "device": "cpu", "revision": "abc", "rows": rows}

    legend = "= tied: its 95% interval overlaps"
    assert legend not in _render(leaderboard_table(board()), 120)  # empty board
    assert legend not in _render(leaderboard_table(board(False, False)), 120)
    assert legend in _render(leaderboard_table(board(False, True)), 120)
