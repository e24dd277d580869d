"""Cleanup rules (rewrites/cleanup.py): each fires where it should, not where its guard fails, and is sound.

Note: eqsat.io.normalize (onnxscript's folder) already removes Identity nodes between two nodes and
Dropout from opset 12 on, so `identity-remove` fires on output aliases (an output that is another
output or an input under a second name) and `dropout-remove` on Dropout-7/10 without attributes.
"""

from __future__ import annotations

import numpy as np
import onnx.helper as oh
import pytest
from hypothesis import given

from eqsat.testing import (PROPERTIES, RuleCase, assert_rule_does_not_fire, assert_rule_sound, op_counts,
                           optimize_with_rules, saturate_with_rules)
from tests.rule_graphs import model, node, property_settings

X = [("x", "FLOAT", (2, 3, 4))]


# ---- relu-merge ----

@pytest.mark.parametrize("n", [2, 4])
def test_relu_merge_collapses_chain(n: int) -> None:
    nodes = [node("Relu", ["x" if k == 0 else f"r{k - 1}"], "y" if k == n - 1 else f"r{k}") for k in range(n)]
    m = model(nodes, X)
    result, fired = optimize_with_rules(m, ["relu-merge"])
    assert fired["relu-merge"] > 0
    assert op_counts(result.model) == {"Relu": 1}
    assert_rule_sound(m, "relu-merge")


def test_relu_merge_not_on_relu_of_sigmoid() -> None:
    assert_rule_does_not_fire(model([node("Sigmoid", ["x"], "s"), node("Relu", ["s"], "y")], X), "relu-merge")


def test_relu_merge_not_on_relu_of_leaky_relu() -> None:
    assert_rule_does_not_fire(model([node("LeakyRelu", ["x"], "s"), node("Relu", ["s"], "y")], X), "relu-merge")


@property_settings()
@given(PROPERTIES["relu-merge"]())
def test_relu_merge_property(case: RuleCase) -> None:
    case.check()


# ---- mul-one, add-zero ----

NEUTRAL = [("mul-one", "Mul", 1.0), ("add-zero", "Add", 0.0)]


@pytest.mark.parametrize("rule,op,value", NEUTRAL)
@pytest.mark.parametrize("shape", [(), (1,), (1, 1, 1)])
@pytest.mark.parametrize("const_first", [False, True])
def test_neutral_element_removed(rule: str, op: str, value: float, shape: tuple, const_first: bool) -> None:
    inputs = ["k", "r"] if const_first else ["r", "k"]
    m = model([node("Relu", ["x"], "r"), node(op, inputs, "y")], X, initializers={"k": np.full(shape, value, np.float32)})
    result, fired = optimize_with_rules(m, [rule])
    assert fired[rule] > 0
    assert op_counts(result.model) == {"Relu": 1}
    assert_rule_sound(m, rule)


@pytest.mark.parametrize("rule,op,value", NEUTRAL)
def test_neutral_element_integer_tensor(rule: str, op: str, value: float) -> None:
    m = model([node("Abs", ["x"], "a"), node(op, ["a", "k"], "y")], [("x", "INT64", (3, 2))],
              initializers={"k": np.array(int(value), np.int64)})
    assert op_counts(assert_rule_sound(m, rule).model) == {"Abs": 1}


@pytest.mark.parametrize("rule,op,value", NEUTRAL)
@pytest.mark.parametrize("other", [2.0, -1.0, 0.5])
def test_neutral_element_not_for_other_values(rule: str, op: str, value: float, other: float) -> None:
    m = model([node(op, ["x", "k"], "y")], X, initializers={"k": np.array(other, np.float32)})
    assert_rule_does_not_fire(m, rule)


@pytest.mark.parametrize("rule,op,value", NEUTRAL)
def test_neutral_element_not_when_it_broadcasts_x(rule: str, op: str, value: float) -> None:
    """x (3,) op k (1, 1) is (1, 3): the constant changes the shape, so the op is not a no-op."""
    m = model([node(op, ["x", "k"], "y")], [("x", "FLOAT", (3,))], initializers={"k": np.full((1, 1), value, np.float32)})
    assert_rule_does_not_fire(m, rule)
    m = model([node(op, ["k", "x"], "y")], [("x", "FLOAT", (2, 1))],
              initializers={"k": np.full((1, 1, 1), value, np.float32)})
    assert_rule_does_not_fire(m, rule)


@pytest.mark.parametrize("rule,op,value", NEUTRAL)
def test_neutral_element_not_on_non_constant_tensor(rule: str, op: str, value: float) -> None:
    """A full constant tensor of ones/zeros is not a Scalar term; neither is a runtime input."""
    m = model([node(op, ["x", "k"], "y")], X, initializers={"k": np.full((2, 3, 4), value, np.float32)})
    assert_rule_does_not_fire(m, rule)
    m = model([node(op, ["x", "k"], "y")], [*X, ("k", "FLOAT", ())])
    assert_rule_does_not_fire(m, rule)


@pytest.mark.parametrize("rule,op,value", NEUTRAL)
def test_neutral_element_not_without_static_shapes(rule: str, op: str, value: float) -> None:
    """A symbolic dim gives no shape fact, so the shape guard cannot hold (rules do not guess)."""
    m = model([node(op, ["x", "k"], "y")], [("x", "FLOAT", ("N", 3))], ["y"],
              initializers={"k": np.array(value, np.float32)})
    assert_rule_does_not_fire(m, rule)


@property_settings()
@given(PROPERTIES["mul-one"]())
def test_mul_one_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["add-zero"]())
def test_add_zero_property(case: RuleCase) -> None:
    case.check()


# ---- identity-remove ----

def test_identity_remove_on_output_alias() -> None:
    """y2 = Identity(y1) with both outputs: the classes merge and one Relu feeds both names."""
    m = model([node("Relu", ["x"], "y1"), node("Identity", ["y1"], "y2")], X, ["y1", "y2"])
    result, fired = optimize_with_rules(m, ["identity-remove"])
    assert fired["identity-remove"] > 0
    session = saturate_with_rules(m, ["identity-remove"])
    assert len(set(session.roots)) == 1
    assert op_counts(result.model) == {"Relu": 1, "Identity": 1}  # the second output name needs a node
    assert_rule_sound(m, "identity-remove")


def test_identity_remove_not_without_identity() -> None:
    assert_rule_does_not_fire(model([node("Relu", ["x"], "y1"), node("Abs", ["y1"], "y2")], X, ["y1", "y2"]),
                              "identity-remove")


@property_settings()
@given(PROPERTIES["identity-remove"]())
def test_identity_remove_property(case: RuleCase) -> None:
    case.check()


# ---- dropout-remove ----

@pytest.mark.parametrize("opset", [7, 10, 11])
def test_dropout_remove_in_inference(opset: int) -> None:
    m = model([node("Relu", ["x"], "r"), node("Dropout", ["r"], "d"), node("Neg", ["d"], "y")], X, opset=opset)
    result, fired = optimize_with_rules(m, ["dropout-remove"])
    assert fired["dropout-remove"] > 0
    assert op_counts(result.model) == {"Relu": 1, "Neg": 1}
    assert_rule_sound(m, "dropout-remove")


def test_dropout_remove_not_in_training_mode() -> None:
    """Dropout-13 with training_mode=True is random: it must stay."""
    inits = {"ratio": np.array(0.5, np.float32), "training": np.array(True)}
    m = model([node("Dropout", ["x", "ratio", "training"], "y")], X, initializers=inits, opset=13)
    assert_rule_does_not_fire(m, "dropout-remove")


def test_dropout_remove_not_when_mask_is_used() -> None:
    m = model([oh.make_node("Dropout", ["x"], ["y", "mask"])], X, ["y", "mask"], opset=11)
    assert_rule_does_not_fire(m, "dropout-remove")


def test_dropout_remove_with_ratio_attribute() -> None:
    m = model([node("Relu", ["x"], "r"), node("Dropout", ["r"], "y", ratio=0.1)], X, opset=10)
    assert_rule_sound(m, "dropout-remove")


@property_settings()
@given(PROPERTIES["dropout-remove"]())
def test_dropout_remove_property(case: RuleCase) -> None:
    case.check()
