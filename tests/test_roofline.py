"""The roofline model (kernelrank.roofline): attainable rate, share, bound, ceilings attached to a
result. Figures worked by hand."""

from __future__ import annotations

import pytest

from kernelrank import roofline

#: An H100 SXM-like runner: 3350 GB/s, 989 TFLOP/s bf16, 67 fp32 (ridge of bf16: 295 FLOP/byte).
CEILINGS = {"device": "cuda", "name": "H100", "copy_gbps": 3350.0,
            "matmul_tflops": {"bfloat16": 989.0, "float32": 67.0}}


def test_attainable_is_the_lower_of_the_two_ceilings() -> None:
    assert roofline.attainable_tflops(10.0, 989.0, 3350.0) == pytest.approx(33.5)   # 10 FLOP/B x 3.35 TB/s
    assert roofline.attainable_tflops(1000.0, 989.0, 3350.0) == 989.0
    assert roofline.ridge_intensity(989.0, 3350.0) == pytest.approx(295.2, rel=1e-3)


def test_a_memory_bound_case_shares_its_bandwidth() -> None:
    # softmax-like: intensity 5 FLOP / 8 bytes; achieved 1675 GB/s -> half the copy bandwidth
    r = roofline.case_roofline(tflops=1.046875, gbps=1675.0, peak_tflops=989.0, bandwidth_gbps=3350.0)
    assert r["bound"] == "memory" and r["intensity"] == pytest.approx(0.625)
    assert r["attainable_tflops"] == pytest.approx(0.625 * 3.35)
    assert r["share"] == pytest.approx(0.5)


def test_a_compute_bound_case_shares_the_peak() -> None:
    # GEMM 8192^3 in bf16: intensity ~2731 FLOP/byte; 700 TFLOP/s of 989
    r = roofline.case_roofline(tflops=700.0, gbps=700.0 * 1e3 / 2731.0, peak_tflops=989.0, bandwidth_gbps=3350.0)
    assert r["bound"] == "compute" and r["share"] == pytest.approx(700 / 989)


def test_one_known_rate_shares_its_own_ceiling_and_nothing_shares_none() -> None:
    assert roofline.case_roofline(None, 335.0, 989.0, 3350.0)["share"] == pytest.approx(0.1)
    assert roofline.case_roofline(98.9, None, 989.0, None)["share"] == pytest.approx(0.1)
    assert roofline.case_roofline(None, None, 989.0, 3350.0) is None
    assert roofline.case_roofline(1.0, 1.0, None, None) is None
    assert roofline.case_roofline("Infinity", 0.0, 989.0, 3350.0) is None


def test_the_compute_ceiling_follows_the_case_then_the_problem_dtype() -> None:
    rates = CEILINGS["matmul_tflops"]
    assert roofline.ceiling_dtype({"dtype": "float32"}, rates, "bfloat16") == "float32"
    assert roofline.ceiling_dtype({"M": 1}, rates, "bfloat16") == "bfloat16"
    assert roofline.ceiling_dtype({}, rates, "float16") == "float32"  # not measured: the default
    assert roofline.ceiling_dtype({}, {}, "float16") is None


def test_attach_stores_the_ceilings_and_each_benchmark_cases_share() -> None:
    result = {"status": "passed", "cases": [
        {"kind": "test", "index": 0, "spec": {}},
        {"kind": "benchmark", "index": 0, "spec": {"dtype": "float32"}, "tflops": 33.5, "gbps": 3350.0},
        {"kind": "benchmark", "index": 1, "spec": {}, "tflops": 494.5, "gbps": 1.0},
        {"kind": "benchmark", "index": 2, "spec": {}, "tflops": None, "gbps": None}]}
    out = roofline.attach(result, CEILINGS, "bfloat16")
    assert out is result and out["ceilings"]["copy_gbps"] == 3350.0
    test, first, second, unknown = out["cases"]
    assert "roofline" not in test and "roofline" not in unknown
    assert first["roofline"]["dtype"] == "float32" and first["roofline"]["share"] == pytest.approx(1.0)
    assert second["roofline"]["dtype"] == "bfloat16" and second["roofline"]["bound"] == "compute"
    assert second["roofline"]["share"] == pytest.approx(0.5)


@pytest.mark.parametrize("bad", [None, "fast", {}, {"copy_gbps": "x", "matmul_tflops": {"float32": -1}},
                                 {"copy_gbps": float("nan")}])
def test_ceilings_that_say_nothing_change_nothing(bad) -> None:
    result = {"cases": [{"kind": "benchmark", "index": 0, "spec": {}, "tflops": 1.0, "gbps": 1.0}]}
    assert roofline.attach(result, bad) == {"cases": [{"kind": "benchmark", "index": 0, "spec": {}, "tflops": 1.0,
                                                       "gbps": 1.0}]}


def _with_share(bound: str, share: float) -> dict:
    return {"cases": [{"kind": "benchmark", "index": 2, "spec": {"N": 8, "seed": 5},
                       "roofline": {"share": share, "bound": bound}}]}


def test_the_physics_floor_holds_shares_past_its_margin() -> None:
    limit = 1 + roofline.FLOOR_MARGIN
    reason = roofline.beyond_floor(_with_share("compute", limit * 1.01), "cpu")
    assert reason is not None and reason.startswith(roofline.FLOOR_REASON)
    assert "benchmark case 2 (N=8)" in reason and "seed" not in reason
    assert roofline.beyond_floor(_with_share("compute", limit * 0.99), "cpu") is None
    assert roofline.beyond_floor(_with_share("memory", limit * 0.99), "cuda") is None


def test_a_memory_bound_share_counts_only_where_the_cache_is_flushed() -> None:
    # the CPU keeps a small case's data in cache between calls: beating DRAM's copy is physical there
    assert roofline.beyond_floor(_with_share("memory", 3.0), "cpu") is None
    assert roofline.beyond_floor(_with_share("memory", 3.0), "cuda") is not None


def test_the_floor_holds_a_case_to_the_runners_fastest_matmul_not_its_dtypes() -> None:
    """On a CPU without bfloat16 matmul units the bfloat16 rate is a fraction of float32's; a
    bfloat16 softmax case computed in float32 beats it honestly and is not held, while one past
    every rate the runner measured is."""
    ceilings = {"copy_gbps": 30.0, "matmul_tflops": {"float32": 0.18, "bfloat16": 0.0013}}

    def run(tflops: float) -> dict:
        return roofline.attach({"cases": [{"kind": "benchmark", "index": 1, "spec": {"dtype": "bfloat16"},
                                           "tflops": tflops, "gbps": tflops * 1e3 / 200}]}, ceilings)

    honest = run(0.0034)  # 259% of the bfloat16 rate, 2% of float32's
    roof = honest["cases"][0]["roofline"]
    # shown against float32's rate, the faster one here, and said so
    assert roof["dtype"] == "bfloat16" and roof["peak_dtype"] == "float32"
    assert roof["share"] == pytest.approx(0.0034 / 0.18) and roof["peak_tflops"] == 0.18
    assert roofline.beyond_floor(honest, "cpu") is None
    assert roofline.beyond_floor(run(0.5), "cpu") is not None  # past float32's rate too
