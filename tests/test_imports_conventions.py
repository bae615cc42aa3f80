"""GPU MODE's conventions through ``kernelrank problems import gpumode``: output buffers among the
inputs (``pmpp_v2``), a reference's own ``check_implementation``, ``verbose_allclose``'s dtype
promotion and tuple outputs; the imported problems judge the sources' own solutions right, on the
CPU, through the real harness. The folders are written here, in GPU MODE's layout
(``tests/fixtures/imports/README.md``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelrank.importers import import_gpumode
from kernelrank.importers.buffers import named_buffers
from kernelrank.problems import load_problem
from kernelrank.runner.judge.harness import evaluate
from kernelrank.vocab import Verdict
from tests.conftest import FIXTURES
from tests.test_imports import folders  # noqa: F401 - the problem folders fixture

_TASK = """\
files:
  - {{"name": "submission.py", "source": "@SUBMISSION@"}}
  - {{"name": "utils.py", "source": "../utils.py"}}
  - {{"name": "reference.py", "source": "reference.py"}}
tests:
  - {tests}
benchmarks:
  - {bench}
"""

SCALE = '''\
from utils import make_match_reference
import torch


def ref_kernel(data):
    x, output = data
    output[...] = 2 * x
    return output


def generate_input(n, seed):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    x = torch.randn(n, device="cuda", generator=gen)
    return x, torch.empty(n, device="cuda")


check_implementation = make_match_reference(ref_kernel, rtol=1e-5, atol=1e-5)
'''

SCAN = '''\
from utils import match_reference
import torch


def ref_kernel(data):
    data, output = data
    return torch.cumsum(data.to(torch.float64), dim=0)


def generate_input(size, seed):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    x = torch.randn(size, device="cuda", generator=gen)
    return x, torch.empty(size, device="cuda")


def check_implementation(data, output):
    scale = data[0].numel() ** 0.5
    return match_reference(data, output, reference=ref_kernel, rtol=1e-5 * scale, atol=1e-5 * scale)
'''

EIG = '''\
import torch


def ref_kernel(data):
    values, vectors = torch.linalg.eigh(data)
    return vectors, values


def generate_input(n, seed):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    a = torch.randn(2, n, n, device="cuda", generator=gen)
    return (a + a.transpose(-1, -2)).contiguous()


def check_implementation(data, output):
    if not isinstance(output, tuple) or len(output) != 2:
        return False, "output must be a tuple (Q, L)"
    q, values = output
    residual = (data.double() @ q.double() - q.double() * values.double().unsqueeze(-2)).abs().amax().item()
    if residual > 1e-3:
        return False, f"A @ Q - Q @ diag(L) is too large: {residual:.3g}"
    return True, f"residual={residual:.3g}"
'''

SOLUTIONS = {
    "pmpp_v2/scale_py": {
        "correct/ref.py": "def custom_kernel(data):\n    x, output = data\n    output[...] = 2 * x\n    return output\n",
        "wrong/empty.py": "def custom_kernel(data):\n    x, output = data\n    return output\n",
    },
    "pmpp_v2/scan_py": {
        "correct/ref.py": ("import torch\n\n\ndef custom_kernel(data):\n    data, output = data\n"
                           "    output[...] = torch.cumsum(data, dim=0)\n    return output\n"),
        "wrong/empty.py": "def custom_kernel(data):\n    data, output = data\n    return output\n",
    },
    "linalg/eig_py": {
        # eigenvectors are defined up to sign: the source's residual check passes flipped ones
        "correct/flipped.py": ("import torch\n\n\ndef custom_kernel(a):\n    values, vectors = torch.linalg.eigh(a)\n"
                               "    return -vectors, values\n"),
        "wrong/values_only.py": ("import torch\n\n\ndef custom_kernel(a):\n    values, vectors = torch.linalg.eigh(a)\n"
                                 "    return vectors, values + 1\n"),
    },
}


def _checkout(root: Path) -> Path:
    for rel, reference, tests, bench in (
            ("pmpp_v2/scale_py", SCALE, '{"n": 1000, "seed": 1}', '{"n": 100000, "seed": 2}'),
            ("pmpp_v2/scan_py", SCAN, '{"size": 1023, "seed": 1}', '{"size": 100000, "seed": 2}'),
            ("linalg/eig_py", EIG, '{"n": 16, "seed": 1}', '{"n": 64, "seed": 2}')):
        folder = root / rel
        folder.mkdir(parents=True)
        (folder / "task.yml").write_text(_TASK.format(tests=tests, bench=bench))
        (folder / "reference.py").write_text(reference)
        shutil.copy(FIXTURES / "imports" / "gpumode" / "pmpp" / "utils.py", folder.parent / "utils.py")
        for name, text in SOLUTIONS[rel].items():
            (folder / "solutions" / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / "solutions" / name).write_text(text)
    return root


@pytest.mark.parametrize(("rel", "check", "buffers"), [("pmpp_v2/scale_py", "promote", ["1"]),
                                                        ("pmpp_v2/scan_py", "source", ["1"]),
                                                        ("linalg/eig_py", "source", [])])
def test_gpumode_conventions_import_and_the_sources_solutions_are_judged_right(
        folders, options, tmp_path: Path, rel: str, check: str, buffers: list[str]) -> None:  # noqa: F811
    problems, refs = folders
    root = _checkout(tmp_path / "checkout")
    name = rel.replace("/", "_")
    report = import_gpumode(root / rel, name)
    definition = load_problem(name).definition
    assert (definition.check, definition.output_buffers) == (check, buffers)
    assert any("check_implementation" in a or "verbose_allclose" in a for a in report.assumed)
    assert not buffers or any("output buffers" in a for a in report.assumed)
    spec = load_problem(name).spec()
    for path in sorted((refs / name / "examples").glob("*.py")):
        r = evaluate(spec, path.read_text(), "test", "cpu", options)
        expected = Verdict.passed if path.name.startswith("correct_") else Verdict.failed
        assert r.status is expected, (path.name, r.message)


def test_output_buffers_are_found_by_name_and_confirmed_by_the_references_behaviour() -> None:
    assert named_buffers(SCALE) == {1: "output"}
    assert named_buffers("def ref_kernel(data):\n    a, b, c = data\n    return a @ b\n") == {2: "c"}
    assert named_buffers("def ref_kernel(data):\n    x, w = data\n    return x @ w\n") == {}
    # a candidate by name that the reference reads is no output buffer: filled, it changes the output
    import types

    import torch

    from kernelrank.importers.buffers import find_buffers

    ref = types.SimpleNamespace(
        generate_input=lambda n, seed, device="cpu": (torch.ones(n), torch.full((n,), 3.0)),
        ref_kernel=lambda data: data[0] + data[1])
    assert find_buffers(ref, {"n": 4, "seed": 1}, {1: "out"}) == []
    ref.ref_kernel = lambda data: data[1].copy_(data[0] * 2)
    assert find_buffers(ref, {"n": 4, "seed": 1}, {}) == ["1"]
