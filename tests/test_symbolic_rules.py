"""Shape guards under symbolic dims, family by family: each rule that reads a shape fires when only the
dims it needs are static (the others symbols), and declines when a dim it computes with is a symbol.
Every positive case is checked for soundness on concrete sizes other than 1."""

from __future__ import annotations

import numpy as np
import onnx.helper as oh
import pytest

from eqsat.testing import assert_rule_does_not_fire, assert_rule_sound
from tests.rule_graphs import model, node

RNG = np.random.default_rng(11)


def _floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _positive(*shape: int) -> np.ndarray:
    return RNG.uniform(0.5, 2.0, shape).astype(np.float32)


# ---- conv: the channel dim is what the folds compute with ----


def _conv_bn(x_shape: tuple) -> object:
    inits = dict(w=_floats(4, 3, 3, 3), s=_positive(4), b=_floats(4), mu=_floats(4), var=_positive(4))
    return model(
        [
            node("Conv", ["x", "w"], "c", pads=[1, 1, 1, 1]),
            node("BatchNormalization", ["c", "s", "b", "mu", "var"], "y"),
        ],
        [("x", "FLOAT", x_shape)],
        initializers=inits,
    )


def test_conv_bn_fold_under_symbolic_batch_and_spatial_dims() -> None:
    m = _conv_bn(("N", 3, "H", "W"))
    assert_rule_sound(m, "conv-bn-fold", {"x": _floats(2, 3, 5, 6)}, also=["conv-zero-bias"])


def test_bn_decompose_not_over_a_symbolic_channel_dim() -> None:
    inits = dict(s=_positive(3), b=_floats(3), mu=_floats(3), var=_positive(3))
    m = model(
        [node("BatchNormalization", ["x", "s", "b", "mu", "var"], "y")],
        [("x", "FLOAT", ("N", "C", 4, 4))],
        initializers=inits,
    )
    assert_rule_does_not_fire(m, "bn-decompose")


# ---- linear: Gemm needs a 2-D A, whatever its rows ----


def _matmul_add(x_shape: tuple) -> object:
    return model(
        [node("MatMul", ["x", "w"], "m"), node("Add", ["m", "b"], "y")],
        [("x", "FLOAT", x_shape)],
        initializers=dict(w=_floats(4, 5), b=_floats(5)),
    )


def test_matmul_add_to_gemm_under_a_symbolic_batch() -> None:
    assert_rule_sound(_matmul_add(("B", 4)), "matmul-add-to-gemm", {"x": _floats(3, 4)})


def test_matmul_add_to_gemm_not_for_a_symbolic_rank_3_input() -> None:
    assert_rule_does_not_fire(_matmul_add(("B", "S", 4)), "matmul-add-to-gemm")


# ---- normalization: LayerNorm over the last axis, batch and sequence symbolic ----


def _layernorm(x_shape: tuple) -> object:
    nodes = [
        node("ReduceMean", ["x"], "mu", axes=[-1]),
        node("Sub", ["x", "mu"], "d"),
        node("Mul", ["d", "d"], "sq"),
        node("ReduceMean", ["sq"], "var", axes=[-1]),
        node("Add", ["var", "eps"], "ve"),
        node("Sqrt", ["ve"], "sd"),
        node("Div", ["d", "sd"], "y"),
    ]
    return model(nodes, [("x", "FLOAT", x_shape)], initializers=dict(eps=np.array(1e-5, np.float32)))


def test_layernorm_fuse_under_symbolic_batch_and_sequence() -> None:
    assert_rule_sound(_layernorm(("B", "S", 8)), "layernorm-fuse", {"x": _floats(2, 3, 8)})


def test_instancenorm_fuse_not_over_a_symbolic_channel_dim() -> None:
    nodes = [
        node("ReduceMean", ["x"], "mu", axes=[2, 3]),
        node("Sub", ["x", "mu"], "d"),
        node("Mul", ["d", "d"], "sq"),
        node("ReduceMean", ["sq"], "var", axes=[2, 3]),
        node("Add", ["var", "eps"], "ve"),
        node("Sqrt", ["ve"], "sd"),
        node("Div", ["d", "sd"], "y"),
    ]
    m = model(nodes, [("x", "FLOAT", ("N", "C", 4, 4))], initializers=dict(eps=np.array(1e-5, np.float32)))
    assert_rule_does_not_fire(m, "instancenorm-fuse")


# ---- activation: per-channel slopes need the channel dim ----


def _prelu(x_shape: tuple, slope: np.ndarray) -> object:
    return model([node("PRelu", ["x", "a"], "y")], [("x", "FLOAT", x_shape)], initializers=dict(a=slope))


def test_prelu_to_leakyrelu_under_symbolic_dims() -> None:
    m = _prelu(("N", "C", "H"), np.array([0.25], np.float32))
    assert_rule_sound(m, "prelu-to-leakyrelu", {"x": _floats(2, 3, 4)})


def test_prelu_to_leakyrelu_not_for_a_slope_per_channel() -> None:
    assert_rule_does_not_fire(_prelu(("N", 3, "H"), np.array([[0.1], [0.2], [0.3]], np.float32)), "prelu-to-leakyrelu")


# ---- tensor: Split of a Concat compares the parts' sizes along the axis ----


def _split_concat(a_shape: tuple, b_shape: tuple) -> object:
    split = oh.make_node("Split", ["c", "sizes"], ["y0", "y1"], axis=1)
    return model(
        [node("Concat", ["a", "b"], "c", axis=1), split],
        [("a", "FLOAT", a_shape), ("b", "FLOAT", b_shape)],
        ["y0", "y1"],
        initializers=dict(sizes=np.array([2, 3], np.int64)),
    )


def test_split_concat_under_a_symbolic_batch() -> None:
    m = _split_concat(("N", 2), ("N", 3))
    assert_rule_sound(m, "split-concat", {"a": _floats(4, 2), "b": _floats(4, 3)})


def test_split_concat_not_when_a_part_is_symbolic_along_the_axis() -> None:
    assert_rule_does_not_fire(_split_concat(("N", "K"), ("N", 3)), "split-concat")


# ---- quant: Q/DQ sink through a transpose of symbolic dims ----


def test_qdq_sink_transpose_under_symbolic_dims() -> None:
    inits = {"s": np.array(0.05, np.float32), "z": np.array(3, np.int8)}
    m = model(
        [
            node("DequantizeLinear", ["x", "s", "z"], "dq"),
            node("Transpose", ["dq"], "t", perm=[0, 2, 1]),
            node("QuantizeLinear", ["t", "s", "z"], "y"),
        ],
        [("x", "INT8", ("B", "S", 4))],
        initializers=inits,
    )
    feeds = {"x": RNG.integers(-128, 128, (2, 3, 4)).astype(np.int8)}
    assert_rule_sound(m, "qdq-sink-transpose", feeds)


# ---- elementwise: x / 1 and x - 0 keep x's shape, symbols included ----


@pytest.mark.parametrize("rule, op, value", [("div-one", "Div", 1.0), ("sub-zero", "Sub", 0.0)])
def test_neutral_divisor_and_subtrahend_under_symbolic_dims(rule: str, op: str, value: float) -> None:
    m = model([node(op, ["x", "k"], "y")], [("x", "FLOAT", ("N", 3))], initializers=dict(k=np.array(value, np.float32)))
    assert_rule_sound(m, rule, {"x": _floats(4, 3)})


@pytest.mark.parametrize("rule, op, value", [("div-one", "Div", 1.0), ("sub-zero", "Sub", 0.0)])
def test_neutral_divisor_and_subtrahend_not_when_the_output_grows(rule: str, op: str, value: float) -> None:
    m = model(
        [node(op, ["x", "k"], "y")], [("x", "FLOAT", ("N", 1))], initializers=dict(k=np.full((1, 3), value, np.float32))
    )
    assert_rule_does_not_fire(m, rule)


# ---- reduce: ReduceSum * 1/N needs the reduced axis static ----


@pytest.mark.parametrize("reduced, fires", [(4, True), ("K", False)])
def test_reducesum_mul_to_mean_needs_the_reduced_axis_static(reduced: int | str, fires: bool) -> None:
    m = model(
        [node("ReduceSum", ["x", "axes"], "r", keepdims=0), node("Mul", ["r", "q"], "y")],
        [("x", "FLOAT", ("N", reduced))],
        initializers=dict(axes=np.array([1], np.int64), q=np.array(0.25, np.float32)),
    )
    if fires:
        assert_rule_sound(m, "reducesum-mul-to-mean", {"x": _floats(3, 4)})
    else:
        assert_rule_does_not_fire(m, "reducesum-mul-to-mean")


# ---- rule catalogue II: normalization variants, bias chains, broadcast sinking under symbolic dims ----


def _moments_over(axes: list[int], x_shape: tuple) -> object:
    nodes = [
        node("ReduceMean", ["x"], "mu", axes=axes),
        node("Sub", ["x", "mu"], "d"),
        node("Mul", ["d", "d"], "sq"),
        node("ReduceMean", ["sq"], "var", axes=axes),
        node("Add", ["var", "eps"], "ve"),
        node("Sqrt", ["ve"], "sd"),
        node("Div", ["d", "sd"], "y"),
    ]
    return model(nodes, [("x", "FLOAT", x_shape)], initializers=dict(eps=np.array(1e-5, np.float32)))


def test_layernorm_fuse_over_two_trailing_axes_under_a_symbolic_batch() -> None:
    assert_rule_sound(_moments_over([1, 2], ("B", 4, 8)), "layernorm-fuse", {"x": _floats(3, 4, 8)})


def test_layernorm_fuse_transposed_under_symbolic_batch_and_spatial_dims() -> None:
    """Channels-first LayerNorm: only the channel dim (the normalized one) must be static."""
    assert_rule_sound(_moments_over([1], ("N", 8, "H", "W")), "layernorm-fuse-transposed", {"x": _floats(2, 8, 3, 5)})


def test_instancenorm_fuse_channels_last_under_symbolic_spatial_dims() -> None:
    """Channels-last InstanceNorm: the spatial dims may be symbols, the first one is read as > 1."""
    m = _moments_over([1, 2], ("N", 4, "W", 3))
    assert_rule_sound(m, "instancenorm-fuse-channels-last", {"x": _floats(2, 4, 5, 3)})
    assert_rule_does_not_fire(_moments_over([1, 2], ("N", "H", "W", 3)), "instancenorm-fuse-channels-last")


def test_matmul_bias_chain_under_symbolic_batch_and_sequence() -> None:
    inits = dict(w=_floats(5, 6), c1=_floats(6), c2=_floats(6))
    m = model(
        [node("MatMul", ["x", "w"], "mm"), node("Add", ["mm", "c1"], "z"), node("Sub", ["z", "c2"], "y")],
        [("x", "FLOAT", ("B", "S", 5))],
        initializers=inits,
    )
    assert_rule_sound(m, "matmul-bias-chain", {"x": _floats(2, 3, 5)})


def test_transpose_sink_binary_broadcast_under_symbolic_dims() -> None:
    m = model(
        [
            oh.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
            node("Add", ["t", "b"], "m"),
            oh.make_node("Transpose", ["m"], ["y"], perm=[0, 3, 1, 2]),
        ],
        [("x", "FLOAT", ("N", "C", "H", "W")), ("b", "FLOAT", ("C",))],
    )
    assert_rule_sound(
        m,
        "transpose-sink-binary-broadcast",
        {"x": _floats(2, 3, 4, 5), "b": _floats(3)},
        also=["transpose-merge", "transpose-identity"],
    )
