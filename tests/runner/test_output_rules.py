"""The pieces of GPU MODE's output conventions, in this process: the definition's fields, the
rules (strict, promoted, per tensor of a tuple or dict), output buffers filled and cloned, the
slots' output trees and output buffers on both sides (the memory file and the device slots'
stand-in), float8 on the channel, and the child's alias rule with output buffers."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from kernelrank.problems import ProblemDefinition, ProblemError
from kernelrank.runner.judge.answers import read_tree
from kernelrank.runner.judge.checking import check_output
from kernelrank.runner.judge.output_rules import buffer_keys, compare_tree, poison, with_fresh_buffers
from kernelrank.runner.judge.slots import Arena, SlotError
from kernelrank.runner.slotformat import CudaVmm, output_leaves
from kernelrank.runner.submission.child import PreviousOutput, _alias, _storages
from kernelrank.runner.submission.mapping import Mapping
from kernelrank.runner.wire import decode, encode
from tests.runner.simvmm import MemfdDriver
from tests.runner.test_device_slots import Wire


def _definition(**fields: Any) -> ProblemDefinition:
    base = {
        "name": "p", "title": "p", "description": "p",
        "contract": {"data": [{"name": "x", "dtype": "float32"}], "output": {"name": "y", "dtype": "float32"}},
        "tolerances": {"float32": {"atol": 1e-5, "rtol": 1e-5}, "float64": {"atol": 1e-5, "rtol": 1e-5}},
        "tests": [{"seed": 1}], "benchmarks": {"cpu": [{"seed": 2}], "cuda": [{"seed": 2}]},
        "timing": {"cpu": {"benchmark": 1, "leaderboard": 1}, "cuda": {"benchmark": 1, "leaderboard": 1}},
    }
    return ProblemDefinition.model_validate({**base, **fields})


@pytest.mark.parametrize(("fields", "needle"), [({"output_buffers": ["1..2"]}, "output_buffers"),
                                                ({"output_buffers": ["1", "1"]}, "twice"),
                                                ({"check": "loose"}, "check"),
                                                ({"tolerances": {"float7": {"atol": 0, "rtol": 0}}}, "float7")])
def test_the_definition_refuses_malformed_conventions(fields: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        _definition(**fields)


def test_the_definition_takes_output_buffers_checks_and_float8_tolerances() -> None:
    d = _definition(output_buffers=["1", "out.0"], check="source",
                    tolerances={"float8_e4m3fn": {"atol": 0.1, "rtol": 0.1}})
    assert d.output_buffers == ["1", "out.0"] and d.check == "source"
    assert d.tolerance_for("float8_e4m3fn").atol == 0.1 and d.tolerance_for("uint16").atol == 0.0
    assert _definition().check == "strict" and _definition().output_buffers == []


def test_promotion_compares_a_float32_output_with_a_float64_reference_in_float64() -> None:
    ref = torch.cumsum(torch.randn(1000, dtype=torch.float64), 0)
    out = ref.float()
    assert not check_output(out, ref, 1e-5, 1e-5).passed
    assert check_output(out, ref, 1e-5, 1e-5, promote=True).passed
    assert not check_output(out + 1, ref, 1e-5, 1e-5, promote=True).passed
    flags = torch.tensor([True, False])
    assert "dtype" in check_output(flags, flags.to(torch.int64), 0, 0, promote=True).message  # booleans never promote


def test_trees_are_compared_tensor_by_tensor_naming_the_failing_place() -> None:
    d = _definition()
    x = torch.randn(8)
    expected = (x, {"idx": torch.tensor([3]), "flags": x > 0})
    assert compare_tree(d, (x.clone(), {"idx": torch.tensor([3]), "flags": x > 0}), expected, "cpu")[0]
    assert compare_tree(d, [x.clone(), {"idx": torch.tensor([3]), "flags": x > 0}], expected, "cpu")[0]
    ok, message, _ = compare_tree(d, (x, {"idx": torch.tensor([4]), "flags": x > 0}), expected, "cpu")
    assert not ok and message.startswith("output[1]['idx']: 1 of 1 values outside atol=0")
    ok, message, _ = compare_tree(d, (x, {"idx": torch.tensor([3])}), expected, "cpu")
    assert not ok and "keys" in message
    ok, message, _ = compare_tree(d, x, expected, "cpu")
    assert not ok and "sequence of 2" in message


def test_output_buffers_are_filled_with_0xff_and_the_reference_writes_into_clones() -> None:
    d = _definition(output_buffers=["1", "2.out"])
    data = (torch.randn(4), torch.zeros(4), {"out": torch.zeros(3, 4, dtype=torch.int64).t()})
    keys = buffer_keys(d, data)
    assert keys == {"1": [1], "2.out": [2, "out"]}
    poison(data, keys)
    assert bool(data[1].isnan().all()) and bool((data[2]["out"] == -1).all())  # non-contiguous too
    fresh = with_fresh_buffers(data, keys)
    fresh[1].fill_(7)
    fresh[2]["out"].fill_(7)
    assert fresh[0] is data[0] and bool(data[1].isnan().all()) and bool((data[2]["out"] == -1).all())
    with pytest.raises(ProblemError, match="'3'"):
        buffer_keys(_definition(output_buffers=["3"]), data)


def test_float8_crosses_the_channel_bit_for_bit() -> None:
    x = torch.randn(16).to(torch.float8_e4m3fn)
    header, buffers = encode({"x": x})
    back = decode(header, [bytearray(b) for b in buffers])["x"]
    assert back.dtype == torch.float8_e4m3fn and torch.equal(back.view(torch.uint8), x.view(torch.uint8))


@pytest.mark.parametrize("device_slots", [False, True], ids=["memory file", "device slots"])
def test_an_output_tree_and_an_output_buffer_are_read_from_where_the_judge_put_them(device_slots: bool) -> None:
    arena = Arena(ipc=CudaVmm(MemfdDriver()) if device_slots else None)
    child = Mapping(arena.fd, ipc=CudaVmm(MemfdDriver()) if device_slots else None)
    wire = Wire()
    data = (torch.randn(6), torch.full((6,), math.nan))
    x, out = child.build(wire(arena.place(data, out_bytes=4096, dests={"1": [1]})))
    assert set(child.dests) == {"1"} and child.dests["1"] is out
    out.copy_(x * 2)
    answer = child.put_output((out, {"idx": torch.argmax(x).reshape(1), "fp8": x.to(torch.float8_e4m3fn)}))
    tree = answer["out"]["tree"]
    assert tree["__tuple__"][0] == {"dest": "1", "device": "cpu"}  # the buffer is named, not copied
    got = read_tree(arena, answer["out"], None, 0)
    assert isinstance(got, tuple) and torch.equal(got[0], data[0] * 2)
    assert torch.equal(got[1]["idx"], torch.argmax(data[0]).reshape(1))
    assert torch.equal(got[1]["fp8"].view(torch.uint8), data[0].to(torch.float8_e4m3fn).view(torch.uint8))
    with pytest.raises(SlotError, match="output buffer"):  # a name the judge did not place
        arena.read_output({"dest": "0"})
    plain = child.put_output(out)
    assert plain["out"] == {"dest": "1", "device": "cpu"}
    assert torch.equal(arena.read_output(plain["out"]), data[0] * 2)


def test_the_childs_alias_rule_lets_an_output_buffer_be_returned_whole_and_nothing_else() -> None:
    x, buf = torch.randn(8), torch.empty(8)
    inputs, dests = _storages((x, buf)), {"1": buf}
    assert _alias(buf, inputs, PreviousOutput(), 1, dests) is None
    assert _alias((buf, x * 2), inputs, PreviousOutput(), 1, dests) is None
    assert "other than the output buffers" in (_alias(buf[2:], inputs, PreviousOutput(), 1, dests) or "")
    assert "other than the output buffers" in (_alias((buf, x), inputs, PreviousOutput(), 1, dests) or "")
    assert "shares memory with an input" in (_alias(buf, inputs, PreviousOutput(), 1) or "")  # undeclared
    prev = PreviousOutput()
    kept = torch.ones(4)
    prev.track((buf, kept), dests)
    assert _alias(buf, [], prev, 2, dests) is None  # the buffer is the judge's, filled afresh each call
    assert "same tensor object" in (_alias((buf, kept), [], prev, 2, dests) or "")


def test_only_tensors_and_builtin_containers_of_them_are_outputs() -> None:
    x = torch.ones(2)
    assert output_leaves({"a": (x, [x])}) == [x, x]
    assert output_leaves(torch.linalg.cholesky_ex(torch.eye(2))) is not None  # torch's own named tuple
    assert output_leaves([x, 1.0]) is None and output_leaves({1: x}) is None

    class Sneaky(tuple):
        pass

    assert output_leaves(Sneaky((x,))) is None
    assert output_leaves([[[[[x]]]]]) is None  # nested past the limit
