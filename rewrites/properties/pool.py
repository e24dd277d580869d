"""Hypothesis properties of the pool rules (rewrites/pool.py): for each rule, a strategy of small graphs where its
guard holds (`RuleCase`), checked by tests/test_rules_pool.py and `eqsat check-rules`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from eqsat.testing.cases import DrawnGraph, RuleCase, feeding, rule_case
from eqsat.testing.models import numpy_dtype
from eqsat.testing.strategies import float_arrays

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


def _pad_pool(rule: str) -> Callable[[], Any]:
    """x (N, C, spatial...) -> Pad (spatial only, zero or -inf) -> AveragePool(count_include_pad=1) or MaxPool,
    with or without pads of its own; every summed pad below the kernel size. Values in [-4, 4]: windows whose
    values are all negative are common (where a zero pad would win a max)."""

    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        n = draw(st.integers(1, 3))
        kernel = [draw(st.integers(2, 3)) for _ in range(n)]
        spatial = [draw(st.integers(k, k + 3)) for k in kernel]
        dtype = draw(st.sampled_from(("FLOAT", "FLOAT", "DOUBLE")))
        g = DrawnGraph()
        x = g.input(
            "x",
            draw(
                float_arrays(
                    (draw(st.integers(1, 2)), draw(st.integers(1, 3)), *spatial), numpy_dtype(dtype), -4.0, 4.0
                )
            ),
        )
        own = [draw(st.integers(0, k - 1)) for k in kernel * 2] if draw(st.booleans()) else None
        have = own or [0] * (2 * n)
        extra = [draw(st.integers(0, kernel[i % n] - 1 - have[i])) for i in range(2 * n)]
        pads = [0, 0, *extra[:n], 0, 0, *extra[n:]]
        value = 0.0 if rule == "pad-avgpool-merge" else -np.inf
        opset = draw(st.sampled_from((10, 11, 13, 18)))
        if opset >= 11:
            g.inits["pads"] = np.array(pads, np.int64)
            inputs = [x, "pads"]
            if value != 0.0 or draw(st.booleans()):
                g.inits["value"] = np.array(value, numpy_dtype(dtype))
                inputs.append("value")
            g.node("Pad", inputs, "p", mode="constant")
        else:
            g.node("Pad", [x], "p", pads=pads, mode="constant", value=value)
        attrs: dict[str, Any] = {"kernel_shape": kernel}
        if own is not None:
            attrs["pads"] = own
        if draw(st.booleans()):
            attrs["strides"] = [draw(st.integers(1, 2)) for _ in range(n)]
        if rule == "pad-avgpool-merge":
            g.node("AveragePool", ["p"], "y", count_include_pad=1, **attrs)
        else:
            g.node("MaxPool", ["p"], "y", **attrs)
        return g.case(rule, ["y"], opset=opset)

    return strategy


#: rule name -> strategy of graphs where the rule fires; one case in four is also checked with symbolic dims.
PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "pad-avgpool-merge": _pad_pool("pad-avgpool-merge"),
    "pad-maxpool-merge": _pad_pool("pad-maxpool-merge"),
    "pad-pool-sites": feeding(_pad_pool("pad-avgpool-merge"), "pad-pool-sites"),
}
