"""Hypothesis properties of the quant rules (rewrites/quant.py): for each rule, a strategy of small graphs
where its guard holds (`RuleCase`), checked by tests/test_rules_quant.py and `eqsat check-rules`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from eqsat.testing.cases import DrawnGraph, RuleCase, feeding, rule_case
from eqsat.testing.models import numpy_dtype
from eqsat.testing.strategies import arrays, float_arrays, perms, shapes

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


def _qparams(
    draw: Callable, st: Any, g: DrawnGraph, qtype: str, channels: int | None, prefix: str = ""
) -> tuple[str, str]:
    """Scale (per tensor, or per channel when `channels`) and zero point initializers."""
    shape = () if channels is None else (channels,)
    scale = np.asarray(draw(float_arrays(shape, np.float32, 0.01, 0.2)), np.float32)
    info = np.iinfo(numpy_dtype(qtype))
    zp = np.asarray(draw(arrays(qtype, shape, max(info.min, -20), min(info.max, 150))), numpy_dtype(qtype))
    g.inits[f"{prefix}s"], g.inits[f"{prefix}z"] = scale, zp
    return f"{prefix}s", f"{prefix}z"


@rule_case
def _qdq_cancel(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3))
    qtype = draw(st.sampled_from(("INT8", "UINT8")))
    per_axis = len(shape) > 1 and draw(st.booleans())
    g = DrawnGraph()
    x = g.input("x", draw(arrays(qtype, shape, -128, 255)))
    s, z = _qparams(draw, st, g, qtype, shape[1] if per_axis else None)
    attrs = {"axis": 1} if per_axis else {}
    dq = g.node("DequantizeLinear", [x, s, z], "dq", **attrs)
    g.node("QuantizeLinear", [dq, s, z], "y", **attrs)
    outs = ["y", "dq"] if draw(st.booleans()) else ["y"]
    return g.case("qdq-cancel", outs, opset=draw(st.sampled_from((13, 17))))


@rule_case
def _dq_q_drop(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3))
    g = DrawnGraph()
    values = draw(float_arrays(shape, np.float32, -4, 4))
    big = max(float(np.max(np.abs(values))), 1e-2)
    flat = values.reshape(-1)  # both signs at the largest magnitude: the output's scale is >= 60 steps
    flat[0] = big
    flat[-1] = -big if flat.size > 1 else big
    x = g.input("x", values)
    # `big` is 60 to 400 steps: beyond ~127 steps Quantize saturates (the Clip must clamp alike); the
    # rounding error <= s / 2 stays under 1% of the output's scale (>= 60 steps)
    g.inits["s"] = np.array(big / draw(st.sampled_from((60.0, 100.0, 200.0, 400.0))), np.float32)
    zp = draw(
        st.sampled_from(
            (
                np.array(128, np.uint8),
                np.array(0, np.int8),
                np.array(3, np.int8),
                np.array(-5, np.int8),
                np.array(0, np.uint8),
                None,
            )
        )
    )
    params = ["s"]
    if zp is not None:
        g.inits["z"] = zp
        params.append("z")
    q = g.node("QuantizeLinear", [x, *params], "q")
    g.node("DequantizeLinear", [q, *params], "y")
    return g.case("dq-q-drop", ["y"], allow=("precision-changing",))


@rule_case
def _qdq_zero_point_default(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3))
    g = DrawnGraph()
    g.inits["s"] = np.array(draw(st.sampled_from((0.05, 0.1))), np.float32)
    if draw(st.booleans()):  # Quantize with an explicit uint8 zero point 0
        x = g.input("x", draw(float_arrays(shape, np.float32, -4, 4)))
        g.inits["z"] = np.zeros((1,) * draw(st.integers(0, 1)), np.uint8)
        g.node("QuantizeLinear", [x, "s", "z"], "y")
    elif len(shape) > 1 and draw(st.booleans()):  # per-axis: a vector of zeros along axis 1
        qtype = draw(st.sampled_from(("INT8", "UINT8")))
        x = g.input("x", draw(arrays(qtype, shape, -128, 255)))
        g.inits["s"] = np.linspace(0.01, 0.1, shape[1], dtype=np.float32)
        g.inits["z"] = np.zeros(shape[1], numpy_dtype(qtype))
        g.node("DequantizeLinear", [x, "s", "z"], "y", axis=1)
    else:
        qtype = draw(st.sampled_from(("INT8", "UINT8", "INT32")))
        x = g.input("x", draw(arrays(qtype, shape, -128, 255)))
        g.inits["z"] = np.zeros((), numpy_dtype(qtype))
        g.node("DequantizeLinear", [x, "s", "z"], "y")
    return g.case("qdq-zero-point-default", ["y"])


def _qdq_sink(rule: str) -> Callable[[], Any]:
    """DQ -> layout op -> Q (the pair meets and cancels), or a lone DQ -> layout op, or layout op -> Q."""

    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        qtype = draw(st.sampled_from(("INT8", "UINT8")))
        g = DrawnGraph()
        s, z = _qparams(draw, st, g, qtype, None)

        def layout(src: str, out: str) -> str:
            if rule == "qdq-sink-transpose":
                return g.node("Transpose", [src], out, perm=list(draw(perms(len(shape)))))
            target = [-1] if draw(st.booleans()) else [int(np.prod(shape)), -1]  # -1: not folded away
            g.inits[f"{out}_shape"] = np.array(target, np.int64)
            return g.node("Reshape", [src, f"{out}_shape"], out)

        kind = draw(st.sampled_from(("pair", "dq", "q")))
        if kind == "q":
            x = g.input("x", draw(float_arrays(shape, np.float32, -4, 4)))
            g.node("QuantizeLinear", [layout(x, "t"), s, z], "y")
            also: tuple[str, ...] = ()
        else:
            x = g.input("x", draw(arrays(qtype, shape, -128, 255)))
            t = layout(g.node("DequantizeLinear", [x, s, z], "dq"), "t")
            if kind == "pair":
                g.node("QuantizeLinear", [t, s, z], "y")
            else:
                g.node("Relu", [t], "y")
            also = ("qdq-cancel",)
        return g.case(rule, ["y"], also=also)

    return strategy


@rule_case
def _qdq_zero_point_shift(draw: Callable, st: Any) -> RuleCase:
    """A DQ-of-Q pair with any 8-bit zero point, per tensor (its DQ's zero point maybe absent when 0, the Q's
    too for uint8) or per axis (one zero point and scale per channel), the Q sometimes also a graph output; or
    a uint8 constant under DQ with any zero point."""
    shape = draw(shapes(1, 4, 3))
    g = DrawnGraph()
    kind = draw(st.sampled_from(("UINT8", "INT8", "weight")))
    qtype = "UINT8" if kind == "weight" else kind
    lo, hi = _int_range(qtype)
    per_axis = kind != "weight" and draw(st.booleans())
    attrs = {"axis": draw(st.integers(0, len(shape) - 1))} if per_axis or draw(st.booleans()) else {}
    if per_axis:
        channels = shape[attrs["axis"]]
        g.inits["s"] = np.asarray(
            draw(st.lists(st.sampled_from((0.01, 0.05, 0.2, 1.0)), min_size=channels, max_size=channels)), np.float32
        )
        g.inits["z"] = np.asarray(
            draw(st.lists(st.integers(lo, hi), min_size=channels, max_size=channels)), numpy_dtype(qtype)
        )
    else:
        g.inits["s"] = np.asarray(draw(st.sampled_from((0.01, 0.05, 0.2, 1.0))), np.float32)
        g.inits["z"] = np.full((1,) * draw(st.integers(0, 1)), draw(st.integers(lo, hi)), numpy_dtype(qtype))
    x = g.input("x", draw(float_arrays(shape, np.float32, -40, 40)))  # beyond the grid: both ends saturate
    outs = ["y"]
    if kind == "weight":
        g.inits["w"] = draw(arrays("UINT8", shape, 0, 255))
        g.node("Add", [x, g.node("DequantizeLinear", ["w", "s", "z"], "dq", **attrs)], "y")
    else:
        zero = not per_axis and int(g.inits["z"].reshape(-1)[0]) == 0
        q_absent = zero and qtype == "UINT8" and draw(st.booleans())  # Q's default: uint8, zero point 0
        dq_absent = zero and draw(st.booleans())  # DQ's default: 0 of the Q's type
        q = g.node("QuantizeLinear", [x, "s"] if q_absent else [x, "s", "z"], "q", **attrs)
        g.node("DequantizeLinear", [q, "s"] if dq_absent else [q, "s", "z"], "y", **attrs)
        outs += ["q"] if draw(st.booleans()) else []
    return g.case("qdq-zero-point-shift", outs, opset=draw(st.sampled_from((13, 17, 19))))


def _int_range(qtype: str) -> tuple[int, int]:
    info = np.iinfo(numpy_dtype(qtype))
    return int(info.min), int(info.max)


def _rescale_params(draw: Callable, st: Any, exact: bool) -> tuple[str, float, float, str]:
    """(type of the middle grid, s1, s2, its x type): s1 = k s2 exactly (`exact`) or a ratio s1 / s2 that is not
    an integer, each a float32."""
    mid = draw(st.sampled_from(("UINT8", "INT8", "UINT16", "INT16")))
    wide = mid.endswith("16")
    if exact:
        if draw(st.booleans()):  # a short mantissa times any small integer: exact in float32
            s2 = float(np.float32(draw(st.integers(1, 1023)) * 2.0 ** -draw(st.integers(8, 16))))
            k = draw(st.integers(1, 200)) if wide else 1
        else:  # a decimal scale times a power of two
            s2 = float(np.float32(draw(st.sampled_from((0.01, 0.05, 0.003)))))
            k = 2 ** draw(st.integers(0, 7)) if wide else 1
        s1 = float(np.float32(k * s2))
        assert s1 == k * s2 and math.fmod(s1, s2) == 0.0
        return mid, s1, s2, draw(st.sampled_from(("UINT8", "INT8")))
    s1 = float(np.float32(draw(st.sampled_from((0.01, 0.05, 0.003)))))
    ratio = draw(st.floats(1.05, 8.0)) if wide else draw(st.floats(0.6, 0.95))
    s2 = float(np.float32(s1 / ratio))
    if math.fmod(s1, s2) == 0.0:  # the rounding made the ratio an integer after all
        s2 = float(np.nextafter(np.float32(s2), np.float32(1.0)))
    return mid, s1, s2, draw(st.sampled_from(("UINT8", "INT8")))


def _rescale_merge(rule: str) -> Callable[[], Any]:
    """x -> DQ(s1, z1) -> Q(s2, z2) -> DQ(s2, z2) with the middle never saturating, then (exact rule only) a
    second requantize Q(s3, z3) (per tensor or per channel), or a float consumer. x covers its type's range."""
    exact = rule == "rescale-merge"

    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        shape = (2,) + draw(shapes(0, 3, 3))
        mid, s1, s2, xtype = _rescale_params(draw, st, exact)
        (lo1, hi1), (lo2, hi2) = (_int_range(t) for t in (xtype, mid))
        z1 = draw(st.integers(lo1, hi1))
        r = s1 / s2
        z2_lo, z2_hi = math.ceil(lo2 - r * (lo1 - z1)), math.floor(hi2 - r * (hi1 - z1))
        if z2_lo > z2_hi:  # this z1 leaves no room: centre x's range instead
            z1 = (lo1 + hi1 + 1) // 2
            z2_lo, z2_hi = math.ceil(lo2 - r * (lo1 - z1)), math.floor(hi2 - r * (hi1 - z1))
        z2 = draw(st.integers(z2_lo, z2_hi))
        g = DrawnGraph()
        values = draw(arrays(xtype, shape, lo1, hi1)).reshape(-1)
        values[0], values[-1] = lo1, hi1  # both ends of x's range: where the middle would saturate
        x = g.input("x", values.reshape(shape))
        g.inits.update({"s1": np.array(s1, np.float32), "s2": np.array(s2, np.float32)})
        absent1 = z1 == 0 and draw(st.booleans())
        absent2 = z2 == 0 and mid == "UINT8" and draw(st.booleans())
        if not absent1:
            g.inits["z1"] = np.array(z1, numpy_dtype(xtype))
        if not absent2:
            g.inits["z2"] = np.array(z2, numpy_dtype(mid))
        p1 = ["s1"] if absent1 else ["s1", "z1"]
        p2 = ["s2"] if absent2 else ["s2", "z2"]
        d1 = g.node("DequantizeLinear", [x, *p1], "d1")
        d2 = g.node("DequantizeLinear", [g.node("QuantizeLinear", [d1, *p2], "q2"), *p2], "d2")
        end = draw(st.sampled_from(("requantize", "float"))) if exact else "float"
        if end == "requantize":
            per_axis = draw(st.booleans())
            channels = shape[1] if per_axis and len(shape) > 1 else None
            s3 = np.asarray(
                draw(float_arrays(() if channels is None else (channels,), np.float32, 0.001, 0.5)), np.float32
            )
            t3 = draw(st.sampled_from(("UINT8", "INT8")))
            z3 = draw(st.integers(0, 10) if t3 == "UINT8" else st.integers(-5, 5))
            g.inits.update({"s3": s3, "z3": np.full(s3.shape, z3, numpy_dtype(t3))})
            g.node("QuantizeLinear", [d2, "s3", "z3"], "y", **({"axis": 1} if channels else {}))
        else:  # |x - z1| reaches half of x's range: the rounding (lossy rule) stays within 1% of the output
            g.node(draw(st.sampled_from(("Abs", "Identity"))), [d2], "y")
        opset = 21 if mid.endswith("16") else draw(st.sampled_from((13, 17, 21)))
        return g.case(rule, ["y"], allow=() if exact else ("precision-changing",), opset=opset)

    return strategy


#: rule name -> strategy of graphs where the rule fires; one case in four is also checked with symbolic dims.
PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "qdq-cancel": _qdq_cancel,
    "dq-q-drop": _dq_q_drop,
    "quant-tables": feeding(_dq_q_drop, "quant-tables"),
    "qdq-zero-point-default": _qdq_zero_point_default,
    "qdq-sink-transpose": _qdq_sink("qdq-sink-transpose"),
    "qdq-sink-reshape": _qdq_sink("qdq-sink-reshape"),
    "qdq-zero-point-shift": _qdq_zero_point_shift,
    "rescale-merge": _rescale_merge("rescale-merge"),
    "rescale-merge-lossy": _rescale_merge("rescale-merge-lossy"),
}
