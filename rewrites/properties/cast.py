"""Hypothesis properties of the cast rules (rewrites/cast.py): for each rule, a strategy of small graphs
where its guard holds (`RuleCase`), checked by tests/test_rules_cast.py and `eqsat check-rules`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import onnx

from eqsat.ops import ARITHMETIC
from eqsat.rewrites.cast import TRUNCATING_PAIRS
from eqsat.testing.cases import DrawnGraph, RuleCase, rule_case
from eqsat.testing.draw import const_input
from eqsat.testing.models import numpy_dtype, onnx_elem_type
from eqsat.testing.strategies import arrays, broadcastable_shapes, float_arrays, shapes, value_range

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


#: dtypes whose values tests can feed and read back through onnxruntime.
_FEEDABLE = ("BOOL", "UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "INT64", "FLOAT16", "FLOAT", "DOUBLE")


_CAST_OUT = (*_FEEDABLE, "UINT64")


def _lossless_pairs() -> list[tuple[str, str]]:
    from eqsat.engine.terms import LOSSLESS_CASTS

    return [(a, b) for a, b in LOSSLESS_CASTS if a in _FEEDABLE]


def _cast_values(draw: Callable, st: Any, d: str, t1: str, t2: str, shape: tuple[int, ...]) -> np.ndarray:
    """Values of dtype `d` for Cast(Cast(x, t1), t2): floats in [-8, 8], integers over most of their
    range; in range of t2 when a float is cast to the integer t2 (out of range, ONNX leaves that cast
    undefined, so the original graph has no defined result to compare with)."""
    floats = ("FLOAT16", "BFLOAT16", "FLOAT", "DOUBLE")
    low, high = (-8.0, 8.0) if d in floats else (-1e9, 1e9)
    if (d in floats or t1 in floats) and t2 not in floats and t2 != "BOOL":
        low, high = value_range(numpy_dtype(t2), low, high)
    return draw(arrays(d, shape, low, high))


def _cast_pair(rule: str, also: str, back_to_source: bool) -> Callable[[], "SearchStrategy[RuleCase]"]:
    """x (dtype d) -> Cast(t1) -> Cast(t2) with d -> t1 lossless; t2 = d when `back_to_source` (a no-op pair)."""

    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        d, t1 = draw(st.sampled_from(_lossless_pairs()))
        t2 = d if back_to_source else draw(st.sampled_from([t for t in _CAST_OUT if t != t1]))
        shape = draw(shapes(0, 3, 3))
        g = DrawnGraph()
        x = g.input("x", _cast_values(draw, st, d, t1, t2, shape))
        g.node("Cast", [x], "c1", to=onnx_elem_type(t1))
        g.node("Cast", ["c1"], "y", to=onnx_elem_type(t2))
        return g.case(rule, ["y"], also=(also,))

    return strategy


_cast_chain_lossless = _cast_pair("cast-chain-lossless", "cast-noop", back_to_source=False)


_cast_noop = _cast_pair("cast-noop", "cast-chain-lossless", back_to_source=True)


@rule_case
def _cast_fp16_roundtrip(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(0, 4, 3))
    g = DrawnGraph()
    x = g.input("x", draw(float_arrays(shape, np.float32, -100, 100)))
    g.node("Cast", [x], "h", to=onnx_elem_type(draw(st.sampled_from(("FLOAT16", "FLOAT16", "BFLOAT16")))))
    g.node("Cast", ["h"], "f", to=onnx.TensorProto.FLOAT)
    out = g.node("Relu", ["f"], "y") if draw(st.booleans()) else "f"
    return g.case("cast-fp16-roundtrip", [out], allow=("precision-changing",))


@rule_case
def _cast_int_truncate_chain(draw: Callable, st: Any) -> RuleCase:
    t1, t2 = draw(st.sampled_from(TRUNCATING_PAIRS))
    # x's dtype other than t1 (the folder drops a cast to x's own dtype: no chain left)
    d = draw(st.sampled_from([d for d in ("BOOL", "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32") if d != t1]))
    shape = draw(shapes(0, 3, 4))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(d, shape, -3e9, 3e9)))
    g.node("Cast", [x], "c1", to=onnx_elem_type(t1))
    g.node("Cast", ["c1"], "y", to=onnx_elem_type(t2))
    return g.case("cast-int-truncate-chain", ["y"], also=("cast-chain-lossless", "cast-noop"))


@rule_case
def _cast_int_via_float_to_half(draw: Callable, st: Any) -> RuleCase:
    """Integers over their whole range, with values around 2^24 (where FLOAT rounds) and 65504/65520 (where
    FLOAT16 overflows)."""
    d = draw(st.sampled_from(("INT32", "UINT32", "INT64")))
    shape = draw(shapes(1, 3, 4))
    g = DrawnGraph()
    x = np.asarray(draw(arrays(d, shape, -3e9, 3e9)))
    edges = np.array([65504, 65519, 65520, 2**24 + 1, 2**24 - 1, 2049, 2047, -65520, -(2**24 + 3)])
    k = draw(st.integers(0, x.size))
    flat = x.reshape(-1)
    flat[:k] = np.resize(edges, k).astype(x.dtype)  # negative edges wrap for unsigned: still integers
    g.input("x", x)
    g.node("Cast", ["x"], "c1", to=onnx_elem_type(draw(st.sampled_from(("FLOAT", "DOUBLE")))))
    g.node("Cast", ["c1"], "y", to=onnx.TensorProto.FLOAT16)
    return g.case("cast-int-via-float-to-half", ["y"])


@rule_case
def _cast_sink_reshape(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 3, 3))
    g = DrawnGraph()
    d = draw(st.sampled_from(("FLOAT", "INT8", "FLOAT16")))
    x = g.input("x", draw(arrays(d, shape)))
    src = x
    also: tuple[str, ...] = ()
    if draw(st.booleans()):  # an inner cast the sunk one meets
        src = g.node("Cast", [x], "c0", to=onnx_elem_type(draw(st.sampled_from(("DOUBLE", "INT32")))))
        also = ("cast-chain-lossless", "cast-noop")
    g.inits["shape"] = np.array([-1] if draw(st.booleans()) else [1, -1], np.int64)  # -1: never folded away
    r = g.node("Reshape", [src, "shape"], "r")
    src_dtype = d if src == x else g.nodes[0].attribute[0].i
    targets = [t for t in ("FLOAT", "DOUBLE", "INT64", "INT8") if onnx_elem_type(t) != onnx_elem_type(src_dtype)]
    g.node("Cast", [r], "y", to=onnx_elem_type(draw(st.sampled_from(targets))))
    return g.case("cast-sink-reshape", ["y"], also=also)


@rule_case
def _cast_fp16_arith(draw: Callable, st: Any) -> RuleCase:
    """fp16 inputs widened to fp32, one op, rounded back to fp16 (a mixed-precision converter's island)."""
    op = draw(st.sampled_from(ARITHMETIC + ("Sqrt", "Pow")))
    a_shape = draw(shapes(0, 3, 4))
    b_shape = draw(broadcastable_shapes(a_shape))
    g = DrawnGraph()
    a = g.input("a", draw(arrays("FLOAT16", a_shape, -300.0, 300.0)))
    a = g.node("Cast", [g.node("Abs", [a], "abs") if op == "Sqrt" else a], "a32", to=onnx_elem_type("FLOAT"))
    if op == "Sqrt":
        z = g.node("Sqrt", [a], "z")
    elif op == "Pow":
        two = np.full((1,) * draw(st.integers(0, len(a_shape))), 2.0)  # of any rank up to a's (none broadcasts a)
        z = g.node("Pow", [a, const_input(g, "two", two, draw(st.sampled_from(("FLOAT", "FLOAT16"))))], "z")
    else:
        b = g.node(
            "Cast", [g.input("b", draw(arrays("FLOAT16", b_shape, -300.0, 300.0)))], "b32", to=onnx_elem_type("FLOAT")
        )
        z = g.node(op, [a, b], "z")
    g.node("Cast", [z], "y", to=onnx_elem_type("FLOAT16"))
    return g.case("cast-fp16-arith", ["y"])


#: rule name -> strategy of graphs where the rule fires; one case in four is also checked with symbolic dims.
PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "cast-int-via-float-to-half": _cast_int_via_float_to_half,
    "cast-noop": _cast_noop,
    "cast-chain-lossless": _cast_chain_lossless,
    "cast-fp16-roundtrip": _cast_fp16_roundtrip,
    "cast-int-truncate-chain": _cast_int_truncate_chain,
    "cast-sink-reshape": _cast_sink_reshape,
    "cast-fp16-arith": _cast_fp16_arith,
}
