"""Whole checkouts in one command: every GPU MODE folder or KernelBench file under a folder is
imported (CPU and CUDA, or CUDA only with the reason) or refused with one message, never a traceback.

The sources are small synthetic folders written here, each mirroring one convention seen in the
real checkouts (GPU MODE's ``pmpp``/``pmpp_v2`` sets, ``helion``'s ``device = "cuda"``, ``amd``'s
``aiter`` imports, ``amd_distributed``'s ``rank``, ``conv2d``'s ``kernelsize``; KernelBench's
``bias_shape``, ``argmax`` and ``Dropout``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import yaml

from kernelrank.importers.batch import CUDA_ONLY, IMPORTED, REFUSED, derive_names, find_sources, import_tree
from kernelrank.importers.common import TEST_INPUT_BYTES, fit_case
from kernelrank.problems import list_problem_names, load_problem
from kernelrank.runner.judge.harness import evaluate
from kernelrank.vocab import Verdict
from tests.conftest import FIXTURES
from tests.test_imports import KERNELRANK, folders  # noqa: F401 - folders: the problem folders fixture

GM = FIXTURES / "imports" / "gpumode"

_TASK = """\
files:
  - {{"name": "submission.py", "source": "@SUBMISSION@"}}
  - {{"name": "reference.py", "source": "reference.py"}}
tests:
  - {tests}
benchmarks:
  - {bench}
"""


def _gm_folder(root: Path, rel: str, reference: str, tests: str, bench: str) -> Path:
    folder = root / rel
    folder.mkdir(parents=True)
    (folder / "task.yml").write_text(_TASK.format(tests=tests, bench=bench))
    (folder / "reference.py").write_text(reference)
    return folder


def _gm_checkout(root: Path) -> Path:
    """A checkout's ``problems`` folder: the rowsum fixture in two sets, and one folder per case."""
    shutil.copytree(GM / "pmpp", root / "pmpp")
    shutil.copytree(GM / "pmpp", root / "pmpp_v2")
    _gm_folder(root, "helion/scale_py", (
        "import torch\n"
        "def generate_input(n, seed):\n"
        "    device = 'cuda'\n"
        "    g = torch.Generator(device=device)\n"
        "    g.manual_seed(seed)\n"
        "    return (torch.randn(n, device=device, generator=g),)\n"
        "def ref_kernel(data):\n"
        "    return data[0] * 2\n"), '{"n": 100, "seed": 1}', '{"n": 8388608, "seed": 2}')
    _gm_folder(root, "amd/needs_aiter", (
        "import torch\nimport aiter_is_not_installed\n"
        "def generate_input(n, seed):\n    return (torch.randn(n),)\n"
        "def ref_kernel(data):\n    return data[0]\n"), '{"n": 100, "seed": 1}', '{"n": 1000, "seed": 2}')
    _gm_folder(root, "amd/gpu_kernel", (
        "import torch\n"
        "def generate_input(n, seed):\n    return (torch.randn(n),)\n"
        "def ref_kernel(data):\n    raise RuntimeError('CUDA driver not found')\n"), '{"n": 100, "seed": 1}',
        '{"n": 1000, "seed": 2}')
    _gm_folder(root, "amd_distributed/all2all", (
        "import torch\n"
        "def generate_input(rank, world_size, n, seed):\n    return (torch.randn(n),)\n"
        "def ref_kernel(data):\n    return data[0]\n"), '{"n": 100, "seed": 1, "world_size": 8}',
        '{"n": 1000, "seed": 2, "world_size": 8}')
    _gm_folder(root, "pmpp/conv_py", (
        "import torch\n"
        "def generate_input(size, kernelsize, seed):\n"
        "    assert size >= kernelsize, 'negative output size'\n"
        "    return (torch.randn(size, size), torch.randn(kernelsize, kernelsize))\n"
        "def ref_kernel(data):\n"
        "    x, k = data\n"
        "    return torch.nn.functional.conv2d(x[None, None], k[None, None])[0, 0]\n"),
        '{"size": 32, "kernelsize": 3, "seed": 1}', '{"size": 4096, "kernelsize": 63, "seed": 2}')
    _gm_folder(root, "broken/bad_py", (
        "import torch\n"
        "def generate_input(n, seed):\n    return (torch.randn(n),)\n"
        "def ref_kernel(data):\n    raise ValueError('a plain bug')\n"), '{"n": 100, "seed": 1}', '{"n": 1000, "seed": 2}')
    return root


def test_names_come_from_paths_lowercase_and_unique(tmp_path: Path) -> None:
    root = _gm_checkout(tmp_path / "problems")
    names = derive_names("gpumode", root, find_sources("gpumode", root))
    assert "gm_pmpp_rowsum_py" in names and "gm_pmpp_v2_rowsum_py" in names and "gm_amd_distributed_all2all" in names
    assert len(set(names)) == len(names) and all(n == n.lower() for n in names)
    # a set imported alone names its problems as the whole checkout does
    assert derive_names("gpumode", root / "pmpp_v2", find_sources("gpumode", root / "pmpp_v2")) == ["gm_pmpp_v2_rowsum_py"]
    assert derive_names("gpumode", root / "pmpp" / "rowsum_py", [root / "pmpp" / "rowsum_py"]) == ["gm_pmpp_rowsum_py"]
    kb = [tmp_path / "KernelBench" / "level1" / "23_Softmax.py", tmp_path / "KernelBench" / "level2" / "23_Softmax.py"]
    assert derive_names("kernelbench", tmp_path / "KernelBench", kb) == ["kb_l1_23_softmax", "kb_l2_23_softmax"]
    long = [tmp_path / f"{'x' * 80}_{i}.py" for i in range(3)]
    got = derive_names("kernelbench", tmp_path, long, prefix="t_")
    assert len(set(got)) == 3 and all(len(n) <= 64 for n in got)


def test_scaling_grows_past_scaled_cases_the_source_cannot_make() -> None:
    def input_bytes(p):  # a size scaled below a kept kernel size makes no input
        if p["size"] < p["kernelsize"]:
            raise RuntimeError("negative output size")
        return p["size"] ** 2 * 4

    case, n = fit_case({"size": 4096, "kernelsize": 63, "seed": 1}, input_bytes, TEST_INPUT_BYTES)
    assert 63 <= case["size"] < 4096 and n <= TEST_INPUT_BYTES


def test_a_gpumode_checkout_imports_in_one_call_with_one_row_per_folder(folders, options) -> None:
    problems, refs = folders
    root = _gm_checkout(problems.parent / "checkout")
    rows = {r.name: r for r in import_tree("gpumode", root)}
    assert rows["gm_pmpp_rowsum_py"].outcome == rows["gm_pmpp_v2_rowsum_py"].outcome == IMPORTED
    assert rows["gm_helion_scale_py"].outcome == IMPORTED  # ``device = 'cuda'`` reads the run's device
    assert rows["gm_pmpp_conv_py"].outcome == IMPORTED  # scaling keeps size >= kernelsize
    cpu = yaml.safe_load((problems / "gm_pmpp_conv_py" / "problem.yaml").read_text())["benchmarks"]["cpu"]
    assert all(63 <= c["size"] < 4096 for c in cpu)
    aiter = rows["gm_amd_needs_aiter"]
    assert aiter.outcome == CUDA_ONLY and "aiter_is_not_installed" in aiter.reason
    gpu = rows["gm_amd_gpu_kernel"]
    assert gpu.outcome == CUDA_ONLY and "needs a GPU" in gpu.reason
    definition = load_problem("gm_amd_gpu_kernel").definition
    assert definition.cuda_only and definition.benchmarks["cpu"] == [] and definition.benchmarks["cuda"]
    dist = rows["gm_amd_distributed_all2all"]
    assert dist.outcome == REFUSED and "rank" in dist.reason and "distributed" in dist.reason
    bad = rows["gm_broken_bad_py"]
    assert bad.outcome == REFUSED and "ValueError: a plain bug" in bad.reason
    assert not (problems / "gm_broken_bad_py").exists() and not (refs / "gm_broken_bad_py").exists()
    # what was imported works as a single import does: the source's solution passes
    ex = refs / "gm_pmpp_v2_rowsum_py" / "examples" / "correct_matmul_ones.py"
    r = evaluate(load_problem("gm_pmpp_v2_rowsum_py").spec(), ex.read_text(), "test", "cpu", options)
    assert r.status is Verdict.passed, r.message


_KB_BIAS = """\
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, channels, bias_shape):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return x + self.bias

batch_size = 16
channels = 256
size = 128
bias_shape = (channels, 1, 1)

def get_inputs():
    return [torch.randn(batch_size, channels, size, size)]

def get_init_inputs():
    return [channels, bias_shape]
"""

_KB_ARGMAX = """\
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return torch.argmax(self.drop(x), dim=1)

batch_size = 4096
dim = 4096

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
"""

_KB_COINCIDENCE = """\
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.norm = nn.LayerNorm(features)

    def forward(self, x):
        return self.norm(x)

batch_size = 1024
features = 4096
input_shape = (4096,)

def get_inputs():
    return [torch.randn(batch_size, *input_shape)]

def get_init_inputs():
    return [features]
"""


def _kb_level(root: Path) -> Path:
    level = root / "KernelBench" / "level2"
    level.mkdir(parents=True)
    (level / "1_Conv_Add_Bias.py").write_text(_KB_BIAS)
    (level / "2_Dropout_Argmax.py").write_text(_KB_ARGMAX)
    (level / "3_Not_A_Problem.py").write_text("x = 1\n")
    (level / "4_LayerNorm_Coincidence.py").write_text(_KB_COINCIDENCE)
    return level


def test_a_kernelbench_level_imports_with_derived_shapes_scaled_and_integer_outputs_exact(folders, options,
                                                                                          tmp_path: Path) -> None:
    problems, _ = folders
    rows = {r.name: r for r in import_tree("kernelbench", _kb_level(tmp_path))}
    assert rows["kb_l2_1_conv_add_bias"].outcome == rows["kb_l2_2_dropout_argmax"].outcome == IMPORTED
    assert rows["kb_l2_3_not_a_problem"].outcome == REFUSED and "no Model" in rows["kb_l2_3_not_a_problem"].reason
    # features and input_shape agree by value only: scaling one breaks the source; the batch alone is scaled
    assert rows["kb_l2_4_layernorm_coincidence"].outcome == IMPORTED, rows["kb_l2_4_layernorm_coincidence"].reason
    tests = load_problem("kb_l2_4_layernorm_coincidence").definition.tests
    assert tests[0].params["features"] == 4096 and tests[0].params["batch_size"] < 1024
    bias = load_problem("kb_l2_1_conv_add_bias")
    case = bias.definition.benchmarks["cpu"][0].params
    assert case["channels"] < 256  # scaled, and bias_shape with it
    data = bias.reference_module().generate_input(device="cpu", **case)
    assert data[-1]["state"]["bias"].shape == (case["channels"], 1, 1)
    # an integer output is judged exactly; dropout is the identity, so the reference is deterministic
    argmax = load_problem("kb_l2_2_dropout_argmax")
    ref = argmax.reference_module()
    d = ref.generate_input(device="cpu", **argmax.definition.tests[0].params)
    assert ref.ref_kernel(d).dtype.is_floating_point is False and ref.ref_kernel(d).equal(ref.ref_kernel(d))
    assert argmax.definition.tolerance_for("int64").atol == 0.0
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text("import torch\ndef custom_kernel(data):\n    return torch.argmax(data[0], dim=1)\n")
    bad.write_text("import torch\ndef custom_kernel(data):\n    return torch.argmax(data[0], dim=1).clamp(max=1)\n")
    assert evaluate(argmax.spec(), good.read_text(), "test", "cpu", options).status is Verdict.passed
    assert evaluate(argmax.spec(), bad.read_text(), "test", "cpu", options).status is Verdict.failed


def test_a_folder_from_the_command_line_prints_a_table_and_exits_1_when_some_are_refused(tmp_path: Path) -> None:
    env = dict(os.environ, COLUMNS="240", KERNELRANK_PROBLEMS_DIR=str(tmp_path / "p"),
               KERNELRANK_REFERENCE_KERNELS_DIR=str(tmp_path / "r"))
    level = _kb_level(tmp_path)
    p = subprocess.run([KERNELRANK, "problems", "import", "kernelbench", str(level), "--prefix", "t_"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    assert "t_l2_1_conv_add_bias" in p.stdout and "imported (CPU and CUDA)" in p.stdout and "refused" in p.stdout
    assert "3 imported for CPU and CUDA, 0 for CUDA only, 1 refused" in p.stdout
    named = subprocess.run([KERNELRANK, "problems", "import", "kernelbench", str(level), "--name", "x"],
                           capture_output=True, text=True, env=env, timeout=300)
    assert named.returncode == 2 and "--prefix" in named.stderr


def test_integer_outputs_are_compared_exactly_even_beyond_float32_precision() -> None:
    import torch

    from kernelrank.problems import ProblemDefinition
    from kernelrank.runner.judge.checking import check_output

    tol = ProblemDefinition.model_validate(yaml.safe_load((FIXTURES.parent.parent / "problems" / "softmax" /
                                                           "problem.yaml").read_text())).tolerance_for("int64")
    ref = torch.tensor([2**30, 5], dtype=torch.int64)
    assert (tol.atol, tol.rtol) == (0.0, 0.0)
    assert check_output(ref.clone(), ref, tol.atol, tol.rtol).passed
    assert not check_output(ref + torch.tensor([1, 0]), ref, tol.atol, tol.rtol).passed  # float32 would round it away


def test_push_uploads_each_imported_problem_and_reports_each_outcome(folders, monkeypatch) -> None:
    import kernelrank.cli.client as client
    from kernelrank.cli.import_cmd import _push
    from kernelrank.importers import import_gpumode

    import_gpumode(GM / "pmpp" / "rowsum_py", "rowsum")
    posted = []

    class FakeApi:
        def __init__(self, target, timeout_s):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def request(self, method, path, files, data):
            posted.append((method, path, files["archive"][0], len(files["archive"][1])))
            if files["archive"][0].startswith("missing"):
                raise client.ClientError("problem refused: reference fails", 2)
            return {"revision": "abc123def4567890"}

    monkeypatch.setattr(client, "ApiClient", FakeApi)
    done = _push(["rowsum"], "http://server", "token")
    assert done == {"rowsum": "pushed: revision abc123def456"}
    assert posted[0][:3] == ("POST", "/admin/problems", "rowsum.tar.gz") and posted[0][3] > 0
    assert _push(["missing"], "http://server", "token")["missing"].startswith("push failed: cannot pack")


def test_a_refused_forced_import_leaves_the_problem_it_would_replace(folders) -> None:
    """``--force`` over an existing problem sets it aside until the new import is in: a refused
    one puts it back as it was (it used to delete it); an accepted one replaces it."""
    from kernelrank.importers.batch import import_one

    problems, refs = folders
    root = _gm_checkout(problems.parent / "checkout")
    row, _ = import_one("gpumode", root / "pmpp" / "rowsum_py", "rowsum")
    assert row.outcome == IMPORTED
    before = (problems / "rowsum" / "problem.yaml").read_text()
    row, _ = import_one("gpumode", root / "broken" / "bad_py", "rowsum", force=True)
    assert row.outcome == REFUSED and "a plain bug" in row.reason
    assert (problems / "rowsum" / "problem.yaml").read_text() == before and (refs / "rowsum" / "reference.py").exists()
    assert sorted(p.name for p in problems.iterdir()) == ["rowsum"]  # nothing set aside is left behind
    assert list_problem_names() == ["rowsum"]
    row, _ = import_one("gpumode", root / "helion" / "scale_py", "rowsum", force=True)
    assert row.outcome == IMPORTED and (problems / "rowsum" / "problem.yaml").read_text() != before
    assert sorted(p.name for p in refs.iterdir()) == ["rowsum"]


_KB_HINGE = """\
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))

batch_size = 4096
input_shape = (4096,)
dim = 1

def get_inputs():
    return [torch.rand(batch_size, *input_shape), torch.randint(0, 2, (batch_size,)).float() * 2 - 1]

def get_init_inputs():
    return []
"""


def test_a_literal_size_the_model_needs_equal_to_a_constant_scales_with_it(folders, options, tmp_path: Path) -> None:
    """KernelBench's HingeLoss broadcasts ``[batch, *input_shape]`` against ``[batch]``: the literal
    ``(32768,)`` must stay equal to ``batch_size``. Neither all sizes nor the batch alone scale it;
    read as ``(batch_size,)`` it scales with the batch, and the import says so."""
    from kernelrank.importers import import_kernelbench
    from kernelrank.importers.kernelbench import tie_literal_sizes

    tied, notes = tie_literal_sizes(_KB_HINGE)
    assert "input_shape = (batch_size,)" in tied and notes == ["input_shape = (4096,) as input_shape = (batch_size,)"]
    assert tie_literal_sizes("n = 128\nshape = (3, 7)\nm = (n, 128)\n") == ("n = 128\nshape = (3, 7)\nm = (n, n)\n",
                                                                            ["m = (n, 128) as m = (n, n)"])
    assert tie_literal_sizes("a = 128\nb = 128\nshape = (128,)\n")[1] == []  # two constants of that value: ambiguous
    file = tmp_path / "100_HingeLoss.py"
    file.write_text(_KB_HINGE)
    report = import_kernelbench(file, "hinge")
    assert any("read as those constants" in a and "(batch_size,)" in a for a in report.assumed)
    problem = load_problem("hinge")
    case = problem.definition.tests[0].params
    data = problem.reference_module().generate_input(device="cpu", **case)
    assert case["batch_size"] < 4096 and data[0].shape == (case["batch_size"], case["batch_size"])
    assert evaluate(problem.spec(), (folders[1] / "hinge" / "templates" / "modelnew.py").read_text(), "test", "cpu",
                    options).status is Verdict.passed
