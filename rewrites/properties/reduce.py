"""Hypothesis properties of the reduce rules (rewrites/reduce.py): for each rule, a strategy of small graphs
where its guard holds (`RuleCase`), checked by tests/test_rules_reduce.py and `eqsat check-rules`."""

from __future__ import annotations

import functools

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from eqsat.ops import AXES_REDUCTIONS, ELEMENT_REDUCTIONS, POINTWISE_REDUCTIONS
from eqsat.testing.cases import DrawnGraph, RuleCase, feeding, rule_case
from eqsat.testing.draw import CONST_LAST, float_input
from eqsat.testing.models import numpy_dtype
from eqsat.testing.strategies import float_arrays

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


def _reduce_sum(rule: str) -> Callable[[], Any]:
    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        rank = draw(st.integers(1, 4))
        shape = tuple(draw(st.integers(1, 4)) for _ in range(rank))
        dtype = draw(st.sampled_from(("FLOAT", "FLOAT", "DOUBLE")))
        axes = sorted(draw(st.sets(st.integers(0, rank - 1), max_size=rank)))
        count = int(np.prod([shape[a] for a in axes] if axes else shape))
        g = DrawnGraph()
        x = float_input(draw, g, "x", shape, dtype)
        keepdims = int(draw(st.booleans()))
        opset = draw(st.sampled_from((11, 13, 18)))
        listed = [a - rank if draw(st.booleans()) else a for a in axes]  # negative axes are normalized
        if opset >= 13:
            inputs = [x]
            if axes:
                g.inits["axes"] = np.array(listed, np.int64)
                inputs.append("axes")
            g.node("ReduceSum", inputs, "rs", keepdims=keepdims)
        else:
            g.node("ReduceSum", [x], "rs", keepdims=keepdims, **({"axes": listed} if axes else {}))
        if rule == "reducesum-mul-to-mean":
            g.inits["k"] = np.array(1.0 / count, numpy_dtype(dtype))
            g.node("Mul", ["rs", "k"] if draw(st.booleans()) else ["k", "rs"], "y")
        else:
            g.inits["k"] = np.array(count, numpy_dtype(dtype))
            g.node("Div", ["rs", "k"], "y")
        return g.case(rule, ["y"], also=CONST_LAST, opset=opset)

    return strategy


def _global_pool(rule: str) -> Callable[[], Any]:
    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        rank = draw(st.integers(3, 5))
        shape = tuple(draw(st.integers(1, 4)) for _ in range(rank))
        dtype = draw(st.sampled_from(("FLOAT", "FLOAT", "FLOAT16", "DOUBLE")))
        g = DrawnGraph()
        x = float_input(draw, g, "x", shape, dtype)
        opset = draw(st.sampled_from((13, 17, 18)))
        keepdims = draw(st.sampled_from((1, 1, 0)))  # 0: the pool flattened to (N, C)
        if rule == "global-pool-to-reducemean":
            g.node("GlobalAveragePool", [x], "y")
        elif opset >= 18:
            g.inits["axes"] = np.array(list(range(2, rank)), np.int64)
            g.node("ReduceMean", [x, "axes"], "y", keepdims=keepdims)
        else:
            g.node("ReduceMean", [x], "y", axes=list(range(2, rank)), keepdims=keepdims)
        return g.case(rule, ["y"], opset=opset)

    return strategy


_REDUCTIONS = AXES_REDUCTIONS


@rule_case
def _reduce_unsqueeze(draw: Callable, st: Any) -> RuleCase:
    op = draw(st.sampled_from(_REDUCTIONS))
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    dtype = draw(st.sampled_from(("FLOAT", "FLOAT", "DOUBLE")))
    g = DrawnGraph()
    low = 0.25 if op in ("ReduceLogSum", "ReduceProd") else -4.0  # a positive sum (log); a moderate product
    x = g.input("x", draw(float_arrays(shape, numpy_dtype(dtype), low, 2.0 if op == "ReduceProd" else 4.0)))
    opset = draw(st.sampled_from((11, 13, 18)))
    axes = sorted(draw(st.sets(st.integers(0, rank - 1), max_size=rank)))
    listed = [a - rank if draw(st.booleans()) else a for a in axes]
    as_input = opset >= (13 if op == "ReduceSum" else 18)
    if as_input:
        inputs = [x]
        if axes:
            g.inits["axes"] = np.array(listed, np.int64)
            inputs.append("axes")
        g.node(op, inputs, "r", keepdims=0)
    else:
        g.node(op, [x], "r", keepdims=0, **({"axes": listed} if axes else {}))
    back = axes or list(range(rank))  # no axes: every axis reduced, every axis restored
    back = [a - rank if draw(st.booleans()) else a for a in back]
    if opset >= 13:
        g.inits["uaxes"] = np.array(back, np.int64)
        g.node("Unsqueeze", ["r", "uaxes"], "y")
    else:
        g.node("Unsqueeze", ["r"], "y", axes=back)
    return g.case("reduce-unsqueeze-fuse", ["y"], opset=opset)


@rule_case
def _reduce_unit_axes(draw: Callable, st: Any, rule: str, ops: tuple[str, ...]) -> RuleCase:
    """A reduction of `ops` with keepdims=1 whose reduced dims are all 1 (no axes: every dim 1); opset 18 with
    noop_with_empty_axes = 0 or 1 written out when axes are listed."""
    op = draw(st.sampled_from(ops))
    rank = draw(st.integers(1, 4))
    axes = sorted(draw(st.sets(st.integers(0, rank - 1), max_size=rank)))
    shape = tuple(1 if (a in axes or not axes) else draw(st.integers(1, 4)) for a in range(rank))
    dtype = draw(st.sampled_from(("FLOAT", "DOUBLE", "FLOAT16")))
    g = DrawnGraph()
    x = float_input(draw, g, "x", shape, dtype)
    opset = draw(st.sampled_from((11, 13, 18)))
    listed = [a - rank if draw(st.booleans()) else a for a in axes]
    if opset >= (13 if op == "ReduceSum" else 18):
        inputs = [x]
        if axes:
            g.inits["axes"] = np.array(listed, np.int64)
            inputs.append("axes")
        noop = {"noop_with_empty_axes": draw(st.sampled_from((0, 1)))} if axes and draw(st.booleans()) else {}
        g.node(op, inputs, "y", keepdims=1, **noop)
    else:
        g.node(op, [x], "y", keepdims=1, **({"axes": listed} if axes else {}))
    return g.case(rule, ["y"], opset=opset)


@rule_case
def _argmax_monotone(draw: Callable, st: Any) -> RuleCase:
    """Distinct values (a permutation of a grid spanning at most 16): no float ties after Exp or Softmax."""
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    dtype = draw(st.sampled_from(("FLOAT", "DOUBLE")))
    size = int(np.prod(shape))
    order = np.array(draw(st.permutations(range(size))), np.float64)
    values = ((order - size / 2) * min(0.5, 16.0 / size)).reshape(shape).astype(numpy_dtype(dtype))
    g = DrawnGraph()
    x = g.input("x", values)
    axis = draw(st.integers(-rank, rank - 1))
    f = draw(st.sampled_from(("Exp", "Softmax", "LogSoftmax")))
    fx = g.node(f, [x], "f", **({"axis": axis} if f != "Exp" else {}))
    arg_axis = axis if f != "Exp" else draw(st.integers(-rank, rank - 1))
    attrs = {"keepdims": draw(st.sampled_from((0, 1)))}
    opset = draw(st.sampled_from((13, 17)))
    if draw(st.booleans()):
        attrs["select_last_index"] = 1
    g.node(draw(st.sampled_from(("ArgMax", "ArgMin"))), [fx], "y", axis=arg_axis, **attrs)
    return g.case("argmax-monotone", ["y"], allow=("precision-changing",), opset=opset)


#: rule name -> strategy of graphs where the rule fires; one case in four is also checked with symbolic dims.
PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "reducesum-mul-to-mean": _reduce_sum("reducesum-mul-to-mean"),
    "reducesum-div-to-mean": _reduce_sum("reducesum-div-to-mean"),
    "reducemean-to-global-pool": _global_pool("reducemean-to-global-pool"),
    "global-pool-to-reducemean": _global_pool("global-pool-to-reducemean"),
    "reduce-unsqueeze-fuse": _reduce_unsqueeze,
    "reduce-unit-axes": functools.partial(_reduce_unit_axes, "reduce-unit-axes", ELEMENT_REDUCTIONS),
    "reduce-sizes": feeding(
        functools.partial(_reduce_unit_axes, "reduce-unit-axes", ELEMENT_REDUCTIONS), "reduce-sizes"
    ),
    "reduce-unit-axes-pointwise": functools.partial(
        _reduce_unit_axes, "reduce-unit-axes-pointwise", tuple(POINTWISE_REDUCTIONS)
    ),
    "argmax-monotone": _argmax_monotone,
}
