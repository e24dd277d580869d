"""Layout rules (rewrites/layout.py): each fires where it should, not where its guard fails, and is sound."""

from __future__ import annotations

import numpy as np
import onnx.numpy_helper
import pytest
from hypothesis import given

from eqsat.testing import (
    PROPERTIES,
    RuleCase,
    assert_rule_does_not_fire,
    assert_rule_sound,
    op_counts,
    optimize_with_rules,
    saturate_with_rules,
    to_proto,
)
from tests.rule_graphs import NCHW_TO_NHWC, NHWC_TO_NCHW, attribute, model, node, property_settings, sandwich, transpose

SANDWICH = ("transpose-merge", "transpose-identity")
X4 = [("x", "FLOAT", (1, 3, 4, 5))]


# ---- transpose-merge ----


def test_transpose_merge_cancels_inverse_pair() -> None:
    m = model([transpose("x", "t", NCHW_TO_NHWC), transpose("t", "r", NHWC_TO_NCHW), node("Relu", ["r"], "y")], X4)
    result, fired = optimize_with_rules(m, ["transpose-merge", "transpose-identity"])
    assert fired["transpose-merge"] > 0
    assert op_counts(result.model) == {"Relu": 1}


def test_transpose_merge_composes_perms() -> None:
    m = model([transpose("x", "t", (1, 2, 0)), transpose("t", "y", (0, 2, 1))], [("x", "FLOAT", (2, 3, 4))])
    result, fired = optimize_with_rules(m, ["transpose-merge"])
    assert "transpose-merge" in fired
    assert op_counts(result.model) == {"Transpose": 1}
    assert attribute(result.model, "Transpose", "perm") == [1, 0, 2]  # p o q: p[q[i]]
    assert_rule_sound(m, "transpose-merge")


def test_transpose_merge_needs_adjacent_transposes() -> None:
    m = model(
        [transpose("x", "t", NCHW_TO_NHWC), node("Softmax", ["t"], "s", axis=-1), transpose("s", "y", NHWC_TO_NCHW)], X4
    )
    assert_rule_does_not_fire(m, "transpose-merge")


@property_settings()
@given(PROPERTIES["transpose-merge"]())
def test_transpose_merge_property(case: RuleCase) -> None:
    case.check()


# ---- transpose-identity ----


def test_transpose_identity_removes_identity_perm() -> None:
    m = model([transpose("x", "t", (0, 1, 2, 3)), node("Relu", ["t"], "y")], X4)
    result, fired = optimize_with_rules(m, ["transpose-identity"])
    assert "transpose-identity" in fired
    assert op_counts(result.model) == {"Relu": 1}


def test_transpose_identity_rank_6() -> None:
    m = model([transpose("x", "t", range(6)), node("Neg", ["t"], "y")], [("x", "FLOAT", (1, 2, 1, 2, 1, 2))])
    assert op_counts(assert_rule_sound(m, "transpose-identity").model) == {"Neg": 1}


def test_transpose_identity_of_a_single_element_tensor() -> None:
    """Every dim 1: any perm moves nothing and keeps the shape (the re-permuted broadcast scalars)."""
    m = model([transpose("x", "t", (2, 0, 3, 1)), node("Neg", ["t"], "y")], [("x", "FLOAT", (1, 1, 1, 1))])
    assert op_counts(assert_rule_sound(m, "transpose-identity").model) == {"Neg": 1}


@pytest.mark.parametrize("perm", [(0, 2, 1, 3), (1, 0, 2, 3), (3, 2, 1, 0)])
def test_transpose_identity_not_on_other_perms(perm: tuple[int, ...]) -> None:
    m = model([transpose("x", "t", perm), node("Relu", ["t"], "y")], X4)
    assert_rule_does_not_fire(m, "transpose-identity")


@property_settings()
@given(PROPERTIES["transpose-identity"]())
def test_transpose_identity_property(case: RuleCase) -> None:
    case.check()


# ---- transpose-sink-unary ----


def test_transpose_sink_unary_relu_sandwich() -> None:
    """Transpose(0,2,3,1) -> Relu -> Transpose(0,3,1,2) ends with 0 Transposes and 1 Relu."""
    m = sandwich([node("Relu", ["t"], "m")])
    result, fired = optimize_with_rules(m, ["transpose-sink-unary", *SANDWICH])
    assert fired["transpose-sink-unary"] > 0
    assert op_counts(result.model) == {"Relu": 1}


@pytest.mark.parametrize(
    "op,attrs,inits",
    [
        ("Clip", {}, {"lo": np.array(0.0, np.float32), "hi": np.array(6.0, np.float32)}),
        ("LeakyRelu", {"alpha": 0.1}, {}),
        ("Cast", {"to": 10}, {}),  # FLOAT16
        ("HardSigmoid", {"alpha": 0.5, "beta": 0.1}, {}),
        ("Sigmoid", {}, {}),
    ],
)
def test_transpose_sink_unary_ops(op: str, attrs: dict, inits: dict) -> None:
    m = sandwich([node(op, ["t", *inits], "m", **attrs)], initializers=inits)
    result = assert_rule_sound(m, "transpose-sink-unary", also=SANDWICH)
    assert op_counts(result.model) == {op: 1}


def test_transpose_sink_unary_chain_of_unaries() -> None:
    m = sandwich([node("Relu", ["t"], "r"), node("Exp", ["r"], "e"), node("Neg", ["e"], "m")])
    result = assert_rule_sound(m, "transpose-sink-unary", also=SANDWICH)
    assert op_counts(result.model) == {"Relu": 1, "Exp": 1, "Neg": 1}


def test_transpose_sink_unary_not_through_softmax() -> None:
    """Softmax reads an axis: it is not layout-agnostic and must not be sunk."""
    assert_rule_does_not_fire(sandwich([node("Softmax", ["t"], "m", axis=3)]), "transpose-sink-unary")


def test_transpose_sink_unary_needs_a_transpose() -> None:
    assert_rule_does_not_fire(
        model([node("Relu", ["x"], "r"), transpose("r", "y", NCHW_TO_NHWC)], X4), "transpose-sink-unary"
    )


@property_settings()
@given(PROPERTIES["transpose-sink-unary"]())
def test_transpose_sink_unary_property(case: RuleCase) -> None:
    case.check()


# ---- transpose-sink-binary ----


def _binary(op: str, perm_a=NCHW_TO_NHWC, perm_b=NCHW_TO_NHWC, b_shape=(1, 3, 4, 5)):
    return model(
        [
            transpose("a", "ta", perm_a),
            transpose("b", "tb", perm_b),
            node(op, ["ta", "tb"], "s"),
            transpose("s", "y", NHWC_TO_NCHW),
        ],
        [("a", "FLOAT", (1, 3, 4, 5)), ("b", "FLOAT", b_shape)],
    )


@pytest.mark.parametrize("op", ["Add", "Mul", "Sub", "Div"])
def test_transpose_sink_binary_same_perm(op: str) -> None:
    m = _binary(op)
    result, fired = optimize_with_rules(m, ["transpose-sink-binary", *SANDWICH])
    assert fired["transpose-sink-binary"] > 0
    assert op_counts(result.model) == {op: 1}


def test_transpose_sink_binary_broadcast_operand() -> None:
    m = _binary("Add", b_shape=(1, 3, 1, 5))
    assert op_counts(assert_rule_sound(m, "transpose-sink-binary", also=SANDWICH).model) == {"Add": 1}


def test_transpose_sink_binary_not_when_perms_differ() -> None:
    m = model(
        [transpose("a", "ta", (0, 2, 3, 1)), transpose("b", "tb", (0, 3, 2, 1)), node("Add", ["ta", "tb"], "y")],
        [("a", "FLOAT", (1, 3, 4, 4)), ("b", "FLOAT", (1, 3, 4, 4))],
    )
    assert_rule_does_not_fire(m, "transpose-sink-binary", also=SANDWICH)


def test_transpose_sink_binary_not_with_untransposed_operand() -> None:
    m = model(
        [transpose("a", "ta", NCHW_TO_NHWC), node("Add", ["ta", "b"], "y")],
        [("a", "FLOAT", (1, 3, 4, 5)), ("b", "FLOAT", (1, 4, 5, 3))],
    )
    assert_rule_does_not_fire(m, "transpose-sink-binary")


@property_settings()
@given(PROPERTIES["transpose-sink-binary"]())
def test_transpose_sink_binary_property(case: RuleCase) -> None:
    case.check()


# ---- transpose-sink-binary-const ----


def test_transpose_sink_binary_const_per_channel_scale() -> None:
    """NHWC Mul by a per-channel constant (shape (3,), broadcast): the constant is transposed at
    compile time and both transposes disappear (written as (3, 1, 1): leading 1-dims are dropped where the
    other operand sets the rank)."""
    scale = np.array([1.0, 2.0, 3.0], np.float32)
    m = sandwich([node("Mul", ["t", "scale"], "m")], initializers={"scale": scale})
    result = assert_rule_sound(m, "transpose-sink-binary-const", also=SANDWICH)
    assert op_counts(result.model) == {"Mul": 1}
    (mul,) = [n for n in result.model.graph if n.op_type == "Mul"]
    const = [v for v in mul.inputs if v.const_value is not None]
    assert len(const) == 1 and const[0].shape.dims == (3, 1, 1)


def test_transpose_sink_binary_const_inverse_perms_standard_and_per_model() -> None:
    """The kept backend holds the inverse of every perm up to rank 5 (standard facts); a rank-6 perm's inverse
    comes with its model and leaves with it: the rule fires in both, and again at rank 4 afterwards."""
    rng = np.random.default_rng(0)
    cases = (((0, 2, 3, 1), (1, 4, 2, 3)), ((0, 2, 3, 4, 5, 1), (1, 3, 2, 1, 2, 2)), ((0, 3, 1, 2), (1, 2, 3, 4)))
    for perm, dims in cases:
        shape = tuple(dims[p] for p in perm)
        m = model(
            [transpose("x", "t", perm), node("Add", ["t", "c"], "y")],
            [("x", "FLOAT", dims)],
            initializers={"c": rng.standard_normal(shape).astype(np.float32)},
        )
        assert_rule_sound(m, "transpose-sink-binary-const")


def test_transpose_sink_binary_const_constant_first() -> None:
    c = np.arange(60, dtype=np.float32).reshape(1, 4, 5, 3)
    m = sandwich([node("Sub", ["c", "t"], "m")], initializers={"c": c})
    result = assert_rule_sound(m, "transpose-sink-binary-const", also=SANDWICH)
    assert op_counts(result.model) == {"Sub": 1}


def test_transpose_sink_binary_const_scalar() -> None:
    m = sandwich([node("Add", ["t", "k"], "m")], initializers={"k": np.array(0.5, np.float32)})
    assert op_counts(assert_rule_sound(m, "transpose-sink-binary-const", also=SANDWICH).model) == {"Add": 1}


def test_transpose_sink_binary_const_not_when_constant_enlarges_output() -> None:
    """Transpose(x) is (1,4,1,3); the constant (1,4,5,3) broadcasts it to a bigger output."""
    m = model(
        [transpose("x", "t", NCHW_TO_NHWC), node("Add", ["t", "c"], "y")],
        [("x", "FLOAT", (1, 3, 4, 1))],
        initializers={"c": np.ones((1, 4, 5, 3), np.float32)},
    )
    assert_rule_does_not_fire(m, "transpose-sink-binary-const", also=SANDWICH)


def test_transpose_sink_binary_const_not_when_constant_rank_is_higher() -> None:
    m = model(
        [transpose("x", "t", (1, 0)), node("Mul", ["t", "c"], "y")],
        [("x", "FLOAT", (3, 4))],
        initializers={"c": np.ones((2, 4, 3), np.float32)},
    )
    assert_rule_does_not_fire(m, "transpose-sink-binary-const", also=SANDWICH)


def test_transpose_sink_binary_const_not_with_runtime_operand() -> None:
    m = model(
        [transpose("x", "t", NCHW_TO_NHWC), node("Add", ["t", "b"], "y")],
        [("x", "FLOAT", (1, 3, 4, 5)), ("b", "FLOAT", (1, 4, 5, 3))],
    )
    assert_rule_does_not_fire(m, "transpose-sink-binary-const")


@property_settings()
@given(PROPERTIES["transpose-sink-binary-const"]())
def test_transpose_sink_binary_const_property(case: RuleCase) -> None:
    case.check()


# ---- transpose-sink-binary-broadcast ----


def test_transpose_sink_binary_broadcast_per_channel_input() -> None:
    """NHWC Add of a per-channel graph input b (3,): b is unsqueezed and transposed (a Reshape: it moves no
    data), and both activation transposes cancel."""
    m = model(
        [transpose("x", "t", NCHW_TO_NHWC), node("Add", ["t", "b"], "m"), transpose("m", "y", NHWC_TO_NCHW)],
        [("x", "FLOAT", (1, 3, 4, 5)), ("b", "FLOAT", (3,))],
    )
    result = assert_rule_sound(m, "transpose-sink-binary-broadcast", also=(*SANDWICH, "transpose-to-reshape"))
    ops = op_counts(result.model)
    assert "Transpose" not in ops and ops["Add"] == 1, ops


@pytest.mark.parametrize("op", ["Sub", "Div"])
def test_transpose_sink_binary_broadcast_input_first(op: str) -> None:
    m = model(
        [transpose("x", "t", NCHW_TO_NHWC), node(op, ["b", "t"], "m"), transpose("m", "y", NHWC_TO_NCHW)],
        [("x", "FLOAT", (1, 3, 4, 5)), ("b", "FLOAT", (5, 3))],
    )
    assert_rule_sound(m, "transpose-sink-binary-broadcast", also=SANDWICH)


def test_transpose_sink_binary_broadcast_not_when_the_input_enlarges_the_output() -> None:
    """Transpose(x) is (1, 4, 1, 3); b (5, 3) broadcasts it to (1, 4, 5, 3)."""
    m = model(
        [transpose("x", "t", NCHW_TO_NHWC), node("Add", ["t", "b"], "y")],
        [("x", "FLOAT", (1, 3, 4, 1)), ("b", "FLOAT", (5, 3))],
    )
    assert_rule_does_not_fire(m, "transpose-sink-binary-broadcast", also=SANDWICH)


def test_transpose_sink_binary_broadcast_not_for_an_input_of_the_same_rank() -> None:
    """Same rank: not a broadcast (a second Transpose on b would be transpose-sink-binary's business)."""
    m = model(
        [transpose("x", "t", NCHW_TO_NHWC), node("Add", ["t", "b"], "y")],
        [("x", "FLOAT", (1, 3, 4, 5)), ("b", "FLOAT", (1, 4, 5, 3))],
    )
    assert_rule_does_not_fire(m, "transpose-sink-binary-broadcast")


@property_settings()
@given(PROPERTIES["transpose-sink-binary-broadcast"]())
def test_transpose_sink_binary_broadcast_property(case: RuleCase) -> None:
    case.check()


# ---- transpose-sink-pad ----


def test_transpose_sink_pad_remaps_pads() -> None:
    """NHWC pads (H by 1/2, W by 3/4) become NCHW pads on axes 2 and 3."""
    pads = np.array([0, 1, 3, 0, 0, 2, 4, 0], np.int64)
    m = sandwich([node("Pad", ["t", "pads"], "m")], initializers={"pads": pads})
    result, fired = optimize_with_rules(m, ["transpose-sink-pad", *SANDWICH])
    assert fired["transpose-sink-pad"] > 0
    assert op_counts(result.model) == {"Pad": 1}
    proto = result.model
    (pad,) = [n for n in proto.graph if n.op_type == "Pad"]
    assert list(pad.inputs[1].const_value.numpy()) == [0, 0, 1, 3, 0, 0, 2, 4]
    assert_rule_sound(m, "transpose-sink-pad", also=SANDWICH)


@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_transpose_sink_pad_modes(mode: str) -> None:
    pads = np.array([0, 1, 2, 0, 0, 2, 1, 0], np.int64)
    m = sandwich([node("Pad", ["t", "pads"], "m", mode=mode)], initializers={"pads": pads})
    assert op_counts(assert_rule_sound(m, "transpose-sink-pad", also=SANDWICH).model) == {"Pad": 1}


def test_transpose_sink_pad_not_with_axes_input() -> None:
    """Pad-18 with an `axes` input is not modelled (opaque): its pads must not be remapped as if full."""
    inits = {"pads": np.array([1, 2, 1, 2], np.int64), "axes": np.array([1, 2], np.int64)}
    m = model(
        [
            transpose("x", "t", NCHW_TO_NHWC),
            node("Pad", ["t", "pads", "", "axes"], "m"),
            transpose("m", "y", NHWC_TO_NCHW),
        ],
        X4,
        initializers=inits,
        opset=18,
    )
    assert_rule_does_not_fire(m, "transpose-sink-pad", also=SANDWICH)


def test_transpose_sink_pad_needs_a_transpose() -> None:
    m = model([node("Pad", ["x", "pads"], "y")], X4, initializers={"pads": np.ones(8, np.int64)})
    assert_rule_does_not_fire(m, "transpose-sink-pad")


@property_settings()
@given(PROPERTIES["transpose-sink-pad"]())
def test_transpose_sink_pad_property(case: RuleCase) -> None:
    case.check()


# ---- transpose-sink-reduce ----


def test_transpose_sink_reduce_nhwc_mean_without_keepdims() -> None:
    """The Keras/TF pattern: NCHW -> Transpose(0,2,3,1) -> ReduceMean(axes 1,2, keepdims 0): the mean moves
    to the NCHW tensor over axes (2, 3) and no transpose is left (its kept-axes perm is the identity)."""
    m = model([transpose("x", "t", NCHW_TO_NHWC), node("ReduceMean", ["t"], "y", axes=[1, 2], keepdims=0)], X4)
    result, fired = optimize_with_rules(m, ["transpose-sink-reduce", *SANDWICH])
    assert fired["transpose-sink-reduce"] > 0
    assert op_counts(result.model) == {"ReduceMean": 1}
    assert attribute(result.model, "ReduceMean", "axes") == [2, 3]
    assert_rule_sound(m, "transpose-sink-reduce", also=SANDWICH)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceL2"])
def test_transpose_sink_reduce_keepdims_sandwich(op: str) -> None:
    """Transpose -> R(axes [3], keepdims 1) -> inverse Transpose: R over the channel axis 1, no transposes."""
    axes = np.array([3], np.int64)
    if op == "ReduceSum":
        mid = node(op, ["t", "axes"], "m", keepdims=1)
        m = sandwich([mid], initializers={"axes": axes})
    else:
        m = sandwich([node(op, ["t"], "m", axes=[3], keepdims=1)])
    result = assert_rule_sound(m, "transpose-sink-reduce", also=SANDWICH)
    assert op_counts(result.model) == {op: 1}


def test_transpose_sink_reduce_keepdims_0_remaps_the_kept_axes() -> None:
    """x (2,3,4,5) -> Transpose(2,0,3,1) (4,2,5,3) -> ReduceSum over axes (0, 2) keepdims 0 -> (2, 3):
    the sum over x's axes (2, 3), and its (2, 3) output needs no transpose; over (1, 3) (axes 0 and 1 of
    x) the kept axes (4, 5) come out in x's order too."""
    for axes, _expected_axes in (([0, 2], [2, 3]), ([1, 3], [0, 1])):
        m = model(
            [transpose("x", "t", (2, 0, 3, 1)), node("ReduceSum", ["t", "axes"], "y", keepdims=0)],
            [("x", "FLOAT", (2, 3, 4, 5))],
            initializers={"axes": np.array(axes, np.int64)},
        )
        result = assert_rule_sound(m, "transpose-sink-reduce", also=SANDWICH)
        assert op_counts(result.model) == {"ReduceSum": 1}


def test_transpose_sink_reduce_keeps_a_needed_transpose() -> None:
    """Transpose(1,0,2) then a reduction over axis 2 without keepdims: the kept axes stay swapped."""
    m = model(
        [transpose("x", "t", (1, 0, 2)), node("ReduceMax", ["t"], "y", axes=[2], keepdims=0)],
        [("x", "FLOAT", (2, 3, 4))],
    )
    result = assert_rule_sound(m, "transpose-sink-reduce", also=SANDWICH)
    assert sorted(op_counts(result.model)) == ["ReduceMax", "Transpose"]


@pytest.mark.parametrize("axes", [None, [0, 1, 2, 3]])
def test_transpose_sink_reduce_over_every_axis(axes) -> None:
    """Reducing every axis (listed, or the default empty list) makes the layout irrelevant."""
    attrs = {} if axes is None else {"axes": axes}
    m = model([transpose("x", "t", NCHW_TO_NHWC), node("ReduceMin", ["t"], "y", keepdims=1, **attrs)], X4)
    result = assert_rule_sound(m, "transpose-sink-reduce", also=SANDWICH)
    assert op_counts(result.model) == {"ReduceMin": 1}


def test_transpose_sink_reduce_needs_a_transpose() -> None:
    m = model([node("Relu", ["x"], "r"), node("ReduceMean", ["r"], "y", axes=[1, 2], keepdims=0)], X4)
    assert_rule_does_not_fire(m, "transpose-sink-reduce")


def test_transpose_sink_reduce_with_symbolic_dims() -> None:
    """The listed-axes forms copy x's dims into the new reduction's shape fact: symbols copy like sizes."""
    m = model(
        [transpose("x", "t", NCHW_TO_NHWC), node("ReduceMean", ["t"], "y", axes=[1, 2], keepdims=0)],
        [("x", "FLOAT", ("N", 3, "H", "W"))],
    )
    result = assert_rule_sound(m, "transpose-sink-reduce")
    assert op_counts(result.model).get("Transpose", 0) <= 1


def test_transpose_sink_reduce_not_for_argmax() -> None:
    """ArgMax's output indexes an axis (not a reduction of a set of axes): never sunk like a reduction."""
    m = model(
        [transpose("x", "t", NCHW_TO_NHWC), node("ArgMax", ["t"], "y", axis=3, keepdims=0)],
        X4,
        outputs=[("y", "INT64", None)],
    )
    assert_rule_does_not_fire(m, "transpose-sink-reduce")


@property_settings()
@given(PROPERTIES["transpose-sink-reduce"]())
def test_transpose_sink_reduce_property(case: RuleCase) -> None:
    case.check()


# ---- transpose-to-reshape ----


@pytest.mark.parametrize("shape,perm", [((2, 1, 3), (1, 0, 2)), ((1, 8, 1, 1), (0, 2, 3, 1)), ((4, 1), (1, 0))])
def test_transpose_to_reshape_when_no_data_moves(shape: tuple, perm: tuple) -> None:
    m = model([transpose("x", "t", perm), node("Relu", ["t"], "y")], [("x", "FLOAT", shape)])
    session = saturate_with_rules(m, ["transpose-to-reshape"])
    assert "transpose-to-reshape" in session.saturation.rules_fired
    g = session.egraph
    relu = next(n for n in g.nodes if n.op == "Relu")
    assert {g.node(k).op for k in g.eclass(relu.children[0]).nodes} == {"Transpose", "Reshape"}
    result = assert_rule_sound(m, "transpose-to-reshape")
    assert op_counts(result.model) == {"Reshape": 1, "Relu": 1}  # a view: cheaper than moving data


@pytest.mark.parametrize("shape,perm", [((2, 3), (1, 0)), ((2, 1, 3), (2, 1, 0)), ((1, 3, 2, 2), (0, 2, 3, 1))])
def test_transpose_to_reshape_not_when_data_moves(shape: tuple, perm: tuple) -> None:
    m = model([transpose("x", "t", perm), node("Relu", ["t"], "y")], [("x", "FLOAT", shape)])
    assert_rule_does_not_fire(m, "transpose-to-reshape")


def test_transpose_to_reshape_fires_exactly_when_no_data_moves() -> None:
    """Every rank-4 perm on every pattern of size-1 axes, in one graph: a Reshape joins the Transpose's class
    exactly when the axes of size > 1 keep their order (and not every axis is 1)."""
    import itertools

    nodes, inputs, expected = [], [], {}
    for mask in itertools.product((1, 2), repeat=4):
        x = "x" + "".join(map(str, mask))
        inputs.append((x, "FLOAT", mask))
        for perm in itertools.permutations(range(4)):
            out = f"t_{x}_{''.join(map(str, perm))}"
            nodes.append(transpose(x, out, perm))
            big = [a for a in perm if mask[a] != 1]
            expected[out] = bool(big) and big == sorted(big)
    m = model(nodes, inputs, outputs=list(expected))
    session = saturate_with_rules(m, ["transpose-to-reshape"])
    g = session.egraph
    fired = {
        name: any(g.node(k).op == "Reshape" for k in g.eclass(g.refs[ref]).nodes)
        for name, ref in session.encoding.refs.items()
        if name in expected
    }
    assert fired == expected


def test_transpose_to_reshape_with_one_symbolic_dim() -> None:
    """One symbolic dim becomes the target's -1."""
    m = model([transpose("x", "t", (1, 0, 2)), node("Relu", ["t"], "y")], [("x", "FLOAT", (2, 1, "N"))])
    result = assert_rule_sound(m, "transpose-to-reshape")
    assert op_counts(result.model) == {"Reshape": 1, "Relu": 1}


def test_transpose_to_reshape_not_with_two_symbolic_dims() -> None:
    """Two symbols cannot both be -1, and neither sits at its own index (Reshape's 0): the rule declines."""
    m = model([transpose("x", "t", (1, 0, 2)), node("Relu", ["t"], "y")], [("x", "FLOAT", ("N", 1, "M"))])
    assert_rule_does_not_fire(m, "transpose-to-reshape")


@pytest.mark.parametrize("last", [4, "N"])
def test_transpose_to_reshape_at_rank_7(last: object) -> None:
    """Rank 7 (the rule's rows once stopped at 6): size-1 axes swapped among axes of size > 1 that keep their order;
    a static output, or one symbol (the target's -1)."""
    m = model(
        [transpose("x", "t", (0, 3, 2, 1, 4, 6, 5)), node("Relu", ["t"], "y")],
        [("x", "FLOAT", (2, 1, 3, 1, 5, 1, last))],
    )
    result = assert_rule_sound(m, "transpose-to-reshape")
    assert op_counts(result.model) == {"Reshape": 1, "Relu": 1}


def test_transpose_to_reshape_not_when_data_moves_at_rank_7() -> None:
    m = model(
        [transpose("x", "t", (0, 1, 4, 3, 2, 5, 6)), node("Relu", ["t"], "y")], [("x", "FLOAT", (2, 1, 3, 1, 5, 1, 4))]
    )
    assert_rule_does_not_fire(m, "transpose-to-reshape")


@property_settings()
@given(PROPERTIES["transpose-to-reshape"]())
def test_transpose_to_reshape_property(case: RuleCase) -> None:
    case.check()


# ---- squeeze-unsqueeze-cancel ----


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_unsqueeze_cancel_same_axes(opset: int) -> None:
    if opset >= 13:
        inits = {"a": np.array([0, 2], np.int64)}
        nodes = [node("Unsqueeze", ["x", "a"], "u"), node("Squeeze", ["u", "a"], "s"), node("Relu", ["s"], "y")]
    else:
        inits = {}
        nodes = [
            node("Unsqueeze", ["x"], "u", axes=[0, 2]),
            node("Squeeze", ["u"], "s", axes=[0, 2]),
            node("Relu", ["s"], "y"),
        ]
    m = model(nodes, [("x", "FLOAT", (3, 4))], initializers=inits, opset=opset)
    result, fired = optimize_with_rules(m, ["squeeze-unsqueeze-cancel"])
    assert fired["squeeze-unsqueeze-cancel"] > 0
    assert op_counts(result.model) == {"Relu": 1}
    assert_rule_sound(m, "squeeze-unsqueeze-cancel")


def test_unsqueeze_squeeze_cancel_same_axes_symbolic_shape() -> None:
    """Same axes need no shape facts: Unsqueeze(Squeeze(x, [1]), [1]) is x for x (N, 1, 4)."""
    m = model(
        [node("Squeeze", ["x", "a"], "s"), node("Unsqueeze", ["s", "a"], "u"), node("Relu", ["u"], "y")],
        [("x", "FLOAT", ("N", 1, 4))],
        initializers={"a": np.array([1], np.int64)},
    )
    result, fired = optimize_with_rules(m, ["squeeze-unsqueeze-cancel"])
    assert fired["squeeze-unsqueeze-cancel"] > 0
    assert op_counts(result.model) == {"Relu": 1}


def test_squeeze_unsqueeze_cancel_other_axes_same_shape() -> None:
    """Squeeze every size-1 axis (no axes), Unsqueeze at the same places: x's shape again."""
    m = model(
        [node("Squeeze", ["x"], "s"), node("Unsqueeze", ["s", "a"], "u"), node("Relu", ["u"], "y")],
        [("x", "FLOAT", (1, 3, 1, 2))],
        initializers={"a": np.array([0, 2], np.int64)},
    )
    result = assert_rule_sound(m, "squeeze-unsqueeze-cancel")
    assert op_counts(result.model) == {"Relu": 1}


def test_squeeze_unsqueeze_cancel_not_when_the_shape_changes() -> None:
    """x (2, 1, 3): Unsqueeze at 0 then Squeeze at 2 gives (1, 2, 3): a reshape, not x."""
    m = model(
        [node("Unsqueeze", ["x", "a"], "u"), node("Squeeze", ["u", "b"], "s"), node("Relu", ["s"], "y")],
        [("x", "FLOAT", (2, 1, 3))],
        initializers={"a": np.array([0], np.int64), "b": np.array([2], np.int64)},
    )
    assert_rule_does_not_fire(m, "squeeze-unsqueeze-cancel")


@property_settings()
@given(PROPERTIES["squeeze-unsqueeze-cancel"]())
def test_squeeze_unsqueeze_cancel_property(case: RuleCase) -> None:
    case.check()


# ---- reshape-transpose-reshape ----


def _merge_transpose_split(x_shape: tuple, perm: tuple, split: tuple | None = None) -> "onnx.ModelProto":
    """Reshape x to [x0*x1, x2...], Transpose by `perm`, Reshape to `split` (default: x0, x1, then the
    transposed trailing dims); a symbolic x0 is the targets' -1."""
    static = all(isinstance(d, int) for d in x_shape)
    merged = [x_shape[0] * x_shape[1] if static else -1, *x_shape[2:]]
    moved = [x_shape[1:][p] if p else None for p in perm]
    target = split or (x_shape[0] if static else -1, x_shape[1], *moved[1:])
    inits = {"m": np.array(merged, np.int64), "s": np.array(target, np.int64)}
    return model(
        [node("Reshape", ["x", "m"], "r"), transpose("r", "t", perm), node("Reshape", ["t", "s"], "y")],
        [("x", "FLOAT", x_shape)],
        initializers=inits,
        outputs=[("y", "FLOAT", None)],
    )


@pytest.mark.parametrize(
    "x_shape, perm", [((2, 3, 4, 5), (0, 2, 1)), ((1, 4, 2, 3, 5), (0, 3, 1, 2)), (("B", 3, 4, 5), (0, 2, 1))]
)
def test_reshape_transpose_reshape_becomes_one_transpose(x_shape: tuple, perm: tuple) -> None:
    m = _merge_transpose_split(x_shape, perm)
    result = assert_rule_sound(m, "reshape-transpose-reshape")
    assert op_counts(result.model) == {"Transpose": 1}
    assert attribute(result.model, "Transpose", "perm") == [0, 1, *(1 + p for p in perm[1:])]


def test_reshape_transpose_reshape_not_when_split_differs() -> None:
    """The last Reshape splits the merged axis the other way round (x1, x0): not x's leading axes."""
    m = _merge_transpose_split((2, 3, 4, 5), (0, 2, 1), split=(3, 2, 5, 4))
    assert_rule_does_not_fire(m, "reshape-transpose-reshape")


def test_reshape_transpose_reshape_not_when_merged_axis_moves() -> None:
    m = _merge_transpose_split((2, 3, 4, 5), (1, 0, 2), split=(4, 2, 3, 5))
    assert_rule_does_not_fire(m, "reshape-transpose-reshape")


@property_settings()
@given(PROPERTIES["reshape-transpose-reshape"]())
def test_reshape_transpose_reshape_property(case: RuleCase) -> None:
    case.check()


# ---- squeeze-merge / unsqueeze-merge ----


def _axes(op: str, x: str, y: str, axes: list, opset: int, inits: dict) -> "object":
    if opset >= 13:
        inits[f"{y}_axes"] = np.array(axes, np.int64)
        return node(op, [x, f"{y}_axes"], y)
    return node(op, [x], y, axes=axes)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize(
    "shape,first,second,merged",
    [
        ((1, 3, 1, 4, 1), [0], [1], [0, 2]),  # the second axis indexes the inner output: x's axis 2
        ((1, 3, 1, 4, 1), [2], [-1], [2, 4]),  # negative axes normalized per op (rank 4 for the outer)
        ((1, 3, 1, 4, 1), [0, 4], [1], [0, 2, 4]),
        ((3, 1, 1, 1), [-1], [1, 2], [1, 2, 3]),
        (("N", 1, 4, 1), [1], [2], [1, 3]),  # a symbolic dim: nothing is computed with it
        ((1, 3, 1, 1, 4, 1, 1, 2, 1, 1), [0, 2, 3], [2, 3, 5, 6], [0, 2, 3, 5, 6, 8, 9]),  # rank 10, 7 axes in all
    ],
)
def test_squeeze_merge(opset: int, shape: tuple, first: list, second: list, merged: list) -> None:
    inits: dict = {}
    m = model(
        [
            _axes("Squeeze", "x", "s", first, opset, inits),
            _axes("Squeeze", "s", "q", second, opset, inits),
            node("Neg", ["q"], "y"),
        ],
        [("x", "FLOAT", shape)],
        initializers=inits,
        opset=opset,
    )
    result = assert_rule_sound(m, "squeeze-merge")
    assert op_counts(result.model) == {"Squeeze": 1, "Neg": 1}
    (sq,) = [n for n in to_proto(result.model).graph.node if n.op_type == "Squeeze"]
    if opset >= 13:
        axes = [i for i in to_proto(result.model).graph.initializer if i.name == sq.input[1]]
        assert [int(v) for v in onnx.numpy_helper.to_array(axes[0])] == merged
    else:
        assert list(sq.attribute[0].ints) == merged


def test_squeeze_merge_without_outer_axes() -> None:
    """Squeeze(Squeeze(x, a)) (no axes: every remaining 1) is Squeeze(x): a's dims are 1s too."""
    m = model(
        [node("Squeeze", ["x", "a"], "s"), node("Squeeze", ["s"], "q"), node("Neg", ["q"], "y")],
        [("x", "FLOAT", (1, 3, 1, 2))],
        initializers={"a": np.array([2], np.int64)},
    )
    assert op_counts(assert_rule_sound(m, "squeeze-merge").model) == {"Squeeze": 1, "Neg": 1}


def test_squeeze_merge_not_across_other_ops() -> None:
    """An Unsqueeze between two Squeezes."""
    m = model(
        [node("Squeeze", ["x", "a"], "s"), node("Unsqueeze", ["s", "a"], "u"), node("Squeeze", ["u", "b"], "y")],
        [("x", "FLOAT", (1, 3, 1, 2))],
        initializers={"a": np.array([0], np.int64), "b": np.array([2], np.int64)},
    )
    assert_rule_does_not_fire(m, "squeeze-merge")


@property_settings()
@given(PROPERTIES["squeeze-merge"]())
def test_squeeze_merge_property(case: RuleCase) -> None:
    case.check()


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize(
    "shape,first,second,merged",
    [
        ((3, 4), [0], [1], [0, 1]),
        ((3, 4), [0], [0], [0, 1]),  # the inner 1 moves to axis 1
        ((3, 4), [1], [3], [1, 3]),
        ((3, 4), [-1], [0, -1], [0, 3, 4]),  # -1: axis 2 of the inner output, 4 of the outer
        (("N", 4), [2, 3], [1], [1, 3, 4]),
        ((3, 4), [0, 2, 4, 5], [1, 3, 8], [0, 1, 3, 4, 6, 7, 8]),  # 4 + 3 axes (onnxoptimizer's test)
    ],
)
def test_unsqueeze_merge(opset: int, shape: tuple, first: list, second: list, merged: list) -> None:
    inits: dict = {}
    m = model(
        [
            _axes("Unsqueeze", "x", "u", first, opset, inits),
            _axes("Unsqueeze", "u", "q", second, opset, inits),
            node("Neg", ["q"], "y"),
        ],
        [("x", "FLOAT", shape)],
        initializers=inits,
        opset=opset,
    )
    result = assert_rule_sound(m, "unsqueeze-merge")
    assert op_counts(result.model) == {"Unsqueeze": 1, "Neg": 1}
    (uq,) = [n for n in to_proto(result.model).graph.node if n.op_type == "Unsqueeze"]
    if opset >= 13:
        axes = [i for i in to_proto(result.model).graph.initializer if i.name == uq.input[1]]
        assert [int(v) for v in onnx.numpy_helper.to_array(axes[0])] == merged
    else:
        assert list(uq.attribute[0].ints) == merged


def test_unsqueeze_merge_not_with_a_squeeze_between() -> None:
    m = model(
        [node("Unsqueeze", ["x", "a"], "u"), node("Squeeze", ["u", "a"], "s"), node("Unsqueeze", ["s", "a"], "y")],
        [("x", "FLOAT", (3, 4))],
        initializers={"a": np.array([0], np.int64)},
    )
    assert_rule_does_not_fire(m, "unsqueeze-merge")


@property_settings()
@given(PROPERTIES["unsqueeze-merge"]())
def test_unsqueeze_merge_property(case: RuleCase) -> None:
    case.check()


# ---- reshape-sink-unary, reshape-sink-bias (tf2onnx Dense layers) ----

DENSE_RULES = ["reshape-sink-bias", "reshape-sink-unary", "reshape-merge", "reshape-noop"]


def dense_stack(runtime_target: bool = False) -> object:
    """tf2onnx's Dense layers over x [batch, 16, 32]: Reshape [-1, 32] -> MatMul -> Reshape [batch, 16, 64] (a
    static target with -1, or one computed from Shape(x)) -> Add(bias) -> Relu -> Reshape [-1, 64] -> MatMul ->
    Reshape back -> Add(bias)."""
    rng = np.random.default_rng(3)
    inits = {
        "flat1": np.array([-1, 32], np.int64),
        "flat2": np.array([-1, 64], np.int64),
        "back": np.array([-1, 16, 64], np.int64),
        "w1": rng.uniform(-1, 1, (32, 64)).astype(np.float32),
        "w2": rng.uniform(-1, 1, (64, 64)).astype(np.float32),
        "b1": rng.uniform(-1, 1, 64).astype(np.float32),
        "b2": rng.uniform(-1, 1, 64).astype(np.float32),
    }
    nodes = [node("Reshape", ["x", "flat1"], "r1"), node("MatMul", ["r1", "w1"], "m1")]
    if runtime_target:
        inits.update(n64=np.array([64], np.int64), lo=np.array([0], np.int64), hi=np.array([2], np.int64))
        nodes += [
            node("Shape", ["x"], "sh"),
            node("Slice", ["sh", "lo", "hi"], "lead"),
            node("Concat", ["lead", "n64"], "tgt", axis=0),
            node("Reshape", ["m1", "tgt"], "u1"),
        ]
    else:
        nodes.append(node("Reshape", ["m1", "back"], "u1"))
    nodes += [
        node("Add", ["u1", "b1"], "a1"),
        node("Relu", ["a1"], "h1"),
        node("Reshape", ["h1", "flat2"], "r2"),
        node("MatMul", ["r2", "w2"], "m2"),
        node("Reshape", ["m2", "back"], "u2"),
        node("Add", ["u2", "b2"], "y"),
    ]
    return model(nodes, [("x", "FLOAT", ("batch", 16, 32))], initializers=inits)


@pytest.mark.parametrize("runtime_target", [False, True])
def test_reshape_sinking_removes_dense_reshape_pairs(runtime_target: bool) -> None:
    """The Reshape back to [batch, 16, 64] sinks through the bias Add and the Relu, meets the next flattening
    Reshape and both go: 4 Reshapes -> 2 (the stack's first and last), verified at two batch sizes."""
    m = dense_stack(runtime_target)
    session = saturate_with_rules(m, DENSE_RULES)
    assert session.saturation.rules_fired["reshape-sink-bias"] > 0
    assert session.saturation.rules_fired["reshape-sink-unary"] > 0
    result = session.extract("cpu", verify=True)
    assert result.report.verification.ok and "x:3x16x32" in result.report.verification.summary()
    assert op_counts(result.model)["Reshape"] == 2
    assert_rule_sound(m, "reshape-sink-bias", also=DENSE_RULES)


def test_reshape_sinking_in_the_default_rules() -> None:
    """With every default rule the Dense stack keeps no Reshape at all (matmul-unflatten folds the outer pair)."""
    from eqsat.session import saturate

    result = saturate(to_proto(dense_stack())).extract("cpu", verify=True)
    assert result.report.verification.ok
    assert op_counts(result.model)["Reshape"] == 0


@pytest.mark.parametrize("case", ["last-dim-changed", "bias-on-another-axis", "full-operand"])
def test_reshape_sink_bias_not(case: str) -> None:
    """b must vary along the last axis only, and the Reshape must keep the last dim: [4, 6] -> [4, 2, 3] puts
    element (i, j) at last index j mod 3, where b [6]'s broadcast would read b[j]."""
    b_shape, target = {
        "last-dim-changed": ((3,), [4, 2, 3]),
        "bias-on-another-axis": ((2, 1), [4, 2, 3]),
        "full-operand": ((4, 2, 3), [4, 2, 3]),
    }[case]
    y_shape = (4, 6) if case == "last-dim-changed" else (8, 3)
    m = model(
        [node("Reshape", ["y", "s"], "r"), node("Add", ["r", "b"], "z")],
        [("y", "FLOAT", y_shape), ("b", "FLOAT", b_shape)],
        ["z"],
        initializers={"s": np.array(target, np.int64)},
    )
    assert_rule_does_not_fire(m, "reshape-sink-bias")


def test_reshape_sink_unary_not_through_softmax() -> None:
    """Softmax normalizes along an axis the Reshape regroups: not elementwise, not sunk."""
    m = model(
        [node("Reshape", ["x", "s"], "r"), node("Softmax", ["r"], "y", axis=-1)],
        [("x", "FLOAT", (2, 6))],
        initializers={"s": np.array([4, 3], np.int64)},
    )
    assert_rule_does_not_fire(m, "reshape-sink-unary")


@property_settings()
@given(PROPERTIES["reshape-sink-unary"]())
def test_reshape_sink_unary_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["reshape-sink-bias"]())
def test_reshape_sink_bias_property(case: RuleCase) -> None:
    case.check()


# ---- transpose-cancel-binary ----


def _cancel_graph(op: str, y_shape: tuple, x_shape: tuple = ("batch", 3, 4, 5), back: tuple = NHWC_TO_NCHW) -> object:
    """x (NCHW) -> Transpose to NHWC -> op with a graph input y (y second for Add, first otherwise) -> Transpose
    `back`."""
    operands = ["t", "y"] if op == "Add" else ["y", "t"]
    return model(
        [transpose("x", "t", NCHW_TO_NHWC), node(op, operands, "m"), transpose("m", "out", back)],
        [("x", "FLOAT", x_shape), ("y", "FLOAT", y_shape)],
        ["out"],
    )


@pytest.mark.parametrize("op,y_shape", [("Add", ("batch", 4, 5, 3)), ("Sub", ("batch", 1, 1, 3))])
def test_transpose_cancel_binary(op: str, y_shape: tuple) -> None:
    """The transposes around x cancel and the non-constant y (an NHWC input, or a per-channel one of the same
    rank) takes the inverse instead: 2 Transposes -> 1, verified at two batch sizes."""
    m = _cancel_graph(op, y_shape)
    session = saturate_with_rules(m, ["transpose-cancel-binary", *SANDWICH])
    assert session.saturation.rules_fired["transpose-cancel-binary"] > 0
    result = session.extract("cpu", verify=True)
    assert result.report.verification.ok and "x:3x3x4x5" in result.report.verification.summary()
    assert op_counts(result.model) == {op: 1, "Transpose": 1}
    assert_rule_sound(m, "transpose-cancel-binary", also=SANDWICH)


@pytest.mark.parametrize("case", ["lower-rank", "enlarging", "not-inverse"])
def test_transpose_cancel_binary_not(case: str) -> None:
    """y [3] of lower rank aligns with the last axis (C in NHWC, W in NCHW): transposing it cannot say that; a y
    that enlarges the output changes the inner shape; an outer Transpose that is not p^-1 leaves a transpose."""
    if case == "lower-rank":
        m = _cancel_graph("Add", (3,))
    elif case == "enlarging":
        m = _cancel_graph("Add", (2, 4, 5, 3), x_shape=(1, 3, 4, 5))
    else:
        m = _cancel_graph("Add", ("batch", 4, 5, 3), back=(0, 1, 3, 2))
    assert_rule_does_not_fire(m, "transpose-cancel-binary", also=SANDWICH)


@property_settings()
@given(PROPERTIES["transpose-cancel-binary"]())
def test_transpose_cancel_binary_property(case: RuleCase) -> None:
    case.check()


# ---- the sites (guards computed once in analysis) ----


@property_settings()
@given(PROPERTIES["transpose-sink-reduce-site"]())
def test_transpose_sink_reduce_site_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["transpose-sink-binary-broadcast-site"]())
def test_transpose_sink_binary_broadcast_site_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["reshape-sink-bias-site"]())
def test_reshape_sink_bias_site_property(case: RuleCase) -> None:
    case.check()


def test_reduce_site_not_set_when_every_axis_is_reduced() -> None:
    """The site holds 0 < |axes| < rank only: a reduction over every axis is the layout-free form's."""
    m = model([transpose("x", "t", NCHW_TO_NHWC), node("ReduceMax", ["t"], "y", axes=[0, 1, 2, 3], keepdims=0)], X4)
    assert "transpose-sink-reduce-site" not in saturate_with_rules(m, []).saturation.rules_fired
