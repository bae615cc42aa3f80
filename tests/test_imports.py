"""``kernelrank problems import``: GPU MODE folders and KernelBench files become problems whose
own correct solutions pass and wrong ones fail, unchanged, through the real harness on the CPU.

Fixtures: ``tests/fixtures/imports`` (see its README for the formats and their sources). With
``KERNELRANK_TEST_GPUMODE_REPO`` / ``KERNELRANK_TEST_KERNELBENCH_REPO`` naming checkouts,
GPU MODE's ``problems/pmpp/matmul_py`` and KernelBench's ``level1/23_Softmax.py`` are imported too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kernelrank.importers import ProblemImportError, import_gpumode, import_kernelbench
from kernelrank.importers.common import fit_case, rewrite_devices, scaled
from kernelrank.problems import load_problem
from kernelrank.runner.judge.harness import evaluate
from kernelrank.vocab import Verdict
from tests.conftest import FIXTURES

IMPORTS = FIXTURES / "imports"
ROWSUM = IMPORTS / "gpumode" / "pmpp" / "rowsum_py"
KB = IMPORTS / "kernelbench"
KERNELRANK = str(Path(sys.executable).parent / "kernelrank")


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Empty problem folders, configured as the settings' problem folders."""
    from kernelrank.settings import get_settings

    problems, refs = tmp_path / "problems", tmp_path / "reference_kernels"
    monkeypatch.setenv("KERNELRANK_PROBLEMS_DIR", str(problems))
    monkeypatch.setenv("KERNELRANK_REFERENCE_KERNELS_DIR", str(refs))
    get_settings.cache_clear()
    yield problems, refs
    get_settings.cache_clear()


def _verdict(name: str, path: Path, options) -> tuple[Verdict, str]:
    r = evaluate(load_problem(name).spec(), path.read_text(encoding="utf-8"), "test", "cpu", options)
    return r.status, r.message


# -- pieces ---------------------------------------------------------------------------------------
def test_device_rewrite_reads_the_run_device_and_keeps_other_code() -> None:
    src = ("import torch\n"
           "def f(n):\n"
           "    g = torch.Generator(device='cuda')\n"
           "    x = torch.empty(n, device=\"cuda\").cuda()\n"
           "    return x.to('cuda:0'), torch.device('cuda'), torch.zeros(n, device='cpu')\n")
    out, count = rewrite_devices(src, "x.py")
    assert count == 5
    assert "'cuda'" not in out.split("\n", 2)[2] and "cuda:0" not in out  # only the prelude names cuda
    ns: dict = {}
    exec(compile(out, "x.py", "exec"), ns)
    ns["_kernelrank_device"] = "cpu"
    x, dev, z = ns["f"](3)
    assert x.device.type == "cpu" and dev.type == "cpu" and z.device.type == "cpu"
    assert rewrite_devices("x = 1\n", "y.py") == ("x = 1\n", 0)


def test_cases_are_scaled_together_to_the_budget_keeping_small_parameters() -> None:
    case = {"m": 4096, "n": 6144, "k": 3, "seed": 7}

    def nbytes(p: dict) -> int:
        return p["m"] * p["n"] * 4

    fitted, n = fit_case(case, nbytes, 16 * 2**20)
    assert n == nbytes(fitted) <= 16 * 2**20
    assert n > 16 * 2**20 / 2  # not far below the budget
    assert fitted["k"] == 3 and fitted["seed"] == 7
    assert fitted["m"] % 16 == 0 and fitted["n"] % 16 == 0
    assert fitted["m"] / fitted["n"] == pytest.approx(4096 / 6144, rel=0.05)
    assert fit_case({"m": 64, "seed": 1}, lambda p: p["m"], 10**6)[0] == {"m": 64, "seed": 1}  # fits: unchanged
    assert scaled({"size": 129, "seed": 1}, 0.5) == {"size": 64, "seed": 1}


# -- GPU MODE -------------------------------------------------------------------------------------
def test_gpumode_folder_imports_with_the_source_tolerance_and_scaled_cpu_cases(folders) -> None:
    problems, refs = folders
    report = import_gpumode(ROWSUM, "rowsum")
    definition = yaml.safe_load((problems / "rowsum" / "problem.yaml").read_text())
    assert definition["tolerances"]["float32"] == {"atol": 1e-4, "rtol": 1e-4}  # make_match_reference(...)
    source = yaml.safe_load((ROWSUM / "task.yml").read_text())
    assert definition["benchmarks"]["cuda"] == source["benchmarks"]
    assert definition["tests"] == source["tests"]
    assert all(c["rows"] * c["cols"] * 4 <= 16 * 2**20 for c in definition["benchmarks"]["cpu"])
    assert {"examples/correct_matmul_ones.py", "examples/wrong_low_precision.py", "templates/python.py"} <= {
        str(p.relative_to(refs / "rowsum")) for p in (refs / "rowsum").rglob("*.py")}
    text = "\n".join(report.lines())
    assert "rtol=0.0001" in text and "2 places" in text and "checked" in text and "flops and bytes unknown" in text
    # the reference needs nothing of the source's folder: the runner receives only its text
    assert "from task import" in load_problem("rowsum").reference_source


def test_gpumode_solutions_run_unchanged_and_are_judged_right(folders, options) -> None:
    _, refs = folders
    import_gpumode(ROWSUM, "rowsum")
    ex = refs / "rowsum" / "examples"
    assert _verdict("rowsum", ex / "correct_matmul_ones.py", options)[0] is Verdict.passed
    status, message = _verdict("rowsum", ex / "wrong_low_precision.py", options)
    assert status is Verdict.failed and "test case 0" in message


def test_import_then_eval_from_the_command_line(tmp_path: Path) -> None:
    env = dict(os.environ, COLUMNS="200", KERNELRANK_PROBLEMS_DIR=str(tmp_path / "p"),
               KERNELRANK_REFERENCE_KERNELS_DIR=str(tmp_path / "r"))
    p = subprocess.run([KERNELRANK, "problems", "import", "gpumode", str(ROWSUM), "--name", "rowsum"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "derived:" in p.stdout and "assumed:" in p.stdout and "problem.yaml" in p.stdout
    p = subprocess.run([KERNELRANK, "eval", "rowsum", str(ROWSUM / "submission.py"), "--device", "cpu", "--json"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    again = subprocess.run([KERNELRANK, "problems", "import", "gpumode", str(ROWSUM), "--name", "rowsum"],
                           capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 2 and "--force" in again.stderr
    missing = subprocess.run([KERNELRANK, "problems", "import", "gpumode", str(tmp_path), "--name", "x"],
                             capture_output=True, text=True, env=env, timeout=300)
    assert missing.returncode == 2 and "task.yml" in missing.stderr


@pytest.mark.parametrize("name", ["Bad-Name", "9lives", ""])
def test_invalid_names_are_refused(folders, name: str) -> None:
    with pytest.raises(ProblemImportError, match="--name"):
        import_gpumode(ROWSUM, name)


# -- KernelBench ----------------------------------------------------------------------------------
def test_kernelbench_file_imports_with_source_sizes_on_cuda_and_scaled_cpu_and_tests(folders) -> None:
    problems, _ = folders
    report = import_kernelbench(KB / "level1" / "scaled_relu.py", "scaled_relu")
    d = yaml.safe_load((problems / "scaled_relu" / "problem.yaml").read_text())
    assert d["benchmarks"]["cuda"][0] | {"seed": 0} == {"batch_size": 4096, "dim": 65536, "seed": 0}
    cpu = d["benchmarks"]["cpu"][0]
    assert 8 * 2**20 < cpu["batch_size"] * cpu["dim"] * 4 <= 16 * 2**20
    assert all(t["batch_size"] * t["dim"] * 4 <= 2**20 for t in d["tests"]) and len(d["tests"]) == 2
    assert d["tolerances"]["float32"] == {"atol": 0.01, "rtol": 0.01}
    assert any("KernelBench's eval default" in a for a in report.assumed)
    # the same seed gives the same inputs; another seed others
    ref = load_problem("scaled_relu").reference_module()
    a = ref.generate_input(seed=5, device="cpu", batch_size=8, dim=64)[0]
    assert a.equal(ref.generate_input(seed=5, device="cpu", batch_size=8, dim=64)[0])
    assert not a.equal(ref.generate_input(seed=6, device="cpu", batch_size=8, dim=64)[0])


@pytest.mark.parametrize("problem,solution,passes", [
    ("scaled_relu", "scaled_relu_modelnew.py", True),
    ("scaled_relu", "scaled_relu_custom_kernel.py", True),
    ("scaled_relu", "scaled_relu_wrong.py", False),
    ("linear_tanh", "linear_tanh_modelnew.py", True),
    ("linear_tanh", "linear_tanh_custom_kernel.py", True),
    ("linear_tanh", "linear_tanh_wrong.py", False),
])
def test_kernelbench_modelnew_and_custom_kernel_are_judged_right(folders, options, problem: str, solution: str,
                                                                 passes: bool) -> None:
    import_kernelbench(KB / "level1" / f"{problem}.py", problem)
    status, message = _verdict(problem, KB / "solutions" / solution, options)
    assert (status is Verdict.passed) is passes, message
    if not passes:
        assert status is Verdict.failed and "test case 0" in message


def test_kernelbench_template_is_a_correct_modelnew(folders, options) -> None:
    _, refs = folders
    import_kernelbench(KB / "level1" / "linear_tanh.py", "linear_tanh")
    template = refs / "linear_tanh" / "templates" / "modelnew.py"
    assert "class ModelNew(" in template.read_text()
    assert _verdict("linear_tanh", template, options)[0] is Verdict.passed


def test_kernelbench_file_without_model_is_refused(folders, tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("def get_inputs():\n    return []\n")
    with pytest.raises(ProblemImportError, match="no Model, get_init_inputs"):
        import_kernelbench(f, "x")


# -- the real sources, when checkouts are named ---------------------------------------------------
def test_real_sources(folders, options) -> None:
    gm, kb = os.environ.get("KERNELRANK_TEST_GPUMODE_REPO"), os.environ.get("KERNELRANK_TEST_KERNELBENCH_REPO")
    if not gm or not kb:
        pytest.skip("KERNELRANK_TEST_GPUMODE_REPO and KERNELRANK_TEST_KERNELBENCH_REPO name no checkouts")
    _, refs = folders
    import_gpumode(Path(gm) / "problems" / "pmpp" / "matmul_py", "gm_matmul")
    assert _verdict("gm_matmul", refs / "gm_matmul" / "examples" / "correct_ref.py", options)[0] is Verdict.passed
    assert _verdict("gm_matmul", refs / "gm_matmul" / "examples" / "wrong_low_precision.py", options)[0] is Verdict.failed
    import_kernelbench(Path(kb) / "KernelBench" / "level1" / "23_Softmax.py", "kb_softmax")
    assert _verdict("kb_softmax", refs / "kb_softmax" / "templates" / "modelnew.py", options)[0] is Verdict.passed
