"""A whole checkout in one call: every GPU MODE problem folder or KernelBench file under a folder.

``kernelrank problems import gpumode REPO/problems`` and ``... kernelbench KernelBench/level1`` call
:func:`import_tree`. Each problem is imported on its own (:func:`~kernelrank.importers.import_gpumode`,
:func:`~kernelrank.importers.import_kernelbench`); its outcome is one :class:`BatchRow`: imported
for CPU and CUDA, imported for CUDA only (the reason), or refused (the reason). No source's failure
stops the others or ends in a traceback.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kernelrank.importers.common import (
    CPU_INPUT_BYTES, NAME_MAX, ImportReport, ProblemImportError, describe_error, remove_problem, target_dirs,
)
from kernelrank.importers.gpumode import import_gpumode
from kernelrank.importers.kernelbench import import_kernelbench

#: Each kind's default name prefix: GPU MODE's and KernelBench's names overlap (``softmax``...).
DEFAULT_PREFIX = {"gpumode": "gm_", "kernelbench": "kb_"}
IMPORTED, CUDA_ONLY, REFUSED = "imported", "cuda-only", "refused"


@dataclass(frozen=True)
class BatchRow:
    """One source's outcome: ``outcome`` is :data:`IMPORTED` (CPU and CUDA), :data:`CUDA_ONLY` or
    :data:`REFUSED`; ``reason`` says why for the last two."""

    source: str
    name: str
    outcome: str
    reason: str = ""


def find_sources(kind: str, root: Path) -> list[Path]:
    """The problems under ``root``, sorted: for ``gpumode`` every folder holding a ``task.yml``
    (``root`` itself when it holds one), for ``kernelbench`` every ``*.py`` file but ``__init__.py``
    (``root`` itself when it is a file).

    Raises:
        ProblemImportError: ``root`` does not exist or holds no problem, or ``kind`` is unknown.
    """
    if not root.exists():
        raise ProblemImportError(f"{root}: no such file or folder")
    if kind == "gpumode":
        found = [root] if (root / "task.yml").is_file() else sorted(p.parent for p in root.rglob("task.yml"))
        what = "task.yml (a GPU MODE problem folder has one)"
    elif kind == "kernelbench":
        found = [root] if root.is_file() else sorted(p for p in root.rglob("*.py") if p.name != "__init__.py")
        what = "Python file (a KernelBench problem is one)"
    else:
        raise ProblemImportError(f"unknown source kind {kind!r}: gpumode or kernelbench")
    if not found:
        raise ProblemImportError(f"{root}: no {what} in it or under it")
    return found


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def derive_names(kind: str, root: Path, sources: list[Path], prefix: str | None = None) -> list[str]:
    """A problem name per source, from its path: ``prefix`` (default :data:`DEFAULT_PREFIX`) then,
    for GPU MODE, the folders below the checkout's ``problems`` folder (else below ``root``), so a
    problem has one name whether a set or the whole checkout is imported (``pmpp_v2/sort_py`` ->
    ``gm_pmpp_v2_sort_py``: the set's name keeps ``pmpp`` and ``pmpp_v2`` apart), for KernelBench the level and the file's name
    (``level1/23_Softmax.py`` -> ``kb_l1_23_softmax``). Names are lowercase, at most
    :data:`~kernelrank.importers.common.NAME_MAX` characters and unique (``_2``, ``_3``... when
    shortening made two alike).

    Raises:
        ProblemImportError: the prefix makes names that are not valid problem names.
    """
    prefix = DEFAULT_PREFIX[kind] if prefix is None else prefix
    if prefix and not re.fullmatch(r"[a-z][a-z0-9_]*", prefix):
        raise ProblemImportError(f"--prefix {prefix!r}: lowercase letters, digits and _, starting with a letter")
    names: list[str] = []
    for src in sources:
        if kind == "gpumode":
            base = next((a for a in src.parents if a.name == "problems"), root if src != root else src.parent)
            stem = "_".join(_slug(p) for p in src.relative_to(base).parts)
        else:
            level = next((m.group(1) for p in reversed(src.parts[:-1]) if (m := re.fullmatch(r"level(\d+)", p))), None)
            stem = (f"l{level}_" if level else "") + _slug(src.stem)
        name = prefix + stem
        if not re.match(r"[a-z]", name):
            name = "p" + name
        name = name[:NAME_MAX].rstrip("_")
        base, n = name, 2
        while name in names:
            suffix = f"_{n}"
            name, n = base[:NAME_MAX - len(suffix)] + suffix, n + 1
        names.append(name)
    return names


def import_one(kind: str, source: Path, name: str, *, cpu_input_bytes: int = CPU_INPUT_BYTES,
               force: bool = False) -> tuple[BatchRow, ImportReport | None]:
    """Import one source, never raising for the source's sake: the row says what happened, with
    the import's report when it succeeded. A refusal leaves no folder behind that it created."""
    fn = import_gpumode if kind == "gpumode" else import_kernelbench
    existed = any(d.exists() for d in target_dirs(name))
    # with --force the problem of that name is set aside, not deleted, until the new one is in
    kept = _set_aside(name) if existed and force else []
    try:
        report = fn(source, name, cpu_input_bytes=cpu_input_bytes, force=force)
    except ProblemImportError as e:
        reason = str(e)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - a source's code may raise anything; it is its row
        reason = f"unexpected failure while importing: {describe_error(e)}"
    else:
        for _folder, aside in kept:
            shutil.rmtree(aside, ignore_errors=True)
        outcome = CUDA_ONLY if report.cuda_only else IMPORTED
        return BatchRow(str(source), name, outcome, report.cuda_only or ""), report
    if not existed or kept:
        remove_problem(name)
    for folder, aside in kept:  # a refused --force import leaves the problem as it was
        aside.rename(folder)
    return BatchRow(str(source), name, REFUSED, reason), None


def _set_aside(name: str) -> list[tuple[Path, Path]]:
    """Move problem ``name``'s existing folders beside themselves (hidden names); ``[(folder,
    aside), ...]`` for putting them back or deleting them."""
    kept = []
    for folder in target_dirs(name):
        if folder.exists():
            aside = folder.with_name(f".{folder.name}.replaced-{os.getpid()}")
            shutil.rmtree(aside, ignore_errors=True)
            folder.rename(aside)
            kept.append((folder, aside))
    return kept


def import_tree(kind: str, root: Path, *, prefix: str | None = None, cpu_input_bytes: int = CPU_INPUT_BYTES,
                force: bool = False, on_row: Callable[[BatchRow], None] | None = None) -> list[BatchRow]:
    """Import every problem under ``root`` (:func:`find_sources`) with names from their paths
    (:func:`derive_names`); ``on_row`` sees each row as it is decided.

    Raises:
        ProblemImportError: ``root`` holds no problem, or the prefix is invalid.
    """
    root = root.resolve()
    sources = find_sources(kind, root)
    rows = []
    for source, name in zip(sources, derive_names(kind, root, sources, prefix)):
        row, _ = import_one(kind, source, name, cpu_input_bytes=cpu_input_bytes, force=force)
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


def counts(rows: list[BatchRow]) -> dict[str, int]:
    """How many rows of each outcome (all three keys present)."""
    out = {IMPORTED: 0, CUDA_ONLY: 0, REFUSED: 0}
    for r in rows:
        out[r.outcome] += 1
    return out


def reason_class(reason: str) -> str:
    """A refusal's or a CUDA-only reason's short class, for counting: its text up to the first
    detail (paths, sizes and messages dropped)."""
    rules = (("distributed problem", "distributed (multi-GPU)"), ("needs the package", "needs a package"),
             ("needs a GPU", "needs a GPU"), ("returns tuple", "output is a tuple"), ("returns list", "output is a list"),
             ("returns dict", "output is a dict"), ("returns", "output is not a tensor"),
             ("scaling the case", "scaling fails"), ("scaling breaks", "scaling breaks the reference"),
             ("has no tolerance", "output dtype unchecked"),
             ("fails on the CPU", "reference fails on the CPU"), ("does not run", "source does not run"),
             ("no generate_input", "not GPU MODE's interface"), ("needs a seed", "a case without a seed"),
             ("exists", "name in use"), ("unexpected failure", "unexpected failure"))
    return next((label for key, label in rules if key in reason), reason.split(":")[0][:60])
