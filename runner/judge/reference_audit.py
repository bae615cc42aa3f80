"""Whether a problem's tolerances can tell right from wrong: the reference's own error against a
float64 computation of the same formula, and degenerate outputs, on its test cases.

A tolerance looser than the reference's own error passes wrong kernels; one tighter than it fails
the reference itself (cases met in the field: docs/administration.md, problems). :func:`audit` computes, per test case on the CPU, the reference's
output, the same reference on the inputs widened to float64 (every floating tensor), and asks:

- does the reference pass its own tolerance against the float64 result *with room* (its largest
  error at most :data:`ROOM` of the allowance ``atol + rtol * |exact|``)?
- do degenerate outputs (all zeros; the reference output's mean everywhere) fail the tolerance
  against the reference's output, where that output is not itself degenerate?

``problems push`` (:mod:`kernelrank.services.reference_check`) refuses a problem with any finding.
A reference that cannot run in float64 (it raises, or gives another shape) has its own error left
unchecked, not refused; the degenerate outputs are still checked.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from kernelrank.problems import ProblemSpec
from kernelrank.runner.judge.checking import degenerate

#: The largest share of its tolerance the reference's own error may use on any value.
ROOM = 0.5


def widened(value: Any) -> Any:
    """``value`` with every floating tensor (in tuples, lists and dicts too) as float64."""
    if isinstance(value, torch.Tensor):
        return value.to(torch.float64) if value.is_floating_point() else value
    if isinstance(value, (tuple, list)):
        return type(value)(widened(v) for v in value)
    if isinstance(value, dict):
        return {k: widened(v) for k, v in value.items()}
    return value


def tolerance_share(out: torch.Tensor, exact: torch.Tensor, atol: float, rtol: float) -> float:
    """The largest ``|out - exact| / (atol + rtol * |exact|)`` over the values (0 for none); ``inf``
    where a value's allowance is 0 and it differs, or where one is NaN and the other not."""
    o, e = out.to(torch.float64), exact.to(torch.float64)
    if o.numel() == 0:
        return 0.0
    diff = (o - e).abs()
    allowance = e.abs() * rtol + atol
    share = torch.where(diff == 0, torch.zeros_like(diff), diff / allowance)
    share = torch.where(o.isnan() & e.isnan(), torch.zeros_like(share), share)
    return float(share.nan_to_num(nan=math.inf, posinf=math.inf).amax())


def within(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> bool:
    """Whether ``out`` passes the tolerance against ``ref`` (torch.isclose's rule, NaN equal)."""
    return bool(torch.isclose(out.to(torch.float64), ref.to(torch.float64), rtol=rtol, atol=atol, equal_nan=True).all())


def audit(spec: ProblemSpec) -> list[str]:
    """The findings on ``spec``'s test cases (see the module docstring), one sentence each; empty
    when its tolerances hold, or when the problem is checked by its source (``check: source``). Runs the trusted reference in this process, on the CPU.

    Raises:
        kernelrank.problems.ProblemError: the reference does not import.
    """
    module = spec.reference_module()
    definition = spec.definition
    findings: list[str] = []
    if definition.check == "source":  # the reference's own check_implementation decides: no tolerance is used
        return findings
    for i, case in enumerate(definition.tests):
        where = f"test case {i} ({case.label()})"
        data = module.generate_input(device="cpu", **case.params)
        out = module.ref_kernel(data)
        if not isinstance(out, torch.Tensor) or not out.is_floating_point():
            continue
        tol = definition.tolerance_for(str(out.dtype).removeprefix("torch."))
        try:
            exact = module.ref_kernel(widened(data))
        except Exception:  # noqa: BLE001 - a reference written for one dtype only: its error is not known
            exact = None
        if isinstance(exact, torch.Tensor) and exact.shape == out.shape:
            share = tolerance_share(out, exact, tol.atol, tol.rtol)
            if share > ROOM:
                findings.append(f"{where}: the reference's own error against float64 uses {share:.0%} of its "
                                f"tolerance (atol={tol.atol:g}, rtol={tol.rtol:g}; at most {ROOM:.0%} leaves room)")
        if degenerate(out) is None:
            mean = out.to(torch.float64).nan_to_num().mean().to(out.dtype)
            candidates = [("all zeros", torch.zeros_like(out))]
            if out.numel() > 1:  # one value's mean is the answer itself
                candidates.append(("the mean everywhere", torch.full_like(out, mean)))
            for name, candidate in candidates:
                if within(candidate, out, tol.atol, tol.rtol):
                    findings.append(f"{where}: an output of {name} passes the tolerance (atol={tol.atol:g}, "
                                    f"rtol={tol.rtol:g}): too loose to tell an answer from none")
    return findings
