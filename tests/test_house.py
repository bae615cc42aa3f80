"""The house rules that a reader of one file cannot see: checked over the whole source tree.

Each rule is its own test function over the parsed sources (``ast``, nothing imported), naming
every offender so that a failure says where to look.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The folders of the ``kernelrank`` distribution (pyproject.toml's package-dir): ``kernelrank.*``,
#: ``kernelrank.api.*`` and ``kernelrank.runner.*``.
SOURCE_DIRS = ("api", "kernelrank", "runner")


def _sources() -> Iterator[tuple[Path, ast.Module]]:
    for folder in SOURCE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path.relative_to(ROOT), ast.parse(path.read_text(encoding="utf-8"), str(path))


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_imports(tree: ast.Module) -> Iterator[str]:
    """``line: from module import _a, _b`` for each import of private names from a kernelrank
    module (absolute ``kernelrank...`` or relative) anywhere in ``tree``, functions included."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        module = node.module or ""
        ours = node.level > 0 or module == "kernelrank" or module.startswith("kernelrank.")
        private = [alias.name for alias in node.names if _is_private(alias.name)]
        if ours and private:
            yield f"{node.lineno}: from {'.' * node.level}{module} import {', '.join(private)}"


def test_no_module_imports_another_modules_private_names() -> None:
    """A leading underscore means "this module's own": a name another module needs is made public
    where it lives (presenters in ``api/presenters.py``, not ``_public`` from a route)."""
    offenders = [f"{path}:{line}" for path, tree in _sources() for line in _private_imports(tree)]
    assert not offenders, "private names imported from another module:\n" + "\n".join(offenders)


def test_the_private_import_rule_names_private_names_from_kernelrank_only() -> None:
    tree = ast.parse("from kernelrank.api.routes.submissions import _public as view, router\n"
                     "from kernelrank import __version__\n"
                     "from torch.utils._pytree import _tree_map\n"
                     "def f():\n    from .slots import _align\n")
    assert list(_private_imports(tree)) == ["1: from kernelrank.api.routes.submissions import _public",
                                            "5: from .slots import _align"]


#: The most lines a module of the distribution may have: a file a reviewer reads whole.
MAX_MODULE_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    long = [f"{path}: {len(path.read_text(encoding='utf-8').splitlines())} lines"
            for path, _tree in ((p, None) for folder in SOURCE_DIRS for p in sorted((ROOT / folder).rglob("*.py")))
            if len((ROOT / path).read_text(encoding="utf-8").splitlines()) > MAX_MODULE_LINES]
    assert not long, "modules over 600 lines:\n" + "\n".join(long)


def _imported_modules(tree: ast.Module) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            yield from ((node.lineno, f"{node.module}.{a.name}") for a in node.names)


def test_the_runner_imports_no_database_web_or_service_code() -> None:
    """A runner on a GPU host holds no database or web code: it talks to the service through the
    queues only."""
    banned = ("sqlalchemy", "fastapi", "starlette", "alembic", "kernelrank.db", "kernelrank.services",
              "kernelrank.api", "kernelrank.cli")
    found = [f"{path}:{line}: {name}" for path, tree in _sources() if path.parts[0] == "runner"
             for line, name in _imported_modules(tree) if name.startswith(banned)]
    assert not found, "the runner imports service code:\n" + "\n".join(found)


def test_the_submissions_process_imports_nothing_of_the_judge() -> None:
    """``runner/submission/`` runs beside submitted code: it may not load the judge's modules (their
    secrets, their rules) into that process."""
    found = [f"{path}:{line}: {name}" for path, tree in _sources() if path.parts[:2] == ("runner", "submission")
             for line, name in _imported_modules(tree) if name.startswith("kernelrank.runner.judge")]
    assert not found, "the child imports the judge:\n" + "\n".join(found)
