"""The timers (the statistics over their figures: tests/runner/test_stats.py)."""

from __future__ import annotations

import pytest

from kernelrank.runner.timing import CpuTimer, make_timer, roofline


def test_roofline() -> None:
    tflops, gbps = roofline(flops=2e12, nbytes=1e9, mean_ns=1e9)
    assert tflops == pytest.approx(2.0) and gbps == pytest.approx(1.0)


def test_cpu_timer_measures_the_call() -> None:
    import time

    timer = make_timer("cpu")
    assert isinstance(timer, CpuTimer)
    out, ns = timer.time_call(lambda d: (time.sleep(0.01), d)[1], 7)
    assert out == 7 and 10_000_000 <= ns < 1_000_000_000
    with pytest.raises(ValueError):
        make_timer("tpu")
