"""The sandbox has the toolchain kernel authors use: ``load_inline`` with and
without a precompiled header in any order on one runner, ``torch.compile`` (inductor on the CPU),
Triton's interpreter (its JIT needs a GPU: see the runner's self-test)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import yaml

from kernelrank.problems import load_problem
from kernelrank.runner.containment import isolation_check
from kernelrank.runner.judge.harness import evaluate
from tests.conftest import FIXTURES


@pytest.fixture
def roomy(tmp_path: Path):
    """The ``double`` problem with budgets for builds and compilation on a busy 2-core machine,
    timed on one pair of processes."""
    problems, kernels = tmp_path / "problems", tmp_path / "reference_kernels"
    shutil.copytree(FIXTURES / "problems" / "double", problems / "double")
    shutil.copytree(FIXTURES / "reference_kernels" / "double", kernels / "double")
    path = problems / "double" / "problem.yaml"
    data = yaml.safe_load(path.read_text())
    data["budgets"] = {"compile": 600, "test": 600, "benchmark": 600, "leaderboard": 600, "profile": 600}
    # one pair of processes: each further submission process compiles again (inductor: 144 s for
    # the benchmark run with the CPU's four pairs, under a minute with one); the pairs themselves
    # are tests/runner/test_paired.py's
    data["timing"]["cpu"]["processes"] = 1
    path.write_text(yaml.safe_dump(data))
    return load_problem("double", problems, kernels)

CPP = '''
import torch
from torch.utils.cpp_extension import load_inline

_mod = load_inline(
    name="double_{tag}",
    cpp_sources="torch::Tensor twice(torch::Tensor x) {{ return x * 2; }}",
    functions=["twice"],
    extra_cflags=["-O3"],  # the flags the judge's precompiled header is built for
    use_pch={pch},
    verbose=False,
)


def custom_kernel(data):
    return _mod.twice(data[0])
'''

COMPILED = '''
import torch


@torch.compile
def _twice(x):
    return x * 2


def custom_kernel(data):
    return _twice(data[0])
'''

TRITON = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _twice(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def custom_kernel(data):
    (x,) = data
    y = torch.empty_like(x)
    _twice[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
    return y
'''


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_load_inline_with_and_without_pch_in_any_order(roomy, options) -> None:
    """``use_pch=False`` (torch's default) deletes the precompiled header when it exists; after a
    ``use_pch=True`` job built it into the read-only site-packages, that must not fail the build."""
    for i, pch in enumerate((False, True, False)):
        r = evaluate(roomy.spec(), CPP.format(tag=f"{i}_{pch}".lower(), pch=pch), "test", "cpu", options)
        assert r.status.value == "passed", f"use_pch={pch} (build {i + 1} of 3): {r.message}\n{r.logs}"


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_torch_compile_works_in_the_sandbox(roomy, options) -> None:
    """Inductor names its cache after the user (``getpass.getuser()``) and keeps worker threads
    between calls: neither may fail or reject an honest kernel."""
    for mode in ("test", "benchmark"):
        r = evaluate(roomy.spec(), COMPILED, mode, "cpu", options)
        assert r.status.value == "passed", f"{mode}: {r.message}\n{r.logs['stderr'][-3000:]}"


@pytest.mark.timeout(1200)
@pytest.mark.skipif(not [m for m in ("setuid", "userns") if isolation_check.probe(m)[0]],
                    reason="a build is shared only between namespaced processes; none works on this host")
def test_a_c_plus_plus_submission_is_built_once_per_job(roomy, options, tmp_path) -> None:
    """A C++ submission is built once: its further timed processes, and the job's next run (a
    runner's secret run, with one ``BuildCache`` per job), find the first one's build up to date
    (each built again before: 124-153 s a CPU leaderboard run, docs/judging.md)."""
    from kernelrank.runner.containment.buildcache import BuildCache

    source = ('import os\nprint("prebuilt", os.path.exists(os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], '
              '"double_shared", "double_shared.so")), flush=True)\n') + CPP.format(tag="shared", pch=False)
    with BuildCache(tmp_path / "kept") as builds:
        r = evaluate(roomy.spec(), source, "benchmark", "cpu", dataclasses.replace(options, processes=3, builds=builds))
        assert r.status.value == "passed", f"{r.message}\n{r.logs}"
        first, *later = r.logs["stdout"].split("--- timed process")
        assert "prebuilt False" in first and len(later) == 2, r.logs["stdout"]
        assert all("prebuilt True" in text for text in later), r.logs["stdout"]
        again = evaluate(roomy.spec(), source, "test", "cpu", dataclasses.replace(options, builds=builds))
        assert again.status.value == "passed" and "prebuilt True" in again.logs["stdout"], again.logs


@pytest.mark.timeout(300)
def test_triton_interpreter_works_in_the_sandbox(double, options) -> None:
    r = evaluate(double.spec(), TRITON, "test", "cpu", options)
    assert r.status.value == "passed", f"{r.message}\n{r.logs['stderr'][-3000:]}"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_judges_build_the_precompiled_header_one_at_a_time() -> None:
    """Two judges on one machine (a runner and a local ``kernelrank eval``) must not build the
    header over each other: while one holds the lock, another judge's preparation waits."""
    import fcntl
    import os
    import threading
    import time

    from kernelrank.runner.containment import pch

    assert pch.prepare_precompiled_header() == "ok"  # built (or found) before the race
    fd = os.open(pch.pch_lock_path(), os.O_RDONLY)
    done: list[str] = []
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        other = threading.Thread(target=lambda: done.append(pch.prepare_precompiled_header()))
        other.start()
        time.sleep(1.0)
        assert other.is_alive() and not done, "a second judge checked the header while another held the lock"
    finally:
        os.close(fd)
    other.join(600)
    assert done == ["ok"]
