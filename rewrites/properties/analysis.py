"""Hypothesis properties of the analysis rules (rewrites/analysis.py): for each rule, a strategy of small graphs
where its guard holds (`RuleCase`), checked by tests/test_rules_analysis.py and `eqsat check-rules`."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import onnx.helper as oh

from eqsat.testing.cases import DrawnGraph, RuleCase, rule_case
from eqsat.testing.draw import SANDWICH_RULES, binary_const, concat_parts, draw_unary, transpose_node
from eqsat.testing.strategies import float_arrays, inverse, perms, shapes
from eqsat.rewrites.properties import activation, layout, reduce

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


def _analysis_case(rule: str, kind: str) -> Callable[[], "SearchStrategy[RuleCase]"]:
    """Graphs where a rewrite needs a fact that only the analysis rule `rule` derives (see the docs of
    tests/test_rules_analysis.py): a sunk unary (shape-unary), a sunk binary (shape-binary), a transposed
    constant created by a rewrite (shape-transpose, constant-terms)."""

    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        p = draw(perms(len(shape)))
        t_shape = tuple(shape[i] for i in p)
        g = DrawnGraph()
        also: tuple[str, ...] = ("transpose-sink-binary-const", *SANDWICH_RULES)
        back = inverse(p)
        if kind == "unary":
            x = g.input("x", draw(float_arrays(shape)))
            g.nodes.append(transpose_node(x, "t", p))
            draw_unary(draw, g, "t", "u", st)
            if g.nodes[-1].op_type == "Cast" or g.nodes[-1].op_type == "IsNaN":
                g.nodes[-1] = oh.make_node("Relu", ["t"], ["u"])
            binary_const(draw, st, g, "u", t_shape, "m")
            also += ("transpose-sink-unary",)
        elif kind == "binary":
            op = draw(st.sampled_from(("Add", "Sub", "Mul", "Div")))  # shape-binary needs equal shapes
            g.input("a", draw(float_arrays(shape)))
            g.input("b", draw(float_arrays(shape, low=0.5) if op == "Div" else float_arrays(shape)))
            g.nodes += [transpose_node("a", "ta", p), transpose_node("b", "tb", p)]
            g.node(op, ["ta", "tb"], "u")
            binary_const(draw, st, g, "u", t_shape, "m")
            also += ("transpose-sink-binary",)
        else:  # a constant transposed by one sinking step is sunk again through a second transpose
            q = draw(perms(len(shape)))
            x = g.input("x", draw(float_arrays(shape)))
            g.nodes += [transpose_node(x, "t0", q), transpose_node("t0", "t", p)]
            qp_shape = tuple(shape[q[i]] for i in p)
            binary_const(draw, st, g, "t", qp_shape, "m")
            also = ("transpose-sink-binary-const",)
            back = inverse(tuple(q[i] for i in p))
        g.nodes.append(transpose_node("m", "y", back))
        return g.case(rule, ["y"], also=also)

    return strategy


@rule_case
def _shape_concat_split(draw: Callable, st: Any) -> RuleCase:
    base, axis, shps = concat_parts(draw, st, 2)
    g = DrawnGraph()
    names = [g.input(f"x{k}", draw(float_arrays(s))) for k, s in enumerate(shps)]
    g.node("Concat", names, "y", axis=axis)
    return g.case("shape-concat-split", ["y"])


@rule_case
def _splat_facts(draw: Callable, st: Any) -> RuleCase:
    """x op k, k a single-element neutral element (Add 0, Mul 1) that does not grow x: the identity rule needs
    the splat fact this rule gives a Scalar."""
    shape = draw(shapes(1, 4, 3))
    op, value = draw(st.sampled_from((("Add", 0.0), ("Mul", 1.0))))
    g = DrawnGraph()
    x = g.input("x", draw(float_arrays(shape)))
    g.inits["k"] = np.full((1,) * draw(st.integers(0, len(shape))), value, np.float32)
    g.node(op, [x, "k"], "y")
    return g.case("splat-facts", ["y"], also=("add-zero", "mul-one"))


@rule_case
def _list_functions(draw: Callable, st: Any) -> RuleCase:
    """A rewrite that reads functions of lists (sorted merged axes, a product of reduced dims): two Squeezes
    that both list axes (the axes-less outer Squeeze merges without them), two Unsqueezes, a sum over a count."""
    case = draw(
        st.one_of(
            layout.PROPERTIES["squeeze-merge"](),
            layout.PROPERTIES["unsqueeze-merge"](),
            reduce.PROPERTIES["reducesum-div-to-mean"](),
        ).filter(lambda c: all(len(n.input) == 2 or n.attribute for n in c.model.graph.node if n.op_type == "Squeeze"))
    )
    return dataclasses.replace(case, rule="list-functions", also=(case.rule, *case.also))


@rule_case
def _facts_agree(draw: Callable, st: Any) -> RuleCase:
    """A graph whose rewrites give classes second shape facts (a sunk unary): each is checked against the first
    (rank and static dims), and the result stays equal to the input."""
    case = draw(_analysis_case("shape-unary", "unary")())
    return dataclasses.replace(case, rule="shape-facts-agree", also=(case.rule, *case.also))


@rule_case
def _reshape_facts(draw: Callable, st: Any) -> RuleCase:
    """Reshape(Transpose(Reshape(x))) that reshape-transpose-reshape makes one Transpose: it reads both reshapes
    through reshape-of."""
    case = draw(layout.PROPERTIES["reshape-transpose-reshape"]())
    return dataclasses.replace(case, rule="reshape-facts", also=(case.rule, *case.also))


@rule_case
def _operand_orders(draw: Callable, st: Any) -> RuleCase:
    """A fusion that reads products and sums in either operand order through mul-of and add-of: PRelu from
    Relu(x) -/+ a * Relu(-x), LeakyRelu from Max(x, a x), HardSwish from x relu6(x + 3) / 6."""
    case = draw(
        st.one_of(
            activation.PROPERTIES["prelu-from-relu"](),
            activation.PROPERTIES["leakyrelu-from-max"](),
            activation.PROPERTIES["hardswish-fuse"](),
        )
    )
    return dataclasses.replace(case, rule="operand-orders", also=(case.rule, *case.also))


#: rule name -> strategy of graphs where the rule fires; one case in four is also checked with symbolic dims.
PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "shape-unary": _analysis_case("shape-unary", "unary"),
    "shape-binary": _analysis_case("shape-binary", "binary"),
    "shape-transpose": _analysis_case("shape-transpose", "transposed-constant"),
    "constant-terms": _analysis_case("constant-terms", "transposed-constant"),
    "splat-facts": _splat_facts,
    "list-functions": _list_functions,
    "shape-facts-agree": _facts_agree,
    "reshape-facts": _reshape_facts,
    "operand-orders": _operand_orders,
}
#: Properties checked with static shapes only.
STATIC_PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "shape-concat-split": _shape_concat_split,
}
