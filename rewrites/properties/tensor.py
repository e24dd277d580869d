"""Hypothesis properties of the tensor rules (rewrites/tensor.py): for each rule, a strategy of small graphs
where its guard holds (`RuleCase`), checked by tests/test_rules_tensor.py and `eqsat check-rules`."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import onnx.helper as oh

from eqsat.rewrites.tensor import D2S_DTYPES, S2D_DTYPES
from eqsat.testing.cases import DrawnGraph, RuleCase, feeding, rule_case
from eqsat.testing.draw import concat_parts
from eqsat.testing.models import numpy_dtype
from eqsat.testing.strategies import arrays, float_arrays, perms, shapes

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


def _onnx_axis(draw: Callable, st: Any, axis: int, rank: int) -> int:
    return axis - rank if draw(st.booleans()) else axis


def _concat_merge(rule: str = "concat-merge") -> Callable[[], Any]:
    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        n = draw(st.integers(3, 5))
        base, axis, shps = concat_parts(draw, st, n)
        g = DrawnGraph()
        names = [g.input(f"x{k}", draw(float_arrays(s))) for k, s in enumerate(shps)]
        i = draw(st.integers(0, n - 2))
        j = draw(st.integers(i + 2, n if i else n - 1))  # the outer Concat keeps two items at least
        inner = g.node("Concat", names[i:j], "inner", axis=_onnx_axis(draw, st, axis, len(base)))
        g.node("Concat", names[:i] + [inner] + names[j:], "y", axis=_onnx_axis(draw, st, axis, len(base)))
        return g.case(rule, ["y"], also=("concat-merge",) if rule != "concat-merge" else ())

    return strategy


def _split(g: DrawnGraph, x: str, outs: list[str], axis: int, sizes: list[int], opset: int) -> None:
    """Split with static sizes: an input from opset 13, the `split` attribute before."""
    if opset >= 13:
        g.inits[f"{x}_sizes"] = np.array(sizes, np.int64)
        g.nodes.append(oh.make_node("Split", [x, f"{x}_sizes"], outs, axis=axis))
    else:
        g.nodes.append(oh.make_node("Split", [x], outs, axis=axis, split=sizes))


@rule_case
def _split_concat(draw: Callable, st: Any) -> RuleCase:
    n = draw(st.integers(2, 4))
    base, axis, shps = concat_parts(draw, st, n)
    opset = draw(st.sampled_from((11, 13, 17)))
    g = DrawnGraph()
    names = [g.input(f"x{k}", draw(float_arrays(s))) for k, s in enumerate(shps)]
    c = g.node("Concat", names, "c", axis=axis)
    sizes = [s[axis] for s in shps]
    outs = [f"y{k}" for k in range(n)]
    _split(g, c, outs, axis, sizes, opset)
    return g.case("split-concat", outs, opset=opset)


@rule_case
def _transpose_sink_concat(draw: Callable, st: Any, constant: bool = False, rule: str = "") -> RuleCase:
    """Concat of 2 or 3 transposed inputs (the loader drops one-input Concats and identity Transposes); with
    `constant`, one of them (at a drawn position) a constant of the transposed shape instead."""
    n = draw(st.integers(2, 3))
    j = draw(st.integers(0, n - 1)) if constant else -1
    base = draw(shapes(2, 4, 3))
    p = draw(perms(len(base)).filter(lambda q: q != tuple(range(len(q)))))
    axis = draw(st.integers(0, len(base) - 1))
    g = DrawnGraph()
    items = []
    for k in range(n):
        shape = list(base)
        shape[p[axis]] = draw(st.integers(1, 3))
        if k == j:
            g.inits["c"] = np.asarray(draw(float_arrays(tuple(shape[i] for i in p))))
            items.append("c")
        else:
            x = g.input(f"x{k}", draw(float_arrays(tuple(shape))))
            items.append(g.node("Transpose", [x], f"t{k}", perm=list(p)))
    g.node("Concat", items, "y", axis=axis)
    return g.case(
        rule or ("transpose-sink-concat-const" if constant else "transpose-sink-concat"),
        ["y"],
        also=("transpose-sink-concat-const" if constant else "transpose-sink-concat",) if rule else (),
    )


@rule_case
def _transpose_sink_split(draw: Callable, st: Any) -> RuleCase:
    base = list(draw(shapes(2, 4, 3)))
    p = draw(perms(len(base)).filter(lambda q: q != tuple(range(len(q)))))
    axis = draw(st.integers(0, len(base) - 1))
    base[p[axis]] = draw(st.integers(2, 5))
    n = draw(st.integers(2, base[p[axis]]))
    cuts = sorted(draw(st.lists(st.integers(1, base[p[axis]] - 1), min_size=n - 1, max_size=n - 1, unique=True)))
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, base[p[axis]]])]
    opset = draw(st.sampled_from((11, 13, 17)))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64"))), tuple(base))))
    t = g.node("Transpose", [x], "t", perm=list(p))
    outs = [f"y{k}" for k in range(len(sizes))]
    _split(g, t, outs, _onnx_axis(draw, st, axis, len(base)), sizes, opset)
    return g.case("transpose-sink-split", outs, opset=opset)


@rule_case
def _split_reshape_merge(draw: Callable, st: Any) -> RuleCase:
    """y [P.., N] split along its last axis into 2 or 3 widths, each part reshaped: by heads ([L.., h_k, d] with d
    dividing every width) or whole ([L.., n_k]), never to the part's own shape (that Reshape is dropped at load); L = P,
    P flattened or regrouped, as is, with one -1, or (L = P) with its leading dims as 0. The split axis written
    positive or negative, opset 11, 13 or 18."""
    lead = draw(shapes(1, 3, 3))
    heads = draw(st.booleans())
    d = draw(st.integers(1, 3)) if heads else 1
    widths = [d * draw(st.integers(1, 3)) for _ in range(draw(st.integers(2, 3)))]
    size = int(np.prod(lead))
    leads = [lead] * heads + [(size,)] * (len(lead) > 1) + [(size // lead[-1], lead[-1]), (1, *lead)]
    opset = draw(st.sampled_from((11, 13, 18)))
    g = DrawnGraph()
    y = g.input("y", draw(float_arrays((*lead, sum(widths)))))
    parts = [f"p{k}" for k in range(len(widths))]
    _split(g, y, parts, _onnx_axis(draw, st, len(lead), len(lead) + 1), widths, opset)
    outs = []
    for k, n in enumerate(widths):
        out_lead = draw(st.sampled_from(leads))
        shape = (*out_lead, n // d, d) if heads else (*out_lead, n)
        if shape == (*lead, n):  # the part's own shape: that Reshape is dropped at load, so regroup it
            out_lead, shape = (1, *out_lead), (1, *shape)
        target = list(shape)
        kind = draw(st.sampled_from(("plain", "infer", "copy") if out_lead == lead else ("plain", "infer")))
        if kind == "infer":
            target[draw(st.integers(0, len(shape) - 1))] = -1
        elif kind == "copy":
            target[: len(lead)] = [0] * len(lead)
        g.inits[f"s{k}"] = np.array(target, np.int64)
        outs.append(g.node("Reshape", [parts[k], f"s{k}"], f"y{k}"))
    return g.case("split-reshape-merge", outs, opset=opset)


def _target(draw: Callable, st: Any, shape: tuple[int, ...], copy: bool = True) -> np.ndarray:
    """A Reshape target for `shape`: as is, with one dim as -1, or (`copy`: the Reshape's input has the same
    first dim) with the first as 0."""
    target = list(shape)
    kind = draw(st.sampled_from(("plain", "infer", "copy") if copy else ("plain", "infer")))
    if kind == "infer":
        target[draw(st.integers(0, len(shape) - 1))] = -1
    elif kind == "copy":
        target[0] = 0
    return np.array(target, np.int64)


def _shuffle(
    g: DrawnGraph, draw: Callable, st: Any, x: str, mid: tuple[int, ...], perm: tuple[int, ...], out: tuple[int, ...]
) -> str:
    """Reshape(x, mid) -> Transpose(perm) -> Reshape(out), the targets drawn by `_target`."""
    g.inits["mid"], g.inits["out"] = _target(draw, st, mid), _target(draw, st, out)
    r = g.node("Reshape", [x, "mid"], "r")
    t = g.node("Transpose", [r], "t", perm=list(perm))
    return g.node("Reshape", [t, "out"], "y")


@rule_case
def _depth_to_space(draw: Callable, st: Any) -> RuleCase:
    mode = draw(st.sampled_from(("DCR", "CRD")))
    opset = draw(st.sampled_from((9, 11, 13, 17) if mode == "DCR" else (11, 13, 17)))
    dtype = draw(st.sampled_from([d for d, since in D2S_DTYPES if since <= opset]))
    n, b, cb, h, w = (draw(st.integers(1, k)) for k in (2, 3, 3, 3, 3))
    mid = (n, b, b, cb, h, w) if mode == "DCR" else (n, cb, b, b, h, w)
    perm = (0, 3, 4, 1, 5, 2) if mode == "DCR" else (0, 1, 4, 2, 5, 3)
    g = DrawnGraph()
    x = g.input("x", draw(arrays(dtype, (n, b * b * cb, h, w))))
    _shuffle(g, draw, st, x, mid, perm, (n, cb, h * b, w * b))
    return g.case("depth-to-space", ["y"], opset=opset)


@rule_case
def _space_to_depth(draw: Callable, st: Any) -> RuleCase:
    opset = draw(st.sampled_from((9, 11, 13, 17)))
    dtype = draw(st.sampled_from([d for d, _ in S2D_DTYPES]))
    n, c, b, hb, wb = (draw(st.integers(1, k)) for k in (2, 3, 3, 2, 2))
    g = DrawnGraph()
    x = g.input("x", draw(arrays(dtype, (n, c, hb * b, wb * b))))
    _shuffle(g, draw, st, x, (n, c, hb, b, wb, b), (0, 3, 5, 1, 2, 4), (n, c * b * b, hb, wb))
    return g.case("space-to-depth", ["y"], opset=opset)


@rule_case
def _stack_reshape(draw: Callable, st: Any) -> RuleCase:
    n = draw(st.integers(2, 4))
    base = draw(shapes(1, 3, 3))
    axis = draw(st.integers(0, len(base) - 1))  # stacked at `axis`, merged with the axis after it
    opset = draw(st.sampled_from((11, 13, 17)))
    dtype = draw(st.sampled_from(("FLOAT", "INT32", "BOOL")))
    g = DrawnGraph()
    ups = []
    for k in range(n):
        x = g.input(f"x{k}", draw(arrays(dtype, base)))
        a = _onnx_axis(draw, st, axis, len(base) + 1)
        if opset >= 13:
            g.inits[f"a{k}"] = np.array([a], np.int64)
            ups.append(g.node("Unsqueeze", [x, f"a{k}"], f"u{k}"))
        else:
            ups.append(g.node("Unsqueeze", [x], f"u{k}", axes=[a]))
    c = g.node("Concat", ups, "c", axis=_onnx_axis(draw, st, axis, len(base) + 1))
    g.inits["shape"] = _target(draw, st, base[:axis] + (n * base[axis],) + base[axis + 1 :], copy=axis > 0)
    g.node("Reshape", [c, "shape"], "y")
    return g.case("stack-reshape-to-concat", ["y"], opset=opset)


@rule_case
def _onehot_matmul(draw: Callable, st: Any) -> RuleCase:
    index = draw(st.sampled_from(("INT64", "INT32")))
    values = draw(st.sampled_from(("FLOAT", "INT64") if index == "INT64" else ("FLOAT",)))  # ORT's OneHot kernels
    lead = draw(shapes(1, 2, 3))  # OneHot's indices have rank >= 1
    d, cols = draw(st.integers(1, 5)), draw(st.integers(2, 4))  # W [d, cols] has 2 elements or more: a Const
    g = DrawnGraph()
    i = g.input("i", draw(arrays(index, lead, -2 * d - 1, 2 * d)))  # out of range [-d, d-1] too
    depth = index if values == "INT64" else draw(st.sampled_from((index, "FLOAT")))
    g.inits["depth"] = np.array(d if draw(st.booleans()) else [d], numpy_dtype(depth))
    g.inits["values"] = np.array([0, 1], numpy_dtype(values))
    g.inits["w"] = draw(arrays(values, (d, cols)))
    axis = -1 if draw(st.booleans()) else len(lead)
    g.node("OneHot", [i, "depth", "values"], "h", axis=axis)
    g.node("MatMul", ["h", "w"], "y")
    return g.case("onehot-matmul-to-gather", ["y"], opset=draw(st.sampled_from((12, 13, 17))))


def _gather_before_elementwise(rule: str) -> Callable[[], Any]:
    return lambda: _dequantized_gather(rule, cast_only=rule == "gather-before-cast")


@rule_case
def _dequantized_gather(draw: Callable, st: Any, rule: str, cast_only: bool, per_row: bool = False) -> RuleCase:
    """A run-time table cast and gathered along any axis, or (not `cast_only`) dequantized (Cast, then
    Sub of a zero point and/or Mul by a scale, each a single element of rank up to the table's or (always when
    `per_row`) per row) and gathered along axis 0."""
    table = draw(shapes(1, 3, 4, min_dim=1))
    lead = draw(shapes(0 if cast_only else 1, 2, 3))  # a rank-0 index under a scalar aligned to the table's
    g = DrawnGraph()  # rank would lower the rank: the rule declines
    w = g.input("w", draw(arrays(draw(st.sampled_from(("INT8", "UINT8", "INT32"))), table)))
    axis = draw(st.integers(0, len(table) - 1)) if cast_only else 0
    i = g.input("i", draw(arrays("INT64", lead, -table[axis], table[axis] - 1)))
    y = g.node("Cast", [w], "f", to=oh.np_dtype_to_tensor_dtype(np.dtype(np.float32)))
    ops = [] if cast_only else draw(st.lists(st.sampled_from(("Sub", "Mul", "Add", "Div")), min_size=1, max_size=2))
    for k, op in enumerate(ops):
        row = (table[0],) + (1,) * (len(table) - 1)
        single = (1,) * draw(st.integers(0, len(table)))  # of rank up to the table's: it broadcasts neither the
        c_shape = row if per_row or draw(st.booleans()) else single  # table nor the output (rank >= the table's)
        g.inits[f"c{k}"] = draw(float_arrays(c_shape, low=0.5, high=2.0))
        y = g.node(op, [y, f"c{k}"], f"{op}{k}")
    g.node("Gather", [y, i], "y", axis=axis)
    also = () if cast_only else ("gather-before-cast", "gather-before-elementwise")
    return g.case(rule, ["y"], also=tuple(a for a in also if a != rule))


#: rule name -> strategy of graphs where the rule fires; one case in four is also checked with symbolic dims.
@rule_case
def _slice_merge(draw: Callable, st: Any) -> RuleCase:
    """Slice(Slice(x)) over disjoint non-empty axis sets, each listed all non-negative or all negative, with
    bounds past either end and steps of either sign (the first axis of each reversed: never a no-op the front
    end would remove); opset 13 or 18."""
    shape = draw(shapes(2, 4, 5, min_dim=2))
    rank = len(shape)
    axes = draw(st.permutations(range(rank)))
    cut = draw(st.integers(1, rank - 1))
    g = DrawnGraph()
    prev = g.input("x", draw(float_arrays(shape)))
    for k, listed in enumerate((axes[:cut], axes[cut:])):
        negative = draw(st.booleans())
        bounds = [st.integers(-shape[a] - 2, shape[a] + 2) for a in listed]
        g.inits[f"s{k}"] = np.array([draw(b) for b in bounds], np.int64)
        g.inits[f"e{k}"] = np.array([draw(b) for b in bounds], np.int64)
        g.inits[f"a{k}"] = np.array([a - rank if negative else a for a in listed], np.int64)
        steps = [draw(st.sampled_from((-1, -2)))] + [draw(st.sampled_from((1, 2, -1, -2, 3))) for _ in listed[1:]]
        g.inits[f"t{k}"] = np.array(steps, np.int64)
        prev = g.node("Slice", [prev, f"s{k}", f"e{k}", f"a{k}", f"t{k}"], f"y{k}")
    return g.case("slice-merge", [prev], opset=draw(st.sampled_from((13, 18))))


PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "slice-merge": _slice_merge,
    "split-reshape-merge": _split_reshape_merge,
    "split-reshape-merge-site": feeding(_split_reshape_merge, "split-reshape-merge-site"),
}
#: Properties checked with static shapes only.
STATIC_PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "list-append": _concat_merge("list-append"),
    "concat-merge": _concat_merge(),
    "split-concat": _split_concat,
    "transpose-sink-concat": _transpose_sink_concat,
    "transpose-sink-concat-const": functools.partial(_transpose_sink_concat, constant=True),
    "concat-transposed-items": functools.partial(_transpose_sink_concat, rule="concat-transposed-items"),
    "transpose-sink-split": _transpose_sink_split,
    "depth-to-space": _depth_to_space,
    "space-to-depth": _space_to_depth,
    "space-depth-site": feeding(_space_to_depth, "space-depth-site"),
    "stack-reshape-to-concat": _stack_reshape,
    "onehot-matmul-to-gather": _onehot_matmul,
    "onehot-matmul-to-gather-site": feeding(_onehot_matmul, "onehot-matmul-to-gather-site"),
    "gather-before-cast": _gather_before_elementwise("gather-before-cast"),
    "gather-before-elementwise": _gather_before_elementwise("gather-before-elementwise"),
    "gather-before-elementwise-site": lambda: _dequantized_gather(
        "gather-before-elementwise-site", cast_only=False, per_row=True
    ),
}
