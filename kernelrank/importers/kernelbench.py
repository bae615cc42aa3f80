"""``kernelrank problems import kernelbench FILE``: a KernelBench problem file.

KernelBench's format (github.com/ScalingIntelligence/KernelBench, ``KernelBench/level<N>/*.py``):
one file defining ``class Model(nn.Module)``, module-level size constants (``batch_size = 4096``),
``get_inputs()`` (the forward arguments, made with torch's global generator) and
``get_init_inputs()`` (``Model``'s constructor arguments). KernelBench seeds the global generator,
builds ``Model`` and the candidate ``ModelNew`` with the same seed (so equal weights), and compares
outputs with ``atol = rtol = 1e-2``.

The import makes each case a set of values for the size constants plus a ``seed``. The generated
reference runs ``get_inputs()`` under that seed on the run's device, and ``Model`` built under
:data:`INIT_SEED`. A submission defines ``custom_kernel(data)`` or, as in KernelBench, ``ModelNew``
(built with the case's init inputs under the same seed, then called on the inputs).
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any

from kernelrank.importers.common import (
    CASE_TIMING, CPU_INPUT_BYTES, FLOAT_DTYPES, MIN_SIZE_PARAM, TEST_INPUT_BYTES, ImportReport, ProblemImportError,
    ReferenceFailure, ScalingError, check_name, describe_error, fit_case, tensor_bytes, write_and_check,
)
from kernelrank.problems import Budgets

#: KernelBench's correctness tolerance (``atol=1e-02, rtol=1e-02`` in its ``eval.py``), used for
#: every float dtype: a problem file names none.
ATOL = RTOL = 1e-2
#: Seed of the global generator while ``Model`` and ``ModelNew`` are built: equal seeds give
#: equal weights when both create their parameters in the same order (KernelBench's convention).
INIT_SEED = 42
#: Seed of the one CUDA benchmark case (the source's sizes).
BENCH_SEED = 1000

_SHARED = '''
import torch

SOURCE = {source}
#: the module-level integer constants of the source: each case sets them
SIZE_NAMES = {sizes}
#: module-level statements computed from the size constants (``bias_shape = (out_channels, 1, 1)``):
#: re-run after the sizes are set, so they follow a scaled case
DERIVED = {derived}
INIT_SEED = {init_seed}

_NS = {{"__name__": "kernelbench_problem"}}
exec(compile(SOURCE, "<kernelbench {filename}>", "exec"), _NS)
_MODELS = {{}}


def _split(data):
    data = tuple(data)
    if data and isinstance(data[-1], dict) and "init_inputs" in data[-1]:
        return data[:-1], data[-1]
    return data, None


def _device(inputs):
    return next((x.device for x in inputs if isinstance(x, torch.Tensor)), torch.device("cpu"))


def _no_dropout(model):
    """Dropout layers in eval mode (the identity), the rest as built: a judge compares outputs, and
    random masks have none to compare; batch norms keep KernelBench's training-mode statistics."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.eval()
    return model


def _build(cls, init, device):
    key = (cls.__name__, repr(init), str(device))
    model = _MODELS.get(key)
    if model is None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(INIT_SEED)
            model = cls(*init)
        model = _no_dropout(model.to(device))
        _MODELS[key] = model
    return model
'''

_REFERENCE = '''"""Reference for ``{name}``, imported from the KernelBench problem file {source!r}
by ``kernelrank problems import kernelbench`` (generated: re-run the import rather than editing).

``data`` is the tuple of ``get_inputs()`` for the case's sizes, made under the case's seed on the
run's device{extra_note}. ``ref_kernel`` is ``Model(*get_init_inputs())`` built under seed
``INIT_SEED``, called on the inputs. Submissions define ``custom_kernel(data)`` or ``ModelNew``
(``SUBMISSION_ADAPTER``: built like ``Model``, under the same seed, with the same init inputs).
"""
{shared}

def _set_sizes(params):
    for k in SIZE_NAMES:
        if k in params:
            _NS[k] = params[k]
    for statement in DERIVED:
        exec(statement, _NS)


def generate_input(*, seed: int, device: str = "cpu", **params):
    """``get_inputs()`` with the size constants set from ``params``, under ``seed``, on ``device``."""
    _set_sizes(params)
    dev = torch.device(device)
    with torch.random.fork_rng(devices=[dev.index or 0] if dev.type == "cuda" else []):
        torch.manual_seed(seed)
        with dev:
            inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in _NS["get_inputs"]()]
    init = list(_NS["get_init_inputs"]())
    if dev.type == "meta":  # sizes only (the import's scaling): a model of no memory, not cached
        try:
            with dev:
                model = _NS["Model"](*init)
        except Exception:  # a constructor that reads values (.item()): built on the CPU
            model = _NS["Model"](*init)
    else:
        model = _build(_NS["Model"], init, dev)
    state = {{k: v.detach().clone() for k, v in model.state_dict().items()}}
    if init or state:
        return (*inputs, {{"init_inputs": init, "init_seed": INIT_SEED, "state": state}})
    return tuple(inputs)


def ref_kernel(data):
    """``Model(*init_inputs)`` (built under ``INIT_SEED``) on the inputs."""
    inputs, extra = _split(data)
    model = _build(_NS["Model"], list(extra["init_inputs"]) if extra else [], _device(inputs))
    with torch.no_grad():
        return model(*inputs)


def flops(case: dict) -> int:
    """Unknown for an imported KernelBench problem: 0 (no TFLOP/s shown)."""
    return 0


def bytes(case: dict) -> int:  # noqa: A001 - name fixed by the problem interface
    """Unknown for an imported KernelBench problem: 0 (no GB/s shown)."""
    return 0


SUBMISSION_ADAPTER = {adapter}
'''

#: Runs in the submission's process: a submission with ``ModelNew`` and no ``custom_kernel``.
_ADAPTER = '''
import torch

INIT_SEED = {init_seed}
_MODELS = {{}}


def adapt(module):
    cls = getattr(module, "ModelNew", None)
    if cls is None:
        return None

    def custom_kernel(data):
        data = tuple(data)
        extra = data[-1] if data and isinstance(data[-1], dict) and "init_inputs" in data[-1] else None
        inputs = data[:-1] if extra is not None else data
        init = list(extra["init_inputs"]) if extra is not None else []
        device = next((x.device for x in inputs if isinstance(x, torch.Tensor)), torch.device("cpu"))
        key = (repr(init), str(device))
        model = _MODELS.get(key)
        if model is None:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(INIT_SEED)
                model = cls(*init)
            model = model.to(device)
            for m in model.modules():  # as the reference: dropout is the identity
                if isinstance(m, torch.nn.modules.dropout._DropoutNd):
                    m.eval()
            _MODELS[key] = model
        with torch.no_grad():
            return model(*inputs)

    return custom_kernel
'''


def _constants(source: str, namespace: dict[str, Any]) -> tuple[dict[str, int], list[str]]:
    """``(sizes, derived)``: the module-level integer constants set from literals (``batch_size =
    4096``), in source order, with their values; and the source of each module-level assignment
    computed from them (``bias_shape = (out_channels, 1, 1)``, ``dim = hidden // heads``), in source
    order, to re-run when a case sets the sizes."""
    sizes: dict[str, int] = {}
    derived: list[str] = []
    depends: set[str] = set()
    for node in ast.parse(source).body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        used = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
        if used & (set(sizes) | depends):
            derived.append(ast.unparse(node))
            depends |= names
            for n in names:
                sizes.pop(n, None)
            continue
        for t in targets:
            v = namespace.get(getattr(t, "id", ""))
            if isinstance(t, ast.Name) and isinstance(v, int) and not isinstance(v, bool):
                sizes[t.id] = v
    return sizes, derived


def import_kernelbench(file: Path, name: str, *, cpu_input_bytes: int = CPU_INPUT_BYTES,
                       force: bool = False) -> ImportReport:
    """Import the KernelBench problem file ``file`` as problem ``name`` into the configured folders.

    Args:
        file: a Python file defining ``Model``, ``get_inputs`` and ``get_init_inputs``.
        name: the KernelRank problem name.
        cpu_input_bytes: input bytes a CPU benchmark case may hold; the source's sizes are scaled
            down to it (tests to :data:`~kernelrank.importers.common.TEST_INPUT_BYTES`).
        force: replace an existing problem of that name.

    Returns:
        The report: what was derived, assumed and written.

    Raises:
        ProblemImportError: an unreadable or incomplete file, an existing problem without
            ``force``, or a reference that fails on the CPU.
    """
    check_name(name)
    try:
        source = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ProblemImportError(f"cannot read {file}: {e}") from None
    try:
        return _import_source(file, source, name, cpu_input_bytes, force)
    except ScalingError:
        tied, notes = tie_literal_sizes(source)
        if not notes:
            raise
    # a literal size equal to a size constant (``input_shape = (32768,)`` beside ``batch_size =
    # 32768``) that the model needs equal to it: read as that constant, it scales with it
    report = _import_source(file, tied, name, cpu_input_bytes, force)
    report.assumed.append("scaling broke the source's literal sizes equal to its constants; read as those constants: "
                          + "; ".join(notes))
    return report


def tie_literal_sizes(source: str) -> tuple[str, list[str]]:
    """``source`` with each integer literal in a module-level tuple or list assignment that equals
    exactly one earlier module-level size constant's value (:data:`MIN_SIZE_PARAM` or more)
    replaced by that constant's name, and a note per statement rewritten (``"input_shape =
    (32768,) as input_shape = (batch_size,)"``); ``(source, [])`` when there is none."""
    tree = ast.parse(source)
    sizes: dict[int, list[str]] = {}
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    notes: list[str] = []
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            continue
        value = node.value
        if isinstance(value, ast.Constant) and type(value.value) is int and value.value >= MIN_SIZE_PARAM:
            sizes.setdefault(value.value, []).append(node.targets[0].id)
            continue
        if not isinstance(value, (ast.Tuple, ast.List)):
            continue
        changed = False
        for i, element in enumerate(value.elts):
            if isinstance(element, ast.Constant) and type(element.value) is int and len(sizes.get(element.value, [])) == 1:
                value.elts[i] = ast.Name(id=sizes[element.value][0], ctx=ast.Load())
                changed = True
        if changed:
            before = "".join(lines[node.lineno - 1:node.end_lineno]).strip()
            edits.append((node.lineno - 1, node.end_lineno or node.lineno, ast.unparse(node) + "\n"))
            notes.append(f"{before} as {ast.unparse(node)}")
    for start, end, text in reversed(edits):
        lines[start:end] = [text]
    return "".join(lines), notes


def _import_source(file: Path, source: str, name: str, cpu_input_bytes: int, force: bool) -> ImportReport:
    """:func:`import_kernelbench` of ``source`` (the text of ``file``, or that text with tied sizes).

    Raises:
        ProblemImportError: as :func:`import_kernelbench`.
    """
    namespace: dict[str, Any] = {"__name__": "kernelbench_problem"}
    try:
        exec(compile(source, str(file), "exec"), namespace)  # noqa: S102 - the admin's chosen source
    except ImportError as e:
        raise ProblemImportError(f"{file}: needs the package {e.name or str(e)!r}, not installed where the import "
                                 "runs (install it, then import again)") from None
    except Exception as e:  # noqa: BLE001 - the source failing is the report
        raise ProblemImportError(f"{file}: does not run: {describe_error(e)}") from None
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in namespace]
    if missing:
        raise ProblemImportError(f"{file}: not a KernelBench problem file: no {', '.join(missing)}")
    sizes, derived = _constants(source, namespace)
    clash = {"seed", "device"} & set(sizes)
    if clash:
        raise ProblemImportError(f"{file}: constants named {sorted(clash)} clash with KernelRank's case keys")
    report = ImportReport(name, f"KernelBench file {file.resolve()}")
    report.derived.append("case parameters (the file's integer constants): "
                          + (", ".join(f"{k}={v}" for k, v in sizes.items()) or "none"))
    report.derived.append(f"sizes scaled for CPU and test cases: those >= {MIN_SIZE_PARAM} "
                          f"({', '.join(k for k, v in sizes.items() if v >= MIN_SIZE_PARAM) or 'none'})")

    if derived:
        report.derived.append("recomputed from the sizes in every case: " + "; ".join(derived))
    shared = _SHARED.format(source=repr(source), sizes=repr(tuple(sizes)), derived=repr(tuple(derived)),
                            init_seed=INIT_SEED, filename=file.name)
    import torch

    try:
        try:
            with torch.device("meta"):  # parameter names only: no memory for the source's full-size weights
                model = namespace["Model"](*namespace["get_init_inputs"]())
        except Exception:  # noqa: BLE001 - a constructor that reads values (.item()) needs real tensors
            model = namespace["Model"](*namespace["get_init_inputs"]())
    except Exception as e:  # noqa: BLE001 - the source failing is the report
        raise ProblemImportError(f"{file}: Model(*get_init_inputs()) fails: {describe_error(e)}") from None
    has_state = bool(list(model.state_dict()))
    has_init = bool(list(namespace["get_init_inputs"]()))
    extra_note = (", followed by a dict ``{'init_inputs': [...], 'init_seed': INIT_SEED, 'state': {name: tensor}}`` "
                  "(Model's constructor arguments and weights)") if (has_state or has_init) else ""
    reference = _REFERENCE.format(name=name, source=str(file.resolve()), shared=shared, extra_note=extra_note,
                                  adapter=repr(_ADAPTER.format(init_seed=INIT_SEED)))

    from kernelrank.problems import load_reference_module

    ref = load_reference_module(reference, name, f"<import {name}>")

    def input_bytes(params: dict[str, Any]) -> int:
        return tensor_bytes(ref.generate_input(device="meta", **params))

    base = dict(sizes, seed=BENCH_SEED)
    try:
        source_bytes = input_bytes(base)
    except Exception as e:  # noqa: BLE001 - the source failing is the report
        raise ProblemImportError(f"{file}: get_inputs() fails at the source's sizes: {describe_error(e)}") from None
    cpu_case, cpu_bytes, tests = _fit(sizes, input_bytes, cpu_input_bytes, None)
    report.derived.append(f"benchmarks: cuda 1 case at the source's sizes ({source_bytes / 2**20:.1f} MiB of inputs); "
                          f"cpu 1 case scaled to {cpu_bytes / 2**20:.2f} MiB (budget {cpu_input_bytes / 2**20:g} MiB): "
                          + ", ".join(f"{k}={cpu_case[k]}" for k in sizes))
    report.derived.append(f"tests: {len(tests)} cases scaled to at most {TEST_INPUT_BYTES / 2**20:g} MiB of inputs "
                          "(two shapes, seeds 1 and 2), run on both devices")
    report.derived.append("data: " + ("inputs then a dict of init inputs, init seed and Model's weights"
                                      if extra_note else "the tuple of get_inputs()"))
    report.assumed.append(f"tolerance atol={ATOL:g} rtol={RTOL:g} for every float dtype (KernelBench's eval default)")
    report.assumed.append(f"Model and ModelNew built under seed {INIT_SEED} (torch.manual_seed), as KernelBench does")
    report.assumed.append(f"timing per benchmark case: {CASE_TIMING} (seconds, as the built-in problems)")
    report.assumed.append("flops and bytes unknown: no TFLOP/s or GB/s are shown")

    doc = inspect.cleandoc(namespace["Model"].__doc__ or "")
    description = (f"{doc}\n\n*Imported from the KernelBench problem `{file.name}`.* "
                   "A submission defines `custom_kernel(data)`, or `ModelNew` (an `nn.Module` built with "
                   "`get_init_inputs()` under the same seed as `Model`, called on the inputs), as in KernelBench.\n\n"
                   f"```python\n{source.strip()}\n```\n")
    budgets = Budgets()
    definition = {
        "name": name,
        "title": f"KernelBench {file.stem}",
        "description": description,
        "contract": {"data": [{"name": "inputs", "dtype": "see get_inputs()",
                               "description": "get_inputs() for the case's sizes" + (" + init/weights dict" if extra_note else ""),
                               }],
                     "output": {"name": "out", "dtype": "as Model.forward", "description": "Model.forward(*inputs)"},
                     "notes": f"Case keys set the file's constants: {', '.join(sizes) or 'none'}."},
        "tolerances": {d: {"atol": ATOL, "rtol": RTOL} for d in FLOAT_DTYPES},
        "tests": tests,
        "benchmarks": {"cpu": [cpu_case], "cuda": [base]},
        "budgets": budgets.model_dump(),
        "timing": CASE_TIMING,
    }
    # the source with Model renamed ModelNew: a correct starting point in KernelBench's convention
    template = re.sub(r"\bModel\b", "ModelNew", source)
    files = {"templates/modelnew.py": template}
    try:
        write_and_check(report, definition, reference, files, force, None)
    except ReferenceFailure as e:
        if {k: v for k, v in tests[0].items() if k != "seed"} == sizes:
            raise
        # sizes equal by coincidence (LayerNorm(out_channels) over the last dim, a model's fixed
        # image size): scale the batch only
        batch = next((k for k in sizes if "batch" in k), next(iter(sizes)))
        try:
            cpu_case, cpu_bytes, tests = _fit(sizes, input_bytes, cpu_input_bytes, batch)
        except Exception:  # noqa: BLE001 - no batch-only case: the first failure is the report
            raise e from None
        definition["tests"], definition["benchmarks"]["cpu"] = tests, [cpu_case]
        report.written.clear()
        try:
            write_and_check(report, definition, reference, files, force, None)
        except ReferenceFailure:
            if not _runs_on_meta(ref, sizes):
                raise e from None
            raise ScalingError(f"scaling breaks the reference: it runs at the source's sizes (checked on the meta "
                               f"device) but fails at the scaled test sizes, all scaled and the batch alone "
                               f"({batch}={tests[0][batch]}): {describe_error(e.cause)}") from None
        report.assumed.append(f"scaling all sizes broke the reference ({describe_error(e.cause)}): CPU and test cases "
                              f"scale {batch} alone (cpu {batch}={cpu_case[batch]}, {cpu_bytes / 2**20:.2f} MiB)")
    return report


def _fit(sizes: dict[str, int], input_bytes: Any, cpu_budget: int,
         alone: str | None) -> tuple[dict[str, Any], int, list[dict[str, Any]]]:
    """``(cpu case, its input bytes, tests)``: the source's sizes scaled to ``cpu_budget`` (tests
    to :data:`TEST_INPUT_BYTES` and a sixteenth of it, seeds 1 and 2); all sizes of
    :data:`MIN_SIZE_PARAM` or more by one factor, or (``alone``) that size only, halved down to 1.

    Raises:
        ScalingError: no scaled copy of the case runs (all sizes scaled).
        Exception: what ``input_bytes`` raises (``alone``).
    """
    def fit(seed: int, budget: int) -> tuple[dict[str, Any], int]:
        if alone is None:
            return fit_case(dict(sizes, seed=seed), input_bytes, budget)
        b = sizes[alone]
        while True:  # halved until the inputs fit, down to 1
            case = dict(sizes, seed=seed)
            case[alone] = b
            n = input_bytes(case)
            if n <= budget or b == 1:
                return case, n
            b = max(1, b // 2)

    cpu_case, cpu_bytes = fit(BENCH_SEED, cpu_budget)
    test1, _ = fit(1, TEST_INPUT_BYTES)
    test2, _ = fit(2, TEST_INPUT_BYTES // 16)
    same = {k: v for k, v in test1.items() if k != "seed"} == {k: v for k, v in test2.items() if k != "seed"}
    return cpu_case, cpu_bytes, [test1, dict(test1, seed=2) if same else test2]


def _runs_on_meta(ref: Any, sizes: dict[str, int]) -> bool:
    """Whether the source's ``Model`` runs on its inputs at ``sizes`` on the meta device (shapes
    only: no memory, no arithmetic), to tell a failure of scaling from one of the source."""
    import torch

    try:
        ref._set_sizes(sizes)
        ns = ref._NS
        with torch.device("meta"), torch.no_grad():
            ns["Model"](*ns["get_init_inputs"]())(*ns["get_inputs"]())
        return True
    except Exception:  # noqa: BLE001 - any failure: not known to run
        return False
