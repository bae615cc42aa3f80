"""Problem definitions: the declarative ``problems/<name>/problem.yaml`` and its reference.

A problem is two folders found by listing, with no central registry to edit:

- ``problems/<name>/problem.yaml``: title, Markdown description, data contract, test cases,
  benchmark cases per device class (``cpu``, ``cuda``), tolerances per output dtype, time budgets
  per mode, timing budgets per benchmark case, ranking rule (validated by :class:`ProblemDefinition`);
- ``reference_kernels/<name>/``: ``reference.py`` (``generate_input``, ``ref_kernel``, ``flops``,
  ``bytes``; optionally ``derive_input(first, second, *, seed)``, a fresh input set with
  ``generate_input``'s distribution made cheaply from two of a case's sets, which the judge then
  uses for the timed sets, checking each timed output against the reference process's on the
  same set: ``harness._Evaluation._derive`` and ``_check_derived``), ``templates/`` and ``examples/``.

A *revision* is the SHA-256 of the definition file and every file of the reference folder
(see :func:`revision_hash`): editing either makes a new revision, and results of different
revisions are never mixed.
"""

from __future__ import annotations

import hashlib
import re
import types
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kernelrank.settings import get_settings
from kernelrank.vocab import DeviceClass, Mode

DEFINITION_FILE = "problem.yaml"
#: Folders of a reference that do not change how submissions are judged, so not its revision:
#: ``attacks/`` (the security test corpus).
UNHASHED = ("attacks",)
REFERENCE_FILE = "reference.py"
#: Output dtypes checked for equality whatever the tolerances say (KernelBench's argmax, sort indices).
EXACT_DTYPES = frozenset({"bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64"})
#: Output dtypes a problem may give a tolerance for: the floating types, float8 among them (GPU MODE's
#: fp8 problems), compared in float32 (float64 for float64).
TOLERANCE_DTYPES = ("float32", "float16", "bfloat16", "float64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                    "float8_e5m2fnuz")
#: How a problem's outputs are judged (``ProblemDefinition.check``): ``strict`` elementwise against the
#: reference's output, of its dtype exactly; ``promote`` elementwise with the two dtypes promoted to a
#: common one first (GPU MODE's ``verbose_allclose``: a float32 output against a float64 reference);
#: ``source`` by the reference's own ``check_implementation(data, output) -> (passed, message)``,
#: run in the judge's process as the reference is (residual checks: a Cholesky factor, eigenvectors).
Check = Literal["strict", "promote", "source"]
CHECKS: tuple[str, ...] = get_args(Check)
#: A path into an input set naming one of its tensors: tuple and list indices and dict keys,
#: joined by dots (``"1"``: the second element of ``data``; ``"out"``, ``"0.2"``).
INPUT_PATH = r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*$"
#: Device memory (MiB) each process running code for a problem may hold, its CUDA context
#: included, when the problem sets no ``device_memory_mib``: 16 GiB leaves an 80 GB GPU's judge
#: and the other side's process theirs. One place: the definition carries it to the runners, so a
#: run's budget depends on the problem's revision, never on a runner's configuration.
DEFAULT_DEVICE_MEMORY_MIB = 16 * 1024


class ProblemError(ValueError):
    """A problem folder is missing, malformed, or its definition fails validation."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Tolerance(_Strict):
    """Elementwise tolerance: an output value passes when ``|out - ref| <= atol + rtol * |ref|``."""

    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)


class ArgContract(_Strict):
    """One element of the ``data`` tuple as documented to authors (shape, dtype, meaning)."""

    name: str
    shape: str | None = None
    dtype: str
    description: str = ""


class DataContract(_Strict):
    """What ``custom_kernel(data)`` receives and must return; shown to users verbatim."""

    data: list[ArgContract]
    output: ArgContract
    notes: str = ""


class Budgets(_Strict):
    """Wall-clock budgets in seconds: ``compile`` bounds loading the submission (C++/CUDA builds
    included); each mode bounds a whole evaluation in that mode after loading.

    Each call also has a deadline of its own, so a kernel that hangs is stopped within seconds,
    naming its case and the line it hung at: the submission's first call gets ``first_call`` (or
    a later call's deadline where that is longer); every later call ``max(call_floor, call_factor x the reference's time for that input set)``,
    per call of a batch. A call whose process is found compiling when its deadline passes
    (``torch.compile``, Triton's JIT, a C++/CUDA build: :mod:`kernelrank.runner.judge.hangs`) is
    given more time, up to ``compile_call`` seconds in all. The mode's budget stays the outer
    bound."""

    compile: float = Field(default=300.0, gt=0)
    test: float = Field(default=120.0, gt=0)
    benchmark: float = Field(default=300.0, gt=0)
    leaderboard: float = Field(default=600.0, gt=0)
    profile: float = Field(default=300.0, gt=0)
    first_call: float = Field(default=10.0, gt=0)
    compile_call: float = Field(default=300.0, gt=0)
    call_floor: float = Field(default=10.0, gt=0)
    call_factor: float = Field(default=100.0, gt=1)

    def for_mode(self, mode: Mode) -> float:
        """Seconds of wall time an evaluation in ``mode`` may take after loading."""
        return float(getattr(self, mode))

    def call_deadline(self, first: bool, reference_s: float, calls: int = 1) -> float:
        """Seconds a request of ``calls`` calls may take (see the class), given the reference's
        time for one call on the same inputs (``reference_s``, seconds, the judge's measure)."""
        later = max(self.call_floor, self.call_factor * reference_s)
        if first:  # never less than a later call's: a slow case's first call is no hang either
            return max(self.first_call, later) + max(0, calls - 1) * later
        return calls * later


class CaseTiming(_Strict):
    """How long one benchmark case is timed (in pairs with the reference), per timed mode.

    ``benchmark``, ``leaderboard``: seconds of wall time per case. A case whose speedup's 95%
    interval is still wider than ``target`` (relative half width: 0.03 is ±3%) when that is spent
    gets more time, up to ``cap`` times it in all; a case still wider than ``noisy_above``
    (0.25 is ±25%) then is marked noisy (:func:`kernelrank.runner.judge.judging.stop_rule`), and a run
    whose speedup over its cases is wider than ``noisy_above / sqrt(cases)`` is too noisy and not
    ranked (:func:`kernelrank.runner.stats.run_noisy`); all are held against the interval without
    the offsets between processes, which more time does not shrink. ±3% by default: the extra time
    is what makes repeated runs of one file agree (max/min 1.021 against 1.05-1.07 at the budget
    alone); ``noisy_above`` ±25% by default: honest idle cases read ±0.8-7%, one the host disturbs
    for seconds ±38-51% (docs/judging.md, 'How long a case is timed'; figures:
    docs/research/bench-history.md).

    ``processes``: how many pairs of processes (a submission's and a reference's) time a case's
    pairs, one per round of the cases' slices (``harness._Evaluation._rounds``); unset, the
    device's default (:data:`kernelrank.runner.judge.judging.PROCESSES`). Two processes running the same
    code differ by a few percent for as long as they live; with one pair per run that offset
    goes unseen by the interval. Pairs a process spends faulting in its first requests do not
    count (``pairs.Side.settle``); what remains is the process's own speed, which several pairs
    average (docs/judging.md, 'Several processes per side').

    On ``cuda``, ``cuda_graph: true`` times every request's calls captured in one CUDA graph and
    launched once (as ``triton.testing.do_bench_cudagraph``), for kernels of a few µs whose launch
    would otherwise dominate; the problem's kernels must then be capturable (no host
    synchronization, no allocation outside torch's caching allocator) — the reference included.
    """

    benchmark: float = Field(gt=0)
    leaderboard: float = Field(gt=0)
    target: float = Field(default=0.03, gt=0)
    noisy_above: float = Field(default=0.25, gt=0)
    cap: float = Field(default=3.0, ge=1)
    processes: int | None = Field(default=None, ge=1, le=8)
    cuda_graph: bool = False


class Case(BaseModel):
    """One test or benchmark case: parameters for ``generate_input`` plus a ``seed``."""

    model_config = ConfigDict(extra="allow", frozen=True)
    seed: int

    @property
    def params(self) -> dict[str, Any]:
        """The case as keyword arguments for ``generate_input`` (``seed`` included)."""
        return {"seed": self.seed, **(self.model_extra or {})}

    def label(self) -> str:
        """A short human-readable label, e.g. ``M=4 N=1 dtype=float32 seed=1``."""
        return " ".join(f"{k}={v}" for k, v in self.params.items())


class ProblemDefinition(_Strict):
    """The validated content of ``problems/<name>/problem.yaml``."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    title: str
    description: str
    contract: DataContract
    tolerances: dict[str, Tolerance]
    tests: list[Case] = Field(min_length=1)
    benchmarks: dict[DeviceClass, list[Case]]
    budgets: Budgets = Budgets()
    timing: dict[DeviceClass, CaseTiming]
    ranking: Literal["geometric_mean"] = "geometric_mean"
    review_speedup: float = Field(default=50.0, gt=1)
    #: device memory (MiB) each child (the submission's and the reference's alike) may hold when
    #: the judge looks after a request, as the driver counts it; more is the verdict
    #: ``out_of_memory`` (:mod:`kernelrank.runner.judge.devmem`)
    device_memory_mib: int = Field(default=DEFAULT_DEVICE_MEMORY_MIB, gt=0)
    #: why the problem runs on CUDA only (its reference needs a GPU or a package a CPU runner
    #: lacks); then ``benchmarks.cpu`` may be empty. Set by the importers (docs/problems.md).
    cuda_only: str | None = None
    #: inputs that are output buffers (destination-passing, GPU MODE's ``data = (x, out)``): paths
    #: into the input set (:data:`INPUT_PATH`). The judge fills each with 0xFF bytes (NaN for floats)
    #: for every call, lets the call write into it and return it, and reads it from its own copy of
    #: the slots; an output sharing memory with any other input still fails (docs/problems.md).
    output_buffers: list[str] = Field(default_factory=list)
    #: how outputs are judged: one of :data:`CHECKS`
    check: Check = "strict"

    @field_validator("tolerances")
    @classmethod
    def _known_dtypes(cls, v: dict[str, Tolerance]) -> dict[str, Tolerance]:
        unknown = set(v) - set(TOLERANCE_DTYPES)
        if unknown:
            raise ValueError(f"tolerances for unknown dtypes {sorted(unknown)}; known: {sorted(TOLERANCE_DTYPES)}")
        return v

    @field_validator("output_buffers")
    @classmethod
    def _input_paths(cls, v: list[str]) -> list[str]:
        bad = [p for p in v if not re.fullmatch(INPUT_PATH, p)]
        if bad:
            raise ValueError(f"output_buffers {bad}: a path is indices or keys joined by dots (\"1\", \"out\", \"0.2\")")
        if len(set(v)) != len(v):
            raise ValueError("output_buffers names a path twice")
        return v

    @model_validator(mode="after")
    def _every_device_has_cases_and_timing(self) -> "ProblemDefinition":
        for device in DeviceClass:
            if not self.benchmarks.get(device) and not (device == DeviceClass.cpu and self.cuda_only):
                raise ValueError(f"benchmarks.{device} must list at least one case")
            if device not in self.timing:
                raise ValueError(f"timing.{device} is missing")
        if self.timing[DeviceClass.cpu].cuda_graph:
            raise ValueError("timing.cpu.cuda_graph: CUDA graphs exist on cuda only")
        return self

    def benchmark_cases(self, device: DeviceClass) -> list[Case]:
        """Benchmark cases for a device class (``cpu`` or ``cuda``)."""
        return list(self.benchmarks.get(device, []))

    def tolerance_for(self, dtype: str) -> Tolerance:
        """Tolerance for an output dtype name (``"bfloat16"``...).

        Raises:
            ProblemError: the definition has no tolerance for that dtype.
        """
        if dtype in EXACT_DTYPES:  # integers and booleans: no rounding, so equal or wrong
            return Tolerance(atol=0.0, rtol=0.0)
        try:
            return self.tolerances[dtype]
        except KeyError:
            raise ProblemError(f"problem {self.name!r} has no tolerance for output dtype {dtype}") from None


@dataclass(frozen=True)
class Problem:
    """A loaded problem: its definition, its reference folder and its revision hash."""

    definition: ProblemDefinition
    definition_path: Path
    reference_dir: Path

    @property
    def name(self) -> str:
        return self.definition.name

    @cached_property
    def revision(self) -> str:
        """SHA-256 (hex) of the definition and reference folder; see :func:`revision_hash`."""
        return revision_hash(self.definition_path, self.reference_dir)

    @property
    def reference_source(self) -> str:
        """The text of ``reference.py``: shipped to runners with each job."""
        return (self.reference_dir / REFERENCE_FILE).read_text(encoding="utf-8")

    def reference_module(self) -> types.ModuleType:
        """Import ``reference.py`` as a fresh module (trusted code: runs on the judge's side)."""
        return load_reference_module(self.reference_source, self.name, self.reference_dir / REFERENCE_FILE)

    def spec(self) -> ProblemSpec:
        """The folder-free :class:`ProblemSpec` of this revision."""
        return ProblemSpec(self.definition, self.reference_source, self.revision)

    def files(self, folder: str) -> dict[str, str]:
        """Text of each file in ``reference_kernels/<name>/<folder>`` (``templates``, ``examples``)."""
        root = self.reference_dir / folder
        if not root.is_dir():
            return {}
        return {p.name: p.read_text(encoding="utf-8") for p in sorted(root.iterdir()) if p.is_file()}


@dataclass(frozen=True)
class ProblemSpec:
    """What an evaluation needs of a problem, with no folder behind it: a runner receives this
    in a job message (definition, reference source, revision) and never reads ``problems/``."""

    definition: ProblemDefinition
    reference_source: str
    revision: str

    @property
    def name(self) -> str:
        return self.definition.name

    def reference_module(self) -> types.ModuleType:
        """Import the reference source as a fresh module (trusted code, judge's side)."""
        return load_reference_module(self.reference_source, self.name, f"<reference {self.name}@{self.revision[:12]}>")

    def to_message(self) -> dict[str, Any]:
        """A JSON-able form for job messages."""
        return {"definition": self.definition.model_dump(mode="json"), "reference_source": self.reference_source,
                "revision": self.revision}

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> "ProblemSpec":
        """Inverse of :meth:`to_message`.

        Raises:
            pydantic.ValidationError: the definition is malformed.
        """
        return cls(ProblemDefinition.model_validate(message["definition"]), message["reference_source"],
                   message["revision"])


def load_reference_module(source: str, name: str, filename: Path | str) -> types.ModuleType:
    """Execute a reference's source as a module named ``kernelrank_reference_<name>``.

    Raises:
        ProblemError: the source does not compile or raises at import (the message names the
            exception), or the module lacks ``generate_input``, ``ref_kernel``, ``flops`` or ``bytes``.
    """
    module = types.ModuleType(f"kernelrank_reference_{name}")
    module.__file__ = str(filename)
    try:
        exec(compile(source, str(filename), "exec"), module.__dict__)  # noqa: S102 - trusted admin code
    except Exception as e:  # noqa: BLE001 - any failure of the reference is a broken problem
        raise ProblemError(f"reference for {name!r} failed to import: {type(e).__name__}: {e}") from e
    missing = [f for f in ("generate_input", "ref_kernel", "flops", "bytes") if not callable(getattr(module, f, None))]
    if missing:
        raise ProblemError(f"reference for {name!r} lacks {', '.join(missing)}")
    return module


def revision_hash(definition_path: Path, reference_dir: Path) -> str:
    """SHA-256 over the definition file and every file under the reference folder.

    Files are hashed in sorted order of their relative paths, each as its path and its bytes,
    so renaming a file changes the revision too. Caches (``__pycache__``, ``*.pyc``) and the
    folders in :data:`UNHASHED` are skipped.
    """
    h = hashlib.sha256()
    h.update(b"definition\0")
    h.update(definition_path.read_bytes())
    for path in sorted(reference_dir.rglob("*")):
        rel = path.relative_to(reference_dir)
        if not path.is_file() or "__pycache__" in rel.parts or path.suffix == ".pyc" or rel.parts[0] in UNHASHED:
            continue
        h.update(b"\0" + rel.as_posix().encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


def parse_definition(path: Path) -> ProblemDefinition:
    """Read and validate one ``problem.yaml``.

    Raises:
        ProblemError: unreadable YAML or a definition that fails validation (message names the field).
    """
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise ProblemError(f"{path}: cannot read YAML: {e}") from e
    if not isinstance(raw, dict):
        raise ProblemError(f"{path}: expected a mapping at top level")
    try:
        return ProblemDefinition.model_validate(raw)
    except ValueError as e:
        raise ProblemError(f"{path}: invalid problem definition:\n{e}") from e


def load_problem(name: str, problems_dir: Path | None = None, reference_dir: Path | None = None) -> Problem:
    """Load ``problems/<name>`` and ``reference_kernels/<name>``.

    Raises:
        ProblemError: unknown problem, a folder name that differs from the definition's ``name``,
            or a missing reference.
    """
    settings = get_settings()
    problems_dir = problems_dir or settings.problems_dir
    reference_dir = reference_dir or settings.reference_kernels_dir
    definition_path = problems_dir / name / DEFINITION_FILE
    if not definition_path.is_file():
        known = ", ".join(list_problem_names(problems_dir)) or "none"
        raise ProblemError(f"unknown problem {name!r} (known: {known})")
    definition = parse_definition(definition_path)
    if definition.name != name:
        raise ProblemError(f"{definition_path}: name {definition.name!r} differs from its folder {name!r}")
    ref = reference_dir / name
    if not (ref / REFERENCE_FILE).is_file():
        raise ProblemError(f"problem {name!r} has no {ref / REFERENCE_FILE}")
    return Problem(definition=definition, definition_path=definition_path, reference_dir=ref)


def list_problem_names(problems_dir: Path | None = None) -> list[str]:
    """Names of the folders under ``problems/`` that hold a ``problem.yaml``, sorted."""
    problems_dir = problems_dir or get_settings().problems_dir
    if not problems_dir.is_dir():
        return []
    # a dot folder is an import's set-aside copy (importers.batch), never a problem
    return sorted(p.name for p in problems_dir.iterdir() if not p.name.startswith(".") and (p / DEFINITION_FILE).is_file())


def load_all(problems_dir: Path | None = None, reference_dir: Path | None = None) -> list[Problem]:
    """Every problem found by listing ``problems/``."""
    return [load_problem(n, problems_dir, reference_dir) for n in list_problem_names(problems_dir)]
