"""Tensor family (rewrites/tensor.py), typed Concat/Split (encode, shape facts, lowering) and the MatMul
merges of the linear family: each rule fires where it should, not where its guard fails, and is sound."""

from __future__ import annotations

import numpy as np
import onnx.helper as oh
import pytest
from hypothesis import given

from eqsat.testing import (PROPERTIES, RuleCase, assert_rule_does_not_fire, assert_rule_sound, op_counts,
                           optimize_with_rules, saturate_with_rules)
from tests.rule_graphs import model, node, property_settings, transpose

RNG = np.random.default_rng(3)


def rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, size=shape).astype(np.float32)


def split(x: str, outs: list[str], axis: int, sizes: list[int] | None, opset: int, name: str = "sizes"):
    if sizes is not None and opset >= 13:
        return oh.make_node("Split", [x, name], outs, axis=axis)
    return oh.make_node("Split", [x], outs, axis=axis, **({"split": sizes} if sizes is not None else {}))


def ops_of(session) -> set[str]:
    return {n.op for n in session.egraph.nodes}


# ---- typed Concat / Split: encoding and lowering ----

@pytest.mark.parametrize("opset", [11, 13, 18])
def test_concat_split_are_typed_and_round_trip(opset: int) -> None:
    inits = {"sizes": np.array([1, 3], np.int64)} if opset >= 13 else {}
    m = model([node("Concat", ["a", "b"], "c", axis=-1), split("c", ["y0", "y1"], -1, [1, 3], opset),
               node("Relu", ["y0"], "r0"), node("Relu", ["y1"], "r1")],
              [("a", "FLOAT", (2, 2)), ("b", "FLOAT", (2, 2))], ["r0", "r1"], initializers=inits, opset=opset)
    session = saturate_with_rules(m, [])
    assert {"Concat", "Split", "Out"} <= ops_of(session) and "Opaque" not in ops_of(session)
    result = session.extract("cpu", verify=True)
    assert op_counts(result.model) == {"Concat": 1, "Split": 1, "Relu": 2}


def test_even_split_without_sizes_is_typed() -> None:
    m = model([split("x", ["y0", "y1"], 1, None, 13), node("Add", ["y0", "y1"], "y")], [("x", "FLOAT", (2, 4))])
    session = saturate_with_rules(m, [])
    assert "Split" in ops_of(session)
    assert op_counts(session.extract("cpu", verify=True).model) == {"Split": 1, "Add": 1}


def test_split_with_runtime_sizes_stays_opaque() -> None:
    m = model([oh.make_node("Split", ["x", "s"], ["y0", "y1"], axis=0), node("Add", ["y0", "y1"], "y")],
              [("x", "FLOAT", (4,)), ("s", "INT64", (2,))], [("y", "FLOAT", ("n",))], opset=13)
    session = saturate_with_rules(m, [])
    assert "Split" not in ops_of(session) and "Opaque" in ops_of(session)


# ---- shape-concat-split (analysis) ----

def test_shape_concat_split_gives_created_concats_a_shape() -> None:
    m = model([transpose("a", "ta", (1, 0)), transpose("b", "tb", (1, 0)), node("Concat", ["ta", "tb"], "y", axis=0)],
              [("a", "FLOAT", (2, 3)), ("b", "FLOAT", (2, 1))])
    session = saturate_with_rules(m, ["transpose-sink-concat"])
    created = [c for c in session.egraph.classes if any(session.egraph.node(n).op == "Concat" for n in c.nodes)
               and c.shape == (2, 4)]
    assert created, "the sunk Concat(a, b) on axis 1 has shape (2, 4)"
    assert_rule_sound(m, "shape-concat-split", also=["transpose-sink-concat"])


def test_shape_concat_split_needs_the_input_shapes() -> None:
    m = model([node("Relu", ["a"], "y")], [("a", "FLOAT", (2, 3))])
    assert_rule_does_not_fire(m, "shape-concat-split")


@property_settings()
@given(PROPERTIES["shape-concat-split"]())
def test_shape_concat_split_property(case: RuleCase) -> None:
    case.check()


# ---- concat-merge and list-append ----

def _nested(inner_axis: int, outer_axis: int = 1):
    return model([node("Concat", ["b", "c"], "i", axis=inner_axis), node("Concat", ["a", "i", "d"], "y", axis=outer_axis)],
                 [("a", "FLOAT", (2, 1)), ("b", "FLOAT", (2, 2)), ("c", "FLOAT", (2, 3)), ("d", "FLOAT", (2, 1))])


def test_concat_merge() -> None:
    m = _nested(1)
    result = assert_rule_sound(m, "concat-merge")
    assert op_counts(result.model) == {"Concat": 1}
    assert_rule_sound(m, "list-append", also=["concat-merge"])


def test_concat_merge_not_on_another_axis() -> None:
    m = model([node("Concat", ["b", "c"], "i", axis=0), node("Concat", ["a", "i"], "y", axis=1)],
              [("a", "FLOAT", (4, 1)), ("b", "FLOAT", (2, 2)), ("c", "FLOAT", (2, 2))])
    assert_rule_does_not_fire(m, "concat-merge")
    assert_rule_does_not_fire(m, "list-append", also=["concat-merge"])


@property_settings()
@given(PROPERTIES["concat-merge"]())
def test_concat_merge_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["list-append"]())
def test_list_append_property(case: RuleCase) -> None:
    case.check()


# ---- split-concat ----

@pytest.mark.parametrize("opset", [11, 13])
def test_split_concat(opset: int) -> None:
    inits = {"sizes": np.array([2, 3], np.int64)} if opset >= 13 else {}
    m = model([node("Concat", ["a", "b"], "c", axis=1), split("c", ["y0", "y1"], 1, [2, 3], opset),
               node("Sub", ["y0", "y0"], "s0"), node("Relu", ["y1"], "s1")],
              [("a", "FLOAT", (2, 2)), ("b", "FLOAT", (2, 3))], ["s0", "s1"], initializers=inits, opset=opset)
    result = assert_rule_sound(m, "split-concat")
    assert op_counts(result.model) == {"Sub": 1, "Relu": 1}


def test_split_concat_not_with_other_sizes() -> None:
    m = model([node("Concat", ["a", "b"], "c", axis=1), split("c", ["y0", "y1"], 1, [3, 2], 13),
               node("Add", ["y0", "y0"], "s0"), node("Relu", ["y1"], "s1")],
              [("a", "FLOAT", (2, 2)), ("b", "FLOAT", (2, 3))], ["s0", "s1"],
              initializers={"sizes": np.array([3, 2], np.int64)}, opset=13)
    assert_rule_does_not_fire(m, "split-concat")


@property_settings()
@given(PROPERTIES["split-concat"]())
def test_split_concat_property(case: RuleCase) -> None:
    case.check()


# ---- transpose-sink-concat ----

def test_transpose_sink_concat_cancels_with_a_transpose_after() -> None:
    m = model([transpose("a", "ta", (0, 2, 1)), transpose("b", "tb", (0, 2, 1)), node("Concat", ["ta", "tb"], "c", axis=1),
               transpose("c", "y", (0, 2, 1))], [("a", "FLOAT", (1, 2, 3)), ("b", "FLOAT", (1, 2, 4))])
    result = assert_rule_sound(m, "transpose-sink-concat", also=["transpose-merge", "transpose-identity"])
    assert op_counts(result.model) == {"Concat": 1}


def test_transpose_sink_concat_not_with_different_perms() -> None:
    m = model([transpose("a", "ta", (1, 0)), node("Concat", ["ta", "b"], "y", axis=0)],
              [("a", "FLOAT", (2, 3)), ("b", "FLOAT", (3, 2))])
    assert_rule_does_not_fire(m, "transpose-sink-concat")


@property_settings()
@given(PROPERTIES["transpose-sink-concat"]())
def test_transpose_sink_concat_property(case: RuleCase) -> None:
    case.check()


# ---- matmul-merge, matmul-bias-merge (linear family) ----

def _qkv(bias: bool, n: int = 3, const: bool = True):
    nodes, outs, inits = [], [], {}
    inputs = [("x", "FLOAT", (2, 5, 8))]
    for i in range(n):
        if const:
            inits[f"w{i}"] = rand(8, 4 + i)
        else:
            inputs.append((f"w{i}", "FLOAT", (8, 4 + i)))
        nodes.append(node("MatMul", ["x", f"w{i}"], f"m{i}"))
        y = f"m{i}"
        if bias:
            inits[f"b{i}"] = rand(4 + i)
            nodes.append(node("Add", [y, f"b{i}"], f"z{i}"))
            y = f"z{i}"
        nodes.append(node("Relu", [y], f"o{i}"))
        outs.append(f"o{i}")
    return model(nodes, inputs, outs, initializers=inits)


@pytest.mark.parametrize("rule,bias", [("matmul-merge", False), ("matmul-bias-merge", True)])
def test_matmul_merge_three_projections(rule: str, bias: bool) -> None:
    m = _qkv(bias)
    session = saturate_with_rules(m, [rule])
    assert session.saturation.rules_fired[rule] == 4  # 3 pairs + 1 triple: each sorted subset once
    result = session.extract("gpu", verify=True)
    assert op_counts(result.model)["MatMul"] == 1 and op_counts(result.model)["Split"] == 1
    assert_rule_sound(m, rule)


@pytest.mark.parametrize("rule,bias", [("matmul-merge", False), ("matmul-bias-merge", True)])
def test_matmul_merge_not_with_runtime_weights(rule: str, bias: bool) -> None:
    if bias:
        m = _qkv(True, 2, const=False)
    else:
        m = _qkv(False, 2, const=False)
    assert_rule_does_not_fire(m, rule)


def test_matmul_bias_merge_not_without_bias() -> None:
    assert_rule_does_not_fire(_qkv(False), "matmul-bias-merge")


@pytest.mark.parametrize("rule", ["matmul-merge", "matmul-bias-merge"])
@property_settings()
@given(case=PROPERTIES["matmul-merge"]())
def test_matmul_merge_property(rule: str, case: RuleCase) -> None:
    if rule == "matmul-merge":
        case.check()


@property_settings()
@given(PROPERTIES["matmul-bias-merge"]())
def test_matmul_bias_merge_property(case: RuleCase) -> None:
    case.check()
