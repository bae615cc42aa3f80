"""Correctness: a submission's output against the reference output, on the judge's side.

Rules (GPU MODE's and KernelBench's, made explicit): shape, dtype and device must match and the
output must be a plain ``torch.Tensor`` (no subclass); values pass where
``|out - ref| <= atol + rtol * |ref|``; NaN must sit where the reference has NaN and infinities
must match the reference's in place and sign. Comparison is in float32 (float64 for float64).

Error figures count every mismatch, non-finite ones included: where a mismatch's difference is
NaN (a NaN where the reference has a number, or the reverse) the max errors are ``nan``; else where
one is infinite (an infinity where the reference has a number or the other infinity, or an
overflowing difference) they are ``inf``. ``nan_mismatches`` and ``inf_mismatches`` count those.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterator

import torch

from kernelrank.runner.judge import native_check

#: Dtypes compared in float64: float64 itself, and integers, which float32 rounds above 2**24
#: (an exact check of ``int64`` indices needs the wider type).
_WIDE = (torch.float64, torch.int64, torch.int32)


@dataclass(frozen=True)
class CheckResult:
    """Outcome of comparing one output.

    ``max_abs_error`` is the largest ``|out - ref|`` and ``max_rel_error`` the largest
    ``|out - ref| / |ref|`` (a mismatch where ``ref`` is 0 counts as ``inf``; a matching value
    where ``ref`` is 0 or infinite counts as 0); both are ``nan`` when a mismatch's difference is
    NaN (``nan_mismatches`` of them), else ``inf`` when one is infinite (``inf_mismatches``).
    ``first_mismatch`` is the multi-index of the first failing element in row-major order.
    """

    passed: bool
    message: str
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatches: int = 0
    numel: int = 0
    first_mismatch: list[int] | None = None
    nan_mismatches: int = 0
    inf_mismatches: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_output(out: Any, ref: torch.Tensor, atol: float, rtol: float, out_device: str | None = None,
                 promote: bool = False) -> CheckResult:
    """Compare ``out`` to ``ref``.

    Args:
        out: what the submission returned (any object: anything but a plain tensor fails).
        ref: the reference output.
        atol, rtol: the problem's tolerance for ``ref.dtype``.
        out_device: the device the submission's output was on, when ``out`` was moved to the
            judge over the channel (its ``.device`` is then the judge's, not the submission's).
        promote: another dtype than ``ref``'s passes if the two promote to a common one (GPU
            MODE's ``verbose_allclose`` subtracts them: a float32 output against a float64
            reference); both are then compared in float64 where either is float64 or a 32/64-bit
            integer, else in float32. Booleans and complex numbers never promote.

    Timed calls' outputs are first checked by the quick rule, piece by piece
    (:func:`close_in_pieces`); only one that fails it comes here.
    """
    if type(out) is not torch.Tensor:  # noqa: E721 - exact type: subclasses can defer work into the checker
        return CheckResult(False, f"output must be a plain torch.Tensor, got {type(out).__module__}.{type(out).__qualname__}")
    if tuple(out.shape) != tuple(ref.shape):
        return CheckResult(False, f"output shape {list(out.shape)} differs from expected {list(ref.shape)}")
    if out.dtype != ref.dtype and not (promote and _promotes(out.dtype, ref.dtype)):
        return CheckResult(False, f"output dtype {_name(out.dtype)} differs from expected {_name(ref.dtype)}")
    device = out_device if out_device is not None else str(out.device)
    if torch.device(device).type != ref.device.type:
        return CheckResult(False, f"output device {device} differs from expected {ref.device.type}")

    work = torch.float64 if ref.dtype in _WIDE or out.dtype in _WIDE else torch.float32
    o = out.detach().to(ref.device, work)
    r = ref.detach().to(work)
    numel = r.numel()
    if numel == 0:
        return CheckResult(True, "ok", 0.0, 0.0, 0, 0)

    # torch.isclose's rule (equal_nan=True: close where |o - r| is finite and within atol +
    # rtol * |r|, or o == r, or both NaN) in fewer passes over the data and no boolean-mask gathers.
    # Outputs are checked once per timed call in leaderboard mode, so this bounds how many calls
    # fit a case's budget: 16 MiB in 210 ms with isclose and masks, now about 45 ms (25 ms with the
    # judge's fixed malloc thresholds, harness.evaluate; docs/research/bench-history.md)
    abs_r = r.abs()
    diff = (o - r).abs_()
    # the allowance made finite: an infinite reference allows nothing but o == r (as isclose)
    close = diff <= abs_r.mul(rtol).add_(atol).clamp_(max=torch.finfo(work).max)
    close.logical_or_(o == r).logical_or_(torch.isnan(o).logical_and_(torch.isnan(r)))
    mismatches = numel - int(close.count_nonzero())
    if mismatches == 0:  # every difference finite, or non-finite where out == ref or both NaN (0 here)
        max_abs = float(diff.nan_to_num_(0.0, 0.0, 0.0).amax())
        max_rel = float(diff.div_(abs_r).nan_to_num_(0.0, 0.0, 0.0).amax())  # r == 0: x/0 is inf or NaN, so 0
        shape = degenerate(o)
        if shape is not None and degenerate(r) is None:  # within a loose tolerance, but no answer
            return CheckResult(False, f"output is degenerate ({shape}) where the reference's is not, though within "
                                      f"atol={atol:g} + rtol={rtol:g}*|ref|", max_abs, max_rel, 0, numel)
        return CheckResult(True, "ok", max_abs, max_rel, 0, numel)

    # a failure: the figures over the mismatches keep their NaN and inf (only this path gathers)
    bad = close.logical_not_()
    bad_diff = diff[bad]
    nan_mismatches = int(bad_diff.isnan().count_nonzero())
    inf_mismatches = int(bad_diff.isinf().count_nonzero())
    # |d| / |r| over the mismatches: r == 0 gives inf (d > 0 there), an infinite d stays inf
    bad_rel = torch.where(bad_diff.isinf(), bad_diff, bad_diff / abs_r[bad])
    # the matching values' figures: finite, non-finite ones (out == ref, both NaN) count 0
    diff.masked_fill_(bad, 0.0)
    max_abs = max(float(diff.nan_to_num(0.0, 0.0, 0.0).amax()),
                  float(bad_diff.nan_to_num(0.0, math.inf).amax()))
    max_rel = max(float(diff.div_(abs_r).nan_to_num_(0.0, 0.0, 0.0).amax()),
                  float(bad_rel.nan_to_num(0.0, math.inf).amax()))
    if nan_mismatches:
        max_abs = max_rel = math.nan

    flat = int(bad.reshape(-1).nonzero()[0, 0])
    index = [int(i) for i in torch.unravel_index(torch.tensor(flat), r.shape)]
    got, want = float(o.reshape(-1)[flat]), float(r.reshape(-1)[flat])
    non_finite = (f" ({nan_mismatches} NaN and {inf_mismatches} infinite differences)"
                  if nan_mismatches or inf_mismatches else "")
    message = (
        f"{mismatches} of {numel} values outside atol={atol:g} + rtol={rtol:g}*|ref|{non_finite}; "
        f"max abs error {max_abs:.4g}, max rel error {max_rel:.4g}; "
        f"first mismatch at {index}: got {got!r}, expected {want!r}"
    )
    return CheckResult(False, message, max_abs, max_rel, mismatches, numel, index, nan_mismatches, inf_mismatches)


def degenerate(t: torch.Tensor) -> str | None:
    """How ``t`` of two values or more is degenerate, or ``None``: ``"NaN everywhere"``, ``"all
    zeros"`` or ``"constant"`` (all equal); one value is never degenerate (it is an answer or a
    wrong one). :func:`check_output` fails such an output where the reference's is not, whatever
    the tolerance: a loose tolerance otherwise passes an output with no answer in it
    (docs/administration.md, problems)."""
    if t.numel() < 2:
        return None
    if bool(t.isnan().all()):
        return "NaN everywhere"
    if not bool(t.any()):
        return "all zeros"
    flat = t.reshape(-1)
    if bool((flat == flat[0]).all()):
        return "constant"
    return None


#: Values per piece when an output on the CPU is checked as it is read (:func:`close_in_pieces`):
#: 1 Mi, 4 MiB of float32, so a piece of the output and of the expected output (8 MiB) stay in the
#: last-level cache (32 MiB here) between their read and their compare. With the torch passes and
#: their temporaries, 64 Ki values (a core's L2) were best (a 16 MiB float32 output in 4.2 ms, 6.3 ms
#: in pieces of 256 Ki); since the native one-pass rule (:mod:`~kernelrank.runner.judge.native_check`) a
#: piece's cost is mostly its fixed per-call costs (a read's system call and the pidfd poll after
#: it, a ctypes call): a softmax input set's checking took 2.3-2.6 ms in pieces of 1 Mi against
#: 3.3-3.4 ms in pieces of 64 Ki (float32 4096x1024), 1.3 against 2.3-2.6 ms (bfloat16 1024x4096);
#: 512 Ki and 2 Mi were 0.1-0.3 ms slower than 1 Mi (docs/research/bench-history.md).
PIECE_VALUES = 1 << 20


def piece_bounds(numel: int, piece: int = PIECE_VALUES) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of each piece of ``numel`` values, in order, the last one shorter."""
    for start in range(0, numel, piece):
        yield start, min(numel, start + piece)


def close_in_pieces(read: Callable[[int, int], torch.Tensor], ref: torch.Tensor, atol: float, rtol: float,
                    piece: int = PIECE_VALUES) -> bool:
    """Whether an output, read piece by piece, passes :func:`check_output` by its quick rule
    (:func:`_all_finite_close`: every ``|out - ref|`` finite and within ``atol + rtol * |ref|``).

    Args:
        read: ``read(start, stop)`` returns values ``start..stop-1`` of the output in row-major
            order, a 1-D tensor of ``ref.dtype`` on ``ref``'s device (it may be overwritten by the
            next ``read``: each piece is checked before the next is read).
        ref: the expected output (any shape; its dtype and shape are the output's, which the
            caller has checked).
        piece: values per piece (:data:`PIECE_VALUES`) on the CPU; on a GPU the output is one
            piece (the point of pieces is a CPU core's cache; on a GPU each would cost a kernel
            launch per operation).

    ``False`` says only that the quick rule does not hold: the output may still pass the full
    rule (equal infinities, NaN against NaN), so the caller then reads it whole and calls
    :func:`check_output`, which gives the verdict and its figures. ``True`` implies it passes.
    """
    r = ref.detach().contiguous().view(-1)
    return close_to_reader(read, lambda a, b: r[a:b], r.numel(), r.dtype, r.device.type, atol, rtol, piece)


def close_to_reader(read: Callable[[int, int], torch.Tensor], read_ref: Callable[[int, int], torch.Tensor],
                    numel: int, dtype: torch.dtype, device_type: str, atol: float, rtol: float,
                    piece: int = PIECE_VALUES, ref_first: bool = False) -> bool:
    """:func:`close_in_pieces` against an expected output that is itself read piece by piece
    (``read_ref``, as ``read``): the reference process's output where it left it, so that neither
    is copied whole.

    Args:
        read, read_ref: ``read(start, stop)``: values ``start..stop-1`` of the output and of the
            expected output, row-major, 1-D tensors of ``dtype`` on a ``device_type`` device
            (each may be overwritten by its next ``read``, never by the other's).
        numel: values in each (the caller has checked both shapes).
        ref_first: read each expected piece before the output's (the order in which the two
            processes ran, so that neither one's pages are always the last read).

    Same rule, result and meaning of ``False`` as :func:`close_in_pieces`.
    """
    work = torch.float64 if dtype in _WIDE else torch.float32
    step = piece if device_type == "cpu" else max(1, numel)
    buffers: tuple[torch.Tensor, torch.Tensor] | None = None
    for start, stop in piece_bounds(numel, step):
        if ref_first:
            r = read_ref(start, stop)
            o = read(start, stop)
        else:
            o = read(start, stop)
            r = read_ref(start, stop)
        if buffers is None:
            buffers = (torch.empty(min(step, numel), dtype=work, device=o.device),
                       torch.empty(min(step, numel), dtype=work, device=o.device))
        n = stop - start
        if not _all_finite_close(o, r, atol, rtol, buffers[0][:n], buffers[1][:n]):
            return False
    return True


def _all_finite_close(o: torch.Tensor, r: torch.Tensor, atol: float, rtol: float, diff: torch.Tensor,
                      bound: torch.Tensor) -> bool:
    """Whether every ``|o - r|`` is within ``atol + rtol * |r|`` (1-D ``o`` and ``r`` of one dtype,
    computed in ``diff``'s and ``bound``'s, float32 or float64 buffers of their length that this
    overwrites): the largest ``|o - r| - bound`` is at most 0. Float32 and bfloat16 pieces on the
    CPU are decided in one native pass where this process could build it
    (:func:`kernelrank.runner.judge.native_check.close`: the same decision bit for bit, 3-6x faster);
    otherwise, and for other dtypes and devices, torch decides: seven passes over a piece (nine for
    bfloat16 and float16, converted first), into the two buffers, with no boolean tensor
    (``Tensor.all`` on one took 20 ms for 4M values here, ``amax`` of the floats 0.6 ms) and no
    temporaries: 2.1 ms for 4M float32 values in pieces, against 2.6 ms with a temporary per
    operation (docs/research/bench-history.md).

    The bound is rounded as :func:`check_output` rounds it (``|r| * rtol``, then ``+ atol``), and
    ``a - b <= 0`` holds exactly when ``a <= b`` in floating point, so True implies the full rule
    passes. A NaN anywhere makes the maximum NaN, so False; so does an infinity in ``r`` (``inf -
    inf``) or in ``|o - r|`` alone: equal infinities and NaN against NaN, which the full rule
    accepts, come out False here and take the full path.
    """
    native = native_check.close(o, r, atol, rtol)
    if native is not None:
        return native
    if o.dtype == diff.dtype:
        torch.sub(o, r, out=diff).abs_()
        torch.abs(r, out=bound)
    else:  # converted first, then as for float32: in the working precision, as check_output computes
        diff.copy_(o)  # (2.2 ms for 4M bfloat16 values, against 2.5 ms with mixed-dtype operations)
        bound.copy_(r)
        diff.sub_(bound).abs_()
        bound.abs_()
    bound.mul_(rtol).add_(atol)
    return float(diff.sub_(bound).amax()) <= 0.0


def _promotes(a: torch.dtype, b: torch.dtype) -> bool:
    """Whether two output dtypes may be compared by promotion (:func:`check_output`'s ``promote``):
    both real numbers, not booleans."""
    return all(d != torch.bool and not d.is_complex for d in (a, b))


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
