"""Quantization rules (rewrites/quant.py): each fires where it should, not where its guard fails, and is
sound; the lossy Q -> DQ removal only with `allow=precision-changing`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given

import eqsat
from eqsat.testing import (PROPERTIES, RuleCase, assert_rule_does_not_fire, assert_rule_sound, op_counts,
                           optimize_with_rules, run)
from tests.rule_graphs import model, node, property_settings

PRECISION = ("precision-changing",)
S = np.array(0.05, np.float32)


def _dq_q(qtype: str = "INT8", *, zp=3, scale=S, scale2=None, zp2=None, axis=None, zp_dtype2=None, shape=(2, 3, 4),
          opset: int = 13) -> object:
    """x (8-bit) -> DequantizeLinear(s, z) -> QuantizeLinear(s2, z2) -> y."""
    np_q = {"INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16, "UINT16": np.uint16}[qtype]
    inits = {"s": np.asarray(scale, np.float32) if axis is None else np.linspace(0.01, 0.1, shape[axis], dtype=np.float32),
             "z": np.array(zp, np_q) if axis is None else np.full(shape[axis], zp, np_q)}
    inits["s2"] = inits["s"] if scale2 is None else np.asarray(scale2, np.float32)
    inits["z2"] = inits["z"] if zp2 is None else np.asarray(zp2, zp_dtype2 or np_q)
    attrs = {} if axis is None else {"axis": axis}
    nodes = [node("DequantizeLinear", ["x", "s", "z"], "dq", **attrs),
             node("QuantizeLinear", ["dq", "s2", "z2"], "y", **attrs)]
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
    return model(nodes, [("x", "FLOAT", (2, 8))], initializers={"s": np.array(0.02, np.float32),
                                                                 "z": np.array(128, np.uint8)})


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
    m = model([node("QuantizeLinear", inputs, "q"), node("DequantizeLinear", ["q", *inputs[1:]], "y")],
              [("x", "FLOAT", (4, 16))], initializers=inits)
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
    m = model([node("QuantizeLinear", ["x", "s", "z"], "q", axis=0),
               node("DequantizeLinear", ["q", "s", "z"], "y", axis=0)], [("x", "FLOAT", (2, 8))], initializers=inits)
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
    m.graph.initializer.append(__import__("onnx").numpy_helper.from_array(np.array(0.1, np.float32), "s2"))
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


@pytest.mark.parametrize("zp,dtype", [(0, np.int8), (5, np.uint8)])
def test_qdq_zero_point_default_not_for_int8_or_nonzero_quantize(zp: int, dtype) -> None:
    """An absent zero point means uint8 0: an int8 zero point (other output type) or 5 is not that."""
    m = model([node("QuantizeLinear", ["x", "s", "z"], "y")], [("x", "FLOAT", (2, 8))],
              initializers={"s": S, "z": np.array(zp, dtype)})
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
    nodes = [node("DequantizeLinear", ["x", "s", "z"], "dq", **attrs), mid,
             node("QuantizeLinear", ["t", "s", "z"], "y", **q_attrs)]
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


def test_bundled_qdq_resnet_still_verifies() -> None:
    """The bundled QDQ ResNet (Q -> DQ pairs only, no DQ -> Q) keeps every Q and DQ and verifies."""
    path = Path(__file__).parent / "models" / "resnet18_w8_qdq.onnx"
    result = eqsat.optimize(path)
    assert result.report.verification.ok
    before, after = result.report.ops_before, result.report.ops_after
    assert after["QuantizeLinear"] == before["QuantizeLinear"] and after["DequantizeLinear"] == before["DequantizeLinear"]
