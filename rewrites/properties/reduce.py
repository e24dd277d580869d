"""Hypothesis properties of the reduce rules (rewrites/reduce.py): for each rule, a strategy of small graphs
where its guard holds (`RuleCase`), checked by tests/test_rules_reduce.py and `eqsat check-rules`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from eqsat.testing.cases import DrawnGraph, RuleCase, rule_case
from eqsat.testing.draw import CONST_LAST, float_input
from eqsat.testing.models import numpy_dtype

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


#: rule name -> strategy of graphs where the rule fires; one case in four is also checked with symbolic dims.
PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "reducesum-mul-to-mean": _reduce_sum("reducesum-mul-to-mean"),
    "reducesum-div-to-mean": _reduce_sum("reducesum-div-to-mean"),
    "reducemean-to-global-pool": _global_pool("reducemean-to-global-pool"),
    "global-pool-to-reducemean": _global_pool("global-pool-to-reducemean"),
}
