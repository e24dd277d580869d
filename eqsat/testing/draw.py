"""Drawing helpers shared by several rule families' properties (rewrites/properties/) and by
`random_graphs`: ops drawn, constants, inputs, activations, transposes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import onnx
import onnx.helper as oh

from eqsat.ops import COMPARISONS, OPS, UNARY
from eqsat.testing.cases import DrawnGraph, RuleCase, rule_case
from eqsat.testing.models import numpy_dtype, onnx_elem_type
from eqsat.testing.strategies import arrays, broadcastable_shapes, float_arrays, hypothesis_strategies, shapes

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


SANDWICH_RULES = ("transpose-merge", "transpose-identity")


#: Elementwise ops drawn by the properties (float inputs; IsNaN gives BOOL, comparisons too): the unary ops of
#: the op table but Not (BOOL inputs), Identity (dropped at load) and HardSwish (left out as it always was).
FLOAT_UNARY = tuple(op for op in OPS if op in UNARY and OPS[op].logic is None and op not in ("Identity", "HardSwish"))


COMPARE_OPS = COMPARISONS


#: Cast targets drawn by layout properties (values are in [-8, 8]: in range for every signed type).
CAST_TARGETS = ("FLOAT16", "DOUBLE", "INT8", "INT32", "INT64", "BOOL")


def transpose_node(x: str, y: str, perm: Sequence[int]) -> onnx.NodeProto:
    return oh.make_node("Transpose", [x], [y], perm=list(perm))


def draw_unary(draw: Callable, g: DrawnGraph, x: str, y: str, st: Any) -> str:
    """Apply a drawn unary elementwise op (plain or with parameters) to float `x`."""
    kind = draw(st.sampled_from(("plain", "plain", "LeakyRelu", "Elu", "HardSigmoid", "Clip", "Cast")))
    if kind == "plain":
        return g.node(draw(st.sampled_from(FLOAT_UNARY)), [x], y)
    if kind in ("LeakyRelu", "Elu"):
        return g.node(kind, [x], y, alpha=draw(st.sampled_from((0.01, 0.2, 1.0, 1.5))))
    if kind == "HardSigmoid":
        return g.node(kind, [x], y, alpha=draw(st.sampled_from((0.2, 0.5))), beta=draw(st.sampled_from((0.5, 0.1))))
    if kind == "Clip":
        lo = draw(st.sampled_from((-1.0, 0.0, -6.0)))
        g.inits[f"{y}_min"] = np.array(lo, np.float32)
        g.inits[f"{y}_max"] = np.array(lo + draw(st.sampled_from((1.0, 6.0))), np.float32)
        return g.node("Clip", [x, f"{y}_min", f"{y}_max"], y)
    return g.node("Cast", [x], y, to=onnx_elem_type(draw(st.sampled_from(CAST_TARGETS))))


def binary_const(draw: Callable, st: Any, g: DrawnGraph, a: str, shape: tuple[int, ...], out: str) -> str:
    """`out` = B(a, c) or B(c, a) for a drawn float binary op and a constant c that broadcasts to `shape`
    without enlarging it (possibly of lower rank)."""
    op = draw(st.sampled_from(("Add", "Sub", "Mul", "Div", "Pow", "PRelu", *COMPARE_OPS)))
    c_shape = draw(broadcastable_shapes(shape))
    integers = op in COMPARE_OPS
    low = 0.5 if op in ("Div", "Pow") else -4.0
    g.inits[f"{out}_c"] = draw(arrays("FLOAT", c_shape, low, 4.0 if op != "Pow" else 2.0, integers=integers))
    value = g.inits[f"{out}_c"]
    if op == "Pow":
        value[...] = np.round(value)  # integral exponents: negative bases stay real
    const_first = op != "PRelu" and draw(st.booleans())
    return g.node(op, [f"{out}_c", a] if const_first else [a, f"{out}_c"], out)


def neutral_element(
    rule: str,
    op: str,
    value: float,
    *,
    commutative: bool = True,
    dtypes: tuple[str, ...] = ("FLOAT", "DOUBLE", "FLOAT16", "INT32", "INT64"),
    k_dtypes: tuple[str, ...] | None = None,
) -> Callable[[], "SearchStrategy[RuleCase]"]:
    """x op k for k filled with the neutral `value` (on either side when `commutative`), -0.0 included: a
    single element, or a tensor (a `splat`) that broadcasts to x's shape without growing it. k has x's
    dtype, or one of `k_dtypes` (Pow's exponent)."""

    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        shape = draw(shapes(0, 4, 3))
        dtype = draw(st.sampled_from(dtypes))
        g = DrawnGraph()
        x = g.input("x", draw(arrays(dtype, shape)))
        if draw(st.booleans()) and dtype != "BOOL":
            x = g.node("Abs", [x], "ax")
        k = draw(st.integers(0, len(shape)))
        k_shape = tuple(d if draw(st.booleans()) else 1 for d in shape[len(shape) - k :])  # 1 or x's dim
        k_dtype = draw(st.sampled_from(k_dtypes)) if k_dtypes else dtype
        neutral = -0.0 if value == 0.0 and k_dtype in ("FLOAT", "DOUBLE") and draw(st.booleans()) else value
        g.inits["k"] = np.full(k_shape, neutral, numpy_dtype(k_dtype))
        g.node(op, ["k", x] if commutative and draw(st.booleans()) else [x, "k"], "y")
        return g.case(rule, ["y"])

    return strategy


def const_input(g: DrawnGraph, name: str, value: Any, dtype: Any) -> str:
    g.inits[name] = np.asarray(value, numpy_dtype(dtype))
    return name


#: Constant-first operand orders are matched through this canonicalization.
CONST_LAST = ("const-operand-last",)


def draw_constant(draw: Callable, shape: tuple[int, ...], dtype: str, *, positive: bool = False) -> np.ndarray:
    low, high = (0.25, 4.0) if positive else (-2.0, 2.0)
    value = np.asarray(draw(float_arrays(shape, numpy_dtype(dtype), low, high)))
    if not positive:  # no zeros: a zero scale makes the comparison trivial
        value = np.where(np.abs(value) < 0.1, 0.5, value).astype(value.dtype)
    return value


def float_input(draw: Callable, g: DrawnGraph, name: str, shape: tuple[int, ...], dtype: str) -> str:
    return g.input(name, draw(float_arrays(shape, numpy_dtype(dtype), -2.0, 2.0)))


def add_activation(draw: Callable, g: DrawnGraph, act: str, x: str, y: str, dtype: str) -> str:
    """y = act(x) with drawn parameters (Clip's bounds as constant inputs, opset 11 on)."""
    st = hypothesis_strategies()
    if act == "Clip":
        dt = numpy_dtype(dtype)
        g.inits.setdefault("clip_lo", np.asarray(draw(st.sampled_from((-0.5, 0.0))), dt))
        g.inits.setdefault("clip_hi", np.asarray(draw(st.sampled_from((0.5, 6.0))), dt))
        return g.node(act, [x, "clip_lo", "clip_hi"], y)
    attrs = {"LeakyRelu": {"alpha": 0.1}, "HardSigmoid": {"alpha": 0.3, "beta": 0.4}}.get(act, {})
    return g.node(act, [x], y, **attrs)


def concat_parts(
    draw: Callable, st: Any, n: int, min_rank: int = 1
) -> tuple[tuple[int, ...], int, list[tuple[int, ...]]]:
    """A base shape, an axis, and n shapes that differ from it only along the axis."""
    base = draw(shapes(min_rank, 4, 3))
    axis = draw(st.integers(0, len(base) - 1))
    sizes = [draw(st.integers(1, 3)) for _ in range(n)]
    return base, axis, [base[:axis] + (s,) + base[axis + 1 :] for s in sizes]
