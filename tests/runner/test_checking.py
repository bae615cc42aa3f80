"""The judge's comparison of outputs with the reference."""

from __future__ import annotations

import math

import pytest
import torch

from kernelrank.runner.judge import checking, native_check
from kernelrank.runner.judge.checking import check_output, close_in_pieces, close_to_reader


def test_equal_passes_and_reports_zero_error() -> None:
    r = torch.randn(4, 5)
    c = check_output(r.clone(), r, atol=0, rtol=0)
    assert c.passed and c.max_abs_error == 0 and c.mismatches == 0


def test_tolerance_formula_is_atol_plus_rtol_times_ref() -> None:
    ref = torch.tensor([100.0, 0.0])
    # bound at 100 is 0.05 + 0.01 * 100 = 1.05; at ref 0 only atol counts
    assert check_output(torch.tensor([101.04, 0.049]), ref, atol=0.05, rtol=0.01).passed
    c = check_output(torch.tensor([101.04, 0.06]), ref, atol=0.05, rtol=0.01)
    assert not c.passed and c.mismatches == 1 and c.first_mismatch == [1]
    c = check_output(torch.tensor([101.06, 0.0]), ref, atol=0.05, rtol=0.01)
    assert not c.passed and c.first_mismatch == [0]


def test_failure_reports_figures_and_first_index() -> None:
    ref = torch.zeros(3, 4)
    out = ref.clone()
    out[1, 2] = 0.5
    out[2, 3] = -2.0
    c = check_output(out, ref, atol=1e-3, rtol=1e-3)
    assert not c.passed
    assert c.mismatches == 2 and c.first_mismatch == [1, 2]
    assert c.max_abs_error == 2.0
    assert "2 of 12" in c.message and "[1, 2]" in c.message


def test_nan_and_inf_must_agree() -> None:
    ref = torch.tensor([float("nan"), float("inf"), 1.0])
    assert check_output(ref.clone(), ref, 0, 0).passed
    assert not check_output(torch.tensor([0.0, float("inf"), 1.0]), ref, 1e9, 0).passed
    assert not check_output(torch.tensor([float("nan"), float("-inf"), 1.0]), ref, 1e9, 0).passed
    assert not check_output(torch.tensor([float("nan"), float("inf"), float("nan")]), ref, 1e9, 0).passed


def test_shape_dtype_device_and_type_checks() -> None:
    ref = torch.zeros(2, 3, dtype=torch.bfloat16)
    assert "shape" in check_output(torch.zeros(3, 2, dtype=torch.bfloat16), ref, 1, 1).message
    assert "dtype" in check_output(torch.zeros(2, 3), ref, 1, 1).message
    assert "device" in check_output(torch.zeros(2, 3, dtype=torch.bfloat16), ref, 1, 1, out_device="cuda:0").message
    assert "plain torch.Tensor" in check_output([[0, 0, 0]] * 2, ref, 1, 1).message

    class Sub(torch.Tensor):
        pass

    assert not check_output(torch.zeros(2, 3, dtype=torch.bfloat16).as_subclass(Sub), ref, 1, 1).passed


def test_low_precision_compared_in_float32() -> None:
    ref = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    out = torch.tensor([1.0078125, 2.0], dtype=torch.bfloat16)  # one bf16 ulp at 1.0
    assert check_output(out, ref, atol=0, rtol=1e-2).passed
    assert not check_output(out, ref, atol=0, rtol=1e-3).passed


def test_same_verdicts_as_torch_isclose_on_special_values() -> None:
    """The pass-saving rule agrees with ``torch.isclose(equal_nan=True)`` element for element,
    NaN, infinities, zeros and overflowing differences included, in float32 and float64."""
    specials = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 3e38, -3e38, 1e-30]
    g = torch.Generator().manual_seed(7)
    for dtype in (torch.float32, torch.float64):
        for trial in range(40):
            ref = torch.randn(500, generator=g, dtype=dtype)
            out = ref + torch.randn(500, generator=g, dtype=dtype) * 10 ** torch.empty(500, dtype=dtype).uniform_(-9, 0, generator=g)
            for t in (ref, out):
                where = torch.randint(0, 500, (len(specials) * 3,), generator=g)
                t[where] = torch.tensor(specials * 3, dtype=dtype)
            if trial % 2:
                out[ref.isnan()] = float("nan")
            atol, rtol = 1e-5, 1e-3
            c = check_output(out, ref, atol, rtol)
            bad = ~torch.isclose(out, ref, rtol=rtol, atol=atol, equal_nan=True)
            assert c.mismatches == int(bad.sum()), (dtype, trial)
            if c.mismatches:
                assert c.first_mismatch == [int(bad.nonzero()[0, 0])]
            diff = (out - ref).abs()
            finite = torch.isfinite(diff)
            nan, inf = int((bad & diff.isnan()).sum()), int((bad & diff.isinf()).sum())
            assert (c.nan_mismatches, c.inf_mismatches) == (nan, inf), (dtype, trial)
            if nan:  # non-finite mismatches make the figure non-finite (they used to be left out)
                assert math.isnan(c.max_abs_error)
            elif inf:
                assert c.max_abs_error == math.inf
            else:
                assert c.max_abs_error == float(diff[finite].max())


def test_non_finite_mismatches_make_the_figures_non_finite_and_are_counted() -> None:
    """An output half infinite is not "max abs error 0" (non-finite differences were left out)."""
    ref = torch.randn(16000)
    out = ref.clone()
    out[::2] = float("inf")
    c = check_output(out, ref, 1e-5, 1e-5)
    assert not c.passed and c.mismatches == 8000 and c.inf_mismatches == 8000 and c.nan_mismatches == 0
    assert c.max_abs_error == math.inf and c.max_rel_error == math.inf
    assert "(0 NaN and 8000 infinite differences); max abs error inf, max rel error inf" in c.message
    out[1] = float("nan")
    c = check_output(out, ref, 1e-5, 1e-5)
    assert c.mismatches == 8001 and c.nan_mismatches == 1 and c.inf_mismatches == 8000
    assert math.isnan(c.max_abs_error) and math.isnan(c.max_rel_error)
    assert "(1 NaN and 8000 infinite differences); max abs error nan" in c.message


def test_finite_failure_figures_are_finite_and_count_no_non_finite() -> None:
    ref = torch.tensor([1.0, float("inf"), float("nan"), 0.0])
    out = torch.tensor([3.0, float("inf"), float("nan"), 0.0])  # the matching infinity and NaN count 0
    c = check_output(out, ref, 1e-3, 1e-3)
    assert (c.mismatches, c.nan_mismatches, c.inf_mismatches) == (1, 0, 0)
    assert c.max_abs_error == 2.0 and c.max_rel_error == 2.0 and "infinite" not in c.message
    c = check_output(torch.tensor([1.0, float("inf"), float("nan"), 0.5]), ref, 1e-3, 1e-3)
    assert c.max_abs_error == 0.5 and c.max_rel_error == math.inf  # 0.5 where the reference is 0


def test_the_quick_rule_never_passes_what_the_full_rule_fails() -> None:
    """The quick rule of timed calls' outputs (``close_in_pieces``, whole or in pieces) passes
    exactly the outputs of finite differences within bounds; a failing output (a NaN, an infinity
    against a number, a value just outside) fails it, and equal non-finite values, which the full
    rule passes, are left to the full rule (False here: the judge then calls ``check_output``)."""
    g = torch.Generator().manual_seed(11)
    ref = torch.randn(1000, generator=g)
    cases = {"equal": ref.clone(), "within": ref + 1e-7 * ref.abs(), "outside": ref.clone()}
    cases["outside"][3] += 1.0
    for name, out, reference in [(n, o, ref) for n, o in cases.items()] + [
            ("equal infinities", *_with(ref, 5, float("inf"))), ("NaN against NaN", *_with(ref, 7, float("nan"))),
            ("NaN against a number", _with(ref, 9, float("nan"))[0], ref),
            ("infinity against a number", _with(ref, 9, float("inf"))[0], ref)]:
        full = check_output(out, reference, 1e-6, 1e-5)
        for piece in (1000, 64):
            quick = close_in_pieces(lambda a, b: out[a:b], reference, 1e-6, 1e-5, piece=piece)  # noqa: B023
            if name in cases:  # finite values: the same verdict
                assert quick == full.passed, (name, piece)
            else:  # non-finite values: never a pass the full rule would refuse
                assert not quick and full.passed == name.startswith(("equal", "NaN against NaN")), (name, piece)


def test_in_pieces_the_quick_rule_is_the_whole_output_s() -> None:
    """``close_in_pieces`` (timed outputs, read piece by piece where the child left them) holds
    exactly where the quick rule on the whole output does: a value outside its bound, a NaN or an
    infinity in any piece, the last (shorter) one included, fails it; an output within bounds
    passes, in float32 and bfloat16 and in pieces that do not divide the output."""
    g = torch.Generator().manual_seed(12)
    for dtype in (torch.float32, torch.bfloat16):
        ref = torch.randn(37, 29, generator=g).to(dtype)
        atol, rtol = (1e-6, 1e-5) if dtype == torch.float32 else (1e-6, 3.2e-2)
        n = ref.numel()
        for where in (0, 100, n - 1):  # the first piece, a middle one, the last (shorter) one
            for value in (float("nan"), float("inf"), None):
                out = ref.clone().view(-1)
                out[where] = value if value is not None else out[where].float() + 1.0
                calls: list[tuple[int, int]] = []

                def read(a: int, b: int) -> torch.Tensor:
                    calls.append((a, b))
                    return out[a:b]

                assert not close_in_pieces(read, ref, atol, rtol, piece=64), (dtype, where, value)
                assert not check_output(out.view(ref.shape), ref, atol, rtol).passed
                assert calls[-1][0] <= where < calls[-1][1]  # stopped at the failing piece
        within = (ref.float() * (1 + rtol / 2)).to(dtype).view(-1)
        calls = []

        def read_within(a: int, b: int) -> torch.Tensor:
            calls.append((a, b))
            return within[a:b]

        assert close_in_pieces(read_within, ref, atol, rtol, piece=64)
        assert check_output(within.view(ref.shape), ref, atol, rtol).passed
        assert calls == [(a, min(n, a + 64)) for a in range(0, n, 64)]  # every value, once, in order


def test_against_a_read_reference_the_quick_rule_is_the_same() -> None:
    """``close_to_reader`` (a timed output against the reference process's, both read piece by
    piece where the children left them, each into a buffer its next read overwrites) gives
    ``close_in_pieces``'s verdict against the same values held whole, reading each value of
    both once, in order, the reference's piece first or second as asked."""
    g = torch.Generator().manual_seed(13)
    for dtype in (torch.float32, torch.bfloat16):
        ref = torch.randn(41, 23, generator=g).to(dtype)
        atol, rtol = (1e-6, 1e-5) if dtype == torch.float32 else (1e-6, 3.2e-2)
        n = ref.numel()
        flat = ref.view(-1)
        for where, value in [(None, None), (0, float("nan")), (n // 2, 1.0), (n - 1, float("inf"))]:
            out = flat.clone()
            if where is not None:
                out[where] = value if not math.isfinite(value) else out[where].float() + value
            for ref_first in (False, True):
                reads: list[tuple[str, int, int]] = []
                buffers = {"out": torch.empty(64, dtype=dtype), "ref": torch.empty(64, dtype=dtype)}

                def reader(name: str, values: torch.Tensor):
                    def read(a: int, b: int) -> torch.Tensor:
                        reads.append((name, a, b))
                        buffers[name][:b - a] = values[a:b]  # noqa: B023
                        return buffers[name][:b - a]  # noqa: B023
                    return read

                quick = close_to_reader(reader("out", out), reader("ref", flat), n, dtype, "cpu", atol, rtol,
                                        piece=64, ref_first=ref_first)
                assert quick == close_in_pieces(lambda a, b: out[a:b], ref, atol, rtol, piece=64)  # noqa: B023
                assert quick == (where is None), (dtype, where, ref_first)
                pieces = [(a, min(n, a + 64)) for a in range(0, n, 64)]
                order = ("ref", "out") if ref_first else ("out", "ref")
                expected = [(name, a, b) for a, b in pieces for name in order]
                assert reads == (expected if where is None else expected[:len(reads)])
                if where is not None:
                    assert reads[-1][1] <= where < reads[-1][2]  # stopped at the failing piece


def _with(t: torch.Tensor, i: int, value: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Two copies of ``t`` holding ``value`` at ``i``."""
    a, b = t.clone(), t.clone()
    a[i] = b[i] = value
    return a, b


def _native_built() -> None:
    """Skip where this machine has no C compiler at all (the judge then checks in torch, which the
    ``torch`` cases test); where it has one, the native rule must build: a failed build fails."""
    if native_check.compiler() is None:
        pytest.skip("no C compiler on PATH (cc, gcc, clang): the judge checks in torch here")
    assert native_check.library() is not None, f"the native check did not build with {native_check.compiler()}"


@pytest.fixture(params=["native", "torch"])
def quick_rule(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The quick rule's two ways: the native pass (:mod:`kernelrank.runner.judge.native_check`) and the
    torch passes it falls back to (forced here by a native rule that cannot decide)."""
    if request.param == "native":
        _native_built()
    else:
        monkeypatch.setattr(native_check, "close", lambda *a: None)
    return request.param


def test_at_the_bound_the_quick_rule_is_the_full_rules_to_the_last_bit(quick_rule: str) -> None:
    """Values within a few ulps of ``atol + rtol * |ref|``, on either side: the quick rule (its
    own buffers, the bound rounded as the full rule rounds it) passes exactly the values the full
    rule passes, one value at a time, in float32 and bfloat16, natively and in torch."""
    g = torch.Generator().manual_seed(14)
    for dtype, atol, rtol in ((torch.float32, 1e-6, 1e-5), (torch.bfloat16, 1e-6, 3.2e-2)):
        n = 2000
        # magnitudes from 1e-7 to 10, so that atol, rtol * |ref| or both make the bound
        ref = (torch.randn(n, generator=g) * 10 ** (torch.rand(n, generator=g) * 8 - 7)).to(dtype)
        r = ref.float()
        bound = r.abs().mul(rtol).add(atol)
        steps = torch.randint(-3, 4, (n,), generator=g).float()
        sign = torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0)
        out = (r + sign * bound * (1 + steps * torch.finfo(dtype).eps)).to(dtype)
        verdicts = set()
        for i in range(n):
            o, e = out[i:i + 1], ref[i:i + 1]
            full = check_output(o, e, atol, rtol).passed
            assert close_in_pieces(lambda a, b: o[a:b], e, atol, rtol) == full, (dtype, i)  # noqa: B023
            verdicts.add(full)
        assert verdicts == {True, False}  # both sides of the bound were tried


def test_the_native_rule_decides_as_the_torch_passes_on_special_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """NaN, infinities, signed zeros, subnormals, the largest values, each against the others, one
    pair at a time: the native pass and the torch passes give the same answer, in float32 and
    bfloat16, and an answer that passes the full rule wherever it is True."""
    _native_built()
    for dtype in (torch.float32, torch.bfloat16):
        info = torch.finfo(dtype)
        values = [0.0, -0.0, 1.0, -1.0, 1e-3, info.tiny, info.tiny / 4, info.max, -info.max, math.inf, -math.inf,
                  math.nan, 0.999, 1.001]
        o = torch.tensor([a for a in values for _ in values], dtype=dtype)
        r = torch.tensor([b for _ in values for b in values], dtype=dtype)
        buffers = torch.empty(1), torch.empty(1)
        for i in range(o.numel()):
            a, b = o[i:i + 1], r[i:i + 1]
            native = native_check.close(a, b, 1e-2, 1e-2)
            with monkeypatch.context() as m:
                m.setattr(native_check, "close", lambda *x: None)
                torch_way = checking._all_finite_close(a, b, 1e-2, 1e-2, *buffers)
            assert native is torch_way, (dtype, float(a), float(b))
            if native:
                assert check_output(a, b, 1e-2, 1e-2).passed, (dtype, float(a), float(b))
    # what it leaves to torch: other dtypes, pieces of two dtypes or lengths, strided views
    x = torch.ones(8)
    assert native_check.close(x.double(), x.double(), 0.0, 0.0) is None
    assert native_check.close(x, x.bfloat16(), 0.0, 0.0) is None and native_check.close(x, x[:4], 0.0, 0.0) is None
    assert native_check.close(x[::2], x[::2], 0.0, 0.0) is None and native_check.close(x[::2].contiguous(), x[:4], 0.0, 0.0)


def test_the_native_rule_is_built_once_per_process_or_not_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """No compiler: ``None`` (the torch passes decide), logged once, never an error."""
    monkeypatch.setattr(native_check, "_state", {"tried": False, "lib": None})
    monkeypatch.setattr(native_check, "compiler", lambda: None)
    assert native_check.library() is None and native_check.method() == "torch"
    assert native_check.close(torch.ones(4), torch.ones(4), 0.0, 0.0) is None
    assert close_in_pieces(lambda a, b: torch.ones(4)[a:b], torch.ones(4), 0.0, 0.0)  # torch decided


def test_where_a_fused_multiply_add_would_widen_the_bound_the_quick_rule_fails_as_the_full_one(quick_rule: str) -> None:
    """Float32 pairs whose ``|o - r|`` equals ``|r| * rtol + atol`` rounded once (a fused
    multiply-add) and exceeds it rounded twice (``|r| * rtol``, then ``+ atol``, as the full rule
    computes it): the full rule fails them, and so must the quick rule, natively as well (built
    without contraction: ``native_check.FLAGS``) as in torch."""
    g = torch.Generator().manual_seed(14)
    n = 1 << 20
    rtol, atol = float(torch.tensor(2.5e-2)), float(torch.tensor(2.5e-2))  # float32 values, as the rules use them
    r = (torch.randn(n, generator=g) * 10 ** (torch.rand(n, generator=g) * 5 - 4)).float()
    twice = r.abs().mul(rtol).add(atol)
    once = (r.abs().double() * rtol + atol).float()  # the product exact in float64, one rounding to float32
    o = r + once
    found = ((once > twice) & ((o - r).abs() == once)).nonzero().flatten()[:200]
    assert len(found) >= 50  # this seed finds thousands
    for i in found.tolist():
        a, b = o[i:i + 1], r[i:i + 1]
        assert not check_output(a, b, atol, rtol).passed, i
        assert not close_in_pieces(lambda x, y: a[x:y], b, atol, rtol), (quick_rule, i)  # noqa: B023


def test_a_degenerate_output_fails_whatever_the_tolerance_where_the_references_is_not() -> None:
    """Zeros, a constant or NaN everywhere within a loose tolerance is no answer (KernelBench issue
    165: zeros passed ``atol 1e-2`` on 4 of 60 problems); where the reference's own output is
    degenerate the same output is right."""
    ref = torch.linspace(-1e-3, 1e-3, 64)  # small values: zeros are within atol 1e-2
    for out, shape in ((torch.zeros(64), "all zeros"), (torch.full((64,), 5e-4), "constant")):
        c = check_output(out, ref, 1e-2, 0.0)
        assert not c.passed and c.mismatches == 0, c
        assert c.message.startswith(f"output is degenerate ({shape}) where the reference's is not"), c.message
    assert check_output(ref.clone(), ref, 1e-2, 0.0).passed  # the answer itself
    assert check_output(torch.zeros(64), torch.zeros(64), 1e-2, 0.0).passed  # the reference is zeros too
    assert check_output(torch.ones(8), torch.full((8,), 1.0 + 1e-9), 1e-6, 0.0).passed  # both constant
    assert check_output(torch.zeros(2), torch.tensor([1e-4, 0.0]), 1e-2, 0.0).message.startswith(
        "output is degenerate (all zeros)")
    assert check_output(torch.tensor([0.0]), torch.tensor([1e-4]), 1e-2, 0.0).passed  # one value is an answer
    assert checking.degenerate(torch.full((3,), math.nan)) == "NaN everywhere"
    assert checking.degenerate(torch.tensor([7.0])) is None and checking.degenerate(torch.empty(0)) is None
