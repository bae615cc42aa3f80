"""Pytest marks sit on tests: a ``@pytest.mark.*`` on a helper (say a ``_param`` factory) marks
nothing, so ``-m "not slow"`` would still run what it was meant to leave out."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent


def _is_mark(decorator: ast.expr) -> bool:
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    return "pytest.mark." in ast.unparse(node) and not ast.unparse(node).startswith("pytest.mark.parametrize.")


def misplaced_marks(source: str) -> list[str]:
    """Names of functions that carry a pytest mark but are not collected as tests (not ``test_*``
    nor fixtures' ``pytest.fixture``): the mark there applies to nothing."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("test"):
            if any(_is_mark(d) for d in node.decorator_list):
                found.append(node.name)
    return found


def test_the_check_finds_a_mark_on_a_helper() -> None:
    assert misplaced_marks("import pytest\n@pytest.mark.slow\ndef _param(p):\n    return p\n") == ["_param"]
    assert misplaced_marks("import pytest\n@pytest.mark.slow\ndef test_x():\n    pass\n") == []


def test_no_mark_on_a_function_that_is_not_a_test() -> None:
    bad = {str(p.relative_to(TESTS)): names for p in sorted(TESTS.rglob("test_*.py"))
           if (names := misplaced_marks(p.read_text(encoding="utf-8")))}
    assert bad == {}
