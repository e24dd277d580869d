"""Graph builders (hypothesis strategies) for the tensor family (Concat/Split) and the MatMul merges of the
linear family. `eqsat.testing.PROPERTIES` includes these."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from eqsat.testing import RuleCase, _Graph, _st, float_arrays, perms, shapes


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
        if opset >= 13:
            g.inits["sizes"] = np.array(sizes, np.int64)
            g.nodes.append(__import__("onnx").helper.make_node("Split", [c, "sizes"], outs, axis=axis))
        else:
            g.nodes.append(__import__("onnx").helper.make_node("Split", [c], outs, axis=axis, split=sizes))
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


PROPERTIES: dict[str, Callable[[], Any]] = {
    "list-append": _concat_merge("list-append"),
    "concat-merge": _concat_merge(),
    "split-concat": _split_concat,
    "transpose-sink-concat": _transpose_sink_concat,
    "shape-concat-split": _shape_concat_split,
    "matmul-merge": _matmul_merge("matmul-merge"),
    "matmul-bias-merge": _matmul_merge("matmul-bias-merge"),
}

__all__ = ["PROPERTIES"]
