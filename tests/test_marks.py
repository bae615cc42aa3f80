"""Pytest marks sit on tests: a ``@pytest.mark.*`` on a helper (say a ``_param`` factory) marks
nothing, so ``-m "not slow"`` would still run what it was meant to leave out."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests import servers

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


def test_a_test_that_reaches_the_servers_unmarked_fails(request: pytest.FixtureRequest) -> None:
    """``tests.servers.require`` (every way to Redis and PostgreSQL goes through it) fails a test
    without the ``servers`` mark, before it looks for the servers: on every machine, not only CI."""
    assert servers.current_test is request.node
    why = servers.unmarked(request.node)
    assert why and request.node.nodeid in why and "servers" in why
    with pytest.raises(pytest.fail.Exception, match="not marked `servers`"):
        servers.require()
    request.node.add_marker(pytest.mark.servers)
    assert servers.unmarked(request.node) is None


def test_the_real_backend_parameter_carries_the_mark() -> None:
    assert [m.name for m in servers.REAL_BACKEND.marks] == ["servers"]
