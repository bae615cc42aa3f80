"""One runner per GPU: which GPU device files a child may reach, and the cover put over the rest."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelrank.cli.runner_cmd import pin_gpu
from kernelrank.runner.containment import isolation, isolation_check
from kernelrank.runner.containment.gpufiles import gpu_files_to_hide
from kernelrank.runner.containment.isolation import Plan

FILES = ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia7", "/dev/nvidiactl", "/dev/nvidia-uvm",
         "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset", "/dev/nvidia-caps/nvidia-cap1", "/dev/dri/renderD128"]


def test_a_cuda_job_reaches_only_its_gpu_and_the_drivers_shared_files() -> None:
    assert gpu_files_to_hide("cuda", FILES, 1) == ("/dev/nvidia0", "/dev/nvidia7")
    assert gpu_files_to_hide("cuda", FILES, None) == ()  # NVML could not tell: nothing hidden


def test_a_cpu_job_reaches_no_gpu() -> None:
    assert gpu_files_to_hide("cpu", FILES, 1) == tuple(FILES)


def test_the_plan_carries_the_covers() -> None:
    plan = Plan("userns", "/tmp/x", gpu_hide=("/dev/nvidia1",))
    assert Plan.from_json(plan.to_json()) == plan
    old = json.loads(plan.to_json())
    del old["gpu_hide"]  # a plan written before the field existed
    assert Plan.from_json(json.dumps(old)).gpu_hide == ()


def test_pin_gpu_sets_the_runners_environment() -> None:
    env: dict[str, str] = {}
    pin_gpu(3, env)
    assert env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "3"}


_CHILD = """
import json, os, sys
from kernelrank.runner.containment.isolation import Plan, enter
enter(Plan.from_json(sys.argv[1]))
st = os.stat(sys.argv[2])
print(json.dumps({"rdev": st.st_rdev, "null": os.stat("/dev/null").st_rdev, "text": open(sys.argv[2]).read()}))
"""


def test_a_covered_device_file_is_dev_null_inside_the_sandbox(tmp_path: Path) -> None:
    method, why = isolation_check.choose("auto")
    if method == "none":
        pytest.skip(f"no namespaces on this machine: {why}")
    work = tmp_path / "work"
    work.mkdir()
    fake = work / "nvidia1"  # stands for another GPU's device file
    fake.write_text("another GPU")
    plan = dataclasses.replace(isolation.make_plan(method, work, {"core_bytes": 0}), gpu_hide=(str(fake),))
    if plan.uid is not None:
        os.chown(work, plan.uid, plan.uid)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run([sys.executable, "-c", _CHILD, plan.to_json(), str(fake)], cwd=work, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["rdev"] == seen["null"] and seen["text"] == ""
    assert fake.read_text() == "another GPU"  # outside, untouched
