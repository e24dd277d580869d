"""Hypothesis properties of the normalization rules (rewrites/normalization.py): for each rule, a strategy of small graphs
where its guard holds (`RuleCase`), checked by tests/test_rules_normalization.py and `eqsat check-rules`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from eqsat.testing.cases import DrawnGraph, RuleCase, rule_case
from eqsat.testing.draw import const_input
from eqsat.testing.models import numpy_dtype
from eqsat.testing.strategies import float_arrays, shapes

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


OPSET_AXES_INPUT = 18  # ReduceMean takes its axes as an input from opset 18 on


def _reduce_mean(g: DrawnGraph, x: str, y: str, axes: list[int], opset: int) -> str:
    if opset >= OPSET_AXES_INPUT:
        g.inits[f"{y}_axes"] = np.array(axes, np.int64)
        return g.node("ReduceMean", [x, f"{y}_axes"], y, keepdims=1)
    return g.node("ReduceMean", [x], y, axes=list(axes), keepdims=1)


def _moments(draw: Callable, st: Any, g: DrawnGraph, x: str, axes: list[int], dtype: str, opset: int) -> str:
    """(x - mean) / sqrt(var + eps) over `axes`, in a drawn exporter variant; returns the output name."""
    m = _reduce_mean(g, x, "mean", axes, opset)
    d = g.node("Sub", [x, m], "d")
    if draw(st.booleans()):
        sq = g.node("Pow", [d, const_input(g, "two", 2.0, "FLOAT" if draw(st.booleans()) else dtype)], "sq")
    else:
        sq = g.node("Mul", [d, d], "sq")
    var = _reduce_mean(g, sq, "var", axes, opset)
    eps = const_input(g, "eps", draw(st.sampled_from((1e-5, 1e-12, 1e-3))), dtype)
    std = g.node("Sqrt", [g.node("Add", [var, eps], "ve")], "std")
    if draw(st.booleans()):
        return g.node("Div", [d, std], "n")
    return g.node("Mul", [d, g.node("Reciprocal", [std], "rstd")], "n")


def _spread(draw: Callable, st: Any, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Values in [-8, 8] plus a drawn offset: rows are far from constant."""
    base = draw(float_arrays(shape, numpy_dtype(dtype), -8.0, 8.0))
    return (base + np.asarray(draw(st.sampled_from((0.0, 3.0, -2.0))), base.dtype)).astype(base.dtype)


def _layernorm(rule: str, affine: str) -> Callable[[], Any]:
    """Moments over the last axis (LN decomposition), then nothing / Mul(gamma) / Mul(gamma) + Add(beta)."""
    also = {"layernorm-fuse": (), "layernorm-fuse-scale": ("layernorm-fuse",),
            "layernorm-fuse-bias": ("layernorm-fuse", "layernorm-fuse-scale")}[rule]

    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        rank = draw(st.integers(1, 4))
        shape = draw(shapes(rank - 1, rank - 1, 3)) + (draw(st.integers(4, 8)),)
        dtype = "FLOAT"
        opset = draw(st.sampled_from((17, 18, 20)))
        g = DrawnGraph()
        x = g.input("x", _spread(draw, st, shape, dtype))
        axis = rank - 1 if draw(st.booleans()) else -1
        out = _moments(draw, st, g, x, [axis], dtype, opset)
        gamma_shape = draw(st.sampled_from(((shape[-1],), (1,) * (rank - 1) + (shape[-1],))))
        if affine in ("scale", "bias") and (affine == "scale" or draw(st.booleans())):
            gamma = const_input(g, "gamma", draw(float_arrays(gamma_shape, numpy_dtype(dtype), -2, 2)), dtype)
            out = g.node("Mul", [out, gamma] if draw(st.booleans()) else [gamma, out], "scaled")
        if affine == "bias":
            beta = const_input(g, "beta", draw(float_arrays(gamma_shape, numpy_dtype(dtype), -2, 2)), dtype)
            out = g.node("Add", [out, beta] if draw(st.booleans()) else [beta, out], "y")
        return g.case(rule, [out], also=also, opset=opset)

    return strategy


@rule_case
def _layernorm_decompose(draw: Callable, st: Any) -> RuleCase:
    rank = draw(st.integers(1, 4))
    shape = draw(shapes(rank - 1, rank - 1, 3)) + (draw(st.integers(4, 8)),)
    g = DrawnGraph()
    x = g.input("x", _spread(draw, st, shape, "FLOAT"))
    inputs = [x, const_input(g, "gamma", draw(float_arrays((shape[-1],), np.float32, -2, 2)), "FLOAT")]
    if draw(st.booleans()):
        inputs.append(const_input(g, "beta", draw(float_arrays((shape[-1],), np.float32, -2, 2)), "FLOAT"))
    g.node("LayerNormalization", inputs, "y", axis=-1, epsilon=draw(st.sampled_from((1e-5, 1e-3))))
    return g.case("layernorm-decompose", ["y"], opset=draw(st.sampled_from((17, 18))))


def _instancenorm(rule: str) -> Callable[[], Any]:
    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        rank = draw(st.integers(3, 4))
        spatial = (draw(st.integers(4, 6)),) + draw(shapes(rank - 3, rank - 3, 2))
        shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3))) + spatial
        dtype = "FLOAT"
        opset = draw(st.sampled_from((13, 17, 18)))
        g = DrawnGraph()
        x = g.input("x", _spread(draw, st, shape, dtype))
        out = _moments(draw, st, g, x, list(range(2, rank)), dtype, opset)
        if rule == "instancenorm-fuse-affine":
            per_channel = (1, shape[1]) + (1,) * (rank - 2)
            gamma = const_input(g, "gamma", draw(float_arrays(per_channel, numpy_dtype(dtype), -2, 2)), dtype)
            out = g.node("Mul", [out, gamma] if draw(st.booleans()) else [gamma, out], "scaled")
            if draw(st.booleans()):
                beta = const_input(g, "beta", draw(float_arrays(per_channel, numpy_dtype(dtype), -2, 2)), dtype)
                out = g.node("Add", [out, beta] if draw(st.booleans()) else [beta, out], "y")
        also = ("instancenorm-fuse",) if rule == "instancenorm-fuse-affine" else ()
        return g.case(rule, [out], also=also, opset=opset)

    return strategy


#: rule name -> strategy of graphs where the rule fires; one case in four is also checked with symbolic dims.
PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "layernorm-fuse": _layernorm("layernorm-fuse", "none"),
    "layernorm-fuse-scale": _layernorm("layernorm-fuse-scale", "scale"),
    "layernorm-fuse-bias": _layernorm("layernorm-fuse-bias", "bias"),
    "layernorm-decompose": _layernorm_decompose,
    "instancenorm-fuse": _instancenorm("instancenorm-fuse"),
    "instancenorm-fuse-affine": _instancenorm("instancenorm-fuse-affine"),
}
