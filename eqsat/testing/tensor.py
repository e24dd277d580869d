"""Graph builders (hypothesis strategies) for the tensor family (Concat/Split, transpose sinking through
Split, pixel shuffles, stack + reshape, one-hot products) and the MatMul merges of the linear family.
`eqsat.testing.PROPERTIES` includes these."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import onnx.helper as oh

from eqsat.testing.cases import RuleCase, _Graph
from eqsat.testing.models import _np_dtype
from eqsat.testing.strategies import _st, arrays, float_arrays, perms, shapes


def _parts(draw: Callable, st: Any, n: int, min_rank: int = 1) -> tuple[tuple[int, ...], int, list[tuple[int, ...]]]:
    """A base shape, an axis, and n shapes that differ from it only along the axis."""
    base = draw(shapes(min_rank, 4, 3))
    axis = draw(st.integers(0, len(base) - 1))
    sizes = [draw(st.integers(1, 3)) for _ in range(n)]
    return base, axis, [base[:axis] + (s,) + base[axis + 1:] for s in sizes]


def _onnx_axis(draw: Callable, st: Any, axis: int, rank: int) -> int:
    return axis - rank if draw(st.booleans()) else axis


def _concat_merge(rule: str = "concat-merge") -> Callable[[], Any]:
    def strategy() -> Any:
        st = _st()

        @st.composite
        def build(draw: Callable) -> RuleCase:
            n = draw(st.integers(3, 5))
            base, axis, shps = _parts(draw, st, n)
            g = _Graph()
            names = [g.input(f"x{k}", draw(float_arrays(s))) for k, s in enumerate(shps)]
            i = draw(st.integers(0, n - 2))
            j = draw(st.integers(i + 2, n if i else n - 1))  # the outer Concat keeps two items at least
            inner = g.node("Concat", names[i:j], "inner", axis=_onnx_axis(draw, st, axis, len(base)))
            g.node("Concat", names[:i] + [inner] + names[j:], "y", axis=_onnx_axis(draw, st, axis, len(base)))
            return g.case(rule, ["y"], also=("concat-merge",) if rule != "concat-merge" else ())

        return build()

    return strategy


def _split(g: _Graph, x: str, outs: list[str], axis: int, sizes: list[int], opset: int) -> None:
    """Split with static sizes: an input from opset 13, the `split` attribute before."""
    if opset >= 13:
        g.inits[f"{x}_sizes"] = np.array(sizes, np.int64)
        g.nodes.append(oh.make_node("Split", [x, f"{x}_sizes"], outs, axis=axis))
    else:
        g.nodes.append(oh.make_node("Split", [x], outs, axis=axis, split=sizes))


def _split_concat() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        n = draw(st.integers(2, 4))
        base, axis, shps = _parts(draw, st, n)
        opset = draw(st.sampled_from((11, 13, 17)))
        g = _Graph()
        names = [g.input(f"x{k}", draw(float_arrays(s))) for k, s in enumerate(shps)]
        c = g.node("Concat", names, "c", axis=axis)
        sizes = [s[axis] for s in shps]
        outs = [f"y{k}" for k in range(n)]
        _split(g, c, outs, axis, sizes, opset)
        return g.case("split-concat", outs, opset=opset)

    return build()


def _transpose_sink_concat() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        n = draw(st.integers(2, 3))  # the loader drops one-input Concats and identity Transposes
        base = draw(shapes(2, 4, 3))
        p = draw(perms(len(base)).filter(lambda q: q != tuple(range(len(q)))))
        axis = draw(st.integers(0, len(base) - 1))
        g = _Graph()
        ts = []
        for k in range(n):
            shape = list(base)
            shape[p[axis]] = draw(st.integers(1, 3))
            x = g.input(f"x{k}", draw(float_arrays(tuple(shape))))
            ts.append(g.node("Transpose", [x], f"t{k}", perm=list(p)))
        g.node("Concat", ts, "y", axis=axis)
        return g.case("transpose-sink-concat", ["y"])

    return build()


def _shape_concat_split() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        base, axis, shps = _parts(draw, st, 2)
        g = _Graph()
        names = [g.input(f"x{k}", draw(float_arrays(s))) for k, s in enumerate(shps)]
        g.node("Concat", names, "y", axis=axis)
        return g.case("shape-concat-split", ["y"])

    return build()


def _matmul_merge(rule: str) -> Callable[[], Any]:
    def strategy() -> Any:
        st = _st()

        @st.composite
        def build(draw: Callable) -> RuleCase:
            n = draw(st.integers(2, 3))
            lead = draw(shapes(1, 2, 3))
            k = draw(st.integers(1, 4))
            g = _Graph()
            x = g.input("x", draw(float_arrays(lead + (k,), low=-2, high=2)))
            outs = []
            for i in range(n):
                cols = draw(st.integers(2, 4))  # single elements are Scalars, not Const weights
                g.inits[f"w{i}"] = draw(float_arrays((k, cols), low=-1, high=1)) + np.float32(i)  # distinct
                y = g.node("MatMul", [x, f"w{i}"], f"y{i}")
                if rule == "matmul-bias-merge":
                    g.inits[f"b{i}"] = draw(float_arrays((cols,), low=-1, high=1))
                    y = g.node("Add", [y, f"b{i}"], f"z{i}")
                outs.append(g.node("Relu", [y], f"o{i}"))
            return g.case(rule, outs)

        return build()

    return strategy


def _transpose_sink_split() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        base = list(draw(shapes(2, 4, 3)))
        p = draw(perms(len(base)).filter(lambda q: q != tuple(range(len(q)))))
        axis = draw(st.integers(0, len(base) - 1))
        base[p[axis]] = draw(st.integers(2, 5))
        n = draw(st.integers(2, base[p[axis]]))
        cuts = sorted(draw(st.lists(st.integers(1, base[p[axis]] - 1), min_size=n - 1, max_size=n - 1, unique=True)))
        sizes = [b - a for a, b in zip([0, *cuts], [*cuts, base[p[axis]]])]
        opset = draw(st.sampled_from((11, 13, 17)))
        g = _Graph()
        x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64"))), tuple(base))))
        t = g.node("Transpose", [x], "t", perm=list(p))
        outs = [f"y{k}" for k in range(len(sizes))]
        _split(g, t, outs, _onnx_axis(draw, st, axis, len(base)), sizes, opset)
        return g.case("transpose-sink-split", outs, opset=opset)

    return build()


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


def _shuffle(g: _Graph, draw: Callable, st: Any, x: str, mid: tuple[int, ...], perm: tuple[int, ...],
             out: tuple[int, ...]) -> str:
    """Reshape(x, mid) -> Transpose(perm) -> Reshape(out), the targets drawn by `_target`."""
    g.inits["mid"], g.inits["out"] = _target(draw, st, mid), _target(draw, st, out)
    r = g.node("Reshape", [x, "mid"], "r")
    t = g.node("Transpose", [r], "t", perm=list(perm))
    return g.node("Reshape", [t, "out"], "y")


def _depth_to_space() -> Any:
    from eqsat.rewrites.tensor import D2S_DTYPES

    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        mode = draw(st.sampled_from(("DCR", "CRD")))
        opset = draw(st.sampled_from((9, 11, 13, 17) if mode == "DCR" else (11, 13, 17)))
        dtype = draw(st.sampled_from([d for d, since in D2S_DTYPES if since <= opset]))
        n, b, cb, h, w = (draw(st.integers(1, k)) for k in (2, 3, 3, 3, 3))
        mid = (n, b, b, cb, h, w) if mode == "DCR" else (n, cb, b, b, h, w)
        perm = (0, 3, 4, 1, 5, 2) if mode == "DCR" else (0, 1, 4, 2, 5, 3)
        g = _Graph()
        x = g.input("x", draw(arrays(dtype, (n, b * b * cb, h, w))))
        _shuffle(g, draw, st, x, mid, perm, (n, cb, h * b, w * b))
        return g.case("depth-to-space", ["y"], opset=opset)

    return build()


def _space_to_depth() -> Any:
    from eqsat.rewrites.tensor import S2D_DTYPES

    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        opset = draw(st.sampled_from((9, 11, 13, 17)))
        dtype = draw(st.sampled_from([d for d, _ in S2D_DTYPES]))
        n, c, b, hb, wb = (draw(st.integers(1, k)) for k in (2, 3, 3, 2, 2))
        g = _Graph()
        x = g.input("x", draw(arrays(dtype, (n, c, hb * b, wb * b))))
        _shuffle(g, draw, st, x, (n, c, hb, b, wb, b), (0, 3, 5, 1, 2, 4), (n, c * b * b, hb, wb))
        return g.case("space-to-depth", ["y"], opset=opset)

    return build()


def _stack_reshape() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        n = draw(st.integers(2, 4))
        base = draw(shapes(1, 3, 3))
        axis = draw(st.integers(0, len(base) - 1))  # stacked at `axis`, merged with the axis after it
        opset = draw(st.sampled_from((11, 13, 17)))
        dtype = draw(st.sampled_from(("FLOAT", "INT32", "BOOL")))
        g = _Graph()
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
        g.inits["shape"] = _target(draw, st, base[:axis] + (n * base[axis],) + base[axis + 1:], copy=axis > 0)
        g.node("Reshape", [c, "shape"], "y")
        return g.case("stack-reshape-to-concat", ["y"], opset=opset)

    return build()


def _onehot_matmul() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        index = draw(st.sampled_from(("INT64", "INT32")))
        values = draw(st.sampled_from(("FLOAT", "INT64") if index == "INT64" else ("FLOAT",)))  # ORT's OneHot kernels
        lead = draw(shapes(1, 2, 3))  # OneHot's indices have rank >= 1
        d, cols = draw(st.integers(1, 5)), draw(st.integers(2, 4))  # W [d, cols] has 2 elements or more: a Const
        g = _Graph()
        i = g.input("i", draw(arrays(index, lead, -2 * d - 1, 2 * d)))  # out of range [-d, d-1] too
        depth = index if values == "INT64" else draw(st.sampled_from((index, "FLOAT")))
        g.inits["depth"] = np.array(d if draw(st.booleans()) else [d], _np_dtype(depth))
        g.inits["values"] = np.array([0, 1], _np_dtype(values))
        g.inits["w"] = draw(arrays(values, (d, cols)))
        axis = -1 if draw(st.booleans()) else len(lead)
        g.node("OneHot", [i, "depth", "values"], "h", axis=axis)
        g.node("MatMul", ["h", "w"], "y")
        return g.case("onehot-matmul-to-gather", ["y"], opset=draw(st.sampled_from((12, 13, 17))))

    return build()


def _gather_before_elementwise(rule: str) -> Callable[[], Any]:
    return lambda: _dequantized_gather(rule, cast_only=rule == "gather-before-cast")


def _dequantized_gather(rule: str, cast_only: bool) -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        """A run-time table cast and gathered along any axis, or (not `cast_only`) dequantized (Cast, then
        Sub of a zero point and/or Mul by a scale, each a scalar or per row) and gathered along axis 0."""
        table = draw(shapes(1, 3, 4, min_dim=1))
        lead = draw(shapes(0 if cast_only else 1, 2, 3))  # a rank-0 index under a scalar aligned to the table's
        g = _Graph()                                         # rank would lower the rank: the rule declines
        w = g.input("w", draw(arrays(draw(st.sampled_from(("INT8", "UINT8", "INT32"))), table)))
        axis = draw(st.integers(0, len(table) - 1)) if cast_only else 0
        i = g.input("i", draw(arrays("INT64", lead, -table[axis], table[axis] - 1)))
        y = g.node("Cast", [w], "f", to=oh.np_dtype_to_tensor_dtype(np.dtype(np.float32)))
        ops = [] if cast_only else draw(st.lists(st.sampled_from(("Sub", "Mul", "Add", "Div")), min_size=1, max_size=2))
        for k, op in enumerate(ops):
            per_row = (table[0],) + (1,) * (len(table) - 1)
            c_shape = per_row if draw(st.booleans()) else ()
            g.inits[f"c{k}"] = draw(float_arrays(c_shape, low=0.5, high=2.0))
            y = g.node(op, [y, f"c{k}"], f"{op}{k}")
        g.node("Gather", [y, i], "y", axis=axis)
        return g.case(rule, ["y"], also=() if cast_only else ("gather-before-cast",))

    return build()


PROPERTIES: dict[str, Callable[[], Any]] = {
    "list-append": _concat_merge("list-append"),
    "concat-merge": _concat_merge(),
    "split-concat": _split_concat,
    "transpose-sink-concat": _transpose_sink_concat,
    "shape-concat-split": _shape_concat_split,
    "transpose-sink-split": _transpose_sink_split,
    "depth-to-space": _depth_to_space,
    "space-to-depth": _space_to_depth,
    "stack-reshape-to-concat": _stack_reshape,
    "onehot-matmul-to-gather": _onehot_matmul,
    "gather-before-cast": _gather_before_elementwise("gather-before-cast"),
    "gather-before-elementwise": _gather_before_elementwise("gather-before-elementwise"),
    "matmul-merge": _matmul_merge("matmul-merge"),
    "matmul-bias-merge": _matmul_merge("matmul-bias-merge"),
}

__all__ = ["PROPERTIES"]
