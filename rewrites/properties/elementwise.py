"""Hypothesis properties of the elementwise rules (rewrites/elementwise.py): for each rule, a strategy of small graphs
where its guard holds (`RuleCase`), checked by tests/test_rules_elementwise.py and `eqsat check-rules`."""

from __future__ import annotations

import math

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from eqsat.testing.cases import DrawnGraph, RuleCase, rule_case
from eqsat.testing.draw import CONST_LAST, neutral_element
from eqsat.testing.models import numpy_dtype
from eqsat.testing.strategies import arrays, broadcastable_shapes, float_arrays, shapes

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


@rule_case
def _div_const_to_mul(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3))
    dtype = draw(st.sampled_from(("FLOAT", "FLOAT16", "DOUBLE")))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(dtype, shape)))
    c_shape = draw(broadcastable_shapes(shape))
    if dtype == "FLOAT16":  # float16 tensors may hold overflowing divisors: single elements only
        c_shape = (1,) * len(c_shape)
    c = draw(float_arrays(c_shape, numpy_dtype(dtype), 0.5, 4.0))
    if c.size == 1 and _power_of_two(float(c.reshape(-1)[0])):  # div-pow2-to-mul's (exact) case
        c = (c * 1.5).astype(c.dtype)
    if draw(st.booleans()):
        c = -c
    if c.size > 1 and draw(st.integers(0, 3)) == 0:  # zeros: x / 0 = x * inf (NaN and inf alike)
        c.reshape(-1)[0] = 0.0
        g.feeds[x].reshape(-1)[0] = 0.0
    g.inits["c"] = c
    g.node("Div", [x, "c"], "y")
    return g.case("div-const-to-mul", ["y"])


def _power_of_two(v: float) -> bool:
    return v != 0 and math.frexp(abs(v))[0] == 0.5


@rule_case
def _div_pow2_to_mul(draw: Callable, st: Any) -> RuleCase:
    """x / +-2^k for a single-element c (any rank up to x's): the product x * 2^-k, bit for bit."""
    shape = draw(shapes(1, 4, 3))
    dtype = draw(st.sampled_from(("FLOAT", "FLOAT16", "DOUBLE")))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(dtype, shape)))
    k = draw(st.integers(-12, 12))  # 2^+-12 and its reciprocal are normal in float16 too
    c = np.full((1,) * draw(st.integers(0, len(shape))), 2.0**k * draw(st.sampled_from((1.0, -1.0))))
    g.inits["c"] = c.astype(numpy_dtype(dtype))
    g.node("Div", [x, "c"], "y")
    return g.case("div-pow2-to-mul", ["y"])


@rule_case
def _neg_neg(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(0, 4, 3))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT32", "INT8"))), shape)))
    g.node("Neg", [g.node("Neg", [x], "n1")], "y")
    return g.case("neg-neg", ["y"])


@rule_case
def _where_not_swap(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64"))), shape)))
    if draw(st.booleans()):  # a condition computed in the graph, or a BOOL input
        g.inits["zero"] = np.zeros((), g.feeds[x].dtype)
        c = g.node(draw(st.sampled_from(("Greater", "Less", "Equal"))), [x, "zero"], "c")
    else:
        c = g.input("c", draw(arrays("BOOL", draw(broadcastable_shapes(shape)))))
    b_shape = draw(broadcastable_shapes(shape))
    g.inits["b"] = draw(arrays(g.feeds[x].dtype, b_shape))
    g.node(
        "Where", [g.node("Not", [c], "n"), x, "b"] if draw(st.booleans()) else [g.node("Not", [c], "n"), "b", x], "y"
    )
    return g.case("where-not-swap", ["y"])


@rule_case
def _logical_self(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(0, 4, 3))
    g = DrawnGraph()
    a = g.input("a", draw(arrays("BOOL", shape)))
    if draw(st.booleans()):
        a = g.node("Not", [a], "n")
    g.node(draw(st.sampled_from(("And", "Or"))), [a, a], "y")
    return g.case("logical-self", ["y"])


@rule_case
def _mul_scalar_reassoc(draw: Callable, st: Any) -> RuleCase:
    """a * (b * c) or (a * c) * b (each product either operand order) for a single-element c (in FLOAT16 one of
    magnitude >= 1: a smaller one could make a * b overflow; integers wrap, and associate exactly)."""
    shape = draw(shapes(0, 4, 3))
    dtype = draw(st.sampled_from(("FLOAT", "DOUBLE", "FLOAT16", "INT32")))
    g = DrawnGraph()
    a = g.input("a", draw(arrays(dtype, shape, -4, 4)))
    b = g.input("b", draw(arrays(dtype, shape, -4, 4)))
    factors = {"FLOAT16": (-3.0, 2.0), "INT32": (3, -2)}.get(dtype, (0.5, -3.0, 0.7071))
    g.inits["c"] = np.full((1,) * draw(st.integers(0, len(shape))), draw(st.sampled_from(factors)), numpy_dtype(dtype))
    inner_b = draw(st.booleans())
    m = g.node("Mul", [b if inner_b else a, "c"] if draw(st.booleans()) else ["c", b if inner_b else a], "m")
    other = a if inner_b else b
    g.node("Mul", [other, m] if draw(st.booleans()) else [m, other], "y")
    return g.case("mul-scalar-reassoc", ["y"], also=CONST_LAST)


@rule_case
def _add_scaled_last(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(0, 4, 3))
    dtype = draw(st.sampled_from(("FLOAT", "FLOAT16", "INT32")))
    g = DrawnGraph()
    p = g.input("p", draw(arrays(dtype, shape, -4, 4)))
    x = g.input("x", draw(arrays(dtype, shape, -4, 4)))
    g.inits["c"] = np.full((1,) * draw(st.integers(0, len(shape))), 3, numpy_dtype(dtype))
    pc = g.node("Mul", [p, "c"] if draw(st.booleans()) else ["c", p], "pc")
    g.node("Add", [pc, x], "y")
    return g.case("add-scaled-last", ["y"], also=CONST_LAST)


#: rule name -> strategy of graphs where the rule fires; one case in four is also checked with symbolic dims.
PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "div-const-to-mul": _div_const_to_mul,
    "div-pow2-to-mul": _div_pow2_to_mul,
    "sub-zero": neutral_element("sub-zero", "Sub", 0.0, commutative=False),
    "div-one": neutral_element("div-one", "Div", 1.0, commutative=False),
    "neg-neg": _neg_neg,
    "where-not-swap": _where_not_swap,
    "logical-self": _logical_self,
    "mul-neg-one": neutral_element("mul-neg-one", "Mul", -1.0),
    "mul-scalar-reassoc": _mul_scalar_reassoc,
    "add-scaled-last": _add_scaled_last,
    "pow-one": neutral_element(
        "pow-one",
        "Pow",
        1.0,
        commutative=False,
        dtypes=("FLOAT", "DOUBLE", "INT32", "INT64"),
        k_dtypes=("FLOAT", "INT64", "INT32"),
    ),
    "or-false": neutral_element("or-false", "Or", 0.0, dtypes=("BOOL",)),
    "and-true": neutral_element("and-true", "And", 1.0, dtypes=("BOOL",)),
}
