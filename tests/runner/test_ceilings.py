"""The runner's ceilings (kernelrank.runner.host.ceilings): measured on this machine's CPU with the same
probe a GPU runner uses, as the command a runner starts. Figures are checked for sense (positive,
finite, in the units stated), never for speed."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from kernelrank.runner.host import ceilings


def test_measure_on_the_cpu_gives_a_bandwidth_and_a_matmul_rate_per_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ceilings, "MATMUL_MAX", {"cpu": 512, "cuda": 512})  # keep the test short
    out = ceilings.measure("cpu", threads=1, dtypes=("float32", "bfloat16"), copy_bytes=32 * 2**20, budget_s=0.05)
    assert out["device"] == "cpu" and out["threads"] == 1 and out["name"]
    assert math.isfinite(out["copy_gbps"]) and out["copy_gbps"] > 0
    assert set(out["matmul_tflops"]) == {"float32", "bfloat16"}
    assert all(math.isfinite(v) and v > 0 for v in out["matmul_tflops"].values())
    # a 512 x 512 float32 matmul (268 MFLOP) takes milliseconds: the rate is in TFLOP/s, not FLOP/s
    assert out["matmul_tflops"]["float32"] < 100
    assert out["matmul_n"]["float32"] == 512 and out["copy_bytes"] == 32 * 2**20
    json.dumps(out, allow_nan=False)  # JSON-ready: it travels in a heartbeat


def test_best_rate_is_the_best_batch_of_the_work_done() -> None:
    import time

    import torch

    calls = []

    def fn() -> None:
        calls.append(1)
        time.sleep(0.002)

    rate, batches = ceilings._best_rate(fn, 1.0, torch.device("cpu"), budget_s=0.02)
    assert batches >= ceilings.MIN_BATCHES and len(calls) >= 2 + batches
    assert 50 < rate <= 500  # one unit of work per >= 2 ms call: at most 500 per second


def test_unknown_device_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown device"):
        ceilings.measure("tpu")


def test_the_command_prints_one_json_object() -> None:
    code = ("import sys; from kernelrank.runner.host import ceilings as c; "
            "c.COPY_BYTES['cpu'] = 16 * 2**20; c.MATMUL_MAX['cpu'] = 512; c.DTYPES = ('float32',); "
            "sys.exit(c.main(['--device', 'cpu', '--threads', '1', '--budget', '0.02']))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["copy_gbps"] > 0 and out["seconds"] > 0


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.cuda
@pytest.mark.skipif(not _has_cuda(), reason="needs a CUDA GPU (none on this project's machines or CI)")
def test_measure_on_the_gpu_marks_gpu_figures() -> None:  # pragma: no cover - GPU-only
    out = ceilings.measure("cuda", budget_s=0.1)
    assert out["device"] == "cuda" and out["copy_gbps"] > 100 and out["matmul_tflops"]["bfloat16"] > 1
