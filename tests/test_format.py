"""The one formatter of figures (kernelrank.format): times, rates, speedups, shares, error figures,
as the CLI, the pages, the charts and the judge's message write them."""

from __future__ import annotations

import math

import pytest

from kernelrank import format as fmt


@pytest.mark.parametrize("x,text", [(2.0, "2.00"), (35.94, "35.9"), (250.0, "250"), (0.00123, "0.00123"),
                                    (9.996, "10.0"), (999.6, "1000"), (1234.0, "1234"), (-1.5, "-1.50"),
                                    (0.0, "0.00")])
def test_three_significant_digits_trailing_zeros_kept_never_cut(x: float, text: str) -> None:
    assert fmt.significant(x) == text


def test_significant_refuses_what_it_cannot_write() -> None:
    with pytest.raises(ValueError):
        fmt.significant(math.inf)
    with pytest.raises(ValueError):
        fmt.significant(1.0, digits=0)


@pytest.mark.parametrize("ns,text", [(None, "—"), (math.nan, "—"), (812, "812 ns"), (35_900, "35.9 µs"),
                                     (250_000, "250 µs"), (999_700, "1.00 ms"), (1_234_000, "1.23 ms"),
                                     (2e9, "2.00 s"), (1234e9, "1234 s"), (0.4, "0.400 ns")])
def test_duration_picks_the_unit_that_reads_best(ns: float | None, text: str) -> None:
    assert fmt.duration(ns) == text


def test_time_unit_for_an_axis() -> None:
    assert fmt.time_unit([12_000, 800_000, None]) == ("µs", 1e3)
    assert fmt.time_unit([5e6, 2e6]) == ("ms", 1e6)
    assert fmt.time_unit([]) == ("µs", 1e3)


@pytest.mark.parametrize("tflops,text", [(989.0, "989 TFLOP/s"), (0.000583, "583 MFLOP/s"), (0.0781, "78.1 GFLOP/s"),
                                         (1500.0, "1.50 PFLOP/s"), (None, "—"), ("Infinity", "—")])
def test_flop_rate_is_never_written_as_0_000583_tflops(tflops: float | None, text: str) -> None:
    assert fmt.flop_rate(tflops) == text


@pytest.mark.parametrize("gbps,text", [(3350.0, "3.35 TB/s"), (18.4, "18.4 GB/s"), (0.311, "311 MB/s"), (None, "—")])
def test_byte_rate(gbps: float | None, text: str) -> None:
    assert fmt.byte_rate(gbps) == text


def test_flop_rate_unit_for_an_axis() -> None:
    assert fmt.flop_rate_unit([0.078, 0.77, 0.001]) == ("GFLOP/s", 1e-3)
    assert fmt.flop_rate_unit([989.0]) == ("TFLOP/s", 1.0)
    assert fmt.flop_rate_unit([]) == ("TFLOP/s", 1.0)


def test_speedup_share_size_number_and_error_figures() -> None:
    assert fmt.speedup(2) == "2.00×" and fmt.speedup(0.5134) == "0.513×" and fmt.speedup(None) == "—"
    assert fmt.share(0.4523) == "45.2%" and fmt.share(1.0) == "100%" and fmt.share(None) == "—"
    assert fmt.size(16 * 2**30) == "16.0 GiB" and fmt.size(256 * 2**20) == "256 MiB" and fmt.size(None) == "—"
    assert fmt.number(42.0) == "42.0" and fmt.number(2.33e-10) == "2.33e-10" and fmt.number(math.inf) == "—"
    # error figures: inf and nan are information (results store them as "Infinity" and "NaN")
    assert fmt.error_figure("Infinity") == "inf" and fmt.error_figure("NaN") == "nan"
    assert fmt.error_figure(0.0) == "0" and fmt.error_figure(0.00123) == "0.00123" and fmt.error_figure(None) == "—"
    assert fmt.error_figure(True) == "—" and fmt.error_figure("x") == "—"


def test_the_pages_and_the_judge_use_it() -> None:
    """One formatter: the page filters are its functions, and no other module formats times."""
    from kernelrank.api.web import format as web

    assert web.FILTERS["duration"] is fmt.duration and web.FILTERS["speedup"] is fmt.speedup
    assert web.rate(0.5, "TFLOP/s") == "500 GFLOP/s" and web.rate(120.0, "GB/s") == "120 GB/s"


def test_the_formatter_imports_no_torch() -> None:
    import subprocess
    import sys

    code = "import sys, kernelrank.format, kernelrank.roofline; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_waits_read_as_people_say_them() -> None:
    assert fmt.waited(0.4) == "0 s" and fmt.waited(59.9) == "59 s" and fmt.waited(125) == "2 min"
    assert fmt.waited(3600 + 5 * 60) == "1 h 5 min" and fmt.waited(None) == fmt.MISSING
    assert fmt.wait(30) == "under a minute" and fmt.wait(61) == "about 2 min" and fmt.wait(7260) == "about 2 h 1 min"
    assert fmt.queue_place(None, 10) == "" and fmt.queue_place(0, None) == "next in its queue"
    assert fmt.queue_place(2, 600) == "2 jobs ahead; starts in about 10 min"
