"""Cleanup rules (rewrites/cleanup.py): each fires where it should, not where its guard fails, and is sound.

Note: eqsat.frontend.normalize (onnxscript's folder) already removes Identity nodes between two nodes and
Dropout from opset 12 on, so `identity-remove` fires on output aliases (an output that is another
output or an input under a second name) and `dropout-remove` on Dropout-7/10 without attributes.
"""

from __future__ import annotations

import numpy as np
import onnx.helper as oh
import pytest
from hypothesis import given

from eqsat.testing import (
    PROPERTIES,
    RuleCase,
    assert_rule_does_not_fire,
    assert_rule_sound,
    op_counts,
    optimize_with_rules,
    run,
    saturate_with_rules,
)
from eqsat.rewrites.registry import all_rules
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
    m = model(
        [node("Relu", ["x"], "r"), node(op, inputs, "y")], X, initializers={"k": np.full(shape, value, np.float32)}
    )
    result, fired = optimize_with_rules(m, [rule])
    assert fired[rule] > 0
    assert op_counts(result.model) == {"Relu": 1}
    assert_rule_sound(m, rule)


@pytest.mark.parametrize("rule, op, zero", [("add-zero", "Add", 0.0), ("sub-zero", "Sub", -0.0)])
def test_removing_a_zero_changes_the_sign_of_a_zero_so_the_rule_is_not_exact(rule: str, op: str, zero: float) -> None:
    """-0 + 0 and -0 - (-0) are +0 under IEEE, and 1 / x tells them apart: the rule is fp-reassoc (on by default,
    the sign of a zero all it changes), not exact."""
    m = model(
        [node(op, ["x", "k"], "s"), node("Reciprocal", ["s"], "y")], X, initializers={"k": np.array(zero, np.float32)}
    )
    result, fired = optimize_with_rules(m, [rule])
    assert fired[rule] > 0
    x = {"x": np.full(X[0][2], -0.0, np.float32)}
    assert np.all(run(m, x)[0] == np.inf) and np.all(run(result.model, x)[0] == -np.inf)
    assert {r.name: r.soundness for r in all_rules()}[rule] == "fp-reassoc"


@pytest.mark.parametrize("rule,op,value", NEUTRAL)
def test_neutral_element_integer_tensor(rule: str, op: str, value: float) -> None:
    m = model(
        [node("Abs", ["x"], "a"), node(op, ["a", "k"], "y")],
        [("x", "INT64", (3, 2))],
        initializers={"k": np.array(int(value), np.int64)},
    )
    assert op_counts(assert_rule_sound(m, rule).model) == {"Abs": 1}


@pytest.mark.parametrize("rule,op,value", NEUTRAL)
@pytest.mark.parametrize("other", [2.0, -1.0, 0.5])
def test_neutral_element_not_for_other_values(rule: str, op: str, value: float, other: float) -> None:
    m = model([node(op, ["x", "k"], "y")], X, initializers={"k": np.array(other, np.float32)})
    assert_rule_does_not_fire(m, rule)


@pytest.mark.parametrize("rule,op,value", NEUTRAL)
def test_neutral_element_not_when_it_broadcasts_x(rule: str, op: str, value: float) -> None:
    """x (3,) op k (1, 1) is (1, 3): the constant changes the shape, so the op is not a no-op."""
    m = model(
        [node(op, ["x", "k"], "y")], [("x", "FLOAT", (3,))], initializers={"k": np.full((1, 1), value, np.float32)}
    )
    assert_rule_does_not_fire(m, rule)
    m = model(
        [node(op, ["k", "x"], "y")], [("x", "FLOAT", (2, 1))], initializers={"k": np.full((1, 1, 1), value, np.float32)}
    )
    assert_rule_does_not_fire(m, rule)


@pytest.mark.parametrize("rule,op,value", NEUTRAL)
@pytest.mark.parametrize("shape", [(2, 3, 4), (3, 1), (1, 3, 4)])
@pytest.mark.parametrize("const_first", [False, True])
def test_neutral_element_tensor_of_equal_elements(
    rule: str, op: str, value: float, shape: tuple, const_first: bool
) -> None:
    """A ones/zeros tensor (the `splat` fact) that does not grow x: the op is a no-op too."""
    inputs = ["k", "r"] if const_first else ["r", "k"]
    m = model(
        [node("Relu", ["x"], "r"), node(op, inputs, "y")], X, initializers={"k": np.full(shape, value, np.float32)}
    )
    assert op_counts(assert_rule_sound(m, rule).model) == {"Relu": 1}


@pytest.mark.parametrize("rule,op,value", NEUTRAL)
def test_neutral_element_not_on_a_mixed_or_runtime_tensor(rule: str, op: str, value: float) -> None:
    """A constant with one element off the neutral value is no splat; a runtime input is no constant."""
    k = np.full((2, 3, 4), value, np.float32)
    k[1, 2, 3] = value + 1
    m = model([node(op, ["x", "k"], "y")], X, initializers={"k": k})
    assert_rule_does_not_fire(m, rule)
    m = model([node(op, ["x", "k"], "y")], [*X, ("k", "FLOAT", ())])
    assert_rule_does_not_fire(m, rule)


@pytest.mark.parametrize("rule,op,value", NEUTRAL)
def test_neutral_element_not_when_a_tensor_of_them_broadcasts_x(rule: str, op: str, value: float) -> None:
    """x (2, 3, 4) + zeros(5, 2, 3, 4), x (3, 1) * ones(3, 4): the splat changes the output shape."""
    m = model([node(op, ["x", "k"], "y")], X, initializers={"k": np.full((5, 2, 3, 4), value, np.float32)})
    assert_rule_does_not_fire(m, rule)
    m = model(
        [node(op, ["k", "x"], "y")], [("x", "FLOAT", (3, 1))], initializers={"k": np.full((3, 4), value, np.float32)}
    )
    assert_rule_does_not_fire(m, rule)


@pytest.mark.parametrize("rule,op,value", NEUTRAL)
def test_neutral_element_with_symbolic_dims(rule: str, op: str, value: float) -> None:
    """x's symbolic dim is the output's: the shape guard holds without knowing its size."""
    m = model(
        [node(op, ["x", "k"], "y")], [("x", "FLOAT", ("N", 3))], ["y"], initializers={"k": np.array(value, np.float32)}
    )
    assert op not in op_counts(assert_rule_sound(m, rule).model)


@pytest.mark.parametrize("rule,op,value", NEUTRAL)
def test_neutral_element_not_when_a_symbolic_output_grows(rule: str, op: str, value: float) -> None:
    """x (N, 1) with a (1, 3) constant: the output is (N, 3), not x's shape (the guard compares symbols)."""
    m = model(
        [node(op, ["x", "k"], "y")],
        [("x", "FLOAT", ("N", 1))],
        ["y"],
        initializers={"k": np.full((1, 3), value, np.float32)},
    )
    assert_rule_does_not_fire(m, rule)


@property_settings()
@given(PROPERTIES["mul-one"]())
def test_mul_one_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["add-zero"]())
def test_add_zero_property(case: RuleCase) -> None:
    case.check()


# ---- termination: a removed neutral op is subsumed (it would be a self-loop for the sinking and folding rules) ----


def _saturates(m) -> "object":
    """All default rules, default limits: saturation must reach a fixed point (regression: the fuzzer's
    B(1, Transpose(x)) grew to ~200k e-nodes, Conv * 1 and Conv / 1 never saturated)."""
    from eqsat.session import saturate

    report = saturate(m).saturation
    assert report.stop_reason == "saturated", (report.stop_reason, report.iterations, report.enodes, report.rules_fired)
    assert report.enodes < 100, report.enodes
    return report


@pytest.mark.parametrize("op,value", [("Mul", 1.0), ("Add", 0.0), ("Sub", 0.0), ("Div", 1.0)])
@pytest.mark.parametrize("const_first", [False, True])
@pytest.mark.parametrize("shape", [(), (1, 1, 1, 1)])
def test_neutral_op_after_transpose_saturates(op: str, value: float, const_first: bool, shape: tuple) -> None:
    if const_first and op in ("Sub", "Div"):
        pytest.skip("1 / x and 0 - x are not neutral")
    inputs = ["k", "t"] if const_first else ["t", "k"]
    m = model(
        [node("Transpose", ["x"], "t", perm=[0, 2, 3, 1]), node(op, inputs, "y")],
        [("x", "FLOAT", (1, 3, 4, 5))],
        initializers={"k": np.full(shape, value, np.float32)},
    )
    _saturates(m)
    result = assert_rule_sound(
        m,
        {"Mul": "mul-one", "Add": "add-zero", "Sub": "sub-zero", "Div": "div-one"}[op],
        also=("transpose-sink-binary-const", "transpose-merge", "transpose-identity"),
    )
    assert op_counts(result.model) == {"Transpose": 1}


@pytest.mark.parametrize("op,value", [("Mul", 1.0), ("Add", 0.0), ("Sub", 0.0), ("Div", 1.0)])
@pytest.mark.parametrize("const_first", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_neutral_op_after_conv_saturates(op: str, value: float, const_first: bool, bias: bool) -> None:
    if const_first and op in ("Sub", "Div"):
        pytest.skip("1 / x and 0 - x are not neutral")
    inits = {"w": np.random.RandomState(0).randn(4, 3, 3, 3).astype(np.float32), "k": np.full((1,), value, np.float32)}
    if bias:
        inits["b"] = np.arange(4, dtype=np.float32)
    conv = node("Conv", ["x", "w", "b"] if bias else ["x", "w"], "c", pads=[1, 1, 1, 1])
    m = model(
        [conv, node(op, ["k", "c"] if const_first else ["c", "k"], "y")],
        [("x", "FLOAT", (1, 3, 8, 8))],
        initializers=inits,
    )
    _saturates(m)
    result = assert_rule_sound(
        m,
        {"Mul": "mul-one", "Add": "add-zero", "Sub": "sub-zero", "Div": "div-one"}[op],
        also=("conv-scale-fold", "conv-div-fold", "conv-bias-fold", "conv-zero-bias", "const-operand-last"),
    )
    assert op_counts(result.model) == {"Conv": 1}


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
    assert_rule_does_not_fire(
        model([node("Relu", ["x"], "y1"), node("Abs", ["y1"], "y2")], X, ["y1", "y2"]), "identity-remove"
    )


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


# ---- expand-noop, reshape-noop, pad-noop, slice-noop (the folder removes only the literal cases) ----


def test_expand_noop_to_a_broadcastable_shape() -> None:
    """Expand(x, (1, 4)) of a (2, 3, 4) x is x."""
    m = model([node("Expand", ["x", "s"], "e"), node("Relu", ["e"], "y")], X, initializers={"s": np.array([1, 4])})
    result = assert_rule_sound(m, "expand-noop")
    assert op_counts(result.model) == {"Relu": 1}


def test_expand_noop_not_when_it_broadcasts() -> None:
    m = model([node("Expand", ["x", "s"], "y")], X, initializers={"s": np.array([3, 2, 3, 4])})
    assert_rule_does_not_fire(m, "expand-noop")


@property_settings()
@given(PROPERTIES["expand-noop"]())
def test_expand_noop_property(case: RuleCase) -> None:
    case.check()


def test_reshape_noop_with_minus_one_and_zero() -> None:
    m = model([node("Reshape", ["x", "s"], "r"), node("Relu", ["r"], "y")], X, initializers={"s": np.array([0, -1, 4])})
    result = assert_rule_sound(m, "reshape-noop")
    assert op_counts(result.model) == {"Relu": 1}


def test_reshape_noop_not_when_the_shape_changes() -> None:
    m = model([node("Reshape", ["x", "s"], "r"), node("Relu", ["r"], "y")], X, initializers={"s": np.array([3, -1])})
    assert_rule_does_not_fire(m, "reshape-noop")


@property_settings()
@given(PROPERTIES["reshape-noop"]())
def test_reshape_noop_property(case: RuleCase) -> None:
    case.check()


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_noop_all_zero(mode: str) -> None:
    m = model([node("Pad", ["x", "p"], "y", mode=mode)], X, initializers={"p": np.zeros(6, np.int64)})
    result = assert_rule_sound(m, "pad-noop")
    assert "Pad" not in op_counts(result.model)


def test_pad_noop_not_when_a_pad_crops_and_grows() -> None:
    """pads (+1, -1) keep the shape but shift the data: not a no-op."""
    m = model([node("Pad", ["x", "p"], "y")], X, initializers={"p": np.array([0, 0, 1, 0, 0, -1])})
    assert_rule_does_not_fire(m, "pad-noop")


@property_settings()
@given(PROPERTIES["pad-noop"]())
def test_pad_noop_property(case: RuleCase) -> None:
    case.check()


def test_slice_noop_full_range() -> None:
    inits = {"st": np.array([0, -100]), "en": np.array([2**62, 100]), "ax": np.array([0, -1])}
    m = model([node("Slice", ["x", "st", "en", "ax"], "y")], X, initializers=inits)
    result = assert_rule_sound(m, "slice-noop")
    assert "Slice" not in op_counts(result.model)


def test_slice_noop_full_range_over_symbolic_dims() -> None:
    """start 0 and an end past any dim keep a symbolic dim: the shape guard holds."""
    inits = {"st": np.array([0, 0]), "en": np.array([2**63 - 1, 2**31 - 1]), "ax": np.array([0, 2])}
    m = model([node("Slice", ["x", "st", "en", "ax"], "y")], [("x", "FLOAT", ("N", 3, "T"))], initializers=inits)
    assert "Slice" not in op_counts(assert_rule_sound(m, "slice-noop").model)


def test_slice_noop_not_for_a_partial_slice_of_a_symbolic_dim() -> None:
    inits = {"st": np.array([0]), "en": np.array([4]), "ax": np.array([2])}
    m = model([node("Slice", ["x", "st", "en", "ax"], "y")], [("x", "FLOAT", ("N", 3, "T"))], initializers=inits)
    assert_rule_does_not_fire(m, "slice-noop")


def test_slice_noop_not_for_a_reversal() -> None:
    """Step -1 over the whole axis keeps the shape and reverses the data."""
    inits = {"st": np.array([-1]), "en": np.array([-(2**62)]), "ax": np.array([2]), "sp": np.array([-1])}
    m = model([node("Slice", ["x", "st", "en", "ax", "sp"], "y")], X, initializers=inits)
    assert_rule_does_not_fire(m, "slice-noop")


def test_slice_noop_not_for_a_real_slice() -> None:
    m = model([node("Slice", ["x", "st", "en"], "y")], X, initializers={"st": np.array([1]), "en": np.array([2])})
    assert_rule_does_not_fire(m, "slice-noop")


@property_settings()
@given(PROPERTIES["slice-noop"]())
def test_slice_noop_property(case: RuleCase) -> None:
    case.check()


# ---- pad-merge ----


def _two_pads(p, q, mode1: str = "constant", mode2: str = "constant", v1: float = 0.0, v2: float = 0.0) -> object:
    inits = {"p": np.array(p), "q": np.array(q), "v1": np.array(v1, np.float32), "v2": np.array(v2, np.float32)}
    return model(
        [node("Pad", ["x", "p", "v1"], "p1", mode=mode1), node("Pad", ["p1", "q", "v2"], "y", mode=mode2)],
        X,
        initializers=inits,
    )


def test_pad_merge_constant_pads() -> None:
    m = _two_pads([0, 1, 0, 0, 2, 1], [1, 0, 0, 1, 0, 3], v1=1.5, v2=1.5)
    result = assert_rule_sound(m, "pad-merge")
    assert op_counts(result.model) == {"Pad": 1}


@pytest.mark.parametrize("kw", [{"mode1": "reflect"}, {"mode2": "edge"}, {"v2": 1.0}])
def test_pad_merge_not_for_reflect_edge_or_other_values(kw: dict) -> None:
    assert_rule_does_not_fire(_two_pads([0, 1, 1, 0, 1, 1], [0, 1, 1, 0, 1, 1], **kw), "pad-merge")


def test_pad_merge_not_with_negative_pads() -> None:
    """A crop after a pad may remove padding and data in another order: left alone."""
    assert_rule_does_not_fire(_two_pads([0, 2, 0, 0, 0, 0], [0, -1, 0, 0, 0, 0]), "pad-merge")


@property_settings()
@given(PROPERTIES["pad-merge"]())
def test_pad_merge_property(case: RuleCase) -> None:
    case.check()


# ---- pad-merge-edge ----


def test_pad_merge_edge_pads() -> None:
    m = _two_pads([0, 1, 0, 0, 2, 1], [1, 0, 2, 1, 0, 3], mode1="edge", mode2="edge")
    result = assert_rule_sound(m, "pad-merge-edge")
    assert op_counts(result.model) == {"Pad": 1}


@pytest.mark.parametrize("modes", [("reflect", "reflect"), ("edge", "reflect"), ("edge", "constant")])
def test_pad_merge_edge_not_for_reflect_or_mixed_modes(modes: tuple) -> None:
    """Reflect pads do not compose: reflect 1 twice on [0 1 2] is [1 0 1 2 1 2], reflect 2 is
    [2 1 0 1 2 1 0] (checked here with numpy), so only edge pads merge."""
    x = np.arange(3)
    assert not np.array_equal(np.pad(np.pad(x, 1, "reflect"), 1, "reflect"), np.pad(x, 2, "reflect"))
    assert_rule_does_not_fire(
        _two_pads([0, 1, 1, 0, 1, 1], [0, 1, 1, 0, 1, 1], mode1=modes[0], mode2=modes[1]), "pad-merge-edge"
    )


def test_pad_merge_edge_not_with_negative_pads() -> None:
    """An edge pad after a crop repeats the new border, not the cropped one."""
    assert_rule_does_not_fire(
        _two_pads([0, -1, 0, 0, 0, 0], [0, 2, 0, 0, 0, 0], mode1="edge", mode2="edge"), "pad-merge-edge"
    )


@property_settings()
@given(PROPERTIES["pad-merge-edge"]())
def test_pad_merge_edge_property(case: RuleCase) -> None:
    case.check()


# ---- pad-merge-reflect ----


@pytest.mark.parametrize(
    "p,q",
    [
        ([0, 1, 0, 0, 2, 0], [0, 0, 2, 0, 0, 1]),  # axis 1, then axis 2
        ([0, 0, 2, 0, 0, 3], [1, 0, 0, 1, 0, 0]),  # axis 2 (x's last), then the batch axis
        ([0, 2, 0, 0, 0, 0], [0, 0, 0, 0, 0, 3]),  # begin of axis 1, end of axis 2
    ],
)
def test_pad_merge_reflect_disjoint_axes(p: list, q: list) -> None:
    """Reflect pads on different axes each read x's own values: one Pad; a dynamic batch at two sizes (when the
    batch axis is not padded)."""
    dims = ("N", 3, 4) if p[0] == q[0] == p[3] == q[3] == 0 else (2, 3, 4)
    m = model(
        [node("Pad", ["x", "p"], "p1", mode="reflect"), node("Pad", ["p1", "q"], "y", mode="reflect")],
        [("x", "FLOAT", dims)],
        initializers={"p": np.array(p), "q": np.array(q)},
    )
    rng = np.random.default_rng(2)
    for n in (2, 3) if dims[0] == "N" else (2,):
        feeds = {"x": rng.standard_normal((n, 3, 4)).astype(np.float32)}
        result = assert_rule_sound(m, "pad-merge-reflect", feeds)
        assert op_counts(result.model) == {"Pad": 1}


@pytest.mark.parametrize(
    "p,q",
    [
        ([0, 1, 0, 0, 1, 0], [0, 1, 0, 0, 1, 0]),  # the same axis, both ends
        ([0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 1, 0]),  # one axis: begin, then end (the end reflects the padding)
        ([0, 1, 1, 0, 0, 0], [0, 0, 0, 0, 0, 1]),  # axes 1 and 2, then axis 2 again
    ],
)
def test_pad_merge_reflect_not_on_a_shared_axis(p: list, q: list) -> None:
    """x = [0 1 2] reflect 1 twice is [1 0 1 2 1 2], not reflect 2's [2 1 0 1 2 1 0]: shared axes stay."""
    m = _two_pads(p, q, mode1="reflect", mode2="reflect")
    assert_rule_does_not_fire(m, "pad-merge-reflect")


def test_pad_merge_reflect_not_for_mixed_modes_or_crops() -> None:
    assert_rule_does_not_fire(
        _two_pads([0, 1, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0], mode1="edge", mode2="reflect"), "pad-merge-reflect"
    )
    assert_rule_does_not_fire(
        _two_pads([0, -1, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0], mode1="reflect", mode2="reflect"), "pad-merge-reflect"
    )


@property_settings()
@given(PROPERTIES["pad-merge-reflect"]())
def test_pad_merge_reflect_property(case: RuleCase) -> None:
    case.check()


# ---- reshape-view-merge ----


def _views(nodes: list, dims: tuple, inits: dict, opset: int = 13) -> object:
    return model(
        nodes, [("x", "FLOAT", dims)], initializers={k: np.array(v, np.int64) for k, v in inits.items()}, opset=opset
    )


VIEW_CHAINS = {
    # Reshape (0 copies N, -1 infers 48) then Squeeze: Reshape(x, [-1, 48])
    "reshape-squeeze": (
        [node("Reshape", ["x", "s"], "r"), node("Squeeze", ["r", "a"], "y")],
        {"s": [0, -1, 1], "a": [2]},
    ),
    # Unsqueeze then Reshape with copied dims: Reshape(x, [-1, 1, 48])
    "unsqueeze-reshape": (
        [node("Unsqueeze", ["x", "a"], "u"), node("Reshape", ["u", "s"], "y")],
        {"a": [1], "s": [0, 0, -1]},
    ),
    # Reshape then Unsqueeze at the end: Reshape(x, [-1, 8, 1])
    "reshape-unsqueeze": (
        [node("Reshape", ["x", "s"], "r"), node("Unsqueeze", ["r", "a"], "y")],
        {"s": [-1, 8], "a": [-1]},
    ),
}


@pytest.mark.parametrize("chain", sorted(VIEW_CHAINS))
def test_reshape_view_merge_dynamic_batch(chain: str) -> None:
    """Two views are one Reshape to the output shape, its one symbol (the batch) as -1; at two batch sizes."""
    nodes, inits = VIEW_CHAINS[chain]
    m = _views(nodes, ("N", 6, 8), inits)
    rng = np.random.default_rng(6)
    for n in (2, 3):
        result = assert_rule_sound(m, "reshape-view-merge", {"x": rng.standard_normal((n, 6, 8)).astype(np.float32)})
        assert op_counts(result.model) == {"Reshape": 1}


def test_reshape_view_merge_squeeze_then_reshape() -> None:
    m = _views([node("Squeeze", ["x", "a"], "q"), node("Reshape", ["q", "s"], "y")], (2, 1, 4), {"a": [1], "s": [4, 2]})
    result = assert_rule_sound(m, "reshape-view-merge")
    assert op_counts(result.model) == {"Reshape": 1}


def test_reshape_view_merge_not_with_two_symbols() -> None:
    """[1, N, M, 4] has two unknown dims: no single Reshape target says it (-1 infers one)."""
    m = model(
        [node("Unsqueeze", ["x", "a"], "u"), node("Reshape", ["u", "s"], "y")],
        [("x", "FLOAT", ("N", "M", 4))],
        initializers={"a": np.array([0]), "s": np.array([0, 0, 0, 4])},
        opset=13,
    )
    assert_rule_does_not_fire(m, "reshape-view-merge")


def test_reshape_view_merge_not_with_an_empty_dim() -> None:
    """A 0 in the output shape would copy a dim (allowzero = 0): no target is written."""
    m = _views(
        [node("Reshape", ["x", "s"], "r"), node("Unsqueeze", ["r", "a"], "y")], (2, 0, 3), {"s": [0, -1], "a": [0]}
    )
    assert_rule_does_not_fire(m, "reshape-view-merge")


@property_settings()
@given(PROPERTIES["reshape-view-merge"]())
def test_reshape_view_merge_property(case: RuleCase) -> None:
    case.check()


# ---- reshape-merge ----


def test_reshape_merge_consecutive() -> None:
    inits = {"s1": np.array([-1]), "s2": np.array([4, -1])}
    m = model([node("Reshape", ["x", "s1"], "r"), node("Reshape", ["r", "s2"], "y")], X, initializers=inits)
    result = assert_rule_sound(m, "reshape-merge")
    assert op_counts(result.model) == {"Reshape": 1}


def test_reshape_merge_writes_a_copied_static_dim_as_its_size() -> None:
    """A 0 copies a dim of the inner Reshape's output (here 24), which x (2, 3, 4) does not have: written as 24."""
    inits = {"s1": np.array([24, 1]), "s2": np.array([0, -1])}
    m = model([node("Reshape", ["x", "s1"], "r"), node("Reshape", ["r", "s2"], "y")], X, initializers=inits)
    result = assert_rule_sound(m, "reshape-merge")
    assert op_counts(result.model) == {"Reshape": 1}


@pytest.mark.parametrize("batch", [80, None])
def test_reshape_merge_keeps_a_zero_that_copies_the_same_dim_of_x(batch: int | None) -> None:
    """Reshape(Reshape(x, [80, -1, 1, 768]), [80, 0, 768]) for x [80, S, 768] (S dynamic): the inner dim 1 is x's
    S, so the 0 copies x's dim 1 directly; with a dynamic batch its 0 copies x's dim 0 too. Two sizes of S."""
    inits = {"s1": np.array([80, -1, 1, 768]), "s2": np.array([80, 0, 768])}
    if batch is None:
        inits["s1"][0] = inits["s2"][0] = 0  # the batch dim copied through both
    m = model(
        [node("Reshape", ["x", "s1"], "r"), node("Reshape", ["r", "s2"], "y")],
        [("x", "FLOAT", (batch or "n", "seq", 768))],
        initializers=inits,
    )
    for seq in (3, 7):
        x = np.random.default_rng(seq).standard_normal((batch or 2, seq, 768)).astype(np.float32)
        result = assert_rule_sound(m, "reshape-merge", {"x": x})
        assert op_counts(result.model) == {"Reshape": 1}


def test_reshape_merge_not_when_the_copied_dim_is_unknown() -> None:
    """x [n, 6]; Reshape(x, [-1, 3]) has dim 0 = 2n, a size no symbol names: the outer 0 cannot be written."""
    inits = {"s1": np.array([-1, 3]), "s2": np.array([0, 3])}
    m = model(
        [node("Reshape", ["x", "s1"], "r"), node("Reshape", ["r", "s2"], "y")],
        [("x", "FLOAT", ("n", 6))],
        initializers=inits,
    )
    assert_rule_does_not_fire(m, "reshape-merge")


def test_reshape_merge_not_when_the_copied_dim_is_an_allowzero_empty_dim() -> None:
    """Inner allowzero=1 makes dim 0 a literal 0 (x is (2, 0)); the outer 0 copies that 0. Written back as 0 in
    Reshape(x, ., 0) it would copy x's 2 instead: not merged."""
    inits = {"s1": np.array([0, 5]), "s2": np.array([0, 5])}
    m = model(
        [node("Reshape", ["x", "s1"], "r", allowzero=1), node("Reshape", ["r", "s2"], "y")],
        [("x", "FLOAT", (2, 0))],
        initializers=inits,
    )
    assert_rule_does_not_fire(m, "reshape-merge")


@property_settings()
@given(PROPERTIES["reshape-merge"]())
def test_reshape_merge_property(case: RuleCase) -> None:
    case.check()


# ---- common sub-expressions: hash-consing, no rule ----


def test_identical_ops_merge_in_the_egraph() -> None:
    """Two Relu(x) and two Mul(x, 2): one e-class each, one node each after extraction."""
    nodes = [
        node("Relu", ["x"], "r1"),
        node("Relu", ["x"], "r2"),
        node("Mul", ["r1", "k"], "m1"),
        node("Mul", ["r2", "k"], "m2"),
        node("Sub", ["m1", "m2"], "d"),
        node("Add", ["m1", "m2"], "y"),
    ]
    m = model(nodes, X, ["y", "d"], initializers={"k": np.array(2.0, np.float32)})
    session = saturate_with_rules(m, [])
    refs = session.encoding.refs
    classes = session.egraph.refs
    assert classes[refs["r1"]] == classes[refs["r2"]] and classes[refs["m1"]] == classes[refs["m2"]]
    assert op_counts(session.extract("cpu", verify=False).model) == {"Relu": 1, "Mul": 1, "Sub": 1, "Add": 1}


def test_random_ops_are_never_merged() -> None:
    """RandomNormalLike twice on the same input draws twice: both stay (opaque, keyed by position)."""
    nodes = [
        node("RandomNormalLike", ["x"], "n1", seed=1.0),
        node("RandomNormalLike", ["x"], "n2", seed=1.0),
        node("Add", ["n1", "n2"], "y"),
    ]
    m = model(nodes, X)
    session = saturate_with_rules(m, [])
    assert session.egraph.refs[session.encoding.refs["n1"]] != session.egraph.refs[session.encoding.refs["n2"]]
    assert op_counts(session.extract("cpu", verify=False).model)["RandomNormalLike"] == 2


# ---- idempotent-merge ----


@pytest.mark.parametrize("op", ["Sign", "Abs", "Ceil", "Floor", "Round"])
def test_idempotent_merge(op: str) -> None:
    m = model([node(op, ["x"], "a"), node(op, ["a"], "b"), node(op, ["b"], "y")], X)
    assert op_counts(assert_rule_sound(m, "idempotent-merge").model) == {op: 1}


def test_idempotent_merge_integer_abs() -> None:
    m = model([node("Abs", ["x"], "a"), node("Abs", ["a"], "y")], [("x", "INT32", (3, 4))])
    assert op_counts(assert_rule_sound(m, "idempotent-merge").model) == {"Abs": 1}


@pytest.mark.parametrize(
    "first,second", [("Floor", "Ceil"), ("Abs", "Sign"), ("Sign", "Abs"), ("Neg", "Neg"), ("Round", "Floor")]
)
def test_idempotent_merge_not_on_different_ops(first: str, second: str) -> None:
    """Two different ops (Abs(Sign(x)) is not Sign(x)), or a non-idempotent op (Neg)."""
    m = model([node(first, ["x"], "a"), node(second, ["a"], "y")], X)
    assert_rule_does_not_fire(m, "idempotent-merge")


@property_settings()
@given(PROPERTIES["idempotent-merge"]())
def test_idempotent_merge_property(case: RuleCase) -> None:
    case.check()


# ---- flatten-noop ----


@pytest.mark.parametrize("shape", [(3, 4), ("N", 4), ("N", "M")])
def test_flatten_noop(shape: tuple) -> None:
    m = model([node("Relu", ["x"], "r"), node("Flatten", ["r"], "y", axis=1)], [("x", "FLOAT", shape)])
    assert op_counts(assert_rule_sound(m, "flatten-noop").model) == {"Relu": 1}


def test_flatten_noop_axis_zero_of_a_row() -> None:
    """Flatten(x, 0) is (1, n): the identity on a (1, n) x (the shape guard)."""
    m = model([node("Relu", ["x"], "r"), node("Flatten", ["r"], "y", axis=0)], [("x", "FLOAT", (1, 6))])
    assert op_counts(assert_rule_sound(m, "flatten-noop").model) == {"Relu": 1}


@pytest.mark.parametrize("shape,axis", [((2, 3, 4), 1), ((3, 4), 0), ((2, 3, 4), 2), (("N", 4), 0)])
def test_flatten_noop_not_when_it_reshapes(shape: tuple, axis: int) -> None:
    m = model([node("Flatten", ["x"], "y", axis=axis)], [("x", "FLOAT", shape)])
    assert_rule_does_not_fire(m, "flatten-noop")


@property_settings()
@given(PROPERTIES["flatten-noop"]())
def test_flatten_noop_property(case: RuleCase) -> None:
    case.check()


# ---- split-noop ----


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_split_noop(opset: int) -> None:
    if opset >= 13:
        split = oh.make_node("Split", ["x", "sizes"], ["s"], axis=1)
        inits = {"sizes": np.array([3], np.int64)}
    else:
        split, inits = oh.make_node("Split", ["x"], ["s"], axis=1, split=[3]), {}
    m = model([split, node("Relu", ["s"], "y")], X, initializers=inits, opset=opset)
    assert op_counts(assert_rule_sound(m, "split-noop").model) == {"Relu": 1}


def test_split_noop_not_with_two_outputs() -> None:
    m = model([oh.make_node("Split", ["x"], ["s0", "s1"], axis=2), node("Add", ["s0", "s1"], "y")], X)
    assert_rule_does_not_fire(m, "split-noop")


@property_settings()
@given(PROPERTIES["split-noop"]())
def test_split_noop_property(case: RuleCase) -> None:
    case.check()


# ---- the sites (guards computed once in analysis) ----


@property_settings()
@given(PROPERTIES["pad-merge-reflect-site"]())
def test_pad_merge_reflect_site_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["pad-merge-sums"]())
def test_pad_merge_sums_property(case: RuleCase) -> None:
    case.check()


def test_pad_merges_read_the_sums_pad_merge_sums_asks_for() -> None:
    """One demand row for every pad merge: without pad-merge-sums, two constant Pads stay two."""
    pads = [node("Pad", ["x", "p"], "a", mode="constant"), node("Pad", ["a", "q"], "y", mode="constant")]
    inits = {"p": np.array([0, 1, 0, 2], np.int64), "q": np.array([1, 0, 0, 0], np.int64)}
    m = model(pads, [("x", "FLOAT", (2, 3))], initializers=inits)
    assert "pad-merge" not in saturate_with_rules(m, ["pad-merge"], without=["pad-merge-sums"]).saturation.rules_fired
    result, fired = optimize_with_rules(m, ["pad-merge"])
    assert fired["pad-merge-sums"] > 0 and op_counts(result.model) == {"Pad": 1}


@property_settings()
@given(PROPERTIES["reshape-view-merge-site"]())
def test_reshape_view_merge_site_property(case: RuleCase) -> None:
    case.check()
