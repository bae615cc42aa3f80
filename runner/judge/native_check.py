"""The output check's quick rule in one native pass over a piece.

The judge checks every output of every timed call (:func:`kernelrank.runner.judge.checking.close_to_reader`),
piece by piece as it reads them, by the quick rule: every ``|o - r| - (|r| * rtol + atol)`` is at
most 0, computed in float32. In torch that is seven passes over a piece (nine for bfloat16,
converted first), and it was the largest part of a softmax case's checking: 2.2 ms of a bfloat16
input set's 4.1 ms (docs/research/bench-history.md, section 17). This module compiles a few lines of C
that make the same decision in one pass: about 0.7 ms for 4M bfloat16 values, 1.2 ms for float32,
against 4.2 and 3.4 ms for the torch passes on the same data.

The decision is bit for bit the torch rule's: float32 arithmetic, each operation rounded on its own
(``-ffp-contract=off``: no fused multiply-add, as torch's separate operations; no fast-math), the
bound as :func:`~kernelrank.runner.judge.checking.check_output` rounds it (``|r| * rtol``, then ``+ atol``),
bfloat16 widened exactly (its 16 bits are a float32's upper half), and ``d - b <= 0`` rather than
``d <= b``, so that a NaN anywhere or an infinite reference (``inf - inf``) fails here as there
and goes to the full rule. ``tests/runner/test_checking.py`` holds both to the full rule at the
bound, value by value.

It is built once per process with the host's C compiler (``cc``, as the CPU runner has for C++
submissions) into a private temporary folder (``mkdtemp``: mode 0700, removed once loaded), with
``-march=native`` where the compiler takes it (built and run on one machine). Where there is no
compiler, or it fails, :func:`close` returns ``None`` and the torch passes decide: the same
verdicts, slower.
"""

from __future__ import annotations

import ctypes
import logging
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: The rule per dtype: 1 when every value passes, else 0 (no early exit: one branch-free pass).
SOURCE = r"""
#include <stdint.h>
#include <string.h>
#include <math.h>

static inline float widen_bf16(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }

static inline int fails(float o, float r, float atol, float rtol) {
    float d = fabsf(o - r);
    float b = fabsf(r) * rtol;
    b = b + atol;
    return !(d - b <= 0.0f);
}

int kernelrank_close_float32(const float *o, const float *r, int64_t n, float atol, float rtol) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad |= fails(o[i], r[i], atol, rtol);
    return !bad;
}

int kernelrank_close_bfloat16(const uint16_t *o, const uint16_t *r, int64_t n, float atol, float rtol) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad |= fails(widen_bf16(o[i]), widen_bf16(r[i]), atol, rtol);
    return !bad;
}
"""
#: Compiler flags: each float operation rounded on its own, as torch's separate operations are.
FLAGS = ("-O3", "-std=c99", "-ffp-contract=off", "-fno-fast-math", "-fPIC", "-shared")
#: Tried first, then without (a compiler that does not take it).
ARCH_FLAGS = ("-march=native",)
#: Seconds a build may take.
BUILD_TIMEOUT_S = 60.0
_FUNCTIONS = {"torch.float32": "kernelrank_close_float32", "torch.bfloat16": "kernelrank_close_bfloat16"}

_lock = threading.Lock()
_state: dict[str, Any] = {"tried": False, "lib": None}


def compiler() -> str | None:
    """The host's C compiler (``cc``, else ``gcc`` or ``clang`` on ``PATH``), or ``None``."""
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _build() -> ctypes.CDLL | None:
    cc = compiler()
    if cc is None:
        return None
    with tempfile.TemporaryDirectory(prefix="kernelrank-check-") as folder:
        src, out = Path(folder, "close.c"), Path(folder, "close.so")
        src.write_text(SOURCE, encoding="ascii")
        for arch in (ARCH_FLAGS, ()):
            done = subprocess.run([cc, *FLAGS, *arch, "-o", str(out), str(src)], capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT_S, check=False)
            if done.returncode == 0:
                break
        else:
            log.warning("the native output check did not build with %s (the torch passes check instead): %s",
                        cc, done.stderr[-500:])
            return None
        lib = ctypes.CDLL(str(out))  # mapped now: the file may go with its folder
    for name in _FUNCTIONS.values():
        fn = getattr(lib, name)
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_float]
        fn.restype = ctypes.c_int
    return lib


def library() -> ctypes.CDLL | None:
    """The rule's library, built on the first call of this process (about 0.1-0.2 s), or ``None``
    where it cannot be (no compiler, a failed build: logged once)."""
    with _lock:
        if not _state["tried"]:
            _state["tried"] = True
            try:
                _state["lib"] = _build()
            except (OSError, subprocess.SubprocessError) as e:
                log.warning("the native output check could not be built (the torch passes check instead): %s", e)
        return _state["lib"]


def method() -> str:
    """``"native"`` where the rule's library is built here, else ``"torch"``."""
    return "native" if library() is not None else "torch"


def close(o: Any, r: Any, atol: float, rtol: float) -> bool | None:
    """Whether every ``|o - r|`` is within ``|r| * rtol + atol`` (float32 arithmetic, NaN and an
    infinite ``r`` failing), in one native pass; ``None`` where this cannot decide, and the caller's
    torch passes must: no library, a device other than the CPU, another dtype than float32 or
    bfloat16, dtypes or lengths that differ, a tensor that is not contiguous.

    Args:
        o, r: 1-D tensors of one dtype on the CPU, ``n`` values each (the output's piece and the
            expected one's).
        atol, rtol: the problem's tolerances (rounded to float32, as torch rounds a scalar for a
            float32 operation).
    """
    name = _FUNCTIONS.get(str(o.dtype))
    if (name is None or o.dtype != r.dtype or o.device.type != "cpu" or r.device.type != "cpu"
            or o.numel() != r.numel() or not o.is_contiguous() or not r.is_contiguous()):
        return None
    lib = library()
    if lib is None:
        return None
    return bool(getattr(lib, name)(o.data_ptr(), r.data_ptr(), o.numel(), atol, rtol))
