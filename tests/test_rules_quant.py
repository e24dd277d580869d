"""Quantization rules (rewrites/quant.py): each fires where it should, not where its guard fails, and is
sound; the lossy rewrites (Q -> DQ removal, a rounding rescale merge) only with `allow=precision-changing`;
each target extracts the quantized type it takes (extract/targets/*.toml [quant])."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given

import eqsat
from eqsat.testing import (
    PROPERTIES,
    RuleCase,
    assert_rule_does_not_fire,
    assert_rule_sound,
    op_counts,
    optimize_with_rules,
    run,
    saturate_with_rules,
    to_proto,
)
from tests.rule_graphs import model, node, property_settings

PRECISION = ("precision-changing",)
S = np.array(0.05, np.float32)


def _dq_q(
    qtype: str = "INT8",
    *,
    zp=3,
    scale=S,
    scale2=None,
    zp2=None,
    axis=None,
    zp_dtype2=None,
    shape=(2, 3, 4),
    opset: int = 13,
) -> object:
    """x (8-bit) -> DequantizeLinear(s, z) -> QuantizeLinear(s2, z2) -> y."""
    np_q = {"INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16, "UINT16": np.uint16}[qtype]
    inits = {
        "s": np.asarray(scale, np.float32) if axis is None else np.linspace(0.01, 0.1, shape[axis], dtype=np.float32),
        "z": np.array(zp, np_q) if axis is None else np.full(shape[axis], zp, np_q),
    }
    inits["s2"] = inits["s"] if scale2 is None else np.asarray(scale2, np.float32)
    inits["z2"] = inits["z"] if zp2 is None else np.asarray(zp2, zp_dtype2 or np_q)
    attrs = {} if axis is None else {"axis": axis}
    nodes = [
        node("DequantizeLinear", ["x", "s", "z"], "dq", **attrs),
        node("QuantizeLinear", ["dq", "s2", "z2"], "y", **attrs),
    ]
    return model(nodes, [("x", qtype, shape)], initializers=inits, opset=opset)


def _no_qdq(m) -> bool:
    ops = op_counts(m)
    return not ops["QuantizeLinear"] and not ops["DequantizeLinear"]


# ---- qdq-cancel ----


@pytest.mark.parametrize("qtype", ["INT8", "UINT8"])
@pytest.mark.parametrize("axis", [None, 1])
def test_qdq_cancel_same_parameters(qtype: str, axis) -> None:
    m = _dq_q(qtype, axis=axis)
    result = assert_rule_sound(m, "qdq-cancel")
    assert op_counts(result.model) == {"Identity": 1}  # y is x under the output's name
    x = {"x": np.arange(-60, 60, 5).reshape(2, 3, 4).astype(np.int8 if qtype == "INT8" else np.uint8)}
    np.testing.assert_array_equal(run(result.model, x)[0], x["x"])  # bit-exact: every 8-bit value survives


def test_qdq_cancel_every_int8_value_round_trips() -> None:
    """The exactness argument, checked on all 256 values with a few scales."""
    for scale in (1e-4, 0.05, 3.7):
        m = _dq_q("INT8", zp=-7, scale=scale, shape=(256,))
        x = {"x": np.arange(-128, 128).astype(np.int8)}
        np.testing.assert_array_equal(run(m, x)[0], x["x"])


@pytest.mark.parametrize("kw", [{"scale2": 0.1}, {"zp2": 4}, {"zp2": 3, "zp_dtype2": np.uint8}])
def test_qdq_cancel_not_with_other_parameters(kw: dict) -> None:
    assert_rule_does_not_fire(_dq_q(**kw), "qdq-cancel")


@pytest.mark.parametrize("scale", [1e37, 1e-39], ids=["overflowing", "subnormal"])
def test_qdq_cancel_not_for_a_scale_beyond_float32s_grid(scale: float) -> None:
    """(x - z) * 1e37 overflows float32 and Q saturates it (x = 35 gives 255), and a subnormal scale loses bits:
    the pair stays, per-tensor or per-axis."""
    assert_rule_does_not_fire(_dq_q("UINT8", scale=scale, shape=(256,)), "qdq-cancel")
    per_axis = _dq_q("UINT8", axis=0, shape=(4, 2))
    for tensor in per_axis.graph.initializer:
        if tensor.name in ("s", "s2"):  # one scale for the pair
            tensor.CopyFrom(onnx.numpy_helper.from_array(np.full(4, scale, np.float32), tensor.name))
    assert_rule_does_not_fire(per_axis, "qdq-cancel")
    fine = _dq_q("UINT8", axis=0, shape=(4, 2))  # the same pair with moderate scales cancels
    assert_rule_sound(fine, "qdq-cancel")


def test_qdq_cancel_not_for_16_bit() -> None:
    """The guard admits dtypes whose values are exact in INT16 (8-bit): a 16-bit pair (opset 21) is left."""
    assert_rule_does_not_fire(_dq_q("UINT16", zp=0, opset=21), "qdq-cancel")


def test_qdq_cancel_not_when_the_axis_differs() -> None:
    m = _dq_q(axis=1)
    m.graph.node[1].attribute[0].i = 2
    m.graph.initializer.extend([])
    assert_rule_does_not_fire(m, "qdq-cancel")


@property_settings()
@given(PROPERTIES["qdq-cancel"]())
def test_qdq_cancel_property(case: RuleCase) -> None:
    case.check()


# ---- dq-q-drop (precision-changing) ----


def _q_dq() -> object:
    nodes = [node("QuantizeLinear", ["x", "s", "z"], "q"), node("DequantizeLinear", ["q", "s", "z"], "y")]
    return model(
        nodes, [("x", "FLOAT", (2, 8))], initializers={"s": np.array(0.02, np.float32), "z": np.array(128, np.uint8)}
    )


#: Inputs within the grid's range (+-2.56): the rounding error (<= 0.01) is within 1% of the output scale.
FEEDS = {"x": np.linspace(-2.5, 2.5, 16, dtype=np.float32).reshape(2, 8)}


def test_dq_q_drop_only_when_allowed() -> None:
    m = _q_dq()
    assert_rule_does_not_fire(m, "dq-q-drop")
    result, fired = optimize_with_rules(m, ["dq-q-drop"], allow=PRECISION)
    assert fired["dq-q-drop"] > 0 and _no_qdq(result.model)
    assert op_counts(result.model) == {"Clip": 1}
    assert_rule_sound(m, "dq-q-drop", FEEDS, allow=PRECISION)


@pytest.mark.parametrize("qtype,zp", [("UINT8", 128), ("INT8", -5), ("UINT8", None)])
def test_dq_q_drop_keeps_the_clamp(qtype: str, zp) -> None:
    """Inputs far outside the grid's range (the fuzzer's counterexample to dropping the pair outright):
    Q saturates them, and the Clip that replaces the pair clamps them to the same values; what remains
    is the rounding, at most s / 2 per element."""
    s = np.array(0.02, np.float32)
    inits = {"s": s}
    inputs = ["x", "s"]
    if zp is not None:
        inits["z"] = np.array(zp, np.uint8 if qtype == "UINT8" else np.int8)
        inputs.append("z")
    m = model(
        [node("QuantizeLinear", inputs, "q"), node("DequantizeLinear", ["q", *inputs[1:]], "y")],
        [("x", "FLOAT", (4, 16))],
        initializers=inits,
    )
    x = {"x": np.linspace(-40, 40, 64, dtype=np.float32).reshape(4, 16)}
    result, fired = optimize_with_rules(m, ["dq-q-drop"], allow=PRECISION)
    assert fired["dq-q-drop"] > 0 and op_counts(result.model) == {"Clip": 1}
    expected, actual = run(m, x)[0], run(result.model, x)[0]
    assert np.max(np.abs(expected - actual)) <= float(s) / 2 * (1 + 1e-5)
    lo, hi = float(expected.min()), float(expected.max())
    assert np.max(actual) == pytest.approx(hi) and np.min(actual) == pytest.approx(lo)  # clamped like Q
    assert_rule_sound(m, "dq-q-drop", x, allow=PRECISION)


def test_dq_q_drop_not_per_axis() -> None:
    """A per-channel scale has no single pair of Clip bounds: the pair is left alone."""
    inits = {"s": np.array([0.02, 0.05], np.float32), "z": np.array([0, 3], np.int8)}
    m = model(
        [node("QuantizeLinear", ["x", "s", "z"], "q", axis=0), node("DequantizeLinear", ["q", "s", "z"], "y", axis=0)],
        [("x", "FLOAT", (2, 8))],
        initializers=inits,
    )
    assert_rule_does_not_fire(m, "dq-q-drop", allow=PRECISION)


def test_default_optimization_keeps_q_dq() -> None:
    """Q -> DQ rounds to the grid: the default pipeline keeps the pair, bit-exact."""
    m = _q_dq()
    result = eqsat.optimize(m)
    assert op_counts(result.model) == {"QuantizeLinear": 1, "DequantizeLinear": 1}
    x = {"x": np.linspace(-3, 3, 16, dtype=np.float32).reshape(2, 8)}
    np.testing.assert_array_equal(run(result.model, x)[0], run(m, x)[0])
    assert not np.array_equal(run(m, x)[0], x["x"])  # why: the pair changes values


def test_dq_q_drop_not_with_other_parameters() -> None:
    m = _q_dq()
    m.graph.node[1].input[1] = "s2"
    m.graph.initializer.append(onnx.numpy_helper.from_array(np.array(0.1, np.float32), "s2"))
    assert_rule_does_not_fire(m, "dq-q-drop", allow=PRECISION)


@property_settings()
@given(PROPERTIES["dq-q-drop"]())
def test_dq_q_drop_property(case: RuleCase) -> None:
    case.check()


# ---- qdq-zero-point-default ----


def test_qdq_zero_point_default_canonicalizes_and_lets_pairs_cancel() -> None:
    """DQ with an explicit zero point 0, Q without one: the same parameters once canonical."""
    nodes = [node("DequantizeLinear", ["x", "s", "z"], "dq"), node("QuantizeLinear", ["dq", "s"], "y")]
    m = model(nodes, [("x", "UINT8", (2, 8))], initializers={"s": S, "z": np.array(0, np.uint8)})
    assert_rule_does_not_fire(m, "qdq-cancel")
    result, fired = optimize_with_rules(m, ["qdq-zero-point-default", "qdq-cancel"])
    assert fired["qdq-zero-point-default"] > 0 and fired["qdq-cancel"] > 0
    assert _no_qdq(result.model)
    assert_rule_sound(m, "qdq-zero-point-default", also=("qdq-cancel",))


@pytest.mark.parametrize("qtype", [np.uint8, np.int8])
def test_qdq_zero_point_default_per_axis_zeros(qtype) -> None:
    """A per-axis zero point of zeros (the `splat` fact) is the default too: DQ always, Q when it is uint8.
    (Abs between them: a Q after a Relu keeps its zero point on the cpu, where ONNX Runtime's ReluQuantFusion
    reads it; tests/test_ties.py.)"""
    s = np.linspace(0.01, 0.1, 3, dtype=np.float32)
    m = model(
        [
            node("DequantizeLinear", ["x", "s", "z"], "dq", axis=1),
            node("Abs", ["dq"], "r"),
            node("QuantizeLinear", ["r", "s", "zq"], "y", axis=1),
        ],
        [("x", "UINT8", (2, 3, 4))],
        initializers={"s": s, "z": np.zeros(3, np.uint8), "zq": np.zeros(3, qtype)},
    )
    session = saturate_with_rules(m, ["qdq-zero-point-default"])
    g = session.egraph
    defaults = {
        n.op
        for n in g.nodes
        if n.op in ("QuantizeLinear", "DequantizeLinear") and g.node(g.eclass(n.children[2]).nodes[0]).op == "Absent"
    }
    assert defaults == ({"DequantizeLinear", "QuantizeLinear"} if qtype == np.uint8 else {"DequantizeLinear"})
    result, _ = optimize_with_rules(m, ["qdq-zero-point-default"])  # the cpu's tie_break: fewer inputs win
    inputs = {n.op_type: len(n.inputs) for n in result.model.graph}
    assert inputs == {"DequantizeLinear": 2, "Abs": 1, "QuantizeLinear": 2 if qtype == np.uint8 else 3}
    assert_rule_sound(m, "qdq-zero-point-default")


def test_qdq_zero_point_default_not_for_a_mixed_per_axis_zero_point() -> None:
    m = model(
        [node("DequantizeLinear", ["x", "s", "z"], "y", axis=1)],
        [("x", "UINT8", (2, 3, 4))],
        initializers={"s": np.linspace(0.01, 0.1, 3, dtype=np.float32), "z": np.array([0, 0, 1], np.uint8)},
    )
    assert_rule_does_not_fire(m, "qdq-zero-point-default")


@pytest.mark.parametrize("zp,dtype", [(0, np.int8), (5, np.uint8)])
def test_qdq_zero_point_default_not_for_int8_or_nonzero_quantize(zp: int, dtype) -> None:
    """An absent zero point means uint8 0: an int8 zero point (other output type) or 5 is not that."""
    m = model(
        [node("QuantizeLinear", ["x", "s", "z"], "y")],
        [("x", "FLOAT", (2, 8))],
        initializers={"s": S, "z": np.array(zp, dtype)},
    )
    assert_rule_does_not_fire(m, "qdq-zero-point-default")


@property_settings()
@given(PROPERTIES["qdq-zero-point-default"]())
def test_qdq_zero_point_default_property(case: RuleCase) -> None:
    case.check()


# ---- qdq-sink-transpose, qdq-sink-reshape ----


def _dq_layout_q(layout: str, per_axis: bool = False) -> object:
    inits = {"s": S, "z": np.array(3, np.int8)}
    if per_axis:
        inits = {"s": np.linspace(0.01, 0.1, 3, dtype=np.float32), "z": np.zeros(3, np.int8)}
    attrs = {"axis": 1} if per_axis else {}
    if layout == "Transpose":
        mid = node("Transpose", ["dq"], "t", perm=[0, 2, 1])
    else:
        inits["shape"] = np.array([2, -1], np.int64)
        mid = node("Reshape", ["dq", "shape"], "t")
    q_attrs = {"axis": 2} if per_axis and layout == "Transpose" else attrs
    nodes = [
        node("DequantizeLinear", ["x", "s", "z"], "dq", **attrs),
        mid,
        node("QuantizeLinear", ["t", "s", "z"], "y", **q_attrs),
    ]
    return model(nodes, [("x", "INT8", (2, 3, 4))], initializers=inits, opset=13)


@pytest.mark.parametrize("layout,rule", [("Transpose", "qdq-sink-transpose"), ("Reshape", "qdq-sink-reshape")])
def test_qdq_sink_lets_the_pair_cancel_in_int8(layout: str, rule: str) -> None:
    m = _dq_layout_q(layout)
    result, fired = optimize_with_rules(m, [rule, "qdq-cancel"])
    assert fired[rule] > 0 and fired["qdq-cancel"] > 0
    assert op_counts(result.model) == {layout: 1}  # the layout op moves int8 data, no Q/DQ left
    assert_rule_sound(m, rule, also=("qdq-cancel",))


@pytest.mark.parametrize("layout,rule", [("Transpose", "qdq-sink-transpose"), ("Reshape", "qdq-sink-reshape")])
def test_qdq_sink_not_per_axis(layout: str, rule: str) -> None:
    """A per-channel scale would have to follow its axis through the layout op: left alone."""
    assert_rule_does_not_fire(_dq_layout_q(layout, per_axis=True), rule)


@property_settings()
@given(PROPERTIES["qdq-sink-transpose"]())
def test_qdq_sink_transpose_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["qdq-sink-reshape"]())
def test_qdq_sink_reshape_property(case: RuleCase) -> None:
    case.check()


# ---- qdq-zero-point-shift ----


def _pair(
    qtype: str = "UINT8", zp: int = 128, *, q_axis: int | None = None, dq_zp: int | None = None, per_axis: bool = False
) -> object:
    """x -> Neg -> Q(s, zp) -> DQ -> Sigmoid -> y0 and DQ -> Tanh -> y1 (DQ nodes with equal inputs are one
    term: consumers share it); `per_axis`: scale and zero point per channel (axis 1, 3 channels)."""
    np_q = {"UINT8": np.uint8, "INT8": np.int8}[qtype]
    shape = (3,) if per_axis else ()
    inits = {"s": np.full(shape, S, np.float32), "z": np.full(shape, zp, np_q)}
    dq_inputs = ["q", "s", "z"]
    if dq_zp is not None:
        inits["z_dq"] = np.full(shape, dq_zp, np_q)
        dq_inputs = ["q", "s", "z_dq"]
    axis = {"axis": 1} if per_axis else {}
    q_attrs = {"axis": q_axis} if q_axis is not None else axis
    nodes = [node("Neg", ["x"], "r"), node("QuantizeLinear", ["r", "s", "z"], "q", **q_attrs)]
    nodes += [
        node("DequantizeLinear", dq_inputs, "dq", **axis),
        node("Sigmoid", ["dq"], "y0"),
        node("Tanh", ["dq"], "y1"),
    ]
    return model(nodes, [("x", "FLOAT", (2, 3, 4))], ["y0", "y1"], initializers=inits)


#: Inputs beyond the grid at both ends (+-6.4 for s = 0.05): both forms saturate alike.
WIDE = {"x": np.linspace(-9, 9, 24, dtype=np.float32).reshape(2, 3, 4)}


def _quantized_types(m) -> set[str]:
    """Element types of the non-float initializers (zero points, quantized weights) of an extracted model."""
    proto = to_proto(m)
    return {
        onnx.TensorProto.DataType.Name(t.data_type)
        for t in proto.graph.initializer
        if t.data_type != onnx.TensorProto.FLOAT
    }


@pytest.mark.parametrize("target,qtype", [("cpu", "UINT8"), ("gpu", "INT8"), ("npu", "INT8")])
def test_qdq_zero_point_shift_target_picks_the_type(target: str, qtype: str) -> None:
    """One e-graph holds both forms; gpu (TensorRT: symmetric int8 only) and npu (int8 preferred) pick int8 with
    zero point 0, cpu (both native: a tie) keeps the input's uint8; all bit-identical to the original."""
    m = _pair()
    result, fired = optimize_with_rules(m, ["qdq-zero-point-shift"], target=target)
    assert fired["qdq-zero-point-shift"] > 0
    assert op_counts(result.model) == {"Neg": 1, "QuantizeLinear": 1, "DequantizeLinear": 1, "Sigmoid": 1, "Tanh": 1}
    assert _quantized_types(result.model) == {qtype}  # the zero point shared by the Q and the DQ
    for expected, actual in zip(run(m, WIDE), run(result.model, WIDE)):
        np.testing.assert_array_equal(actual, expected)
    assert_rule_sound(m, "qdq-zero-point-shift", WIDE, target=target)


def test_qdq_zero_point_shift_back_from_int8() -> None:
    """An int8 pair with zero point 0 (explicit on Q, absent on DQ) gets the uint8 form too; every target keeps
    int8 (cpu: a tie; gpu: uint8 is not taken)."""
    nodes = [node("QuantizeLinear", ["x", "s", "z"], "q"), node("DequantizeLinear", ["q", "s"], "y")]
    m = model(nodes, [("x", "FLOAT", (2, 3, 4))], initializers={"s": S, "z": np.array(0, np.int8)})
    session = saturate_with_rules(m, ["qdq-zero-point-shift"])
    assert session.saturation.rules_fired["qdq-zero-point-shift"] > 0
    assert {
        c.dtype for c in session.egraph.classes if any(session.egraph.node(n).op == "QuantizeLinear" for n in c.nodes)
    } == {"UINT8", "INT8"}
    for target in ("cpu", "gpu"):
        result = session.extract(target, verify=False)
        assert _quantized_types(result.model) == {"INT8"}, target
    assert_rule_sound(m, "qdq-zero-point-shift", WIDE)


def test_qdq_zero_point_shift_weight_constant() -> None:
    """DQ(W uint8, s, 128) under a Conv: the int8 twin W - 128 is folded into an int8 initializer on gpu."""
    w = np.random.default_rng(0).integers(0, 256, (4, 3, 3, 3)).astype(np.uint8)
    nodes = [node("DequantizeLinear", ["w", "s", "z"], "wf"), node("Conv", ["x", "wf"], "y")]
    m = model(nodes, [("x", "FLOAT", (1, 3, 5, 5))], initializers={"w": w, "s": S, "z": np.array(128, np.uint8)})
    x = {"x": np.linspace(-4, 4, 75, dtype=np.float32).reshape(1, 3, 5, 5)}
    for target, qtype in (("cpu", "UINT8"), ("gpu", "INT8")):
        result, fired = optimize_with_rules(m, ["qdq-zero-point-shift"], target=target)
        assert fired["qdq-zero-point-shift"] > 0 and op_counts(result.model) == {"DequantizeLinear": 1, "Conv": 1}
        assert _quantized_types(result.model) == {qtype}, target
        np.testing.assert_array_equal(run(result.model, x)[0], run(m, x)[0])
    assert_rule_sound(m, "qdq-zero-point-shift", x, target="gpu")


@pytest.mark.parametrize(
    "kw,twin",
    [
        ({"zp": 127}, "INT8"),
        ({"zp": 0}, "INT8"),
        ({"qtype": "INT8", "zp": 1}, "UINT8"),
        ({"qtype": "INT8", "zp": -128}, "UINT8"),
        ({"per_axis": True, "zp": 3}, "INT8"),
    ],
    ids=["u8-zp127", "u8-zp0", "i8-zp1", "i8-zp-128", "per-axis"],
)
def test_qdq_zero_point_shift_any_zero_point(kw: dict, twin: str) -> None:
    """Every 8-bit zero point z has its twin z -/+ 128 in the other type (uint8 0 <-> int8 -128 among them), per
    axis too (the twin's zero points computed at lowering); the npu (int8, asymmetric) takes an int8 pair, the
    gpu (symmetric int8 only) never an int8 pair whose zero point is not 0; all bit-identical."""
    m = _pair(**kw)
    session = saturate_with_rules(m, ["qdq-zero-point-shift"])
    assert session.saturation.rules_fired["qdq-zero-point-shift"] > 0
    assert {
        c.dtype for c in session.egraph.classes if any(session.egraph.node(n).op == "QuantizeLinear" for n in c.nodes)
    } == {"UINT8", "INT8"}
    npu = session.extract("npu", verify=False).model
    assert _quantized_types(npu) == {"INT8"}
    gpu = session.extract("gpu", verify=False).model
    assert _quantized_types(gpu) == {kw.get("qtype", "UINT8")}  # a twin with zero point 0 exists for none of these
    for expected, actual in zip(run(m, WIDE), run(npu, WIDE)):
        np.testing.assert_array_equal(actual, expected)
    assert_rule_sound(m, "qdq-zero-point-shift", WIDE, target="npu")


def test_qdq_zero_point_shift_from_an_absent_uint8_zero_point() -> None:
    """Q(x, s) quantizes to uint8 with zero point 0: its pair's twin is int8 with zero point -128."""
    nodes = [node("QuantizeLinear", ["x", "s"], "q"), node("DequantizeLinear", ["q", "s"], "y")]
    m = model(nodes, [("x", "FLOAT", (2, 3, 4))], initializers={"s": S})
    result, fired = optimize_with_rules(m, ["qdq-zero-point-shift"], target="npu")
    assert fired["qdq-zero-point-shift"] > 0 and _quantized_types(result.model) == {"INT8"}
    zero_point = next(t for t in to_proto(result.model).graph.initializer if t.data_type == onnx.TensorProto.INT8)
    assert onnx.numpy_helper.to_array(zero_point).item() == -128
    np.testing.assert_array_equal(run(result.model, WIDE)[0], run(m, WIDE)[0])


@pytest.mark.parametrize("kw", [{"dq_zp": 127}, {"q_axis": 0}], ids=["dq-zp127", "axis"])
def test_qdq_zero_point_shift_not_when_the_pair_disagrees(kw: dict) -> None:
    """Different zero points on Q and DQ, or a different axis: not a Q/DQ pair of one grid; left alone."""
    assert_rule_does_not_fire(_pair(**kw), "qdq-zero-point-shift")


def test_qdq_zero_point_shift_not_for_16_bit_pairs() -> None:
    nodes = [node("QuantizeLinear", ["x", "s", "z"], "q"), node("DequantizeLinear", ["q", "s", "z"], "y")]
    m = model(nodes, [("x", "FLOAT", (2, 3, 4))], initializers={"s": S, "z": np.array(0, np.uint16)}, opset=21)
    assert_rule_does_not_fire(m, "qdq-zero-point-shift")


def test_qdq_zero_point_shift_not_for_a_lone_q_or_an_activation_dq() -> None:
    """A lone Q (its uint8 output is what the consumer reads) and the DQ of a uint8 graph input keep their type."""
    lone_q = model(
        [node("QuantizeLinear", ["x", "s", "z"], "y")],
        [("x", "FLOAT", (2, 8))],
        initializers={"s": S, "z": np.array(128, np.uint8)},
    )
    lone_dq = model(
        [node("DequantizeLinear", ["x", "s", "z"], "y")],
        [("x", "UINT8", (2, 8))],
        initializers={"s": S, "z": np.array(128, np.uint8)},
    )
    for m in (lone_q, lone_dq):
        assert_rule_does_not_fire(m, "qdq-zero-point-shift")


@property_settings()
@given(PROPERTIES["qdq-zero-point-shift"]())
def test_qdq_zero_point_shift_property(case: RuleCase) -> None:
    case.check()


# ---- rescale-merge, rescale-merge-lossy ----


Z3_DEFAULT = np.int8(10)  # the third zero point _chain uses unless told


def _chain(
    s1: float,
    z1,
    s2: float,
    z2,
    *,
    xtype: str = "UINT8",
    s3=0.05,
    z3=Z3_DEFAULT,
    axis3: int | None = None,
    mid_axes: tuple[int | None, int | None] = (None, None),
    end: str = "requantize",
) -> object:
    """x -> DQ(s1, z1) -> Q(s2, z2) -> DQ(s2, z2) -> Q(s3, z3) -> y (end="requantize") or -> Identity -> y."""
    inits = {
        "s1": np.asarray(s1, np.float32),
        "z1": np.asarray(z1),
        "s2": np.asarray(s2, np.float32),
        "z2": np.asarray(z2),
        "s3": np.asarray(s3, np.float32),
        "z3": np.asarray(z3),
    }
    qa, da = ({} if a is None else {"axis": a} for a in mid_axes)
    nodes = [
        node("DequantizeLinear", ["x", "s1", "z1"], "d1"),
        node("QuantizeLinear", ["d1", "s2", "z2"], "q2", **qa),
        node("DequantizeLinear", ["q2", "s2", "z2"], "d2", **da),
    ]
    if end == "requantize":
        nodes.append(node("QuantizeLinear", ["d2", "s3", "z3"], "y", **({} if axis3 is None else {"axis": axis3})))
    else:
        nodes.append(node("Identity", ["d2"], "y"))
        del inits["s3"], inits["z3"]
    opset = 21 if np.asarray(z2).dtype.itemsize == 2 else 13
    return model(nodes, [("x", xtype, (2, 128))], initializers=inits, opset=opset)


#: Every uint8 / int8 value once.
ALL_U8 = {"x": np.arange(256, dtype=np.uint8).reshape(2, 128)}
ALL_I8 = {"x": np.arange(-128, 128, dtype=np.int8).reshape(2, 128)}
K3 = float(np.float32(7 * 2.0**-10))  # 7/1024: 3 * K3 is exact in float32


@pytest.mark.parametrize(
    "s1,z1,s2,z2,feeds",
    [
        (0.02, np.uint8(100), 0.01, np.int16(0), ALL_U8),  # k = 2 into int16, then back to int8
        (3 * K3, np.uint8(128), K3, np.uint16(400), ALL_U8),  # k = 3 (exact: a short mantissa)
        (0.05, np.uint8(128), 0.05, np.int8(0), ALL_U8),  # k = 1: uint8 zp 128 == int8 zp 0
        (0.05, np.int8(-3), 0.05, np.uint8(125), ALL_I8),  # k = 1: an integer shift that never saturates
        (0.08, np.int8(0), 0.01, np.int16(-7), ALL_I8),  # k = 8
    ],
)
def test_rescale_merge_two_requantizes_become_one(s1, z1, s2, z2, feeds) -> None:
    m = _chain(s1, z1, s2, z2, xtype="UINT8" if feeds is ALL_U8 else "INT8")
    result = assert_rule_sound(m, "rescale-merge", feeds)
    assert op_counts(result.model) == {"DequantizeLinear": 1, "QuantizeLinear": 1}  # Q(DQ(x, s1, z1), s3, z3)
    np.testing.assert_array_equal(run(result.model, feeds)[0], run(m, feeds)[0])  # bit-exact on every value


def test_rescale_merge_keeps_a_per_channel_outer_requantize() -> None:
    m = _chain(
        0.02,
        np.uint8(100),
        0.01,
        np.int16(0),
        s3=np.linspace(0.01, 0.2, 2, dtype=np.float32),
        z3=np.array([0, 3], np.int8),
        axis3=0,
    )
    result = assert_rule_sound(m, "rescale-merge", ALL_U8)
    assert op_counts(result.model) == {"DequantizeLinear": 1, "QuantizeLinear": 1}


@pytest.mark.parametrize(
    "s1,z1,s2,z2",
    [
        (0.03, np.uint8(128), 0.02, np.int16(0)),  # s1 / s2 = 1.5
        (float(np.float32(0.003)), np.uint8(128), float(np.float32(0.001)), np.int16(0)),  # 2.9999999 in float32
        (0.02, np.uint8(128), 0.01, np.int8(0)),  # k = 2 into int8: -256..254 saturates
        (0.05, np.uint8(128), 0.05, np.int8(1)),  # 255 - 128 + 1 = 128 saturates
        (0.05, np.uint8(127), 0.05, np.int8(0)),  # zero point 127 against 0: 255 - 127 = 128 saturates
    ],
    ids=["ratio-1.5", "ratio-not-exact", "k2-int8", "zp-shift-1", "zp127"],
)
def test_rescale_merge_not_when_the_middle_rounds_or_saturates(s1, z1, s2, z2) -> None:
    assert_rule_does_not_fire(_chain(s1, z1, s2, z2), "rescale-merge")


def test_rescale_merge_not_across_axes_or_per_axis_scales() -> None:
    """The middle Q and DQ on different axes; a per-channel first scale: left alone."""
    assert_rule_does_not_fire(_chain(0.02, np.uint8(100), 0.01, np.int16(0), mid_axes=(0, 1)), "rescale-merge")
    per_axis = _chain(0.02, np.uint8(100), 0.01, np.int16(0))
    per_axis.graph.initializer[0].CopyFrom(onnx.numpy_helper.from_array(np.array([0.02, 0.04], np.float32), "s1"))
    per_axis.graph.initializer[1].CopyFrom(onnx.numpy_helper.from_array(np.array([100, 100], np.uint8), "z1"))
    per_axis.graph.node[0].attribute.append(onnx.helper.make_attribute("axis", 0))
    for rule in ("rescale-merge", "rescale-merge-lossy"):
        assert_rule_does_not_fire(per_axis, rule, allow=PRECISION)


@property_settings()
@given(PROPERTIES["rescale-merge"]())
def test_rescale_merge_property(case: RuleCase) -> None:
    case.check()


def test_rescale_merge_lossy_only_when_allowed_and_within_half_a_step() -> None:
    """s1 / s2 = 1.5: the middle rounds to the s2 grid; dropping it changes values by at most s2 / 2."""
    m = _chain(0.03, np.uint8(128), 0.02, np.int16(0), end="float")
    assert_rule_does_not_fire(m, "rescale-merge-lossy")
    assert_rule_does_not_fire(m, "rescale-merge", allow=PRECISION)
    result, fired = optimize_with_rules(m, ["rescale-merge-lossy"], allow=PRECISION)
    assert fired["rescale-merge-lossy"] > 0 and op_counts(result.model) == {"DequantizeLinear": 1}  # y = DQ(x)
    expected, actual = run(m, ALL_U8)[0], run(result.model, ALL_U8)[0]
    rounding = float(np.max(np.abs(expected))) * 2.0**-22  # the float32 products themselves
    assert 0 < np.max(np.abs(expected - actual)) <= float(np.float32(0.02)) / 2 + rounding
    assert_rule_sound(m, "rescale-merge-lossy", ALL_U8, allow=PRECISION)


def test_rescale_merge_lossy_keeps_the_middle_clamp() -> None:
    """A dropped saturation is not a bounded change: the lossy rule also needs the middle never to saturate."""
    m = _chain(0.03, np.uint8(128), 0.02, np.int8(0), end="float")  # 127 * 1.5 = 190 > 127
    assert_rule_does_not_fire(m, "rescale-merge-lossy", allow=PRECISION)


@property_settings()
@given(PROPERTIES["rescale-merge-lossy"]())
def test_rescale_merge_lossy_property(case: RuleCase) -> None:
    case.check()


def test_bundled_qdq_resnet_gets_int8_twins_and_no_rescale() -> None:
    """resnet18_w8_qdq quantizes activations to uint8 with calibrated zero points (0, 95..154, never 128) and
    weights to int8 with zero point 0: each uint8 pair gets its int8 twin (z - 128), which only the npu takes;
    the cpu keeps the input's form, and no DQ -> Q chain exists (rescale-merge finds nothing)."""
    proto = onnx.load(Path(__file__).parent / "models" / "resnet18_w8_qdq.onnx")
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in proto.graph.initializer}
    zps = [inits[n.input[2]] for n in proto.graph.node if n.op_type == "QuantizeLinear" and len(n.input) > 2]
    assert zps and all(z.dtype == np.uint8 and 128 not in z for z in zps)
    session = saturate_with_rules(proto, ["qdq-zero-point-shift", "rescale-merge"])
    fired = set(session.saturation.rules_fired)
    assert "qdq-zero-point-shift" in fired and "rescale-merge" not in fired
    cpu = session.extract("cpu", verify=True)
    assert cpu.report.verification.ok and "UINT8" in _quantized_types(cpu.model)
    npu = session.extract("npu", verify=True)
    assert npu.report.verification.ok and "UINT8" not in _quantized_types(npu.model)


def test_bundled_qdq_resnet_still_verifies() -> None:
    """The bundled QDQ ResNet (Q -> DQ pairs only, no DQ -> Q) keeps every Q and DQ and verifies."""
    path = Path(__file__).parent / "models" / "resnet18_w8_qdq.onnx"
    result = eqsat.optimize(path)
    assert result.report.verification.ok
    before, after = result.report.ops_before, result.report.ops_after
    assert (
        after["QuantizeLinear"] == before["QuantizeLinear"] and after["DequantizeLinear"] == before["DequantizeLinear"]
    )


@pytest.mark.parametrize("zero_point_shape", [(), (1,)])
def test_qdq_zero_point_shift_q_without_zero_point_dq_with_zero(zero_point_shape: tuple) -> None:
    """QuantizeLinear with no zero point (uint8, 0) read by a DequantizeLinear with an explicit uint8 0: the same
    pair as both absent or both 0, so the int8 twin exists too (a draw of the property that CI hit)."""
    import onnx.helper as oh
    import onnx.numpy_helper as onh
    from onnx import TensorProto

    graph = oh.make_graph(
        [oh.make_node("QuantizeLinear", ["x", "s"], ["q"]), oh.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])],
        "test",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [onh.from_array(np.array(0.01, np.float32), "s"), onh.from_array(np.zeros(zero_point_shape, np.uint8), "z")],
    )
    m = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)])
    assert_rule_sound(m, "qdq-zero-point-shift", {"x": np.array([0.0], np.float32)})


# ---- analysis relations this family's rules join: each checked on the graphs of a rule that reads it ----


@property_settings()
@given(PROPERTIES["quant-tables"]())
def test_quant_tables_property(case: RuleCase) -> None:
    case.check()
