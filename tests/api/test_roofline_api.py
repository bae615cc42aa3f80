"""Roofline shares: the control worker stores the ceilings of the runner that ran a run
(from its heartbeat) with the result and each benchmark case's share; the API, the submission
page and its roofline chart show them."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import World, passed_result, record, submit

CEILINGS = {"device": "cpu", "name": "test cpu", "threads": 4, "copy_gbps": 20.0,
            "matmul_tflops": {"float32": 0.1, "bfloat16": 0.4}}


def _case(index: int, dtype: str, tflops: float, gbps: float) -> dict[str, Any]:
    return {"kind": "benchmark", "index": index, "spec": {"M": 64, "N": 1024, "dtype": dtype, "seed": index},
            "passed": True, "message": "ok", "tflops": tflops, "gbps": gbps, "ref_mean_ns": 1e5, "speedup": 1.0,
            "timing": {"runs": 10, "mean_ns": 1e5, "std_ns": 1e3, "min_ns": 9e4, "max_ns": 1.2e5}}


@pytest.fixture
def judged(client: TestClient, world: World) -> int:
    """A passed benchmark-mode softmax submission run by a runner that reported its ceilings:
    case 0 (float32) memory-bound at 5 GB/s of 20, case 1 (bfloat16) at 0.04 TFLOP/s with an
    intensity of 100 FLOP/byte (above the bf16 ridge of 20): compute-bound, 10% of 0.4 TFLOP/s."""
    from kernelrank.db.session import session_scope
    from kernelrank.services import runners

    with session_scope() as s:
        runners.heartbeat(s, "runner-cpu-1", "cpu", {"name": "test cpu", "ceilings": CEILINGS}, "0.1.0")
    sid = submit(client, world.tokens["alice"], mode="benchmark").json()["id"]
    record(sid, "public", passed_result(None, mode="benchmark",
                                        cases=[_case(0, "float32", 0.003125, 5.0), _case(1, "bfloat16", 0.04, 0.4)]))
    return sid


def test_the_result_carries_the_runners_ceilings_and_each_cases_share(client: TestClient, world: World,
                                                                      judged: int) -> None:
    sub = client.get(f"/api/v1/submissions/{judged}").json()
    result = sub["runs"][0]["result"]
    assert result["ceilings"]["copy_gbps"] == 20.0 and result["ceilings"]["name"] == "test cpu"
    first, second = result["cases"]
    assert first["roofline"]["bound"] == "memory" and first["roofline"]["share"] == pytest.approx(0.25)
    assert first["roofline"]["dtype"] == "float32" and first["roofline"]["intensity"] == pytest.approx(0.625)
    assert second["roofline"]["bound"] == "compute" and second["roofline"]["share"] == pytest.approx(0.1)
    assert second["roofline"]["dtype"] == "bfloat16"


def test_a_runner_without_ceilings_leaves_results_as_they_were(client: TestClient, world: World) -> None:
    sid = submit(client, world.tokens["alice"], mode="benchmark").json()["id"]
    record(sid, "public", passed_result(None, mode="benchmark", cases=[_case(0, "float32", 0.001, 1.0)]))
    result = client.get(f"/api/v1/submissions/{sid}").json()["runs"][0]["result"]
    assert "ceilings" not in result and "roofline" not in result["cases"][0]
    page = client.get(f"/submissions/{sid}").text
    assert "Roofline" not in page and "roofline.svg" not in page
    assert client.get(f"/submissions/{sid}/roofline.svg").status_code == 404


def test_the_submission_page_shows_shares_ceilings_and_the_roofline_chart(client: TestClient, judged: int) -> None:
    page = client.get(f"/submissions/{judged}").text
    assert "<th title=" in page and ">Roofline</th>" in page
    assert "25.0% <span class=\"meta\">memory</span>" in page
    assert "10.0% <span class=\"meta\">compute, bfloat16</span>" in page
    assert "memory copy 20.0 GB/s" in page and "float32 100 GFLOP/s" in page and "bfloat16 400 GFLOP/s" in page
    assert f'src="/submissions/{judged}/roofline.svg"' in page
    svg = client.get(f"/submissions/{judged}/roofline.svg")
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    assert "default-src 'none'" in svg.headers["content-security-policy"]
    text = svg.text
    assert "arithmetic intensity (FLOP/byte)" in text and "achieved rate (GFLOP/s)" in text
    assert "memory ceiling: copy bandwidth 20.0 GB/s" in text
    assert "compute ceiling: bfloat16 dense matmul 400 GFLOP/s" in text
    assert "compute ceiling: float32 dense matmul 100 GFLOP/s" in text
    assert "#0 M=64 N=1024 dtype=float32" in text and "#1 M=64 N=1024 dtype=bfloat16" in text


def test_the_cli_shows_the_share_column_and_the_ceilings(judged: int, client: TestClient) -> None:
    from rich.console import Console

    from kernelrank.cli.views import submission_view

    sub = client.get(f"/api/v1/submissions/{judged}").json()
    console = Console(width=200, record=True, highlight=False)
    console.print(submission_view(sub))
    out = console.export_text()
    assert "roofline" in out and "25.0% mem" in out and "10.0% compute" in out
    assert "memory copy 20.0 GB/s; dense matmul float32 100 GFLOP/s, bfloat16 400 GFLOP/s" in out
