"""What both importers share: the report, case scaling, the device rewrite, writing the folders.

An imported problem is an ordinary KernelRank problem (``problems/<name>/problem.yaml`` and
``reference_kernels/<name>/``) whose ``reference.py`` is generated: it embeds the source's files
as text and adapts them to the reference interface (``generate_input(*, seed, device, ...)``,
``ref_kernel``, ``flops``, ``bytes``). A runner receives only that text, so it needs nothing of
the source's folder.
"""

from __future__ import annotations

import ast
import math
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from kernelrank.problems import (DEFINITION_FILE, REFERENCE_FILE, TOLERANCE_DTYPES, ProblemDefinition, ProblemError,
                                 load_problem)
from kernelrank.settings import get_settings

#: Inputs of one CPU case, unless ``--cpu-input-mib`` says otherwise: the size of the largest
#: CPU benchmark input of the built-in problems (softmax: 4096 x 1024 float32 = 16 MiB), which a
#: 2-core machine times within the CPU case budget below.
CPU_INPUT_BYTES = 16 * 2**20
#: Inputs of one test case (both devices): tests check correctness, and run on the CPU too.
TEST_INPUT_BYTES = 2**20
#: Integer case parameters of at least this value are taken as sizes and scaled together; smaller
#: ones (a kernel size of 3, a reduction dim of 1, 8 heads) are kept as the source has them.
MIN_SIZE_PARAM = 64
#: Largest granularity kept when a size is scaled: a size that is a multiple of 16 in the source
#: stays a multiple of 16 (the largest power of two dividing it, up to this bound).
MAX_GRANULARITY = 16
#: The coarser bound tried when a reference fails at sizes scaled with :data:`MAX_GRANULARITY`
#: (GPU MODE's nvfp4 problems need ``k`` in whole blocks of 256).
COARSE_GRANULARITY = 256
#: Seconds of timing per benchmark case, as the built-in problems (softmax) have them.
CASE_TIMING = {"cpu": {"benchmark": 3.0, "leaderboard": 3.0}, "cuda": {"benchmark": 10.0, "leaderboard": 30.0}}
#: The dtypes a KernelRank tolerance may name (``ProblemDefinition.tolerances``), float8 among them.
FLOAT_DTYPES = TOLERANCE_DTYPES
#: The name a rewritten source reads the run's device from.
DEVICE_NAME = "_kernelrank_device"
#: A problem name: as :class:`~kernelrank.problems.ProblemDefinition` requires.
NAME_MAX = 64
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class ProblemImportError(ValueError):
    """The source cannot be imported (missing or malformed files, a name in use, a reference that
    fails on the CPU); the message says which and why."""


@dataclass
class ImportReport:
    """What an import wrote, what it derived from the source and what it assumed."""

    name: str
    source: str
    derived: list[str] = field(default_factory=list)
    assumed: list[str] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    #: why the problem has no CPU cases (its reference needs a GPU or a package); None: both devices
    cuda_only: str | None = None

    def lines(self) -> list[str]:
        """The report as plain lines for a terminal."""
        out = [f"imported {self.source} as problem {self.name!r}"
               + (f" (CUDA only: {self.cuda_only})" if self.cuda_only else "")]
        out += ["derived:"] + [f"  - {d}" for d in self.derived]
        out += ["assumed:"] + [f"  - {a}" for a in self.assumed]
        out += ["wrote:"] + [f"  - {p}" for p in self.written]
        return out


def check_name(name: str) -> None:
    """Raises :class:`ProblemImportError` unless ``name`` is a valid problem name."""
    if not NAME_PATTERN.match(name):
        raise ProblemImportError(f"--name {name!r}: a problem name is a lowercase letter, then lowercase letters, "
                                 "digits or _ (64 at most)")


# -- scaling --------------------------------------------------------------------------------------
def size_params(params: dict[str, Any]) -> list[str]:
    """Names of the parameters taken as sizes: integers (not booleans) of at least
    :data:`MIN_SIZE_PARAM`, other than ``seed``."""
    return [k for k, v in params.items()
            if k != "seed" and isinstance(v, int) and not isinstance(v, bool) and v >= MIN_SIZE_PARAM]


def _granularity(v: int, most: int = MAX_GRANULARITY) -> int:
    g = 1
    while g < most and v % (g * 2) == 0:
        g *= 2
    return g


def scaled(params: dict[str, Any], factor: float, granularity: int = MAX_GRANULARITY) -> dict[str, Any]:
    """``params`` with every size parameter multiplied by ``factor`` (at most 1), rounded down to
    its granularity (the largest power of two dividing it, up to ``granularity``) and at least
    that granularity."""
    out = dict(params)
    for k in size_params(params):
        v, g = params[k], _granularity(params[k], granularity)
        out[k] = max(g, int(v * min(factor, 1.0)) // g * g)
    return out


class ScalingError(ProblemImportError):
    """The source's case runs as it is, but no scaled-down copy of it both fits the budget and runs
    (scaling shrinks some sizes and not others, e.g. a ``size`` below its ``kernelsize``)."""


def fit_case(params: dict[str, Any], input_bytes: Callable[[dict[str, Any]], int], budget: int,
             granularity: int = MAX_GRANULARITY) -> tuple[dict[str, Any], int]:
    """The case scaled down (all sizes by one factor) until its inputs fit ``budget`` bytes, with
    the bytes of its inputs.

    ``input_bytes(params)`` measures a case's inputs; it is called on small cases first, doubling
    the factor while the inputs fit (so a measurement allocates at most a few times the budget),
    then bisecting the last step four times. A scaled case whose measurement raises is taken as
    too small (sizes that scaling shrank below ones it kept): the search grows past it. A case that
    fits as it is comes back unchanged; one that does not fit even at its smallest sizes comes back
    at the smallest that runs.

    Raises:
        ScalingError: the case runs unscaled, but no scaled copy both runs and fits the budget.
        Exception: whatever ``input_bytes`` raises on the unscaled case (the source's own failure).
    """
    if not size_params(params):
        return dict(params), input_bytes(params)
    input_bytes = memoized(input_bytes)
    failure: list[BaseException] = []

    def measure(case: dict[str, Any]) -> int | None:
        try:
            return input_bytes(case)
        except Exception as e:  # noqa: BLE001 - a scaled case the source cannot make
            failure.append(e)
            return None

    factor, best, smallest = 2.0**-24, None, None
    while factor <= 1.0:
        case = scaled(params, factor, granularity)
        n = measure(case)
        if n is not None and smallest is None:
            smallest = (case, n)
        if n is not None and n > budget:
            break
        if n is not None:
            best = (factor, case, n)
        factor *= 2
    if best is None:
        if smallest is not None:
            return smallest
        input_bytes(params)  # the source's own failure, raised as it is
        raise ScalingError(f"scaling the case {params} fails: no scaled copy runs ({describe_error(failure[-1])})")
    if best[0] >= 1.0:
        return best[1], best[2]
    lo, hi = best[0], min(1.0, best[0] * 2)
    for _ in range(4):
        mid = math.sqrt(lo * hi)
        case = scaled(params, mid, granularity)
        n = measure(case)
        if n is None:
            lo = mid
        elif n <= budget:
            lo, best = mid, (mid, case, n)
        else:
            hi = mid
    return best[1], best[2]


def describe_error(e: BaseException) -> str:
    """``Type: first line of the message`` (300 characters at most) of an exception."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300] if text else ''}".rstrip(": ")


def memoized(input_bytes: Callable[[dict[str, Any]], int]) -> Callable[[dict[str, Any]], int]:
    """``input_bytes`` measuring each distinct case once (the smallest scaled cases repeat while
    every size sits at its granularity; a source's inputs may take seconds to make on the CPU),
    cases differing only in their seed being one. A failure is remembered and raised again."""
    if getattr(input_bytes, "memo", None) is not None:
        return input_bytes
    memo: dict[str, Any] = {}

    def measure(params: dict[str, Any]) -> int:
        key = repr(sorted((k, v) for k, v in params.items() if k != "seed"))  # sizes do not depend on it
        if key not in memo:
            try:
                memo[key] = input_bytes(params)
            except Exception as e:  # noqa: BLE001 - raised again below, and on every later call
                memo[key] = e
        if isinstance(memo[key], BaseException):
            raise memo[key]
        return memo[key]

    measure.memo = memo  # type: ignore[attr-defined]
    return measure


def fit_cases(cases: list[dict[str, Any]], input_bytes: Callable[[dict[str, Any]], int],
              budget: int, granularity: int = MAX_GRANULARITY) -> tuple[list[dict[str, Any]], int]:
    """Each case fitted to ``budget`` (:func:`fit_case`), duplicates (same parameters but the seed)
    dropped; returns the cases and how many were scaled."""
    input_bytes = memoized(input_bytes)
    out, seen, changed = [], set(), 0
    for c in cases:
        fitted, _ = fit_case(c, input_bytes, budget, granularity)
        changed += fitted != c
        key = tuple(sorted((k, repr(v)) for k, v in fitted.items() if k != "seed"))
        if key not in seen:
            seen.add(key)
            out.append(fitted)
    return out, changed


def tensor_bytes(value: Any) -> int:
    """Bytes of every tensor in a (nested) value."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(tensor_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(tensor_bytes(v) for v in value.values())
    return 0


# -- the device rewrite ---------------------------------------------------------------------------
class _DeviceRewrite(ast.NodeTransformer):
    """Hard-coded CUDA devices read :data:`DEVICE_NAME` instead: ``device='cuda'`` keywords,
    ``torch.device('cuda')``, ``.to('cuda')``, ``.cuda()``, ``device = 'cuda'`` assignments and
    ``device='cuda'`` parameter defaults."""

    def __init__(self) -> None:
        self.count = 0

    @staticmethod
    def _is_cuda(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"cuda(:0)?", node.value) is not None

    def _name(self) -> ast.Name:
        self.count += 1
        return ast.Name(id=DEVICE_NAME, ctx=ast.Load())

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        # ``device = "cuda"`` set as a variable (GPU MODE's helion references)
        self.generic_visit(node)
        if self._is_cuda(node.value) and all(isinstance(t, ast.Name) for t in node.targets):
            node.value = self._name()
        return node

    def visit_arguments(self, node: ast.arguments) -> ast.AST:
        # ``def f(..., device="cuda")``
        self.generic_visit(node)
        node.defaults = [self._name() if self._is_cuda(d) else d for d in node.defaults]
        node.kw_defaults = [self._name() if d is not None and self._is_cuda(d) else d for d in node.kw_defaults]
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        for kw in node.keywords:
            if kw.arg == "device" and self._is_cuda(kw.value):
                kw.value = self._name()
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("device", "to", "Generator") and node.args and self._is_cuda(node.args[0]):
            node.args[0] = self._name()
        if isinstance(func, ast.Attribute) and func.attr == "cuda" and not node.args and not node.keywords \
                and not (isinstance(func.value, ast.Name) and func.value.id == "torch"):
            self.count += 1
            return ast.Call(func=ast.Attribute(value=func.value, attr="to", ctx=ast.Load()),
                            args=[ast.Name(id=DEVICE_NAME, ctx=ast.Load())], keywords=[])
        return node


def rewrite_devices(source: str, filename: str) -> tuple[str, int]:
    """``source`` with its hard-coded CUDA devices reading ``_kernelrank_device`` (defined at its
    top: ``cuda`` when torch sees one, else ``cpu``; the reference wrapper sets it to the run's
    device), and the number of places changed. A source with none comes back unchanged.

    Raises:
        ProblemImportError: the source is not valid Python.
    """
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as e:
        raise ProblemImportError(f"{filename}: not valid Python: {e}") from None
    rw = _DeviceRewrite()
    tree = rw.visit(tree)
    if not rw.count:
        return source, 0
    prelude = ast.parse(f"{DEVICE_NAME} = 'cuda' if __import__('torch').cuda.is_available() else 'cpu'").body
    at = 0
    while at < len(tree.body) and (
            (isinstance(tree.body[at], ast.ImportFrom) and tree.body[at].module == "__future__")
            or (at == 0 and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant))):
        at += 1
    tree.body[at:at] = prelude
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n", rw.count


# -- writing and checking -------------------------------------------------------------------------
def target_dirs(name: str) -> tuple[Path, Path]:
    """``(problems/<name>, reference_kernels/<name>)`` under the configured folders."""
    s = get_settings()
    return s.problems_dir / name, s.reference_kernels_dir / name


def write_problem(report: ImportReport, definition: dict[str, Any], reference: str, files: dict[str, str],
                  force: bool) -> None:
    """Validate ``definition`` and write it with ``reference`` (as ``reference.py``) and ``files``
    (relative path: text) into the configured problem folders; adds the paths to the report.

    Raises:
        ProblemImportError: the definition fails validation, or the problem exists and ``force``
            is false.
    """
    try:
        ProblemDefinition.model_validate(definition)
    except ValueError as e:
        raise ProblemImportError(f"the generated definition fails validation: {e}") from None
    pdir, rdir = target_dirs(report.name)
    if (pdir.exists() or rdir.exists()) and not force:
        raise ProblemImportError(f"problem {report.name!r} exists ({pdir} or {rdir}); pass --force to replace it")
    for d in (pdir, rdir):
        if d.exists():
            shutil.rmtree(d)
    pdir.mkdir(parents=True)
    rdir.mkdir(parents=True)
    (pdir / DEFINITION_FILE).write_text(yaml.safe_dump(definition, sort_keys=False, allow_unicode=True, width=100),
                                        encoding="utf-8")
    (rdir / REFERENCE_FILE).write_text(reference, encoding="utf-8")
    report.written += [pdir / DEFINITION_FILE, rdir / REFERENCE_FILE]
    for rel, text in files.items():
        path = rdir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        report.written.append(path)


class ReferenceFailure(ProblemImportError):
    """The imported reference raised on the CPU; ``cause`` is what it raised."""

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.cause = cause


#: Words in an error that say the code wanted a GPU (or a GPU-only library) the CPU lacks.
_GPU_WORDS = re.compile(r"cuda|nvidia|nccl|rocm|\bhip\b|triton|\bgpu\b|fp8|float8", re.IGNORECASE)


def cpu_unsupported(error: BaseException) -> str | None:
    """Why ``error`` (raised by a source's code on the CPU) shows the source needs what a CPU runner
    lacks: a package that is not installed (``aiter``, ``helion``) or a GPU (an error naming CUDA,
    NCCL, ROCm, Triton or float8); ``None`` when it is an ordinary failure of the source. A
    wrapped error (``raise ... from``) is judged by its cause."""
    while error.__cause__ is not None:
        error = error.__cause__
    if isinstance(error, ImportError):
        return f"the reference needs the package {error.name or str(error)!r}, not installed here"
    if _GPU_WORDS.search(f"{type(error).__name__} {error}"):
        return f"the reference needs a GPU ({describe_error(error)})"
    return None


def check_on_cpu(report: ImportReport, params: dict[str, Any] | None = None) -> None:
    """Load the written problem and run its reference on the CPU on ``params`` (a scaled case; by
    default the first test case); each tensor of its output (a tensor, or a tuple, list or dict of
    them) must have a dtype with a tolerance or an integer dtype (checked exactly), unless the
    problem is checked by its source's own ``check_implementation``. Adds what it saw to the report.

    Raises:
        ReferenceFailure: the problem does not load or the reference fails (``cause`` says why).
        ProblemImportError: its output is not of tensors of dtypes KernelRank checks.
    """
    import torch

    from kernelrank.problems import EXACT_DTYPES

    try:
        problem = load_problem(report.name)
        ref = problem.reference_module()
        params = dict(params if params is not None else problem.definition.tests[0].params)
        data = ref.generate_input(device="cpu", **params)
        with torch.no_grad():
            out = ref.ref_kernel(data)
    except (ProblemError, Exception) as e:  # noqa: BLE001 - any failure of the source's code is the report
        raise ReferenceFailure(f"the imported reference fails on the CPU ({describe_error(e)})", e) from None
    leaves = refuse_non_tensor(out)
    dtypes = [str(t.dtype).removeprefix("torch.") for t in leaves]
    for dtype in dtypes:
        if (dtype not in problem.definition.tolerances and dtype not in EXACT_DTYPES
                and problem.definition.check != "source"):
            raise ProblemImportError(f"the reference's output dtype {dtype} has no tolerance (KernelRank checks float "
                                     "and integer outputs)")
    label = " ".join(f"{k}={v}" for k, v in params.items())
    shown = ", ".join(f"{d} {list(t.shape)}" + (" (checked exactly)" if d in EXACT_DTYPES else "")
                      for d, t in zip(dtypes, leaves))
    what = "output" if len(leaves) == 1 and type(out) is torch.Tensor else f"output {type(out).__name__} of"  # noqa: E721
    report.derived.append(f"checked: the reference runs on the CPU ({label}): "
                          f"inputs {tensor_bytes(data)} bytes, {what} {shown}")
    report.derived.append(f"revision {problem.revision[:12]}")


def refuse_non_tensor(out: Any) -> list[Any]:
    """The tensors of the reference's output ``out``: a plain tensor, or a tuple, list or dict of
    them (torch's named tuples as tuples: :func:`~kernelrank.runner.slotformat.output_leaves`).

    Raises:
        ProblemImportError: anything else (a Python number, a custom class), which KernelRank cannot check."""
    from kernelrank.runner.slotformat import output_leaves

    leaves = output_leaves(out)
    if leaves is None:
        raise ProblemImportError(f"the reference returns {type(out).__name__}, which KernelRank cannot check (a tensor, "
                                 "or a tuple, list or dict of tensors)")
    return leaves


def make_cuda_only(report: ImportReport, definition: dict[str, Any], reason: str) -> None:
    """Mark ``definition`` (and the report) CUDA-only for ``reason``: no CPU benchmark cases."""
    definition["benchmarks"]["cpu"] = []
    definition["cuda_only"] = reason
    report.cuda_only = reason
    report.assumed.append(f"CUDA only, no CPU cases: {reason}")


def write_and_check(report: ImportReport, definition: dict[str, Any], reference: str, files: dict[str, str],
                    force: bool, check_params: dict[str, Any] | None) -> None:
    """Write the problem (:func:`write_problem`) and check its reference on the CPU on
    ``check_params`` (:func:`check_on_cpu`), unless it is CUDA-only already. A reference that fails
    there for want of a GPU or a package (:func:`cpu_unsupported`) makes the problem CUDA-only and
    it is written again so; any other failure is raised, and the written files are removed.

    Raises:
        ProblemImportError: as :func:`write_problem` and :func:`check_on_cpu`.
    """
    write_problem(report, definition, reference, files, force)
    if report.cuda_only:
        return
    try:
        check_on_cpu(report, check_params)
    except ReferenceFailure as e:
        reason = cpu_unsupported(e.cause)
        if reason is None:
            remove_problem(report.name)
            raise
        make_cuda_only(report, definition, reason)
        report.written.clear()
        write_problem(report, definition, reference, files, True)
    except ProblemImportError:
        remove_problem(report.name)
        raise


def remove_problem(name: str) -> None:
    """Delete the configured folders of problem ``name`` (an import that was refused after writing)."""
    for d in target_dirs(name):
        if d.exists():
            shutil.rmtree(d)


def literal_block(text: str) -> str:
    """``text`` as a Python string literal for generated sources."""
    return repr(text)
