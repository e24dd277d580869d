"""Hypothesis properties of the cleanup rules (rewrites/cleanup.py): for each rule, a strategy of small graphs
where its guard holds (`RuleCase`), checked by tests/test_rules_cleanup.py and `eqsat check-rules`."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from eqsat.ops import IDEMPOTENT
from eqsat.testing.cases import DrawnGraph, RuleCase, feeding, rule_case
from eqsat.testing.draw import neutral_element
from eqsat.testing.strategies import arrays, float_arrays, shapes

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


@rule_case
def _repeated(draw: Callable, st: Any, rule: str, dtypes: dict[str, tuple[str, ...]]) -> RuleCase:
    """f(f(x)), or f applied three times, for an op f of `dtypes` over one of its dtypes (float values may be
    halves: Round's ties to even)."""
    op = draw(st.sampled_from(list(dtypes)))
    shape = draw(shapes(0, 4, 3))
    g = DrawnGraph()
    values = draw(arrays(draw(st.sampled_from(dtypes[op])), shape))
    if values.dtype.kind == "f" and draw(st.booleans()):
        values = (np.round(values * 2) / 2).astype(values.dtype)
    prev = g.input("x", values)
    for k in range(draw(st.integers(2, 3))):
        prev = g.node(op, [prev], f"f{k}")
    return g.case(rule, [prev])


@rule_case
def _identity_remove(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(0, 4, 3))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64", "BOOL"))), shape)))
    if draw(st.booleans()):  # an output that is an input, under another name
        return g.case("identity-remove", [g.node("Identity", [x], "y")])
    r = g.node("Not" if g.feeds[x].dtype == np.bool_ else "Abs", [x], "r")
    return g.case("identity-remove", [r, g.node("Identity", [r], "y")])


@rule_case
def _dropout_remove(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3))
    g = DrawnGraph()
    x = g.input("x", draw(float_arrays(shape)))
    if draw(st.booleans()):
        x = g.node("Relu", [x], "r")
    g.node("Dropout", [x], "y")
    return g.case("dropout-remove", ["y"], opset=draw(st.sampled_from((7, 10, 11))))


@rule_case
def _expand_noop(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3, min_dim=2))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64", "BOOL"))), shape)))
    # a target other than x's own shape (the folder already removes that one): ones of some rank <= x's
    g.inits["shape"] = np.ones(draw(st.integers(1, len(shape))), np.int64)
    g.node("Expand", [x, "shape"], "y")
    return g.case("expand-noop", ["y"])


@rule_case
def _reshape_noop(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3))
    g = DrawnGraph()
    x = g.input("x", draw(arrays("FLOAT", shape)))
    target = list(shape)  # x's own shape with a -1 (and maybe a 0: copies the input dim); the folder
    target[draw(st.integers(0, len(shape) - 1))] = -1  # removes a Reshape to the literal same shape
    if len(shape) > 1 and draw(st.booleans()):
        target[[i for i, d in enumerate(target) if d != -1][0]] = 0
    g.inits["shape"] = np.array(target, np.int64)
    g.node("Relu", [g.node("Reshape", [x, "shape"], "r")], "y")
    return g.case("reshape-noop", ["y"])


@rule_case
def _pad_noop(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3, min_dim=2))
    g = DrawnGraph()
    x = g.input("x", draw(float_arrays(shape)))
    g.inits["pads"] = np.zeros(2 * len(shape), np.int64)
    g.node("Pad", [x, "pads"], "y", mode=draw(st.sampled_from(("constant", "reflect", "edge"))))
    return g.case("pad-noop", ["y"])


@rule_case
def _slice_noop(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3))
    rank = len(shape)
    axes = sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank)))
    g = DrawnGraph()
    x = g.input("x", draw(float_arrays(shape)))
    with_axes = draw(st.booleans())
    if not with_axes:  # without an axes input, starts/ends apply to the first len(axes) axes
        axes = list(range(len(axes)))
    g.inits["starts"] = np.array([draw(st.sampled_from((0, -shape[a] - 5))) for a in axes], np.int64)
    g.inits["ends"] = np.array(
        [draw(st.sampled_from((shape[a], 1000, np.iinfo(np.int64).max))) for a in axes], np.int64
    )
    inputs = [x, "starts", "ends"]
    if with_axes:
        g.inits["axes"] = np.array([a - rank if draw(st.booleans()) else a for a in axes], np.int64)
        inputs.append("axes")
        if draw(st.booleans()):
            g.inits["steps"] = np.ones(len(axes), np.int64)
            inputs.append("steps")
    g.node("Slice", inputs, "y")
    return g.case("slice-noop", ["y"])


def _pad_merge(rule: str, mode: str) -> Callable[[], Any]:
    """Two Pads of `mode` with non-negative pads (constant mode: sometimes with an explicit pad value; edge mode:
    at opset 13 or 18)."""

    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        rank = len(shape)
        g = DrawnGraph()
        x = g.input("x", draw(float_arrays(shape)))
        g.inits["p"] = np.array([draw(st.integers(0, 2)) for _ in range(2 * rank)], np.int64)
        g.inits["q"] = np.array([draw(st.integers(0, 2)) for _ in range(2 * rank)], np.int64)
        inputs = ([x, "p"], ["p1", "q"])
        if mode == "constant" and draw(st.booleans()):
            g.inits["v"] = np.array(draw(st.sampled_from((0.0, 1.5, -3.0))), np.float32)
            inputs = ([x, "p", "v"], ["p1", "q", "v"])
        g.node("Pad", inputs[0], "p1", mode=mode)
        g.node("Pad", inputs[1], "y", mode=mode)
        if mode == "constant":
            return g.case(rule, ["y"])
        return g.case(rule, ["y"], opset=draw(st.sampled_from((13, 18))))

    return strategy


@rule_case
def _reshape_merge(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3))
    size = int(np.prod(shape))
    g = DrawnGraph()
    x = g.input("x", draw(float_arrays(shape)))
    g.inits["s1"] = np.array(draw(st.sampled_from(([-1], [1, -1], [-1, 1, 1]))), np.int64)
    second = list(draw(st.sampled_from(([size, -1], [-1], [1, -1], [0, -1], list(shape)))))  # 0: copies r1's dim 0
    second[-1] = -1  # never literally the inner output's shape (the folder removes that Reshape itself)
    g.inits["s2"] = np.array(second, np.int64)
    g.node("Reshape", [g.node("Reshape", [x, "s1"], "r1"), "s2"], "y")
    return g.case("reshape-merge", ["y"])


@rule_case
def _pad_merge_reflect(draw: Callable, st: Any) -> RuleCase:
    """Two reflect Pads on disjoint sets of axes (each pad below its dim, as reflect needs), opset 13 or 18."""
    shape = draw(shapes(2, 4, 4, min_dim=2))
    rank = len(shape)
    first = draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank - 1))
    second = draw(st.sets(st.sampled_from([a for a in range(rank) if a not in first]), min_size=1))
    g = DrawnGraph()
    x = g.input("x", draw(float_arrays(shape)))
    for name, axes in (("p", first), ("q", second)):  # a pad of 1 to dim - 1 before, 0 to dim - 1 after
        begin = [draw(st.integers(1, shape[a] - 1)) if a in axes else 0 for a in range(rank)]
        end = [draw(st.integers(0, shape[a] - 1)) if a in axes else 0 for a in range(rank)]
        g.inits[name] = np.array(begin + end, np.int64)
    g.node("Pad", [g.node("Pad", [x, "p"], "p1", mode="reflect"), "q"], "y", mode="reflect")
    return g.case("pad-merge-reflect", ["y"], opset=draw(st.sampled_from((13, 18))))


@rule_case
def _reshape_view_merge(draw: Callable, st: Any) -> RuleCase:
    """Reshape then Squeeze / Unsqueeze, or Squeeze / Unsqueeze then Reshape, with Reshape targets using -1 and
    0 (copy) entries; opset 13 (axes as inputs) or 11 (attributes)."""
    shape = draw(shapes(1, 3, 4))
    rank = len(shape)
    kind = draw(st.sampled_from(("reshape-squeeze", "reshape-unsqueeze", "squeeze-reshape", "unsqueeze-reshape")))
    opset = draw(st.sampled_from((11, 13)))
    g = DrawnGraph()
    pos = draw(st.integers(0, rank))

    def axes_node(op: str, x: str, axis: int, out: str) -> str:
        if opset >= 13:
            g.inits[f"{out}_axes"] = np.array([axis], np.int64)
            return g.node(op, [x, f"{out}_axes"], out)
        return g.node(op, [x], out, axes=[axis])

    def reshape(x: str, target: list[int], out: str) -> str:
        g.inits[f"{out}_shape"] = np.array(target, np.int64)
        return g.node("Reshape", [x, f"{out}_shape"], out)

    if kind == "squeeze-reshape":
        x = g.input("x", draw(float_arrays(shape[:pos] + (1,) + shape[pos:])))
        y = reshape(axes_node("Squeeze", x, pos, "v"), [-1] + ([1] if draw(st.booleans()) else []), "y")
    elif kind == "unsqueeze-reshape":
        x = g.input("x", draw(float_arrays(shape)))
        y = reshape(axes_node("Unsqueeze", x, 0, "v"), [0, -1], "y")  # 0 copies the new axis of 1
    else:
        x = g.input("x", draw(float_arrays(shape)))
        target = [0] * min(pos, rank) + [-1]  # copies of x's leading dims, the rest flattened
        target.insert(len(target) - 1 if kind == "reshape-squeeze" else len(target), 1)
        r = reshape(x, target, "r")
        out_rank = len(target)
        y = axes_node(
            "Squeeze" if kind == "reshape-squeeze" else "Unsqueeze",
            r,
            target.index(1) if kind == "reshape-squeeze" else draw(st.integers(0, out_rank)),
            "y",
        )
    return g.case("reshape-view-merge", [y], opset=opset)


@rule_case
def _flatten_noop(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(2, 2, 4))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64", "BOOL"))), shape)))
    axis = draw(st.sampled_from((1, -1)))  # -1 is 1 at rank 2
    g.node("Flatten", [x], "y", axis=axis)
    return g.case("flatten-noop", ["y"], opset=draw(st.sampled_from((11, 13, 17))))


@rule_case
def _split_noop(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3))
    rank = len(shape)
    axis = draw(st.integers(-rank, rank - 1))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64"))), shape)))
    opset = draw(st.sampled_from((11, 13, 18)))
    sized = draw(st.booleans())
    if opset >= 13 and sized:
        g.inits["sizes"] = np.array([shape[axis]], np.int64)
        g.node("Split", [x, "sizes"], "s", axis=axis)
    elif sized:
        g.node("Split", [x], "s", axis=axis, split=[shape[axis]])
    else:
        g.node("Split", [x], "s", axis=axis, **({"num_outputs": 1} if opset >= 18 else {}))
    g.node("Neg", ["s"], "y")
    return g.case("split-noop", ["y"], opset=opset)


#: rule name -> strategy of graphs where the rule fires; one case in four is also checked with symbolic dims.
PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "relu-merge": functools.partial(_repeated, "relu-merge", {"Relu": ("FLOAT", "FLOAT16", "DOUBLE", "INT32")}),
    "idempotent-merge": functools.partial(
        _repeated,
        "idempotent-merge",
        {
            op: ("FLOAT", "FLOAT16", "DOUBLE") + (("INT32", "INT64") if op in ("Sign", "Abs") else ())
            for op in IDEMPOTENT
        },
    ),
    "flatten-noop": _flatten_noop,
    "split-noop": _split_noop,
    "mul-one": neutral_element("mul-one", "Mul", 1.0),
    "add-zero": neutral_element("add-zero", "Add", 0.0),
    "identity-remove": _identity_remove,
    "dropout-remove": _dropout_remove,
    "expand-noop": _expand_noop,
    "reshape-noop": _reshape_noop,
    "pad-noop": _pad_noop,
    "slice-noop": _slice_noop,
    "pad-merge": _pad_merge("pad-merge", "constant"),
    "pad-merge-edge": _pad_merge("pad-merge-edge", "edge"),
    "pad-merge-sums": feeding(_pad_merge("pad-merge", "constant"), "pad-merge-sums"),
    "pad-merge-reflect": _pad_merge_reflect,
    "pad-merge-reflect-site": feeding(_pad_merge_reflect, "pad-merge-reflect-site"),
    "reshape-view-merge": _reshape_view_merge,
    "reshape-view-merge-site": feeding(_reshape_view_merge, "reshape-view-merge-site"),
    "reshape-merge": _reshape_merge,
}
