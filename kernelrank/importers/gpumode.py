"""``kernelrank problems import gpumode DIR``: a GPU MODE reference-kernels problem folder.

GPU MODE's format (github.com/gpu-mode/reference-kernels, ``problems/<set>/<name>/``): ``task.yml``
(the files the runner assembles beside the submission — ``task.py``, ``utils.py``,
``reference.py``, often from the parent folder —, a description, ``tests`` and ``benchmarks`` as
lists of ``generate_input`` keyword arguments with a ``seed``, timeouts in seconds, templates),
``reference.py`` (``generate_input``, ``ref_kernel``, ``check_implementation``, usually
``make_match_reference(ref_kernel, rtol=..., atol=...)`` from ``utils.py``) and ``solutions/correct``
and ``solutions/wrong``. Submissions do ``from task import input_t, output_t``.

The import keeps those files' text, with hard-coded CUDA devices reading the run's device, inside
a generated ``reference.py``, which also ships them to the submission's process as importable
modules (``SUBMISSION_MODULES``), so GPU MODE submissions run unchanged.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import yaml

from kernelrank.importers.common import (
    CASE_TIMING, COARSE_GRANULARITY, CPU_INPUT_BYTES, FLOAT_DTYPES, MAX_GRANULARITY, TEST_INPUT_BYTES, ImportReport,
    ProblemImportError, ScalingError, check_name,
    cpu_unsupported, describe_error, fit_case, fit_cases, make_cuda_only, memoized, refuse_non_tensor,
    rewrite_devices, tensor_bytes, write_and_check,
)
from kernelrank.importers.buffers import find_buffers, named_buffers
from kernelrank.problems import Budgets

#: GPU MODE's own defaults for ``match_reference`` (``problems/pmpp/utils.py``), used when neither
#: the reference nor its ``utils.py`` names a tolerance.
DEFAULT_RTOL, DEFAULT_ATOL = 1e-5, 1e-8
#: Files of a task that are GPU MODE's runner, not the problem: never shipped.
_RUNNER_FILES = ("submission.py", "eval.py")

_REFERENCE = '''"""Reference for ``{name}``, imported from the GPU MODE problem folder {source!r}
by ``kernelrank problems import gpumode`` (generated: re-run the import rather than editing).

The source's files are kept below as text ({files}), with every hard-coded CUDA device reading
the run's device (``_kernelrank_device``, {rewrites} places). They are executed as modules of
their own names while this file loads, and the same text is shipped to the submission's process
(``SUBMISSION_MODULES``), so a submission's ``from task import input_t`` works as in GPU MODE.
Outputs are judged as ``problem.yaml``'s ``check`` says: {check_note}.
"""

import sys
import types

SOURCES = {sources}


def _load() -> dict:
    saved = {{n: sys.modules.get(n) for n in SOURCES}}
    modules = {{}}
    try:
        for n, text in SOURCES.items():
            m = types.ModuleType(n)
            m.__file__ = f"<gpumode {{n}}.py>"
            sys.modules[n] = m
            exec(compile(text, m.__file__, "exec"), m.__dict__)
            modules[n] = m
    finally:
        for n, old in saved.items():
            if old is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = old
    return modules


_MODULES = _load()
SUBMISSION_MODULES = dict(SOURCES)


def generate_input(*, seed: int, device: str = "cpu", **params):
    """The source's ``generate_input(**params, seed=seed)`` with its CUDA device set to ``device``."""
    for m in _MODULES.values():
        if hasattr(m, "_kernelrank_device"):
            m._kernelrank_device = device
    return _MODULES["reference"].generate_input(seed=seed, **params)


def ref_kernel(data):
    """The source's ``ref_kernel``."""
    return _MODULES["reference"].ref_kernel(data)


def check_implementation(data, output):
    """The source's ``check_implementation(data, output) -> (passed, message)``, which the judge
    calls in its own process where ``problem.yaml``'s ``check`` is ``source``."""
    return _MODULES["reference"].check_implementation(data, output)


def flops(case: dict) -> int:
    """Unknown for an imported GPU MODE problem: 0 (no TFLOP/s shown)."""
    return 0


def bytes(case: dict) -> int:  # noqa: A001 - name fixed by the problem interface
    """Unknown for an imported GPU MODE problem: 0 (no GB/s shown)."""
    return 0
'''


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ProblemImportError(f"cannot read {path}: {e}") from None


def _task_files(folder: Path, task: dict[str, Any]) -> dict[str, Path]:
    """Module name -> path of each Python file the task ships beside the submission (``task.py``,
    ``utils.py``, ``reference.py``...), in the order of ``files``; the runner's own files excluded."""
    files: dict[str, Path] = {}
    for entry in task.get("files") or []:
        if not isinstance(entry, dict) or not str(entry.get("name", "")).endswith(".py"):
            continue
        if entry["name"] in _RUNNER_FILES or str(entry.get("source", "")).startswith("@"):
            continue
        files[entry["name"][:-3]] = (folder / str(entry["source"])).resolve()
    for default in ("task", "utils", "reference"):
        if default not in files:
            for candidate in (folder / f"{default}.py", folder.parent / f"{default}.py"):
                if candidate.is_file():
                    files[default] = candidate.resolve()
                    break
    if "reference" not in files:
        raise ProblemImportError(f"{folder}: no reference.py (task.yml files or beside task.yml)")
    # the reference imports the others: it runs last
    files["reference"] = files.pop("reference")
    return files


def _float_kwargs(call: ast.Call) -> dict[str, float]:
    out = {}
    for kw in call.keywords:
        if kw.arg in ("rtol", "atol"):
            try:
                out[kw.arg] = float(ast.literal_eval(kw.value))
            except (ValueError, TypeError):
                pass
    return out


def _check_rule(reference: str) -> tuple[str, str]:
    """``(check, what the report assumes)``: ``source`` where the reference defines its own
    ``check_implementation`` function (a residual check, a tolerance that scales with the size),
    run by the judge in its own process as the reference is; else ``promote``, GPU MODE's
    ``make_match_reference`` and ``verbose_allclose`` (values within the tolerance once the output
    and the reference are promoted to a common dtype: a float32 output against a float64 one)."""
    for node in ast.parse(reference).body:
        if isinstance(node, ast.FunctionDef) and node.name == "check_implementation":
            return "source", ("outputs are judged by the source's own check_implementation(data, output), run in the "
                              "judge's process as the reference is (problem code, trusted; never in the submission's "
                              "process); the tolerances below are not used")
    return "promote", ("outputs are judged as GPU MODE's verbose_allclose judges them: within the tolerance below "
                       "once output and reference are promoted to a common dtype (a float32 output against a float64 "
                       "reference passes)")


def _tolerance(reference: str, utils: str | None) -> tuple[float, float, str]:
    """``(rtol, atol, where from)`` from ``make_match_reference(..., rtol=, atol=)`` in the
    reference, else the defaults of ``utils.match_reference``, else GPU MODE's."""
    tree = ast.parse(reference)
    found: dict[str, float] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "make_match_reference":
            found = _float_kwargs(node)
    defaults = {"rtol": DEFAULT_RTOL, "atol": DEFAULT_ATOL}
    origin = "GPU MODE's match_reference defaults"
    if utils:
        for node in ast.walk(ast.parse(utils)):
            if isinstance(node, ast.FunctionDef) and node.name == "match_reference":
                args = node.args.args[-len(node.args.defaults):] if node.args.defaults else []
                for a, d in zip(args, node.args.defaults):
                    if a.arg in defaults:
                        try:
                            defaults[a.arg] = float(ast.literal_eval(d))
                            origin = "utils.py match_reference defaults"
                        except (ValueError, TypeError):
                            pass
    if found:
        origin = "reference.py make_match_reference(" + ", ".join(f"{k}={v:g}" for k, v in found.items()) + ")"
    return found.get("rtol", defaults["rtol"]), found.get("atol", defaults["atol"]), origin


def _type_alias(task: str | None, name: str) -> str:
    """The bound of ``name = TypeVar(..., bound=X)`` (or the right side of ``name = X``) in task.py."""
    if not task:
        return "see the description"
    for node in ast.parse(task).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            v = node.value
            if isinstance(v, ast.Call) and getattr(v.func, "id", "") == "TypeVar":
                for kw in v.keywords:
                    if kw.arg == "bound":
                        return ast.unparse(kw.value)
            return ast.unparse(v)
    return "see the description"


def _title(task_yml: str, folder: Path) -> str:
    for line in task_yml.splitlines()[:5]:
        if line.startswith("# name:"):
            return line.split(":", 1)[1].strip()
    return folder.name


def import_gpumode(folder: Path, name: str, *, cpu_input_bytes: int = CPU_INPUT_BYTES, force: bool = False) -> ImportReport:
    """Import the GPU MODE problem folder ``folder`` as problem ``name`` into the configured folders.

    Args:
        folder: the folder holding ``task.yml`` (files it names by relative path, e.g. ``../utils.py``,
            are read from there).
        name: the KernelRank problem name.
        cpu_input_bytes: input bytes a CPU benchmark case may hold; the source's cases are scaled
            down to it.
        force: replace an existing problem of that name.

    Returns:
        The report: what was derived, assumed and written.

    Raises:
        ProblemImportError: a missing or malformed file, an existing problem without ``force``, or
            a reference that fails on the CPU.
    """
    check_name(name)
    folder = folder.resolve()
    task_path = folder / "task.yml"
    if not task_path.is_file():
        raise ProblemImportError(f"{folder}: no task.yml (a GPU MODE problem folder has one)")
    task_yml = _read(task_path)
    try:
        task = yaml.safe_load(task_yml)
    except yaml.YAMLError as e:
        raise ProblemImportError(f"{task_path}: not valid YAML: {e}") from None
    if not isinstance(task, dict) or not task.get("tests") or not task.get("benchmarks"):
        raise ProblemImportError(f"{task_path}: needs non-empty 'tests' and 'benchmarks' lists")
    report = ImportReport(name, f"GPU MODE folder {folder}")

    paths = _task_files(folder, task)
    originals = {n: _read(p) for n, p in paths.items()}
    sources, rewrites = {}, 0
    for n, text in originals.items():
        sources[n], count = rewrite_devices(text, str(paths[n]))
        rewrites += count
    report.derived.append("modules shipped to submissions: " + ", ".join(f"{n} ({paths[n]})" for n in sources))
    report.derived.append(f"hard-coded CUDA devices made the run's device: {rewrites} places")

    rtol, atol, origin = _tolerance(originals["reference"], originals.get("utils"))
    report.derived.append(f"tolerance rtol={rtol:g} atol={atol:g} for every float dtype, from {origin}")
    check, check_note = _check_rule(originals["reference"])
    report.assumed.append(check_note)

    if not any(isinstance(n, ast.FunctionDef) and n.name == "generate_input" for n in ast.parse(originals["reference"]).body):
        raise ProblemImportError(f"{paths['reference']}: no generate_input function (GPU MODE's interface is "
                                 "generate_input(**case) and ref_kernel(data))")
    tests = [dict(c) for c in task["tests"]]
    cuda = [dict(c) for c in task["benchmarks"]]
    if any(not isinstance(c, dict) or "seed" not in c for c in tests + cuda):
        raise ProblemImportError(f"{task_path}: every test and benchmark needs a seed")

    _refuse_unsupplied_arguments(originals["reference"], tests + cuda, task_path)
    reference = _REFERENCE.format(name=name, source=str(folder), files=", ".join(f"{n}.py" for n in sources),
                                  rewrites=rewrites, sources="{\n" + "".join(f"    {n!r}: {t!r},\n" for n, t in sources.items()) + "}",
                                  check_note=check if check == "source" else f"{check}, rtol={rtol:g}, atol={atol:g}")
    cpu, tests_fit, check_case, buffers = _cpu_cases(report, reference, tests, cuda, cpu_input_bytes,
                                                     named_buffers(originals["reference"]))

    budgets = Budgets()
    timeouts = {"test": task.get("test_timeout"), "benchmark": task.get("benchmark_timeout"),
                "leaderboard": task.get("ranked_timeout")}
    budget = {m: max(float(v or 0), budgets.for_mode(m)) for m, v in timeouts.items()}
    report.derived.append("time budgets (s): " + ", ".join(f"{m} {v:g}" for m, v in budget.items())
                          + " (the source's timeouts, at least KernelRank's defaults)")
    report.assumed.append(f"timing per benchmark case: {CASE_TIMING} (seconds, as the built-in problems)")
    report.assumed.append("flops and bytes unknown: no TFLOP/s or GB/s are shown")

    input_t, output_t = _type_alias(originals.get("task"), "input_t"), _type_alias(originals.get("task"), "output_t")
    description = (str(task.get("description") or "").strip()
                   + f"\n\n*Imported from the GPU MODE problem `{folder.name}`.* Submissions define "
                     "`custom_kernel(data: input_t) -> output_t` and may `from task import input_t, output_t` "
                     "(and import `utils` and `reference`) as in GPU MODE.\n")
    definition = {
        "name": name,
        "title": _title(task_yml, folder),
        "description": description,
        "contract": {"data": [{"name": "data", "dtype": "see description", "description": f"input_t = {input_t}"}],
                     "output": {"name": "output", "dtype": "see description", "description": f"output_t = {output_t}"},
                     "notes": "Tensors are on the run's device (GPU MODE's sources create them on CUDA)."},
        "tolerances": {d: {"atol": atol, "rtol": rtol} for d in FLOAT_DTYPES},
        "tests": tests_fit,
        "benchmarks": {"cpu": cpu, "cuda": cuda},
        "budgets": {"compile": budgets.compile, **budget, "profile": budgets.profile},
        "timing": CASE_TIMING,
        "check": check,
        "output_buffers": buffers,
    }
    if report.cuda_only:
        make_cuda_only(report, definition, report.cuda_only)
    files = _solutions(folder, task, report)
    write_and_check(report, definition, reference, files, force, check_case)
    return report


def _first_check(ref_module: Any, test: dict[str, Any], input_bytes: Any) -> tuple[dict[str, Any], int]:
    """``(case, granularity)``: the first test scaled to :data:`TEST_INPUT_BYTES`, on which the
    reference runs on the CPU and returns a tensor; sizes keep multiples of 16, else of 256 when
    the reference fails at the finer ones. Run before the other cases are sized, so that a
    reference KernelRank cannot check is refused at once.

    Raises:
        ScalingError: the reference fails at both scalings of a case it was given scaled.
        ProblemImportError: its output is not a tensor.
        Exception: what the reference raised on the source's own, unscaled case.
    """
    first: Exception | None = None
    for granularity in (MAX_GRANULARITY, COARSE_GRANULARITY):
        check, _ = fit_case(test, input_bytes, TEST_INPUT_BYTES, granularity)
        try:
            out = ref_module.ref_kernel(ref_module.generate_input(device="cpu", **check))
        except Exception as e:  # noqa: BLE001 - judged below
            if cpu_unsupported(e) or check == test:
                raise
            first = first or e
            continue
        refuse_non_tensor(out)
        return check, granularity
    raise ScalingError(f"scaling breaks the reference: the test case {test} scaled to "
                       f"{TEST_INPUT_BYTES // 2**20} MiB of inputs ({check}) fails: {describe_error(first)}; "
                       "the source's own sizes were not run on the CPU")


def _refuse_unsupplied_arguments(reference: str, cases: list[dict[str, Any]], task_path: Path) -> None:
    """Refuse a ``generate_input`` with parameters no case supplies (GPU MODE's distributed
    problems take a ``rank``: one process per GPU, which KernelRank does not run)."""
    for node in ast.parse(reference).body:
        if isinstance(node, ast.FunctionDef) and node.name == "generate_input":
            args = node.args.posonlyargs + node.args.args
            required = [a.arg for a in args[:len(args) - len(node.args.defaults)]]
            required += [a.arg for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is None]
            missing = sorted({a for a in required for c in cases if a not in c})
            if missing:
                kind = " (a distributed problem: one process per GPU, which KernelRank does not run)" \
                    if {"rank", "world_size"} & set(missing) else ""
                raise ProblemImportError(f"{task_path}: generate_input needs {', '.join(missing)}, which the "
                                         f"cases do not give{kind}")


def _cpu_cases(report: ImportReport, reference: str, tests: list[dict[str, Any]], cuda: list[dict[str, Any]],
               budget: int, named: dict[int, str]
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any] | None, list[str]]:
    """``(cpu benchmarks, tests, the case the CPU check runs, output buffers)``: the source's cases
    scaled to ``budget`` (the check's to :data:`TEST_INPUT_BYTES`, so a heavy reference stays
    quick), and the inputs that are output buffers, found on the check's case
    (:func:`~kernelrank.importers.buffers.find_buffers`). A source that cannot run on the CPU for
    want of a GPU or a package sets ``report.cuda_only``, keeps its tests as they are, and takes
    as output buffers the inputs its ``ref_kernel`` names so (``named``), unconfirmed.

    Raises:
        ProblemImportError: the reference fails on the CPU for another reason, or scaling fails.
    """
    from kernelrank.problems import load_reference_module

    try:
        ref_module = load_reference_module(reference, report.name, f"<import {report.name}>")

        @memoized
        def input_bytes(params: dict[str, Any]) -> int:
            return tensor_bytes(ref_module.generate_input(device="cpu", **params))

        check, granularity = _first_check(ref_module, tests[0], input_bytes)
        buffers = find_buffers(ref_module, check, named)
        cpu, scaled_n = fit_cases(cuda, input_bytes, budget, granularity)
        tests_fit, tests_scaled = fit_cases(tests, input_bytes, budget, granularity)
    except ProblemImportError:
        raise
    except Exception as e:  # noqa: BLE001 - the source's code failing is the report
        report.cuda_only = cpu_unsupported(e)
        if report.cuda_only is None:
            raise ProblemImportError(f"the source's reference fails on the CPU: {describe_error(e)}") from None
        report.derived.append(f"benchmarks: cuda {len(cuda)} as the source has them; cpu none")
        report.derived.append(f"tests: {len(tests)} from the source, unscaled (they run on CUDA only)")
        buffers = [str(i) for i in sorted(named)]
        if buffers:
            report.assumed.append("output buffers (not confirmed: the reference does not run here): "
                                  + ", ".join(f"data[{i}] ({named[i]})" for i in sorted(named)))
        return [], tests, None, buffers
    report.derived.append(f"benchmarks: cuda {len(cuda)} as the source has them; cpu {len(cpu)} "
                          f"({scaled_n} scaled down to at most {budget / 2**20:g} MiB of inputs, duplicates dropped)")
    if tests_scaled:
        report.derived.append(f"tests: {tests_scaled} of {len(tests)} scaled down to the CPU input budget "
                              "(they run on both devices)")
    report.derived.append(f"tests: {len(tests_fit)} from the source")
    if buffers:
        report.assumed.append("output buffers (destination-passing): " + ", ".join(f"data[{p.replace('.', '][')}]" for p in buffers)
                              + "; the reference's output does not depend on what they hold. The judge gives each "
                              "call fresh ones filled with 0xFF bytes (NaN), reads what the call wrote into them, and "
                              "still fails an output that shares memory with any other input")
    return cpu, tests_fit, check, buffers


def _solutions(folder: Path, task: dict[str, Any], report: ImportReport) -> dict[str, str]:
    """``examples/correct_*.py`` and ``examples/wrong_*.py`` from ``solutions/``; the folder's
    ``submission.py`` and the task's templates as ``templates/<name>.py``."""
    files: dict[str, str] = {}
    for kind in ("correct", "wrong"):
        for p in sorted((folder / "solutions" / kind).glob("*.py")):
            files[f"examples/{kind}_{p.stem.replace('-', '_')}.py"] = _read(p)
    if (folder / "submission.py").is_file():  # GPU MODE's starting point: a template, not known to be correct
        files["templates/submission.py"] = _read(folder / "submission.py")
    for lang, rel in (task.get("templates") or {}).items():
        p = (folder / str(rel)).resolve()
        if p.is_file() and p.suffix == ".py":
            files[f"templates/{str(lang).lower()}.py"] = _read(p)
    report.derived.append(f"examples and templates: {', '.join(sorted(files)) or 'none'}")
    return files
