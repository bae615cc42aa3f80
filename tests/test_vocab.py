"""The one vocabulary (kernelrank/vocab.py): torch-free, and what every layer spells."""

from __future__ import annotations

import ast
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
    """The layers that used to spell these words hold vocab's own, under vocab's names, with no
    alias of their own, so they cannot drift apart."""
    from kernelrank import problems

    assert problems.ProblemDefinition.model_fields["benchmarks"].annotation == dict[vocab.DeviceClass,
                                                                                     list[problems.Case]]
    assert typing.get_type_hints(problems.Budgets.for_mode)["mode"] is vocab.Mode
    aliases = {"MODES", "TIMED_MODES", "DEVICE_CLASSES", "STATUSES", "VERDICTS", "RUN_KINDS", "FINAL", "FINAL_STATUSES",
               "ACTIVE", "ACTIVE_STATUSES", "Status", "Mode", "DeviceClass", "CaseKind", "RunKind", "Verdict",
               "SubmissionStatus"}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Name, ast.Attribute)):
                named = {t.id for t in node.targets if isinstance(t, ast.Name)} & aliases
                assert not named, f"{path.relative_to(ROOT)}:{node.lineno}: {named} aliases a vocab word"
            if isinstance(node, ast.ImportFrom) and node.module == "kernelrank.vocab":
                renamed = [f"{a.name} as {a.asname}" for a in node.names if a.asname]
                assert not renamed, f"{path.relative_to(ROOT)}:{node.lineno}: imports {renamed}"
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Literal":
                words = {c.value for c in ast.walk(node.slice) if isinstance(c, ast.Constant)}
                assert not words & WORDS - {vocab.AUTO}, f"{path.relative_to(ROOT)}:{node.lineno}: a Literal of vocab words"


#: Every word of the vocabulary: statuses, verdicts, modes, case kinds, run kinds, device classes, auto.
WORDS = frozenset(w.value for e in (vocab.Verdict, vocab.SubmissionStatus, vocab.Mode, vocab.CaseKind, vocab.RunKind,
                                    vocab.DeviceClass) for w in e) | {vocab.AUTO}
#: Comparisons to a vocab word that are someone else's word. Kept tiny: fix the code instead.
ALLOWED = {
    # the importer rewrites ``x.cuda()`` calls in imported code: torch's method name, not ours
    ("kernelrank/importers/common.py", "cuda"),
}


def _modules() -> list:
    return [p for top in ("api", "kernelrank", "runner") for p in sorted((ROOT / top).rglob("*.py"))
            if p != ROOT / "kernelrank" / "vocab.py"]


def _words(node: ast.AST) -> list[str]:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [c.value for c in items if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value in WORDS]


def _torch_device_type(node: ast.AST) -> bool:
    """``t.device.type``, ``device.type`` or a ``device_type`` taken from one: torch's device
    words, not our device classes."""
    if isinstance(node, ast.Attribute) and node.attr == "type":
        of = node.value
        return (isinstance(of, ast.Attribute) and of.attr == "device") or (isinstance(of, ast.Name)
                                                                           and of.id == "device")
    return isinstance(node, ast.Name) and node.id == "device_type"


def test_no_vocab_word_is_spelled_outside_vocab() -> None:
    """A comparison to, or a parameter default of, a status, verdict, mode, case kind, run kind or
    device class spelled as a string drifts from vocab.py unseen: every layer names vocab's member."""
    found = []
    for path in _modules():
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                if any(_torch_device_type(o) for o in operands):
                    continue
                found += [f"{rel}:{node.lineno}: compares to {w!r}: {ast.unparse(node)}"
                          for o in operands for w in _words(o) if (rel, w) not in ALLOWED]
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
                found += [f"{rel}:{d.lineno}: defaults to {w!r}" for d in defaults for w in _words(d)]
    assert not found, "spell these with kernelrank.vocab's names:\n" + "\n".join(found)


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
    # one queue per SKU: the form factor changes the speed
    assert vocab.gpu_queue_name("NVIDIA H100 PCIe") == "cuda-h100-pcie"
    assert vocab.gpu_queue_name("NVIDIA H100 NVL") == "cuda-h100-nvl"
    assert vocab.gpu_queue_name("NVIDIA A100-SXM4-80GB") == "cuda-a100-sxm"
    assert vocab.gpu_queue_name("NVIDIA A100 80GB PCIe") == "cuda-a100-pcie"
    assert vocab.gpu_queue_name("NVIDIA H200") == "cuda-h200-sxm"
    assert vocab.gpu_queue_name("NVIDIA H100 80GB HBM3 MIG 1g.10gb") == "cuda-h100-sxm-mig-1g10gb"
    assert vocab.gpu_queue_name("NVIDIA L4") == "cuda-l4"
    assert vocab.gpu_queue_name("NVIDIA GeForce RTX 4090") == "cuda-rtx4090"
    assert vocab.is_device_queue(vocab.gpu_queue_name("Some Future Accelerator X"))
