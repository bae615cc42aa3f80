"""The one vocabulary (kernelrank/vocab.py): torch-free, and what every layer spells."""

from __future__ import annotations

import subprocess
import sys
import typing

import pytest

from kernelrank import vocab
from tests.conftest import ROOT


def test_vocab_imports_no_torch_nor_web_nor_database_code() -> None:
    code = ("import sys; import kernelrank.vocab; "
            "print(sorted(m for m in ('torch', 'fastapi', 'sqlalchemy', 'celery') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_statuses_verdicts_and_final_ones_agree() -> None:
    assert set(vocab.VERDICTS) < set(vocab.STATUSES)
    assert vocab.FINAL_STATUSES == set(vocab.VERDICTS) | {"cancelled"}
    assert set(vocab.ACTIVE_STATUSES) == set(vocab.STATUSES) - vocab.FINAL_STATUSES
    assert vocab.run_kinds("leaderboard") == ("public", "secret") and vocab.run_kinds("test") == ("public",)


def test_every_layer_uses_the_vocabulary() -> None:
    """The layers that used to spell these words now hold vocab's (the drift of issue 12)."""
    from kernelrank import problems, queue
    from kernelrank.cli import client
    from kernelrank.runner.results import Status
    from kernelrank.services import limits, submissions
    from kernelrank.web.routes import submissions as pages

    assert Status is vocab.Verdict
    assert submissions.FINAL == client.FINAL == vocab.FINAL_STATUSES
    assert pages.STATUSES == vocab.STATUSES  # "My submissions" offers every status, cancelled included
    assert limits.ACTIVE == vocab.ACTIVE_STATUSES and set(limits.COUNTED) <= set(vocab.STATUSES)
    assert typing.get_args(problems.Mode) == problems.MODES == vocab.MODES
    assert typing.get_args(problems.DeviceClass) == problems.DEVICE_CLASSES == vocab.DEVICE_CLASSES
    assert queue.device_class is vocab.device_class


@pytest.mark.parametrize("name, cls", [("cpu", "cpu"), ("cuda-h100", "cuda"), ("cuda-rtx4090", "cuda")])
def test_device_queues(name: str, cls: str) -> None:
    assert vocab.is_device_queue(name) and vocab.device_class(name) == cls


@pytest.mark.parametrize("name", ["cuda", "auto", "gpu", "CPU", "cuda-", "control"])
def test_not_device_queues(name: str) -> None:
    """``cuda`` alone is the local shorthand, never a service queue."""
    assert not vocab.is_device_queue(name)
    with pytest.raises(ValueError, match="not a device queue"):
        vocab.device_class(name)


def test_gpu_queue_names() -> None:
    assert vocab.gpu_queue_name("NVIDIA H100 80GB HBM3") == "cuda-h100-sxm"
    # one queue per SKU: the form factor changes the speed (issue 16)
    assert vocab.gpu_queue_name("NVIDIA H100 PCIe") == "cuda-h100-pcie"
    assert vocab.gpu_queue_name("NVIDIA H100 NVL") == "cuda-h100-nvl"
    assert vocab.gpu_queue_name("NVIDIA A100-SXM4-80GB") == "cuda-a100-sxm"
    assert vocab.gpu_queue_name("NVIDIA A100 80GB PCIe") == "cuda-a100-pcie"
    assert vocab.gpu_queue_name("NVIDIA H200") == "cuda-h200-sxm"
    assert vocab.gpu_queue_name("NVIDIA H100 80GB HBM3 MIG 1g.10gb") == "cuda-h100-sxm-mig-1g10gb"
    assert vocab.gpu_queue_name("NVIDIA L4") == "cuda-l4"
    assert vocab.gpu_queue_name("NVIDIA GeForce RTX 4090") == "cuda-rtx4090"
    assert vocab.is_device_queue(vocab.gpu_queue_name("Some Future Accelerator X"))
