"""Hypothesis properties of the layout rules (rewrites/layout.py): for each rule, a strategy of small graphs
where its guard holds (`RuleCase`), checked by tests/test_rules_layout.py and `eqsat check-rules`."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import onnx.helper as oh

from eqsat.ops import ARITHMETIC, BOOL_BINARY, TRANSPOSE_REDUCTIONS
from eqsat.testing.cases import DrawnGraph, RuleCase, feeding, rule_case
from eqsat.testing.draw import COMPARE_OPS, FLOAT_UNARY, SANDWICH_RULES, binary_const, draw_unary, transpose_node
from eqsat.testing.strategies import arrays, broadcastable_shapes, float_arrays, inverse, perms, shapes

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


@rule_case
def _transpose_merge(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 5, 3))
    p = draw(perms(len(shape)))
    q = draw(st.one_of(st.just(inverse(p)), perms(len(shape))))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64", "BOOL"))), shape)))
    g.nodes += [transpose_node(x, "t", p), transpose_node("t", "y", q)]
    return g.case("transpose-merge", ["y"])


@rule_case
def _transpose_identity(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 6, 3))
    perm: Sequence[int] = range(len(shape))
    if draw(st.booleans()):  # a single-element tensor: any perm
        shape = (1,) * len(shape)
        perm = draw(perms(len(shape)))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT32", "BOOL"))), shape)))
    g.nodes.append(transpose_node(x, "t", perm))
    if draw(st.booleans()):
        return g.case("transpose-identity", [g.node("Not" if g.feeds[x].dtype == np.bool_ else "Abs", ["t"], "y")])
    return g.case("transpose-identity", ["t"])


@rule_case
def _transpose_sink_unary(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3))
    p = draw(perms(len(shape)))
    g = DrawnGraph()
    if draw(st.integers(0, 9)) == 0:
        x = g.input("x", draw(arrays("BOOL", shape)))
        g.nodes.append(transpose_node(x, "t", p))
        g.node("Not", ["t"], "u")
    else:
        x = g.input("x", draw(float_arrays(shape)))
        g.nodes.append(transpose_node(x, "t", p))
        draw_unary(draw, g, "t", "u", st)
    back = draw(st.sampled_from((inverse(p), inverse(p), None)))
    if back is None:
        return g.case("transpose-sink-unary", ["u"], also=SANDWICH_RULES)
    g.nodes.append(transpose_node("u", "y", back))
    return g.case("transpose-sink-unary", ["y"], also=SANDWICH_RULES)


def _binary_operands(draw: Callable, st: Any, shape: tuple[int, ...]) -> tuple[str, str, np.ndarray, np.ndarray]:
    """A drawn binary op and operands of the same rank that broadcast to at most `shape`."""
    family = draw(st.sampled_from(("float", "float", "compare", "logical", "mod")))
    b_shape = draw(broadcastable_shapes(shape, same_rank=True))
    if family == "float":
        op = draw(st.sampled_from(("Add", "Sub", "Mul", "Div", "Pow", "PRelu")))
        a_shape = shape if op == "PRelu" else draw(broadcastable_shapes(shape, same_rank=True))
        return op, "FLOAT", draw(float_arrays(a_shape)), draw(float_arrays(b_shape))
    a_shape = draw(broadcastable_shapes(shape, same_rank=True))
    if family == "compare":
        return (
            draw(st.sampled_from(COMPARE_OPS)),
            "FLOAT",
            draw(arrays("FLOAT", a_shape, -3, 3, integers=True)),
            draw(arrays("FLOAT", b_shape, -3, 3, integers=True)),
        )
    if family == "logical":
        return draw(st.sampled_from(BOOL_BINARY)), "BOOL", draw(arrays("BOOL", a_shape)), draw(arrays("BOOL", b_shape))
    return "Mod", "INT32", draw(arrays("INT32", a_shape, -20, 20)), draw(arrays("INT32", b_shape, 1, 5))


@rule_case
def _transpose_sink_binary(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3))
    p = draw(perms(len(shape)))
    op, _, a, b = _binary_operands(draw, st, shape)
    g = DrawnGraph()
    g.input("a", a)
    g.input("b", b)
    g.nodes += [transpose_node("a", "ta", p), transpose_node("b", "tb", p)]
    g.node(op, ["ta", "tb"], "m")
    if draw(st.integers(0, 3)) == 0:
        return g.case("transpose-sink-binary", ["m"], also=SANDWICH_RULES)
    g.nodes.append(transpose_node("m", "y", inverse(p)))
    return g.case("transpose-sink-binary", ["y"], also=SANDWICH_RULES)


@rule_case
def _transpose_sink_binary_const(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3))
    p = draw(perms(len(shape)))
    g = DrawnGraph()
    integers = draw(st.booleans())
    x = g.input("x", draw(arrays("FLOAT", shape, -4, 4, integers=integers)))
    g.nodes.append(transpose_node(x, "t", p))
    binary_const(draw, st, g, "t", tuple(shape[i] for i in p), "m")
    if draw(st.integers(0, 3)) == 0:
        return g.case("transpose-sink-binary-const", ["m"], also=SANDWICH_RULES)
    g.nodes.append(transpose_node("m", "y", inverse(p)))
    return g.case("transpose-sink-binary-const", ["y"], also=SANDWICH_RULES)


@rule_case
def _transpose_sink_binary_broadcast(draw: Callable, st: Any) -> RuleCase:
    """B(Transpose(x, p), c) or B(c, Transpose(x, p)) for a graph input c of lower rank broadcasting into it."""
    shape = draw(shapes(2, 4, 3))
    p = draw(perms(len(shape)))
    t_shape = tuple(shape[i] for i in p)
    k = draw(st.integers(0, len(shape) - 1))
    c_shape = tuple(1 if draw(st.booleans()) else d for d in t_shape[len(shape) - k :])
    op = draw(st.sampled_from(ARITHMETIC))
    g = DrawnGraph()
    x = g.input("x", draw(float_arrays(shape)))
    c = g.input("c", draw(float_arrays(c_shape, low=0.5, high=2.0)) if op == "Div" else draw(float_arrays(c_shape)))
    g.nodes.append(transpose_node(x, "t", p))
    g.node(op, ["t", c] if draw(st.booleans()) else [c, "t"], "m")
    if draw(st.integers(0, 3)) == 0:
        return g.case("transpose-sink-binary-broadcast", ["m"], also=SANDWICH_RULES)
    g.nodes.append(transpose_node("m", "y", inverse(p)))
    return g.case("transpose-sink-binary-broadcast", ["y"], also=SANDWICH_RULES)


@rule_case
def _transpose_sink_pad(draw: Callable, st: Any) -> RuleCase:
    shape = draw(shapes(1, 4, 3, min_dim=2))
    rank = len(shape)
    p = draw(perms(rank))
    t_shape = [shape[i] for i in p]
    mode = draw(st.sampled_from(("constant", "constant", "reflect", "edge")))
    limit = [d - 1 if mode == "reflect" else 2 for d in t_shape]
    pads = [draw(st.integers(0, limit[i % rank])) for i in range(2 * rank)]
    g = DrawnGraph()
    x = g.input("x", draw(float_arrays(shape)))
    g.nodes.append(transpose_node(x, "t", p))
    g.inits["pads"] = np.array(pads, np.int64)
    inputs = ["t", "pads"]
    if mode == "constant" and draw(st.booleans()):
        g.inits["value"] = np.array(draw(st.sampled_from((0.0, 1.5, -2.0))), np.float32)
        inputs.append("value")
    g.node("Pad", inputs, "pd", mode=mode)
    if draw(st.integers(0, 3)) == 0:
        return g.case("transpose-sink-pad", ["pd"], also=SANDWICH_RULES)
    g.nodes.append(transpose_node("pd", "y", inverse(p)))
    return g.case("transpose-sink-pad", ["y"], also=SANDWICH_RULES)


def _axes_op(g: DrawnGraph, op: str, x: str, y: str, axes: Sequence[int], opset: int, since: int, **attrs: Any) -> str:
    """`op` with `axes` as an attribute before opset `since`, as an input from it on."""
    if opset >= since:
        g.inits[f"{y}_axes"] = np.array(list(axes), np.int64)
        return g.node(op, [x, f"{y}_axes"], y, **attrs)
    return g.node(op, [x], y, axes=list(axes), **attrs)


_REDUCE_OPS = TRANSPOSE_REDUCTIONS


@rule_case
def _transpose_sink_reduce(draw: Callable, st: Any, some_only: bool = False) -> RuleCase:
    """A reduction of a transpose over some, all or no axes (`some_only`: some, the site's case)."""
    shape = draw(shapes(2 if some_only else 1, 7, 3))
    rank = len(shape)
    p = draw(perms(rank))
    op = draw(st.sampled_from(_REDUCE_OPS))
    kind = "some" if some_only else draw(st.sampled_from(("some", "some", "some", "all", "empty")))
    if kind == "some" and rank > 1:
        axes = sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank - 1)))
    elif kind == "all" or rank == 1:
        axes = list(range(rank))
    else:
        axes = []
    if draw(st.booleans()):  # negative axes: normalized at load
        axes = [a - rank if draw(st.booleans()) else a for a in axes]
    keepdims = draw(st.sampled_from((0, 1)))
    opset = draw(st.sampled_from((13, 18)))
    g = DrawnGraph()
    low, high = (0.5, 1.5) if op == "ReduceProd" else (-4.0, 4.0)  # products stay in range
    x = g.input("x", draw(float_arrays(shape, np.float32, low, high)))
    g.nodes.append(transpose_node(x, "t", p))
    if axes:
        r = _axes_op(g, op, "t", "r", axes, opset, 13 if op == "ReduceSum" else 18, keepdims=keepdims)
    else:
        r = g.node(op, ["t"], "r", keepdims=keepdims)
    if keepdims and kind == "some" and draw(st.booleans()):  # the inverse transpose cancels
        g.nodes.append(transpose_node(r, "y", inverse(p)))
        return g.case("transpose-sink-reduce", ["y"], also=SANDWICH_RULES, opset=opset)
    return g.case("transpose-sink-reduce", [r], also=SANDWICH_RULES, opset=opset)


@rule_case
def _transpose_to_reshape(draw: Callable, st: Any) -> RuleCase:
    rank = draw(st.integers(2, 7))  # any rank: 7 is past the rows the rule once had (2 to 6)
    shape = list(draw(shapes(rank, rank, 3)))
    ones = draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank - 1))
    for i in range(rank):  # some dim > 1: an all-ones tensor is transpose-identity's
        shape[i] = 1 if i in ones else max(shape[i], 2)
    # a perm that moves no data: any order of the size-1 axes among the others, which keep their order
    q = list(draw(perms(rank)))
    big = [a for a in range(rank) if shape[a] != 1]
    slots = [i for i, a in enumerate(q) if shape[a] != 1]
    for i, a in zip(slots, big):
        q[i] = a
    if q == list(range(rank)):  # identity: swap two size-1 axes or a size-1 axis with its neighbour
        one = sorted(ones)[0]
        other = one + 1 if one + 1 < rank else one - 1
        q[one], q[other] = q[other], q[one]
    g = DrawnGraph()
    x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64", "BOOL"))), tuple(shape))))
    g.nodes.append(transpose_node(x, "t", q))
    if draw(st.booleans()):
        return g.case("transpose-to-reshape", ["t"])
    return g.case("transpose-to-reshape", [g.node("Not" if g.feeds[x].dtype == np.bool_ else "Abs", ["t"], "y")])


@rule_case
def _reshape_transpose_reshape(draw: Callable, st: Any) -> RuleCase:
    """x -> Reshape [x0*x1, x2...] -> Transpose keeping axis 0 (moving others) -> Reshape [x0, x1, ...]."""
    shape = draw(shapes(4, 5, 3, min_dim=2))
    tail = draw(perms(len(shape) - 2).filter(lambda q: list(q) != sorted(q)))
    p = (0, *(1 + q for q in tail))
    merged = (shape[0] * shape[1], *shape[2:])
    split = (shape[0], shape[1], *(merged[k] for k in p[1:]))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64"))), shape)))
    g.inits["m"] = np.array(merged, np.int64)
    g.inits["s"] = np.array(split, np.int64)
    g.nodes += [
        oh.make_node("Reshape", [x, "m"], ["r"]),
        transpose_node("r", "t", p),
        oh.make_node("Reshape", ["t", "s"], ["y"]),
    ]
    return g.case("reshape-transpose-reshape", ["y"])


@rule_case
def _squeeze_unsqueeze_cancel(draw: Callable, st: Any) -> RuleCase:
    opset = draw(st.sampled_from((11, 13, 17)))
    g = DrawnGraph()
    if draw(st.booleans()):  # Squeeze(Unsqueeze(x, a), a)
        shape = draw(shapes(0, 4, 3))
        out_rank = len(shape) + draw(st.integers(1, 2))
        axes = sorted(
            draw(st.sets(st.integers(0, out_rank - 1), min_size=out_rank - len(shape), max_size=out_rank - len(shape)))
        )
        x = g.input("x", draw(arrays("FLOAT", shape)))
        u = _axes_op(g, "Unsqueeze", x, "u", [a - out_rank if draw(st.booleans()) else a for a in axes], opset, 13)
        _axes_op(g, "Squeeze", u, "y", axes, opset, 13)
    else:  # Unsqueeze(Squeeze(x, a), a): x has size-1 dims at a
        shape = list(draw(shapes(1, 5, 3)))
        axes = sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape))))
        for a in axes:
            shape[a] = 1
        x = g.input("x", draw(arrays("FLOAT", tuple(shape))))
        sq = _axes_op(g, "Squeeze", x, "s", axes, opset, 13)
        _axes_op(g, "Unsqueeze", sq, "y", axes, opset, 13)
    return g.case("squeeze-unsqueeze-cancel", [g.node("Relu", ["y"], "out")], opset=opset)


def _negated(draw: Callable, st: Any, axes: Sequence[int], rank: int) -> list[int]:
    """`axes` with some written negative (-rank..-1): normalized at load."""
    return [a - rank if draw(st.booleans()) else a for a in axes]


@rule_case
def _squeeze_merge(draw: Callable, st: Any) -> RuleCase:
    """x of rank 2 to 10 with size-1 dims at a set S of 2 or more axes; the inner Squeeze removes A (a non-empty
    part of S), the outer the rest of S (in the inner output's indices), or every remaining 1 (no axes)."""
    opset = draw(st.sampled_from((11, 13, 17)))
    shape = list(draw(shapes(2, 10, 3)))
    ones = sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=2, max_size=len(shape))))
    for a in ones:
        shape[a] = 1
    first = sorted(draw(st.sets(st.sampled_from(ones), min_size=1, max_size=len(ones) - 1)))
    rest = [b - sum(a < b for a in first) for b in ones if b not in first]
    g = DrawnGraph()
    x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64"))), tuple(shape))))
    sq = _axes_op(g, "Squeeze", x, "s", _negated(draw, st, first, len(shape)), opset, 13)
    if draw(st.integers(0, 3)) == 0:
        g.node("Squeeze", [sq], "y")
    else:
        _axes_op(g, "Squeeze", sq, "y", _negated(draw, st, rest, len(shape) - len(first)), opset, 13)
    return g.case("squeeze-merge", [g.node("Neg", ["y"], "out")], opset=opset)


@rule_case
def _unsqueeze_merge(draw: Callable, st: Any) -> RuleCase:
    """The output (rank up to 10) has inserted 1s at a set C of 2 to 7 axes: the outer Unsqueeze inserts B (a
    non-empty part of C, in the output's indices), the inner one the rest (in the inner output's indices: C
    without B shifted)."""
    opset = draw(st.sampled_from((11, 13, 17)))
    shape = draw(shapes(0, 3, 3))
    out_rank = len(shape) + draw(st.integers(2, 7))
    inserted = sorted(
        draw(st.sets(st.integers(0, out_rank - 1), min_size=out_rank - len(shape), max_size=out_rank - len(shape)))
    )
    outer = sorted(draw(st.sets(st.sampled_from(inserted), min_size=1, max_size=len(inserted) - 1)))
    inner = [c - sum(b < c for b in outer) for c in inserted if c not in outer]
    g = DrawnGraph()
    x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "BOOL"))), shape)))
    u = _axes_op(g, "Unsqueeze", x, "u", _negated(draw, st, inner, len(shape) + len(inner)), opset, 13)
    _axes_op(g, "Unsqueeze", u, "y", _negated(draw, st, outer, out_rank), opset, 13)
    return g.case(
        "unsqueeze-merge", [g.node("Not" if g.feeds[x].dtype == np.bool_ else "Neg", ["y"], "out")], opset=opset
    )


def _reshape_target(g: DrawnGraph, name: str, target: Sequence[int]) -> str:
    """`target` as an int64 initializer named `name` (Reshape's shape input)."""
    g.inits[name] = np.array(list(target), np.int64)
    return name


@rule_case
def _reshape_sink_unary(draw: Callable, st: Any) -> RuleCase:
    """U(Reshape(x, s)) for x of rank 2 to 4, s of another rank (flattened, a 1 added, or [-1, last, 1]): a
    Reshape to x's own shape is dropped at load."""
    shape = draw(shapes(2, 4, 3))
    size = int(np.prod(shape))
    target = draw(st.sampled_from(([size], [1, *shape], [-1, shape[-1], 1] if len(shape) != 3 else [size, 1])))
    g = DrawnGraph()
    x = g.input("x", draw(float_arrays(shape)))
    g.node("Reshape", [x, _reshape_target(g, "s", target)], "r")
    if draw(st.booleans()):
        g.node(draw(st.sampled_from(FLOAT_UNARY)), ["r"], "y")
    else:
        g.node("LeakyRelu", ["r"], "y", alpha=draw(st.sampled_from((0.01, 0.2))))
    return g.case("reshape-sink-unary", ["y"])


@rule_case
def _reshape_sink_bias(draw: Callable, st: Any) -> RuleCase:
    """B(Reshape(y, s), b) or B(b, Reshape(y, s)) for y [P, d] reshaped to [.., d] of rank 3 or 4 (static or with -1)
    and b [1, .., 1, d or 1] of rank 1 to the output's."""
    lead = draw(shapes(2, 3, 3))
    d = draw(st.integers(1, 4))
    out = (*lead, d)
    target = draw(st.sampled_from((list(out), [-1, *out[1:]])))
    op = draw(st.sampled_from(ARITHMETIC))
    k = draw(st.integers(1, len(out)))
    b_shape = (1,) * (k - 1) + (draw(st.sampled_from((d, d, 1))),)
    g = DrawnGraph()
    y = g.input("y", draw(float_arrays((int(np.prod(lead)), d), low=0.5, high=2.0)))
    g.node("Reshape", [y, _reshape_target(g, "s", target)], "r")
    g.inits["b"] = draw(float_arrays(b_shape, low=0.5, high=2.0))
    g.node(op, ["r", "b"] if draw(st.booleans()) else ["b", "r"], "z")
    return g.case("reshape-sink-bias", [g.node("Relu", ["z"], "out")])


@rule_case
def _transpose_cancel_binary(draw: Callable, st: Any) -> RuleCase:
    """Transpose(B(Transpose(x, p), y), p^-1) (either operand order) for a graph input y of the same rank
    broadcasting into the inner output."""
    shape = draw(shapes(1, 4, 3))
    p = draw(perms(len(shape)))
    t_shape = tuple(shape[i] for i in p)
    op = draw(st.sampled_from(("Add", "Sub", "Mul", "Div", "Max", "Min")))
    g = DrawnGraph()
    x = g.input("x", draw(float_arrays(shape, low=0.5, high=2.0)))
    y = g.input("y", draw(float_arrays(draw(broadcastable_shapes(t_shape, same_rank=True)), low=0.5, high=2.0)))
    g.nodes.append(transpose_node(x, "t", p))
    g.node(op, ["t", y] if draw(st.booleans()) else [y, "t"], "m")
    g.nodes.append(transpose_node("m", "out", inverse(p)))
    return g.case("transpose-cancel-binary", ["out"], also=SANDWICH_RULES)


#: rule name -> strategy of graphs where the rule fires; one case in four is also checked with symbolic dims.
PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "transpose-merge": _transpose_merge,
    "transpose-identity": _transpose_identity,
    "transpose-sink-unary": _transpose_sink_unary,
    "transpose-sink-binary": _transpose_sink_binary,
    "transpose-sink-binary-const": _transpose_sink_binary_const,
    "transpose-sink-binary-broadcast": _transpose_sink_binary_broadcast,
    "transpose-sink-binary-broadcast-site": feeding(
        _transpose_sink_binary_broadcast, "transpose-sink-binary-broadcast-site"
    ),
    "transpose-sink-pad": _transpose_sink_pad,
    "transpose-sink-reduce": _transpose_sink_reduce,
    "transpose-sink-reduce-site": feeding(
        functools.partial(_transpose_sink_reduce, some_only=True), "transpose-sink-reduce-site"
    ),
    "transpose-to-reshape": _transpose_to_reshape,
    "reshape-transpose-reshape": _reshape_transpose_reshape,
    "squeeze-unsqueeze-cancel": _squeeze_unsqueeze_cancel,
    "squeeze-merge": _squeeze_merge,
    "unsqueeze-merge": _unsqueeze_merge,
    "reshape-sink-unary": _reshape_sink_unary,
    "reshape-sink-bias": _reshape_sink_bias,
    "reshape-sink-bias-site": feeding(_reshape_sink_bias, "reshape-sink-bias-site"),
    "transpose-cancel-binary": _transpose_cancel_binary,
}
