"""Hypothesis properties of the activation rules (rewrites/activation.py): for each rule, a strategy of small graphs
where its guard holds (`RuleCase`), checked by tests/test_rules_activation.py and `eqsat check-rules`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from eqsat.testing.cases import DrawnGraph, RuleCase, feeding, rule_case
from eqsat.testing.draw import const_input
from eqsat.testing.models import numpy_dtype
from eqsat.testing.strategies import arrays, broadcastable_shapes, float_arrays, shapes

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


SQRT2 = math.sqrt(2.0)


def _gelu_product(draw: Callable, st: Any, g: DrawnGraph, x: str, h: str, dtype: str) -> str:
    """x * h * 0.5 in one of the association orders exporters write."""
    half = const_input(g, "half", 0.5, dtype)
    form = draw(st.integers(0, 3))
    if form < 2:
        xh = g.node("Mul", [x, h] if form == 0 else [h, x], "xh")
        return g.node("Mul", [xh, half], "y")
    xs = g.node("Mul", [x, half], "xhalf")
    return g.node("Mul", [xs, h] if form == 2 else [h, xs], "y")


def _gelu(rule: str, checked: str = "") -> Callable[[], Any]:
    """Graphs where `rule` (a Gelu fusion) fires; `checked`: the rule the case checks instead (with `rule` also)."""

    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        shape = draw(shapes(1, 3, 4))
        dtype = "FLOAT"
        g = DrawnGraph()
        x = g.input("x", draw(float_arrays(shape, numpy_dtype(dtype), -5, 5)))
        one = const_input(g, "one", 1.0, dtype)
        if rule == "gelu-fuse":
            if draw(st.booleans()):
                u = g.node("Div", [x, const_input(g, "k", SQRT2, dtype)], "u")
            else:
                u = g.node("Mul", [x, const_input(g, "k", 1 / SQRT2, dtype)], "u")
            h = g.node("Add", [g.node("Erf", [u], "e"), one], "h")
        else:
            if draw(st.booleans()):
                cube = g.node("Pow", [x, const_input(g, "three", 3.0, dtype)], "cube")
            else:
                cube = g.node("Mul", [g.node("Mul", [x, x], "x2"), x], "cube")
            c = g.node("Mul", [cube, const_input(g, "c1", 0.044715, dtype)], "c")
            inner = g.node(
                "Mul", [g.node("Add", [x, c], "p"), const_input(g, "c2", math.sqrt(2 / math.pi), dtype)], "u"
            )
            h = g.node("Add", [g.node("Tanh", [inner], "t"), one], "h")
        out = _gelu_product(draw, st, g, x, h, dtype)
        return g.case(checked or rule, [out], opset=20, also=(rule,) if checked else ())

    return strategy


@rule_case
def _gelu_decompose(draw: Callable, st: Any) -> RuleCase:
    g = DrawnGraph()
    x = g.input("x", draw(float_arrays(draw(shapes(1, 3, 4)), np.float32, -5, 5)))
    g.node("Gelu", [x], "y", approximate=draw(st.sampled_from(("none", "tanh"))))
    return g.case("gelu-decompose", ["y"], opset=20)


@rule_case
def _leakyrelu_from_max(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 3, 4))
    dtype = draw(st.sampled_from(("FLOAT", "FLOAT16")))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(dtype, shape)))
    a = const_input(g, "a", draw(st.sampled_from((0.01, 0.1, 0.2, 0.5, 0.999))), dtype)
    ax = g.node("Mul", [x, a] if draw(st.booleans()) else [a, x], "ax")
    g.node("Max", [x, ax] if draw(st.booleans()) else [ax, x], "y")
    return g.case("leakyrelu-from-max", ["y"], opset=draw(st.sampled_from((13, 17))))


@rule_case
def _hardswish_fuse(draw: Callable, st: Any) -> RuleCase:
    g = DrawnGraph()
    x = g.input("x", draw(float_arrays(draw(shapes(1, 3, 4)), np.float32, -6, 6)))
    shifted = g.node("Add", [x, const_input(g, "three", 3.0, "FLOAT")], "s")
    h = g.node("Clip", [shifted, const_input(g, "lo", 0.0, "FLOAT"), const_input(g, "hi", 6.0, "FLOAT")], "h")
    by_six = draw(st.booleans())
    scale = const_input(g, "k", 6.0 if by_six else 1 / 6, "FLOAT")
    if draw(st.booleans()):  # (x * h) / 6
        xh = g.node("Mul", [x, h] if draw(st.booleans()) else [h, x], "xh")
        g.node("Div" if by_six else "Mul", [xh, scale], "y")
    else:  # x * (h / 6)
        hs = g.node("Div" if by_six else "Mul", [h, scale], "hs")
        g.node("Mul", [x, hs] if draw(st.booleans()) else [hs, x], "y")
    return g.case("hardswish-fuse", ["y"], opset=draw(st.sampled_from((11, 14, 17))))


@rule_case
def _prelu_from_relu(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3))
    dtype = draw(st.sampled_from(("FLOAT", "FLOAT16")))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(dtype, shape)))
    a_shape = draw(broadcastable_shapes(shape))
    a = const_input(g, "a", draw(float_arrays(a_shape, numpy_dtype(dtype), -2, 2)), dtype)
    pos = g.node("Relu", [x], "pos")
    neg = g.node("Relu", [g.node("Neg", [x], "nx")], "neg")
    scaled = g.node("Mul", [neg, a] if draw(st.booleans()) else [a, neg], "an")
    if draw(st.booleans()):
        g.node("Sub", [pos, scaled], "y")
    else:
        g.node("Add", [pos, scaled] if draw(st.booleans()) else [scaled, pos], "y")
    return g.case("prelu-from-relu", ["y"])


@rule_case
def _prelu_to_leakyrelu(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3))
    dtype = draw(st.sampled_from(("FLOAT", "FLOAT16")))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(dtype, shape)))
    slope = draw(st.sampled_from((0.01, 0.25, -0.5, 1.5)))
    k = draw(st.integers(0, len(shape)))
    g.inits["a"] = np.full((1,) * k, slope, numpy_dtype(dtype))
    g.node("PRelu", [x, "a"], "y")
    return g.case("prelu-to-leakyrelu", ["y"])


def _clip(g: DrawnGraph, x: str, y: str, lo: float | None, hi: float | None, dtype: str, opset: int) -> str:
    if opset < 11:
        attrs = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
        return g.node("Clip", [x], y, **attrs)
    inputs = [x, const_input(g, f"{y}_lo", lo, dtype) if lo is not None else ""]
    if hi is not None:
        inputs.append(const_input(g, f"{y}_hi", hi, dtype))
    return g.node("Clip", inputs, y)


@rule_case
def _clip_merge(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 3, 4))
    opset = draw(st.sampled_from((6, 13, 17)))
    dtype = "FLOAT" if opset < 12 else draw(st.sampled_from(("FLOAT", "FLOAT", "FLOAT16", "INT32")))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(dtype, shape, -10, 10)))
    bounds = sorted(draw(st.lists(st.sampled_from((-6.0, -1.0, 0.0, 1.0, 3.0, 6.0)), min_size=4, max_size=4)))
    # overlapping intervals [a, b] and [c, d]: a <= d and c <= b
    a, c, b, d = bounds if draw(st.booleans()) else (bounds[0], bounds[1], bounds[3], bounds[2])
    if draw(st.booleans()):
        a, b, c, d = c, d, a, b
    inner = _clip(g, x, "c1", a if draw(st.integers(0, 4)) else None, b, dtype, opset)
    _clip(g, inner, "y", c, d if draw(st.integers(0, 4)) else None, dtype, opset)
    return g.case("clip-merge", ["y"], opset=opset)


@rule_case
def _relu_clip_merge(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 3, 4))
    opset = draw(st.sampled_from((6, 13, 17)))  # Relu takes integers from opset 14 on
    dtype = "FLOAT" if opset < 14 else draw(st.sampled_from(("FLOAT", "FLOAT16", "INT32")))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(dtype, shape, -10, 10)))
    lo = draw(st.sampled_from((-6.0, -1.0, 0.0, 2.0)))
    hi = max(lo, 0.0) + draw(st.sampled_from((0.0, 1.0, 6.0)))
    if draw(st.booleans()):
        g.node("Relu", [_clip(g, x, "c", lo, hi, dtype, opset)], "y")
    else:
        _clip(g, g.node("Relu", [x], "r"), "y", lo, hi, dtype, opset)
    return g.case("relu-clip-merge", ["y"], opset=opset)


#: rule name -> strategy of graphs where the rule fires; one case in four is also checked with symbolic dims.
PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "gelu-fuse": _gelu("gelu-fuse"),
    "gelu-forms": _gelu("gelu-fuse", checked="gelu-forms"),
    "gelu-tanh-fuse": _gelu("gelu-tanh-fuse"),
    "gelu-decompose": _gelu_decompose,
    "scalar-broadcast-facts": feeding(_gelu_decompose, "scalar-broadcast-facts"),
    "hardswish-fuse": _hardswish_fuse,
    "leakyrelu-from-max": _leakyrelu_from_max,
    "prelu-from-relu": _prelu_from_relu,
    "prelu-to-leakyrelu": _prelu_to_leakyrelu,
    "clip-merge": _clip_merge,
    "relu-clip-merge": _relu_clip_merge,
}
