"""Cast rules (rewrites/cast.py): each fires where it should, not where its guard fails, and is sound.

Note: eqsat.io.normalize (onnxscript's folder) already turns a Cast to the input's own dtype into an
Identity, so `cast-noop` fires on casts that rewrites create: the end of a lossless round trip.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from hypothesis import given

import eqsat
from eqsat.testing import (PROPERTIES, RuleCase, assert_rule_does_not_fire, assert_rule_sound, op_counts,
                           optimize_with_rules, run)
from eqsat.session import saturate
from tests.rule_graphs import attribute, model, node, property_settings

PRECISION = ("precision-changing",)


def _chain(d: str, *targets: str, shape=(2, 3)) -> onnx.ModelProto:
    """x (dtype d) -> Cast(targets[0]) -> Cast(targets[1]) ... -> y"""
    nodes, prev = [], "x"
    for k, t in enumerate(targets):
        out = "y" if k == len(targets) - 1 else f"c{k}"
        nodes.append(node("Cast", [prev], out, to=getattr(TensorProto, t)))
        prev = out
    return model(nodes, [("x", d, shape)])


# ---- cast-noop ----

@pytest.mark.parametrize("d,t1", [("INT32", "INT64"), ("FLOAT", "DOUBLE"), ("FLOAT16", "FLOAT"), ("UINT8", "INT16")])
def test_cast_noop_ends_a_lossless_round_trip(d: str, t1: str) -> None:
    m = _chain(d, t1, d)
    result, fired = optimize_with_rules(m, ["cast-noop", "cast-chain-lossless"])
    assert fired["cast-noop"] > 0 and fired["cast-chain-lossless"] > 0
    assert op_counts(result.model)["Cast"] == 0
    assert_rule_sound(m, "cast-noop", also=("cast-chain-lossless",))


def test_cast_noop_not_when_dtypes_differ() -> None:
    assert_rule_does_not_fire(_chain("FLOAT", "DOUBLE"), "cast-noop")


def test_cast_noop_not_after_a_chain_to_another_dtype() -> None:
    """FLOAT -> DOUBLE -> FLOAT16 fuses to Cast(x, FLOAT16): not a no-op."""
    assert_rule_does_not_fire(_chain("FLOAT", "DOUBLE", "FLOAT16"), "cast-noop", also=("cast-chain-lossless",))


@property_settings()
@given(PROPERTIES["cast-noop"]())
def test_cast_noop_property(case: RuleCase) -> None:
    case.check()


# ---- cast-chain-lossless ----

@pytest.mark.parametrize("d,t1,t2", [("UINT8", "INT32", "FLOAT"), ("INT8", "FLOAT16", "FLOAT"),
                                     ("FLOAT", "DOUBLE", "FLOAT16"), ("BOOL", "INT32", "FLOAT"),
                                     ("INT16", "INT32", "INT8")])
def test_cast_chain_lossless_fuses(d: str, t1: str, t2: str) -> None:
    m = _chain(d, t1, t2)
    result = assert_rule_sound(m, "cast-chain-lossless")
    assert op_counts(result.model) == {"Cast": 1}
    assert attribute(result.model, "Cast", "to") == getattr(TensorProto, t2)


@pytest.mark.parametrize("d,t1,t2", [("FLOAT", "FLOAT16", "FLOAT"),   # rounds to fp16
                                     ("INT32", "UINT8", "INT32"),     # wraps modulo 256
                                     ("FLOAT", "INT32", "FLOAT"),     # truncates
                                     ("INT64", "DOUBLE", "INT64"),    # rounds above 2^53
                                     ("DOUBLE", "FLOAT", "DOUBLE")])  # rounds to fp32
def test_cast_chain_lossless_not_when_first_cast_loses(d: str, t1: str, t2: str) -> None:
    assert_rule_does_not_fire(_chain(d, t1, t2), "cast-chain-lossless")


def test_cast_chain_lossy_first_cast_changes_values() -> None:
    """Why the guard matters: the chains above do change values, so fusing them would be unsound."""
    x = np.array([[1.5, -2.7, 300.2], [1e-4, 70000.0, -0.5]], np.float32)
    for t1 in ("FLOAT16", "INT32"):
        (y,) = run(_chain("FLOAT", t1, "FLOAT"), {"x": x})
        assert not np.array_equal(y, x)
    ints = np.array([[1, 256, -3], [1000, 7, 255]], np.int32)
    (y,) = run(_chain("INT32", "UINT8", "INT32"), {"x": ints})
    assert not np.array_equal(y, ints)


@property_settings()
@given(PROPERTIES["cast-chain-lossless"]())
def test_cast_chain_lossless_property(case: RuleCase) -> None:
    case.check()


# ---- cast-fp16-roundtrip (precision-changing: only with allow) ----

@pytest.mark.parametrize("half", ["FLOAT16", "BFLOAT16"])
def test_cast_fp16_roundtrip_removed_when_allowed(half: str) -> None:
    m = _chain("FLOAT", half, "FLOAT")
    result, fired = optimize_with_rules(m, ["cast-fp16-roundtrip"], allow=PRECISION)
    assert fired["cast-fp16-roundtrip"] > 0
    assert op_counts(result.model)["Cast"] == 0
    assert_rule_sound(m, "cast-fp16-roundtrip", allow=PRECISION)


def test_cast_fp16_roundtrip_needs_allow() -> None:
    assert_rule_does_not_fire(_chain("FLOAT", "FLOAT16", "FLOAT"), "cast-fp16-roundtrip")


def test_default_optimization_keeps_fp16_round_trip() -> None:
    """Neither saturation with the default rules nor `eqsat.optimize` drops the fp16 rounding."""
    m = model([node("Cast", ["x"], "h", to=10), node("Cast", ["h"], "f", to=1), node("Relu", ["f"], "y")],
              [("x", "FLOAT", (2, 8))])
    session = saturate(m)
    assert "cast-fp16-roundtrip" not in {r.name for r in session.rules}
    assert "cast-fp16-roundtrip" not in session.saturation.rules_fired
    result = eqsat.optimize(m)
    assert op_counts(result.model)["Cast"] == 2
    x = {"x": np.array([[0.1, 1.0001, 2049.0, 3.14159, -7.77, 1e-5, 65519.0, 1.0]] * 2, np.float32)}
    np.testing.assert_array_equal(run(result.model, x)[0], run(m, x)[0])  # bit-exact: the rounding is kept


@pytest.mark.parametrize("d,t1,t2", [("DOUBLE", "FLOAT16", "FLOAT"), ("FLOAT", "FLOAT16", "DOUBLE"),
                                     ("FLOAT", "INT8", "FLOAT")])
def test_cast_fp16_roundtrip_only_float_via_half_to_float(d: str, t1: str, t2: str) -> None:
    assert_rule_does_not_fire(_chain(d, t1, t2), "cast-fp16-roundtrip", allow=PRECISION)


@property_settings()
@given(PROPERTIES["cast-fp16-roundtrip"]())
def test_cast_fp16_roundtrip_property(case: RuleCase) -> None:
    case.check()
