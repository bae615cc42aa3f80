"""Tracebacks of submitted code as the child formats them (runner/submission/child.py submission_traceback):
the harness's frames that led to the submission are dropped, chained exceptions included."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from kernelrank.runner.submission.child import submission_traceback

SOURCE = '''
def inner(x):
    return 1 / x


def custom_kernel(data):
    try:
        return inner(0)
    except ZeroDivisionError as e:
        raise RuntimeError("kernel failed") from e
'''


def _load(path: Path):
    spec = importlib.util.spec_from_file_location("tb_submission", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_frames_before_the_submission_are_dropped_in_every_chained_exception(tmp_path: Path) -> None:
    path = tmp_path / "submission.py"
    path.write_text(SOURCE)
    kernel = _load(path).custom_kernel
    with pytest.raises(RuntimeError) as caught:
        kernel(None)  # this test's frame calls it: the harness's place
    tb = submission_traceback(caught.value, str(path))
    assert __file__ not in tb and "test_child_traceback" not in tb
    assert tb.count("Traceback (most recent call last):") == 2  # the cause and the exception
    assert 'line 3, in inner' in tb and 'line 10, in custom_kernel' in tb
    assert "The above exception was the direct cause" in tb and tb.rstrip().endswith("RuntimeError: kernel failed")
    full = "".join(__import__("traceback").format_exception(caught.value))
    assert __file__ in full  # the plain traceback had the caller's frame


def test_without_a_submission_frame_only_the_harness_frames_go(tmp_path: Path) -> None:
    """A syntax error has no frame of the submission: importlib's and the harness's frames go, the
    error's own location (file, line, caret) stays."""
    path = tmp_path / "submission.py"
    path.write_text("def custom_kernel(data):\n    return (\n")
    with pytest.raises(SyntaxError) as caught:
        _load(path)
    tb = submission_traceback(caught.value, str(path))
    assert "importlib" not in tb and "submission.py" in tb and "SyntaxError" in tb
    assert str(Path(sys.modules["kernelrank.runner.submission.child"].__file__).parent) not in tb
