"""Hypothesis properties of the normalization rules (rewrites/normalization.py): for each rule, a strategy of small
graphs
where its guard holds (`RuleCase`), checked by tests/test_rules_normalization.py and `eqsat check-rules`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from eqsat.testing.cases import DrawnGraph, RuleCase, feeding, rule_case
from eqsat.testing.draw import CONST_LAST, const_input
from eqsat.testing.models import numpy_dtype
from eqsat.testing.strategies import float_arrays, shapes

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


OPSET_AXES_INPUT = 18  # ReduceMean takes its axes as an input from opset 18 on
#: The exporters' Pow(d, 2) and Mul(d, Reciprocal(std)) reach the fusions' form through this rule.
FORMS = "norm-moment-forms"


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
    rstd = g.node("Reciprocal", [std], "rstd")
    return g.node("Mul", [d, rstd] if draw(st.booleans()) else [rstd, d], "n")


def _spread(draw: Callable, st: Any, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Values in [-8, 8] plus a drawn offset: rows are far from constant."""
    base = draw(float_arrays(shape, numpy_dtype(dtype), -8.0, 8.0))
    return (base + np.asarray(draw(st.sampled_from((0.0, 3.0, -2.0))), base.dtype)).astype(base.dtype)


def _layernorm(rule: str, affine: str) -> Callable[[], Any]:
    """Moments over the trailing axes (one or several: LN decomposition), then nothing / Mul(gamma) /
    Mul(gamma) + Add(beta)."""
    also = (
        FORMS,
        *{
            "layernorm-fuse": (),
            "layernorm-fuse-scale": ("layernorm-fuse",),
            "layernorm-fuse-bias": ("layernorm-fuse", "layernorm-fuse-scale"),
        }[rule],
    )

    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        rank = draw(st.integers(1, 4))
        shape = draw(shapes(rank - 1, rank - 1, 3)) + (draw(st.integers(4, 8)),)
        dtype = "FLOAT"
        opset = draw(st.sampled_from((17, 18, 20)))
        g = DrawnGraph()
        x = g.input("x", _spread(draw, st, shape, dtype))
        n = draw(st.integers(1, rank))
        axes = [a - rank if draw(st.booleans()) else a for a in range(rank - n, rank)]
        out = _moments(draw, st, g, x, axes, dtype, opset)
        nd = shape[rank - n :]
        gamma_shape = draw(st.sampled_from((nd, (1,) * (rank - n) + nd)))
        if affine in ("scale", "bias") and (affine == "scale" or draw(st.booleans())):
            out = _with_constant(draw, st, g, "Mul", out, "gamma", gamma_shape, "scaled", dtype)
        if affine == "bias":
            out = _with_constant(draw, st, g, "Add", out, "beta", gamma_shape, "y", dtype)
        return g.case(rule, [out], also=also, opset=opset)

    return strategy


@rule_case
def _layernorm_transposed(draw: Callable, st: Any) -> RuleCase:
    """Moments over contiguous axes a..a+n-1 of a rank 2..4 x that are not the trailing ones (at least one
    normalized dim of 3 or more), then maybe a gamma/beta pair varying along them."""
    rank = draw(st.integers(2, 4))
    n = draw(st.integers(1, rank - 1))
    a = draw(st.integers(0, rank - n - 1))
    shape = list(draw(shapes(rank, rank, 3)))
    shape[a] = draw(st.integers(3, 6))
    shape = tuple(shape)
    opset = draw(st.sampled_from((17, 18)))
    g = DrawnGraph()
    x = g.input("x", _spread(draw, st, shape, "FLOAT"))
    out = _moments(draw, st, g, x, list(range(a, a + n)), "FLOAT", opset)
    also: tuple[str, ...] = ()
    if draw(st.booleans()):
        cshape = tuple(d if a <= i < a + n else 1 for i, d in enumerate(shape))[draw(st.integers(0, a)) :]
        gamma = const_input(g, "gamma", draw(float_arrays(cshape, np.float32, -2, 2)), "FLOAT")
        beta = const_input(g, "beta", draw(float_arrays(cshape, np.float32, -2, 2)), "FLOAT")
        out = g.node("Add", [g.node("Mul", [out, gamma], "scaled"), beta], "y")
        also = (
            "layernorm-fuse-scale",
            "layernorm-fuse-bias",
            "transpose-sink-binary-const",
            "transpose-merge",
            "transpose-identity",
        )
    return g.case("layernorm-fuse-transposed", [out], also=(*also, FORMS), opset=opset)


@rule_case
def _instancenorm_channels_last(draw: Callable, st: Any) -> RuleCase:
    """Moments over the axes 1..r-2 of an (N, spatial..., C) tensor, then maybe per-channel gamma and beta."""
    rank = draw(st.integers(3, 4))
    spatial = (draw(st.integers(4, 6)),) + draw(shapes(rank - 3, rank - 3, 2))
    shape = (draw(st.integers(1, 2)), *spatial, draw(st.integers(1, 3)))
    opset = draw(st.sampled_from((13, 17, 18)))
    g = DrawnGraph()
    x = g.input("x", _spread(draw, st, shape, "FLOAT"))
    out = _moments(draw, st, g, x, list(range(1, rank - 1)), "FLOAT", opset)
    also: tuple[str, ...] = ()
    if draw(st.booleans()):
        cshape = draw(st.sampled_from(((shape[-1],), (1,) * (rank - 1) + (shape[-1],))))
        gamma = const_input(g, "gamma", draw(float_arrays(cshape, np.float32, -2, 2)), "FLOAT")
        out = g.node("Mul", [out, gamma], "scaled")
        if draw(st.booleans()):
            beta = const_input(g, "beta", draw(float_arrays(cshape, np.float32, -2, 2)), "FLOAT")
            out = g.node("Add", [out, beta], "y")
        also = ("instancenorm-fuse-affine", "transpose-sink-binary-const", "transpose-merge", "transpose-identity")
    return g.case("instancenorm-fuse-channels-last", [out], also=(*also, FORMS), opset=opset)


def _with_constant(
    draw: Callable,
    st: Any,
    g: DrawnGraph,
    op: str,
    x: str,
    name: str,
    shape: tuple[int, ...],
    out: str,
    dtype: str = "FLOAT",
) -> str:
    """`out` = op(x, c) or op(c, x) for a constant c called `name` of `shape`, values in [-2, 2] (a gamma, a beta)."""
    c = const_input(g, name, draw(float_arrays(shape, numpy_dtype(dtype), -2, 2)), dtype)
    return g.node(op, [x, c] if draw(st.booleans()) else [c, x], out)


def _variance_eps(draw: Callable, st: Any, g: DrawnGraph, x: str, axes: list[int], opset: int) -> tuple[str, str, str]:
    """mean, d = x - mean and var + eps over `axes`."""
    m = _reduce_mean(g, x, "mean", axes, opset)
    d = g.node("Sub", [x, m], "d")
    var = _reduce_mean(g, g.node("Mul", [d, d], "sq"), "var", axes, opset)
    eps = const_input(g, "eps", draw(st.sampled_from((1e-5, 1e-3))), "FLOAT")
    return m, d, g.node("Add", [var, eps], "ve")


def _rsqrt(draw: Callable, st: Any, g: DrawnGraph, ve: str, form: str) -> str:
    if form == "pow":
        return g.node("Pow", [ve, const_input(g, "mhalf", -0.5, "FLOAT")], "r")
    if form == "div":
        return g.node("Div", [const_input(g, "one", 1.0, "FLOAT"), g.node("Sqrt", [ve], "s")], "r")
    return g.node("Reciprocal", [g.node("Sqrt", [ve], "s")], "r")


def _norm_input(draw: Callable, st: Any) -> tuple[DrawnGraph, str, tuple[int, ...], list[int], int]:
    """x of rank 2..4 and some of its axes (any, sorted), with the opset."""
    rank = draw(st.integers(2, 4))
    shape = draw(shapes(rank, rank, 5))
    axes = sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank)))
    g = DrawnGraph()
    # a checkerboard of +-2 under the drawn values: every reduced set of 2+ elements has a spread (the folded
    # form's x * k - m * k cancels; a near-constant set would amplify its roundings by 1 / std)
    base = draw(float_arrays(shape, np.float32, -1.0, 1.0))
    x = g.input("x", (base + np.indices(shape).sum(0) % 2 * 4.0 - 2.0).astype(np.float32))
    return g, x, shape, axes, draw(st.sampled_from((13, 17, 18)))


def _rms_form(draw: Callable, st: Any) -> RuleCase:
    """x * r or r * x for r = Reciprocal(Sqrt(mean(x^2) + eps)) or Div(1, Sqrt(..)) (with norm-rsqrt-forms), over
    any axes."""
    g, x, shape, axes, opset = _norm_input(draw, st)
    sq = (
        g.node("Pow", [x, const_input(g, "two", 2.0, "FLOAT")], "sq")
        if draw(st.booleans())
        else g.node("Mul", [x, x], "sq")
    )
    ve = g.node("Add", [_reduce_mean(g, sq, "ms", axes, opset), const_input(g, "eps", 1e-6, "FLOAT")], "ve")
    std = g.node("Sqrt", [ve], "std")
    divided = draw(st.booleans())
    r = g.node("Div", [const_input(g, "one", 1.0, "FLOAT"), std], "r") if divided else g.node("Reciprocal", [std], "r")
    out = g.node("Mul", [x, r] if draw(st.booleans()) else [r, x], "n")
    return g.case(FORMS, [out], also=("norm-rsqrt-forms",) if divided else (), opset=opset)


@rule_case
def _moment_forms(draw: Callable, st: Any) -> RuleCase:
    """(x - mean) * Reciprocal(Sqrt(var + eps)) (either operand order) or with Pow(x - mean, 2), over any axes;
    or RMSNorm's x * rsqrt(mean(x^2) + eps) (`_rms_form`)."""
    if draw(st.booleans()):
        return _rms_form(draw, st)
    g, x, shape, axes, opset = _norm_input(draw, st)
    m = _reduce_mean(g, x, "mean", axes, opset)
    d = g.node("Sub", [x, m], "d")
    pow_form = draw(st.booleans())
    sq = g.node("Pow", [d, const_input(g, "two", 2.0, "FLOAT")], "sq") if pow_form else g.node("Mul", [d, d], "sq")
    var = _reduce_mean(g, sq, "var", axes, opset)
    ve = g.node("Add", [var, const_input(g, "eps", 1e-5, "FLOAT")], "ve")
    std = g.node("Sqrt", [ve], "std")
    if pow_form and draw(st.booleans()):
        out = g.node("Div", [d, std], "n")
    else:
        rstd = g.node("Reciprocal", [std], "rstd")
        out = g.node("Mul", [d, rstd] if draw(st.booleans()) else [rstd, d], "n")  # either operand order
    return g.case(FORMS, [out], opset=opset)


@rule_case
def _rsqrt_forms(draw: Callable, st: Any) -> RuleCase:
    g, x, shape, axes, opset = _norm_input(draw, st)
    m, d, ve = _variance_eps(draw, st, g, x, axes, opset)
    form = draw(st.sampled_from(("pow", "div", "sqrt")))
    if form == "sqrt":
        out = g.node("Div", [d, g.node("Pow", [ve, const_input(g, "half", 0.5, "FLOAT")], "std")], "n")
    else:
        out = g.node("Mul", [d, _rsqrt(draw, st, g, ve, form)], "n")
    return g.case("norm-rsqrt-forms", [out], opset=opset)


@rule_case
def _unfold_shift(draw: Callable, st: Any) -> RuleCase:
    """x * k + (b - m * k) (also -, Neg forms), k = [g *] rsqrt(var + eps), over any axes."""
    g, x, shape, axes, opset = _norm_input(draw, st)
    m, d, ve = _variance_eps(draw, st, g, x, axes, opset)
    k = _rsqrt(draw, st, g, ve, "recip")
    reduced = tuple(1 if i in axes else n for i, n in enumerate(shape))
    cshape = tuple(n if i in axes else 1 for i, n in enumerate(shape))
    if draw(st.booleans()):
        k = _with_constant(draw, st, g, "Mul", k, "gamma", cshape, "k")
    xk = g.node("Mul", [x, k], "xk")
    mk = g.node("Mul", [m, k], "mk")
    form = draw(st.sampled_from(("sub", "minus", "neg")))
    if form == "sub":
        bshape = draw(st.sampled_from((cshape, reduced, ())))
        beta = const_input(g, "beta", draw(float_arrays(bshape, np.float32, -2, 2)), "FLOAT")
        shift = g.node("Sub", [beta, mk], "shift")
        out = g.node("Add", [xk, shift] if draw(st.booleans()) else [shift, xk], "y")
    elif form == "minus":
        out = g.node("Sub", [xk, mk], "y")
    else:
        neg = g.node("Neg", [mk], "shift")
        out = g.node("Add", [xk, neg] if draw(st.booleans()) else [neg, xk], "y")
    return g.case("norm-unfold-shift", [out], opset=opset)


@rule_case
def _regroup_scale(draw: Callable, st: Any) -> RuleCase:
    """(x - m) * (g * Reciprocal(Sqrt(var + eps))) for a constant g varying along the reduced axes."""
    g, x, shape, axes, opset = _norm_input(draw, st)
    m, d, ve = _variance_eps(draw, st, g, x, axes, opset)
    r = _rsqrt(draw, st, g, ve, "recip")
    cshape = tuple(n if i in axes else 1 for i, n in enumerate(shape))
    k = _with_constant(draw, st, g, "Mul", r, "gamma", cshape, "k")
    return g.case("norm-regroup-scale", [g.node("Mul", [d, k], "y")], opset=opset)


@rule_case
def _distribute_affine(draw: Callable, st: Any) -> RuleCase:
    """(LN(x) + b) * g over the last axis, or (IN(x) + b) * g per channel, for constants b and g."""
    instance = draw(st.booleans())
    rank = draw(st.integers(3, 4)) if instance else draw(st.integers(1, 3))
    if instance:
        shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(4, 6))) + draw(
            shapes(rank - 3, rank - 3, 3)
        )
        axes, cshape, also = list(range(2, rank)), (1, shape[1]) + (1,) * (rank - 2), ("instancenorm-fuse",)
    else:
        shape = draw(shapes(rank - 1, rank - 1, 3)) + (draw(st.integers(4, 8)),)
        cshape = draw(st.sampled_from(((shape[-1],), (1,) * (rank - 1) + (shape[-1],))))
        axes, also = [rank - 1], ("layernorm-fuse",)
    opset = draw(st.sampled_from((17, 18)))
    g = DrawnGraph()
    x = g.input("x", _spread(draw, st, shape, "FLOAT"))
    out = _moments(draw, st, g, x, axes, "FLOAT", opset)
    nb = _with_constant(draw, st, g, "Add", out, "beta", cshape, "nb")
    out = _with_constant(draw, st, g, "Mul", nb, "gamma", cshape, "y")
    return g.case("norm-distribute-affine", [out], also=(*also, *CONST_LAST, FORMS), opset=opset)


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
            out = _with_constant(draw, st, g, "Mul", out, "gamma", per_channel, "scaled", dtype)
            if draw(st.booleans()):
                out = _with_constant(draw, st, g, "Add", out, "beta", per_channel, "y", dtype)
        also = ("instancenorm-fuse",) if rule == "instancenorm-fuse-affine" else ()
        return g.case(rule, [out], also=(*also, FORMS), opset=opset)

    return strategy


#: rule name -> strategy of graphs where the rule fires; one case in four is also checked with symbolic dims.
PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "layernorm-fuse": _layernorm("layernorm-fuse", "none"),
    "layernorm-fuse-scale": _layernorm("layernorm-fuse-scale", "scale"),
    "layernorm-fuse-bias": _layernorm("layernorm-fuse-bias", "bias"),
    "layernorm-dims": feeding(_layernorm("layernorm-fuse-bias", "bias"), "layernorm-dims"),
    "layernorm-decompose": _layernorm_decompose,
    "layernorm-fuse-transposed": _layernorm_transposed,
    "instancenorm-fuse": _instancenorm("instancenorm-fuse"),
    "instancenorm-fuse-affine": _instancenorm("instancenorm-fuse-affine"),
    "instancenorm-fuse-channels-last": _instancenorm_channels_last,
    "norm-moment-forms": _moment_forms,
    "norm-rsqrt-forms": _rsqrt_forms,
    "norm-unfold-shift": _unfold_shift,
    "norm-regroup-scale": _regroup_scale,
    "norm-distribute-affine": _distribute_affine,
    # the analysis relations the fusions join, and the facts of the nodes they create
    "norm-moment-sites": feeding(_layernorm("layernorm-fuse", "none"), "norm-moment-sites"),
    "norm-sites": feeding(_instancenorm("instancenorm-fuse"), "norm-sites"),
    "norm-shapes": feeding(_layernorm_transposed, "norm-shapes"),
    "norm-moment-shapes": feeding(_layernorm_decompose, "norm-moment-shapes"),
}
