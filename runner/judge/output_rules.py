"""How an output is judged, by the problem's rule (``ProblemDefinition.check``), and the input
sets' output buffers (``ProblemDefinition.output_buffers``), on the judge's side.

- ``strict``: the output has the reference's structure (a tensor, or a tuple, list or dict of
  them) and each tensor passes :func:`~kernelrank.runner.judge.checking.check_output` against
  the reference's (integer and boolean tensors exactly: ``ProblemDefinition.tolerance_for``);
- ``promote``: the same, dtypes promoted to a common one first (GPU MODE's ``verbose_allclose``);
- ``source``: the reference's own ``check_implementation(data, output)`` decides (GPU MODE's
  residual checks), called here, in the judge's process, on a copy of the judge's pristine input
  set and the output the judge read: problem code, trusted as the reference is, never run in a
  submission's process and never given anything of the submission's but tensors the judge made.

Output buffers (destination-passing): each is filled with 0xFF bytes (NaN for every float dtype,
-1 or the largest value for integers) in the judge's copy of every input set (:func:`poison`), so
each call's slots hold a fresh one that no earlier call's answer survives in; the reference's
expected output is computed on clones of them (:func:`with_fresh_buffers`), never in the set
placed for the children.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from kernelrank.problems import ProblemDefinition, ProblemError
from kernelrank.runner.judge.checking import check_output, degenerate
from kernelrank.runner.slotformat import output_leaves

#: Key path of an output buffer in an input set: tuple and list indices (int), dict keys (str).
Keys = tuple[Any, ...]


def buffer_keys(definition: ProblemDefinition, data: Any) -> dict[str, list[Any]]:
    """The problem's output buffers in ``data`` (name, as ``output_buffers`` spells it: its indices
    and keys), each leading to a tensor.

    Raises:
        ProblemError: a path that leads to no tensor of the input set (a broken problem)."""
    found: dict[str, list[Any]] = {}
    for path in definition.output_buffers:
        keys: list[Any] = []
        node = data
        for part in path.split("."):
            if isinstance(node, (tuple, list)) and part.isdigit() and int(part) < len(node):
                keys.append(int(part))
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                keys.append(part)
                node = node[part]
            else:
                raise ProblemError(f"problem {definition.name!r}: output_buffers path {path!r} is not in the input set")
        if type(node) is not torch.Tensor:  # noqa: E721
            raise ProblemError(f"problem {definition.name!r}: output_buffers path {path!r} is not a tensor of the "
                               "input set")
        found[path] = keys
    return found


def _replaced(v: Any, paths: set[Keys], fn: Any, prefix: Keys = ()) -> Any:
    """``v`` with the leaves at ``paths`` replaced by ``fn(leaf)``; containers on the way rebuilt."""
    if prefix in paths:
        return fn(v)
    if isinstance(v, tuple):
        items = [_replaced(x, paths, fn, (*prefix, i)) for i, x in enumerate(v)]
        return type(v)(*items) if hasattr(v, "_fields") else tuple(items)
    if isinstance(v, list):
        return [_replaced(x, paths, fn, (*prefix, i)) for i, x in enumerate(v)]
    if isinstance(v, dict):
        return {k: _replaced(x, paths, fn, (*prefix, k)) for k, x in v.items()}
    return v


def poison(data: Any, keys: dict[str, list[Any]]) -> None:
    """Fill each output buffer of ``data`` (``keys``: :func:`buffer_keys`) with 0xFF bytes, in place."""
    for path in keys.values():
        t = data
        for k in path:
            t = t[k]
        if t.numel() == 0:
            continue
        with torch.no_grad():
            if t.is_contiguous():
                t.reshape(-1).view(torch.uint8).fill_(0xFF)
            else:
                filled = torch.empty(t.shape, dtype=t.dtype, device=t.device)
                filled.reshape(-1).view(torch.uint8).fill_(0xFF)
                t.copy_(filled)


def with_fresh_buffers(data: Any, keys: dict[str, list[Any]]) -> Any:
    """``data`` with a clone in place of each output buffer (the other tensors shared): what the
    reference writes into then stays out of the set placed for the children."""
    if not keys:
        return data
    return _replaced(data, {tuple(k) for k in keys.values()}, lambda t: t.clone())


def clone_tree(v: Any) -> Any:
    """A copy of ``v`` with every tensor cloned (containers rebuilt, other values shared)."""
    if isinstance(v, torch.Tensor):
        return v.clone()
    if isinstance(v, tuple):
        items = [clone_tree(x) for x in v]
        return type(v)(*items) if hasattr(v, "_fields") else tuple(items)
    if isinstance(v, list):
        return [clone_tree(x) for x in v]
    if isinstance(v, dict):
        return {k: clone_tree(x) for k, x in v.items()}
    return v


def judge_output(definition: ProblemDefinition, reference: Any, reply: dict[str, Any], out: Any, expected: Any,
                 data: Any = None) -> tuple[bool, str, dict[str, Any]]:
    """One output judged by the problem's rule: ``(passed, message, error figures)``.

    Args:
        reply: the child's answer about the call (its ``alias`` and ``out_type``, ``out_device``).
        out: the output the judge read (a tensor, a tuple, list or dict of them; ``None``: neither).
        expected: the reference's output on the same input set (the judge's).
        data: the judge's pristine input set (needed by ``source``; never given to a child).

    Raises:
        ProblemError: ``source`` without a ``check_implementation`` in the reference, or without ``data``.
    """
    if reply.get("alias"):
        return False, f"{reply['alias']!s:.500}", {}
    if out is None:
        return False, (f"output must be a plain torch.Tensor (or a tuple, list or dict of them), "
                       f"got {reply.get('out_type')!s:.200}"), {}
    if definition.check == "source":
        empty = _degenerate_where_expected_is_not(out, expected)
        if empty is not None:  # what a sloppy check lets through: the 0xFF bytes of an unwritten buffer
            return False, empty, {}
        return _source_check(definition, reference, out, data)
    return compare_tree(definition, out, expected, str(reply.get("out_device")), definition.check == "promote")


def compare_tree(definition: ProblemDefinition, out: Any, expected: Any, out_device: str | None,
                 promote: bool = False, where: str = "output") -> tuple[bool, str, dict[str, Any]]:
    """``out`` against ``expected`` of the same structure (tuples and lists alike, dicts by their
    keys), each tensor by :func:`~kernelrank.runner.judge.checking.check_output` with the tolerance
    of its expected dtype; the first failing tensor names its place (``output[1]``, ``output['lse']``).
    A passing output's figures are the largest over its tensors."""
    if isinstance(expected, torch.Tensor):
        tol = definition.tolerance_for(str(expected.dtype).removeprefix("torch."))
        c = check_output(out, expected, tol.atol, tol.rtol, out_device=out_device, promote=promote)
        figures = {"max_abs_error": c.max_abs_error, "max_rel_error": c.max_rel_error, "mismatches": c.mismatches,
                   "first_mismatch": c.first_mismatch, "nan_mismatches": c.nan_mismatches,
                   "inf_mismatches": c.inf_mismatches}
        message = c.message if where == "output" or c.passed else f"{where}: {c.message}"
        return c.passed, message, figures
    if isinstance(expected, (tuple, list)):
        if not isinstance(out, (tuple, list)) or len(out) != len(expected):
            return False, f"{where} must be a sequence of {len(expected)} tensors, got {_shape_of(out)}", {}
        items: list[tuple[str, Any, Any]] = [(f"{where}[{i}]", o, e) for i, (o, e) in enumerate(zip(out, expected))]
    elif isinstance(expected, dict):
        if not isinstance(out, dict) or set(out) != set(expected):
            return False, f"{where} must be a dict with keys {sorted(expected)}, got {_shape_of(out)}", {}
        items = [(f"{where}[{k!r}]", out[k], e) for k, e in expected.items()]
    else:
        raise ProblemError(f"problem {definition.name!r}: the reference's output has a {type(expected).__name__}, "
                           "which KernelRank cannot compare")
    worst: dict[str, Any] = {}
    for place, o, e in items:
        ok, message, figures = compare_tree(definition, o, e, out_device, promote, place)
        if not ok:
            return ok, message, figures
        for k in ("max_abs_error", "max_rel_error"):
            v = figures.get(k)
            if v is not None and (worst.get(k) is None or v > worst[k] or math.isnan(v)):
                worst[k] = v
    return True, "ok", worst


def _degenerate_where_expected_is_not(out: Any, expected: Any) -> str | None:
    """Why ``out`` holds no answer where the reference's output has one (a tensor of it NaN
    everywhere, all zeros or constant, :func:`~kernelrank.runner.judge.checking.degenerate`, where
    the expected tensor in the same place is not), or ``None``; ``None`` too when the two differ in
    structure (the problem's own check says why). Guards a ``source`` check, which decides alone
    otherwise, as the elementwise rules are guarded."""
    outs, wants = output_leaves(out), output_leaves(expected)
    if outs is None or wants is None or len(outs) != len(wants):
        return None
    for i, (o, e) in enumerate(zip(outs, wants)):
        if o.shape != e.shape:
            return None
        shape = degenerate(_comparable(o))
        if shape is not None and degenerate(_comparable(e)) is None:
            where = "output" if len(outs) == 1 else f"tensor {i} of the output"
            return f"{where} is degenerate ({shape}) where the reference's is not: no answer was written"
    return None


def _comparable(t: torch.Tensor) -> torch.Tensor:
    """``t`` in a dtype every reduction has (float8 and unsigned types widened)."""
    return t if t.dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
                            torch.bool) else t.to(torch.float32)


def _shape_of(v: Any) -> str:
    if isinstance(v, (tuple, list)):
        return f"a {type(v).__name__} of {len(v)}"
    if isinstance(v, dict):
        return f"a dict with keys {sorted(map(str, v))[:8]}"
    return f"a {type(v).__name__}"


def _source_check(definition: ProblemDefinition, reference: Any, out: Any, data: Any) -> tuple[bool, str, dict[str, Any]]:
    """The reference's ``check_implementation(data, output)`` on a copy of the pristine set: it
    answers ``(passed, message)`` (GPU MODE), a bool, or a message that is empty when it passed
    (GPU MODE's older convention). What it raises fails the output, with its words."""
    check = getattr(reference, "check_implementation", None)
    if not callable(check):
        raise ProblemError(f"problem {definition.name!r} is checked by its source, and its reference defines no "
                           "check_implementation")
    if data is None:
        raise ProblemError(f"problem {definition.name!r}: no input set to give its check_implementation")
    try:
        with torch.no_grad():
            verdict = check(clone_tree(data), out)
    except Exception as e:  # noqa: BLE001 - the problem's check refusing what it was given
        return False, f"the problem's check_implementation raised {type(e).__name__}: {str(e)[:500]}", {}
    if isinstance(verdict, (tuple, list)) and len(verdict) >= 1:
        passed, message = bool(verdict[0]), str(verdict[1]) if len(verdict) > 1 else ""
    elif isinstance(verdict, str):
        passed, message = not verdict, verdict
    else:
        passed, message = bool(verdict), ""
    if passed:
        return True, "ok", {}
    return False, f"the problem's check_implementation: {message[:1000] or 'failed'}", {}
