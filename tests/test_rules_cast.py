"""Cast rules (rewrites/cast.py): each fires where it should, not where its guard fails, and is sound.

Note: eqsat.frontend.normalize (onnxscript's folder) already turns a Cast to the input's own dtype into an
Identity, so `cast-noop` fires on casts that rewrites create: the end of a lossless round trip.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto
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
)
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


@pytest.mark.parametrize(
    "d,t1,t2",
    [
        ("UINT8", "INT32", "FLOAT"),
        ("INT8", "FLOAT16", "FLOAT"),
        ("FLOAT", "DOUBLE", "FLOAT16"),
        ("BOOL", "INT32", "FLOAT"),
        ("INT16", "INT32", "INT8"),
    ],
)
def test_cast_chain_lossless_fuses(d: str, t1: str, t2: str) -> None:
    m = _chain(d, t1, t2)
    result = assert_rule_sound(m, "cast-chain-lossless")
    assert op_counts(result.model) == {"Cast": 1}
    assert attribute(result.model, "Cast", "to") == getattr(TensorProto, t2)


@pytest.mark.parametrize(
    "d,t1,t2",
    [
        ("FLOAT", "FLOAT16", "FLOAT"),  # rounds to fp16
        ("INT32", "UINT8", "INT32"),  # wraps modulo 256
        ("FLOAT", "INT32", "FLOAT"),  # truncates
        ("INT64", "DOUBLE", "INT64"),  # rounds above 2^53
        ("DOUBLE", "FLOAT", "DOUBLE"),
    ],
)  # rounds to fp32
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


@pytest.mark.parametrize(
    "targets,written", [(("DOUBLE", "FLOAT16"), ["FLOAT16"]), (("INT32", "FLOAT"), ["INT32", "FLOAT"])]
)
def test_cast_to_a_type_name_before_opset_6(targets: tuple, written: list) -> None:
    """Before opset 6 Cast's `to` is a TensorProto data type name ("INT32"): read as that type (the lossless chain
    fuses) and written back as a name, a fused Cast's too; the result passes the full checker."""
    nodes = [node("Cast", ["x"], "c", to=targets[0]), node("Cast", ["c"], "y", to=targets[1])]
    m = model(nodes, [("x", "FLOAT", (2, 3))], [("y", targets[1], (2, 3))], opset=5)
    result = eqsat.optimize(m, verify=False)  # no runtime runs Cast-1 with a name (onnxruntime from opset 7)
    onnx.checker.check_model(result.proto, full_check=True)
    casts = [n for n in result.proto.graph.node if n.op_type == "Cast"]
    assert [oh.get_attribute_value(a) for n in casts for a in n.attribute] == [t.encode() for t in written]


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
    m = model(
        [node("Cast", ["x"], "h", to=10), node("Cast", ["h"], "f", to=1), node("Relu", ["f"], "y")],
        [("x", "FLOAT", (2, 8))],
    )
    session = saturate(m)
    assert "cast-fp16-roundtrip" not in {r.name for r in session.rules}
    assert "cast-fp16-roundtrip" not in session.saturation.rules_fired
    result = eqsat.optimize(m)
    assert op_counts(result.model)["Cast"] == 2
    x = {"x": np.array([[0.1, 1.0001, 2049.0, 3.14159, -7.77, 1e-5, 65519.0, 1.0]] * 2, np.float32)}
    np.testing.assert_array_equal(run(result.model, x)[0], run(m, x)[0])  # bit-exact: the rounding is kept


@pytest.mark.parametrize(
    "d,t1,t2", [("DOUBLE", "FLOAT16", "FLOAT"), ("FLOAT", "FLOAT16", "DOUBLE"), ("FLOAT", "INT8", "FLOAT")]
)
def test_cast_fp16_roundtrip_only_float_via_half_to_float(d: str, t1: str, t2: str) -> None:
    assert_rule_does_not_fire(_chain(d, t1, t2), "cast-fp16-roundtrip", allow=PRECISION)


@property_settings()
@given(PROPERTIES["cast-fp16-roundtrip"]())
def test_cast_fp16_roundtrip_property(case: RuleCase) -> None:
    case.check()


# ---- chains through float types: lossless or not (cast-chain-lossless) ----


@pytest.mark.parametrize(
    "d,t1,t2",
    [
        ("INT8", "FLOAT16", "FLOAT"),
        ("UINT8", "FLOAT16", "DOUBLE"),
        ("INT16", "FLOAT", "DOUBLE"),
        ("BOOL", "FLOAT16", "INT32"),
    ],
)
def test_cast_chain_lossless_through_float(d: str, t1: str, t2: str) -> None:
    """int8 -> fp16 -> fp32 fuses: every int8 value is exact in fp16."""
    result = assert_rule_sound(_chain(d, t1, t2), "cast-chain-lossless")
    assert op_counts(result.model) == {"Cast": 1}


@pytest.mark.parametrize(
    "d,t1,t2", [("FLOAT", "FLOAT16", "BOOL"), ("INT32", "FLOAT16", "FLOAT"), ("INT16", "FLOAT16", "FLOAT")]
)
def test_cast_chain_through_lossy_float_is_kept(d: str, t1: str, t2: str) -> None:
    """fp32 -> fp16 -> bool differs from fp32 -> bool (fp16 rounds 1e-8 to 0: False instead of True);
    int32/int16 -> fp16 rounds above 2048."""
    for rule in ("cast-chain-lossless", "cast-int-truncate-chain"):
        assert_rule_does_not_fire(_chain(d, t1, t2), rule)


def test_fp16_to_bool_differs_from_fp32_to_bool() -> None:
    x = {"x": np.array([[1e-8, 0.0, -3e-9], [1.0, 1e-30, 2.0]], np.float32)}
    (via_half,) = run(_chain("FLOAT", "FLOAT16", "BOOL"), x)
    (direct,) = run(_chain("FLOAT", "BOOL"), x)
    assert not np.array_equal(via_half, direct)


# ---- cast-int-truncate-chain ----


@pytest.mark.parametrize(
    "d,t1,t2",
    [
        ("INT32", "UINT8", "INT8"),
        ("INT32", "INT16", "UINT8"),
        ("INT16", "UINT32", "INT16"),
        ("UINT8", "INT64", "UINT16"),
        ("BOOL", "INT32", "UINT8"),
    ],
)
def test_cast_int_truncate_chain_fuses(d: str, t1: str, t2: str) -> None:
    """int32 -> uint8 -> int8 keeps the low 8 bits either way: Cast(x, INT8)."""
    m = _chain(d, t1, t2)
    result = assert_rule_sound(m, "cast-int-truncate-chain", also=("cast-noop",))
    assert op_counts(result.model).get("Cast", 0) <= 1
    ints = {"x": np.array([[-129, 255, 256], [70000, -1, 127]]).astype(np.dtype(d.lower()) if d != "BOOL" else bool)}
    np.testing.assert_array_equal(run(result.model, ints)[0], run(m, ints)[0])


@pytest.mark.parametrize(
    "d,t1,t2",
    [
        ("INT32", "INT8", "INT16"),  # sign of bit 7 extended into 16 bits
        ("INT32", "UINT8", "INT32"),  # wraps modulo 256
        ("FLOAT", "INT32", "INT8"),  # float: out of int8 range is undefined
        ("INT64", "INT32", "INT8"),
    ],
)  # x wider than 32 bits: not admitted
def test_cast_int_truncate_chain_not_where_inexact(d: str, t1: str, t2: str) -> None:
    assert_rule_does_not_fire(_chain(d, t1, t2), "cast-int-truncate-chain")


def test_cast_int_truncate_chain_widening_would_differ() -> None:
    """Why bits(t2) <= bits(t1): int32 -> int8 -> int16 sign-extends bit 7, int32 -> int16 keeps bits 8-15."""
    x = {"x": np.array([[200, 300, -200]], np.int32)}
    assert not np.array_equal(
        run(_chain("INT32", "INT8", "INT16", shape=(1, 3)), x)[0], run(_chain("INT32", "INT16", shape=(1, 3)), x)[0]
    )


@property_settings()
@given(PROPERTIES["cast-int-truncate-chain"]())
def test_cast_int_truncate_chain_property(case: RuleCase) -> None:
    case.check()


# ---- cast-int-via-float-to-half ----


@pytest.mark.parametrize("d,mid", [("INT32", "FLOAT"), ("INT64", "FLOAT"), ("UINT32", "DOUBLE"), ("INT64", "DOUBLE")])
def test_cast_int_via_float_to_half(d: str, mid: str) -> None:
    """int -> fp32 -> fp16 is int -> fp16: exact below 2^24, inf both ways above 65519."""
    m = _chain(d, mid, "FLOAT16", shape=(1, 8))
    result = assert_rule_sound(m, "cast-int-via-float-to-half")
    assert op_counts(result.model) == {"Cast": 1}
    edges = np.array([[65504, 65519, 65520, 2**24 + 1, 2047, 2049, 3, 2**31 - 1]]).astype(d.lower())
    np.testing.assert_array_equal(run(result.model, {"x": edges})[0], run(m, {"x": edges})[0])


@pytest.mark.parametrize(
    "d,mid,last",
    [
        ("INT32", "FLOAT", "BFLOAT16"),  # bf16 holds 2^24: double rounding
        ("FLOAT", "DOUBLE", "FLOAT16"),  # not an integer (lossless anyway)
        ("INT64", "FLOAT16", "FLOAT"),
    ],
)  # the other direction
def test_cast_int_via_float_to_half_not(d: str, mid: str, last: str) -> None:
    assert_rule_does_not_fire(_chain(d, mid, last), "cast-int-via-float-to-half")


def test_cast_int_via_float_to_bfloat16_would_differ() -> None:
    """Why not BFLOAT16: 2^24 + 2^16 + 1 rounds to 2^24 + 2^16 in fp32 (a tie for bf16, to even: 2^24), where
    rounding once gives 2^24 + 2^17."""
    x = {"x": np.array([[2**24 + 2**16 + 1]], np.int32)}
    via = run(_chain("INT32", "FLOAT", "BFLOAT16", "FLOAT", shape=(1, 1)), x)[0]
    assert int(via[0, 0]) == 2**24 and 2**24 + 2**16 + 1 - int(via[0, 0]) > 2**16  # not the nearest bf16


@property_settings()
@given(PROPERTIES["cast-int-via-float-to-half"]())
def test_cast_int_via_float_to_half_property(case: RuleCase) -> None:
    case.check()


# ---- cast-sink-reshape ----


def _reshape_cast_chain(t0: str = "DOUBLE", t1: str = "FLOAT") -> onnx.ModelProto:
    """x (FLOAT) -> Cast(t0) -> Reshape(-1) -> Cast(t1) -> y: the casts meet once the second one sinks."""
    nodes = [
        node("Cast", ["x"], "c0", to=getattr(TensorProto, t0)),
        node("Reshape", ["c0", "shape"], "r"),
        node("Cast", ["r"], "y", to=getattr(TensorProto, t1)),
    ]
    return model(nodes, [("x", "FLOAT", (2, 3))], initializers={"shape": np.array([-1], np.int64)})


def test_cast_sink_reshape_lets_a_lossless_round_trip_vanish() -> None:
    m = _reshape_cast_chain()
    result, fired = optimize_with_rules(m, ["cast-sink-reshape", "cast-chain-lossless", "cast-noop"])
    assert fired["cast-sink-reshape"] > 0
    assert op_counts(result.model) == {"Reshape": 1}
    assert_rule_sound(m, "cast-sink-reshape", also=("cast-chain-lossless", "cast-noop"))


def test_cast_sink_reshape_keeps_a_lossy_round_trip() -> None:
    """fp32 -> fp16 -> Reshape -> fp32: the cast sinks, but the fp16 rounding stays (2 Casts)."""
    result, fired = optimize_with_rules(_reshape_cast_chain("FLOAT16"), ["cast-sink-reshape", "cast-chain-lossless"])
    assert fired["cast-sink-reshape"] > 0 and op_counts(result.model)["Cast"] == 2


def test_cast_sink_reshape_needs_a_reshape() -> None:
    m = model([node("Flatten", ["x"], "r"), node("Cast", ["r"], "y", to=TensorProto.DOUBLE)], [("x", "FLOAT", (2, 3))])
    assert_rule_does_not_fire(m, "cast-sink-reshape")


@property_settings()
@given(PROPERTIES["cast-sink-reshape"]())
def test_cast_sink_reshape_property(case: RuleCase) -> None:
    case.check()


# ---- cast-fp16-arith ----


def _island(op: str, dtype: str = "FLOAT16", exponent: float = 2.0, exponent_shape: tuple = ()) -> onnx.ModelProto:
    """a, b (dtype) -> Cast(FLOAT) -> op -> Cast(FLOAT16): the fp32 island a mixed-precision converter leaves."""
    nodes = [node("Cast", ["a"], "a32", to=TensorProto.FLOAT)]
    inputs, inits = [("a", dtype, (2, 3))], {}
    if op == "Sqrt":
        nodes.append(node("Sqrt", ["a32"], "z"))
    elif op == "Pow":
        inits["e"] = np.full(exponent_shape, exponent, np.float32)
        nodes.append(node("Pow", ["a32", "e"], "z"))
    else:
        nodes += [node("Cast", ["b"], "b32", to=TensorProto.FLOAT), node(op, ["a32", "b32"], "z")]
        inputs.append(("b", dtype, (2, 3)))
    nodes.append(node("Cast", ["z"], "y", to=TensorProto.FLOAT16))
    return model(nodes, inputs, initializers=inits)


@pytest.mark.parametrize(
    "op, exponent_shape",
    [(op, ()) for op in ("Add", "Sub", "Mul", "Div", "Sqrt", "Pow")]
    + [
        ("Pow", (1, 1))  # a 2 of a's rank broadcasts nothing
    ],
)
def test_cast_fp16_arith_computes_in_fp16(op: str, exponent_shape: tuple) -> None:
    m = _island(op, exponent_shape=exponent_shape)
    result, fired = optimize_with_rules(m, ["cast-fp16-arith"])
    assert fired["cast-fp16-arith"] > 0
    assert op_counts(result.model) == {"Mul" if op == "Pow" else op: 1}
    assert_rule_sound(m, "cast-fp16-arith")


def test_cast_fp16_arith_is_bit_exact_on_every_fp16_square_root() -> None:
    """All 63,488 finite fp16 values: Sqrt in fp16 equals Sqrt in fp32 rounded to fp16 (reference evaluator)."""
    values = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    values = np.abs(values[np.isfinite(values)]).reshape(1, -1)
    m = model(
        [
            node("Cast", ["a"], "a32", to=TensorProto.FLOAT),
            node("Sqrt", ["a32"], "z"),
            node("Cast", ["z"], "y", to=TensorProto.FLOAT16),
        ],
        [("a", "FLOAT16", values.shape)],
    )
    result, _ = optimize_with_rules(m, ["cast-fp16-arith"])
    assert op_counts(result.model) == {"Sqrt": 1}
    before, after = run(m, {"a": values}), run(result.model, {"a": values})
    assert np.array_equal(before[0].view(np.uint16), after[0].view(np.uint16))


@pytest.mark.parametrize(
    "model_",
    [
        _island("Add", "BFLOAT16"),  # bf16 subnormals are fp32's: no spare bits
        _island("Mul", "FLOAT"),  # not a narrowing
        _island("Pow", exponent=3.0),  # x^3 is not exact in fp32
        _island("Pow", exponent_shape=(1, 1, 1)),  # a 2 of higher rank than a broadcasts it: a * a would not
        _island("Max"),
    ],  # not in the list (exact, but not needed)
    ids=["bfloat16", "float", "pow3", "pow-exponent-broadcasts", "max"],
)
def test_cast_fp16_arith_not_outside_its_guard(model_: onnx.ModelProto) -> None:
    assert_rule_does_not_fire(model_, "cast-fp16-arith")


def test_cast_fp16_arith_needs_both_operands_fp16() -> None:
    m = model(
        [
            node("Cast", ["a"], "a32", to=TensorProto.FLOAT),
            node("Add", ["a32", "b"], "z"),
            node("Cast", ["z"], "y", to=TensorProto.FLOAT16),
        ],
        [("a", "FLOAT16", (2, 3)), ("b", "FLOAT", (2, 3))],
    )
    assert_rule_does_not_fire(m, "cast-fp16-arith")


@property_settings()
@given(PROPERTIES["cast-fp16-arith"]())
def test_cast_fp16_arith_property(case: RuleCase) -> None:
    case.check()
