"""Output buffers among a source's inputs (destination-passing: GPU MODE's ``pmpp_v2`` passes
``data = (x, out)`` and its solutions write into ``out`` and return it), found for
``ProblemDefinition.output_buffers``.

An input is taken as an output buffer when the reference's output does not depend on what it
holds: filled with 0xFF bytes (NaN) before the reference runs, the reference's output is the same,
bit for bit, as on the input set as generated. Only inputs that are candidates are tried: those the
reference's output shares memory with (it wrote into one and returned it), and those its
``ref_kernel`` unpacks under a name that says output (``data, output = data``; ``a, b, c = data``).
"""

from __future__ import annotations

import ast
import re
from typing import Any

#: Names of an unpacked element of ``data`` that say it is where the output goes.
OUTPUT_NAME = re.compile(r"out|^(c|y|dst|dest|res|result)$", re.IGNORECASE)


def named_buffers(reference: str) -> dict[int, str]:
    """Index to name of the elements of ``ref_kernel``'s ``data`` unpacked into a name that says
    output (:data:`OUTPUT_NAME`), from the source's text; empty when it has none."""
    found: dict[int, str] = {}
    try:
        tree = ast.parse(reference)
    except SyntaxError:
        return found
    for fn in tree.body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name == "ref_kernel" and fn.args.args):
            continue
        param = fn.args.args[0].arg
        for node in ast.walk(fn):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple)
                    and isinstance(node.value, ast.Name) and node.value.id == param):
                for i, elt in enumerate(node.targets[0].elts):
                    if isinstance(elt, ast.Name) and OUTPUT_NAME.search(elt.id):
                        found[i] = elt.id
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == param for t in node.targets):
                break  # ``data`` rebound: later unpacks are of something else
    return found


def _tensor_paths(v: Any, prefix: str = "") -> list[tuple[str, Any]]:
    import torch

    if isinstance(v, torch.Tensor):
        return [(prefix, v)] if prefix else []
    items: list[tuple[Any, Any]] = []
    if isinstance(v, (tuple, list)):
        items = list(enumerate(v))
    elif isinstance(v, dict):
        items = [(k, x) for k, x in v.items() if isinstance(k, str)]
    found: list[tuple[str, Any]] = []
    for k, x in items:
        found += _tensor_paths(x, f"{prefix}.{k}" if prefix else str(k))
    return found


def _same(a: Any, b: Any) -> bool:
    """Whether two outputs are equal bit for bit in value (NaN where the other has NaN)."""
    import torch

    from kernelrank.runner.slotformat import output_leaves

    la, lb = output_leaves(a), output_leaves(b)
    if la is None or lb is None or len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.dtype.is_floating_point:
            x, y = x.float(), y.float()
            if not bool(((x == y) | (x.isnan() & y.isnan())).all()):
                return False
        elif not torch.equal(x, y):
            return False
    return True


def find_buffers(ref_module: Any, params: dict[str, Any], named: dict[int, str]) -> list[str]:
    """Paths (as ``output_buffers`` spells them) of the inputs of ``ref_module``'s input set for
    ``params`` that are output buffers (see the module), run on the CPU. A candidate on which the
    reference raises once filled is not one.

    Raises:
        Exception: what the reference raises on the input set as generated.
    """
    import torch

    from kernelrank.problems import ProblemDefinition
    from kernelrank.runner.judge.output_rules import buffer_keys, clone_tree, poison
    from kernelrank.runner.slotformat import output_leaves

    def run(data: Any) -> Any:
        with torch.no_grad():
            return ref_module.ref_kernel(data)

    data = ref_module.generate_input(device="cpu", **params)
    paths = _tensor_paths(data)
    out = run(data)
    spans = [(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()) for t in output_leaves(out) or []]
    candidates = [p for p, t in paths
                  if any(s <= t.untyped_storage().data_ptr() < s + n for s, n in spans)
                  or (p.isdigit() and int(p) in named)]
    if not candidates:
        return []
    expected = clone_tree(run(ref_module.generate_input(device="cpu", **params)))
    confirmed = []
    for path in candidates:
        fresh = ref_module.generate_input(device="cpu", **params)
        stub = ProblemDefinition.model_construct(name="import", output_buffers=[path])
        try:
            poison(fresh, buffer_keys(stub, fresh))
            if _same(run(fresh), expected):
                confirmed.append(path)
        except Exception:  # noqa: BLE001 - an input the reference cannot do without
            continue
    return confirmed
