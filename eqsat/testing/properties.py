"""Graph builders (hypothesis strategies) for the layout, cast, cleanup and analysis rules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import onnx
import onnx.helper as oh

from eqsat.testing.cases import RuleCase, _Graph
from eqsat.testing.models import _elem_type, _np_dtype
from eqsat.testing.strategies import _range_of, _st, arrays, broadcastable_shapes, float_arrays, inverse, perms, shapes

if TYPE_CHECKING:  # heavy imports only where they are used
    from hypothesis.strategies import SearchStrategy


_SANDWICH = ("transpose-merge", "transpose-identity")
#: Elementwise ops drawn by the properties (float inputs; IsNaN gives BOOL, comparisons too).
_FLOAT_UNARY = ("Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp", "Log", "Sqrt", "Erf", "Reciprocal", "Floor",
                "Ceil", "Sign", "Softplus", "Softsign", "Sin", "Cos", "Round", "IsNaN")
_FLOAT_BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "PRelu")
_COMPARE = ("Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual")
_LOGICAL = ("And", "Or", "Xor")
#: Cast targets drawn by layout properties (values are in [-8, 8]: in range for every signed type).
_CAST_TARGETS = ("FLOAT16", "DOUBLE", "INT8", "INT32", "INT64", "BOOL")


def _transpose_node(x: str, y: str, perm: Sequence[int]) -> onnx.NodeProto:
    return oh.make_node("Transpose", [x], [y], perm=list(perm))


def _draw_unary(draw: Callable, g: _Graph, x: str, y: str, st: Any) -> str:
    """Apply a drawn unary elementwise op (plain or with parameters) to float `x`."""
    kind = draw(st.sampled_from(("plain", "plain", "LeakyRelu", "Elu", "HardSigmoid", "Clip", "Cast")))
    if kind == "plain":
        return g.node(draw(st.sampled_from(_FLOAT_UNARY)), [x], y)
    if kind in ("LeakyRelu", "Elu"):
        return g.node(kind, [x], y, alpha=draw(st.sampled_from((0.01, 0.2, 1.0, 1.5))))
    if kind == "HardSigmoid":
        return g.node(kind, [x], y, alpha=draw(st.sampled_from((0.2, 0.5))), beta=draw(st.sampled_from((0.5, 0.1))))
    if kind == "Clip":
        lo = draw(st.sampled_from((-1.0, 0.0, -6.0)))
        g.inits[f"{y}_min"] = np.array(lo, np.float32)
        g.inits[f"{y}_max"] = np.array(lo + draw(st.sampled_from((1.0, 6.0))), np.float32)
        return g.node("Clip", [x, f"{y}_min", f"{y}_max"], y)
    return g.node("Cast", [x], y, to=_elem_type(draw(st.sampled_from(_CAST_TARGETS))))


def _transpose_merge() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 5, 3))
        p = draw(perms(len(shape)))
        q = draw(st.one_of(st.just(inverse(p)), perms(len(shape))))
        g = _Graph()
        x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64", "BOOL"))), shape)))
        g.nodes += [_transpose_node(x, "t", p), _transpose_node("t", "y", q)]
        return g.case("transpose-merge", ["y"])

    return build()


def _transpose_identity() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 6, 3))
        perm: Sequence[int] = range(len(shape))
        if draw(st.booleans()):  # a single-element tensor: any perm
            shape = (1,) * len(shape)
            perm = draw(perms(len(shape)))
        g = _Graph()
        x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT32", "BOOL"))), shape)))
        g.nodes.append(_transpose_node(x, "t", perm))
        if draw(st.booleans()):
            return g.case("transpose-identity", [g.node("Not" if g.feeds[x].dtype == np.bool_ else "Abs", ["t"], "y")])
        return g.case("transpose-identity", ["t"])

    return build()


def _transpose_sink_unary() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        p = draw(perms(len(shape)))
        g = _Graph()
        if draw(st.integers(0, 9)) == 0:
            x = g.input("x", draw(arrays("BOOL", shape)))
            g.nodes.append(_transpose_node(x, "t", p))
            g.node("Not", ["t"], "u")
        else:
            x = g.input("x", draw(float_arrays(shape)))
            g.nodes.append(_transpose_node(x, "t", p))
            _draw_unary(draw, g, "t", "u", st)
        back = draw(st.sampled_from((inverse(p), inverse(p), None)))
        if back is None:
            return g.case("transpose-sink-unary", ["u"], also=_SANDWICH)
        g.nodes.append(_transpose_node("u", "y", back))
        return g.case("transpose-sink-unary", ["y"], also=_SANDWICH)

    return build()


def _binary_operands(draw: Callable, st: Any, shape: tuple[int, ...]) -> tuple[str, str, np.ndarray, np.ndarray]:
    """A drawn binary op and operands of the same rank that broadcast to at most `shape`."""
    family = draw(st.sampled_from(("float", "float", "compare", "logical", "mod")))
    b_shape = draw(broadcastable_shapes(shape, same_rank=True))
    if family == "float":
        op = draw(st.sampled_from(_FLOAT_BINARY))
        a_shape = shape if op == "PRelu" else draw(broadcastable_shapes(shape, same_rank=True))
        return op, "FLOAT", draw(float_arrays(a_shape)), draw(float_arrays(b_shape))
    a_shape = draw(broadcastable_shapes(shape, same_rank=True))
    if family == "compare":
        return (draw(st.sampled_from(_COMPARE)), "FLOAT", draw(arrays("FLOAT", a_shape, -3, 3, integers=True)),
                draw(arrays("FLOAT", b_shape, -3, 3, integers=True)))
    if family == "logical":
        return draw(st.sampled_from(_LOGICAL)), "BOOL", draw(arrays("BOOL", a_shape)), draw(arrays("BOOL", b_shape))
    return "Mod", "INT32", draw(arrays("INT32", a_shape, -20, 20)), draw(arrays("INT32", b_shape, 1, 5))


def _transpose_sink_binary() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        p = draw(perms(len(shape)))
        op, _, a, b = _binary_operands(draw, st, shape)
        g = _Graph()
        g.input("a", a)
        g.input("b", b)
        g.nodes += [_transpose_node("a", "ta", p), _transpose_node("b", "tb", p)]
        g.node(op, ["ta", "tb"], "m")
        if draw(st.integers(0, 3)) == 0:
            return g.case("transpose-sink-binary", ["m"], also=_SANDWICH)
        g.nodes.append(_transpose_node("m", "y", inverse(p)))
        return g.case("transpose-sink-binary", ["y"], also=_SANDWICH)

    return build()


def _binary_const(draw: Callable, st: Any, g: _Graph, a: str, shape: tuple[int, ...], out: str) -> str:
    """`out` = B(a, c) or B(c, a) for a drawn float binary op and a constant c that broadcasts to `shape`
    without enlarging it (possibly of lower rank)."""
    op = draw(st.sampled_from(("Add", "Sub", "Mul", "Div", "Pow", "PRelu", *_COMPARE)))
    c_shape = draw(broadcastable_shapes(shape))
    integers = op in _COMPARE
    low = 0.5 if op in ("Div", "Pow") else -4.0
    g.inits[f"{out}_c"] = draw(arrays("FLOAT", c_shape, low, 4.0 if op != "Pow" else 2.0, integers=integers))
    value = g.inits[f"{out}_c"]
    if op == "Pow":
        value[...] = np.round(value)  # integral exponents: negative bases stay real
    const_first = op != "PRelu" and draw(st.booleans())
    return g.node(op, [f"{out}_c", a] if const_first else [a, f"{out}_c"], out)


def _transpose_sink_binary_const() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        p = draw(perms(len(shape)))
        g = _Graph()
        integers = draw(st.booleans())
        x = g.input("x", draw(arrays("FLOAT", shape, -4, 4, integers=integers)))
        g.nodes.append(_transpose_node(x, "t", p))
        _binary_const(draw, st, g, "t", tuple(shape[i] for i in p), "m")
        if draw(st.integers(0, 3)) == 0:
            return g.case("transpose-sink-binary-const", ["m"], also=_SANDWICH)
        g.nodes.append(_transpose_node("m", "y", inverse(p)))
        return g.case("transpose-sink-binary-const", ["y"], also=_SANDWICH)

    return build()


def _transpose_sink_pad() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3, min_dim=2))
        rank = len(shape)
        p = draw(perms(rank))
        t_shape = [shape[i] for i in p]
        mode = draw(st.sampled_from(("constant", "constant", "reflect", "edge")))
        limit = [d - 1 if mode == "reflect" else 2 for d in t_shape]
        pads = [draw(st.integers(0, limit[i % rank])) for i in range(2 * rank)]
        g = _Graph()
        x = g.input("x", draw(float_arrays(shape)))
        g.nodes.append(_transpose_node(x, "t", p))
        g.inits["pads"] = np.array(pads, np.int64)
        inputs = ["t", "pads"]
        if mode == "constant" and draw(st.booleans()):
            g.inits["value"] = np.array(draw(st.sampled_from((0.0, 1.5, -2.0))), np.float32)
            inputs.append("value")
        g.node("Pad", inputs, "pd", mode=mode)
        if draw(st.integers(0, 3)) == 0:
            return g.case("transpose-sink-pad", ["pd"], also=_SANDWICH)
        g.nodes.append(_transpose_node("pd", "y", inverse(p)))
        return g.case("transpose-sink-pad", ["y"], also=_SANDWICH)

    return build()


def _axes_op(g: _Graph, op: str, x: str, y: str, axes: Sequence[int], opset: int, since: int, **attrs: Any) -> str:
    """`op` with `axes` as an attribute before opset `since`, as an input from it on."""
    if opset >= since:
        g.inits[f"{y}_axes"] = np.array(list(axes), np.int64)
        return g.node(op, [x, f"{y}_axes"], y, **attrs)
    return g.node(op, [x], y, axes=list(axes), **attrs)


_REDUCE_OPS = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceSumSquare")


def _transpose_sink_reduce() -> "SearchStrategy[RuleCase]":
    from eqsat.rewrites.layout import MAX_REDUCE_AXES

    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 5, 3))
        rank = len(shape)
        p = draw(perms(rank))
        op = draw(st.sampled_from(_REDUCE_OPS))
        kind = draw(st.sampled_from(("some", "some", "some", "all", "empty")))
        if kind == "some" and rank > 1:
            axes = sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=min(MAX_REDUCE_AXES, rank - 1))))
        elif kind == "all" or rank == 1:
            axes = list(range(rank))
        else:
            axes = []
        if draw(st.booleans()):  # negative axes: normalized at load
            axes = [a - rank if draw(st.booleans()) else a for a in axes]
        keepdims = draw(st.sampled_from((0, 1)))
        opset = draw(st.sampled_from((13, 18)))
        g = _Graph()
        low, high = (0.5, 1.5) if op == "ReduceProd" else (-4.0, 4.0)  # products stay in range
        x = g.input("x", draw(float_arrays(shape, np.float32, low, high)))
        g.nodes.append(_transpose_node(x, "t", p))
        if axes:
            r = _axes_op(g, op, "t", "r", axes, opset, 13 if op == "ReduceSum" else 18, keepdims=keepdims)
        else:
            r = g.node(op, ["t"], "r", keepdims=keepdims)
        if keepdims and kind == "some" and draw(st.booleans()):  # the inverse transpose cancels
            g.nodes.append(_transpose_node(r, "y", inverse(p)))
            return g.case("transpose-sink-reduce", ["y"], also=_SANDWICH, opset=opset)
        return g.case("transpose-sink-reduce", [r], also=_SANDWICH, opset=opset)

    return build()


def _transpose_to_reshape() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        rank = draw(st.integers(2, 6))
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
        g = _Graph()
        x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64", "BOOL"))), tuple(shape))))
        g.nodes.append(_transpose_node(x, "t", q))
        if draw(st.booleans()):
            return g.case("transpose-to-reshape", ["t"])
        return g.case("transpose-to-reshape", [g.node("Not" if g.feeds[x].dtype == np.bool_ else "Abs", ["t"], "y")])

    return build()


def _reshape_transpose_reshape() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        """x -> Reshape [x0*x1, x2...] -> Transpose keeping axis 0 (moving others) -> Reshape [x0, x1, ...]."""
        shape = draw(shapes(4, 5, 3, min_dim=2))
        tail = draw(perms(len(shape) - 2).filter(lambda q: list(q) != sorted(q)))
        p = (0, *(1 + q for q in tail))
        merged = (shape[0] * shape[1], *shape[2:])
        split = (shape[0], shape[1], *(merged[k] for k in p[1:]))
        g = _Graph()
        x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64"))), shape)))
        g.inits["m"] = np.array(merged, np.int64)
        g.inits["s"] = np.array(split, np.int64)
        g.nodes += [oh.make_node("Reshape", [x, "m"], ["r"]), _transpose_node("r", "t", p),
                    oh.make_node("Reshape", ["t", "s"], ["y"])]
        return g.case("reshape-transpose-reshape", ["y"])

    return build()


def _squeeze_unsqueeze_cancel() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        opset = draw(st.sampled_from((11, 13, 17)))
        g = _Graph()
        if draw(st.booleans()):  # Squeeze(Unsqueeze(x, a), a)
            shape = draw(shapes(0, 4, 3))
            out_rank = len(shape) + draw(st.integers(1, 2))
            axes = sorted(draw(st.sets(st.integers(0, out_rank - 1), min_size=out_rank - len(shape),
                                       max_size=out_rank - len(shape))))
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

    return build()


#: dtypes whose values tests can feed and read back through onnxruntime.
_FEEDABLE = ("BOOL", "UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "INT64", "FLOAT16", "FLOAT", "DOUBLE")
_CAST_OUT = (*_FEEDABLE, "UINT64")


def _lossless_pairs() -> list[tuple[str, str]]:
    from eqsat.terms import LOSSLESS_CASTS

    return [(a, b) for a, b in LOSSLESS_CASTS if a in _FEEDABLE]


def _cast_values(draw: Callable, st: Any, d: str, t1: str, t2: str, shape: tuple[int, ...]) -> np.ndarray:
    """Values of dtype `d` for Cast(Cast(x, t1), t2): floats in [-8, 8], integers over most of their
    range; in range of t2 when a float is cast to the integer t2 (out of range, ONNX leaves that cast
    undefined, so the original graph has no defined result to compare with)."""
    floats = ("FLOAT16", "BFLOAT16", "FLOAT", "DOUBLE")
    low, high = (-8.0, 8.0) if d in floats else (-1e9, 1e9)
    if (d in floats or t1 in floats) and t2 not in floats and t2 != "BOOL":
        low, high = _range_of(_np_dtype(t2), low, high)
    return draw(arrays(d, shape, low, high))


def _cast_pair(rule: str, also: str, back_to_source: bool) -> Callable[[], "SearchStrategy[RuleCase]"]:
    """x (dtype d) -> Cast(t1) -> Cast(t2) with d -> t1 lossless; t2 = d when `back_to_source` (a no-op pair)."""
    def strategy() -> "SearchStrategy[RuleCase]":
        st = _st()

        @st.composite
        def build(draw: Callable) -> RuleCase:
            d, t1 = draw(st.sampled_from(_lossless_pairs()))
            t2 = d if back_to_source else draw(st.sampled_from([t for t in _CAST_OUT if t != t1]))
            shape = draw(shapes(0, 3, 3))
            g = _Graph()
            x = g.input("x", _cast_values(draw, st, d, t1, t2, shape))
            g.node("Cast", [x], "c1", to=_elem_type(t1))
            g.node("Cast", ["c1"], "y", to=_elem_type(t2))
            return g.case(rule, ["y"], also=(also,))

        return build()

    return strategy


_cast_chain_lossless = _cast_pair("cast-chain-lossless", "cast-noop", back_to_source=False)
_cast_noop = _cast_pair("cast-noop", "cast-chain-lossless", back_to_source=True)


def _cast_fp16_roundtrip() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(0, 4, 3))
        g = _Graph()
        x = g.input("x", draw(float_arrays(shape, np.float32, -100, 100)))
        g.node("Cast", [x], "h", to=_elem_type(draw(st.sampled_from(("FLOAT16", "FLOAT16", "BFLOAT16")))))
        g.node("Cast", ["h"], "f", to=onnx.TensorProto.FLOAT)
        out = g.node("Relu", ["f"], "y") if draw(st.booleans()) else "f"
        return g.case("cast-fp16-roundtrip", [out], allow=("precision-changing",))

    return build()


def _relu_merge() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(0, 4, 3))
        g = _Graph()
        prev = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "FLOAT16", "DOUBLE", "INT32"))), shape)))
        for k in range(draw(st.integers(2, 3))):
            prev = g.node("Relu", [prev], f"r{k}")
        return g.case("relu-merge", [prev])

    return build()


def _neutral_element(rule: str, op: str, value: float, *,
                     commutative: bool = True) -> Callable[[], "SearchStrategy[RuleCase]"]:
    """x op k for k filled with the neutral `value` (on either side when `commutative`), -0.0 included."""
    def strategy() -> "SearchStrategy[RuleCase]":
        st = _st()

        @st.composite
        def build(draw: Callable) -> RuleCase:
            shape = draw(shapes(0, 4, 3))
            dtype = draw(st.sampled_from(("FLOAT", "DOUBLE", "FLOAT16", "INT32", "INT64")))
            g = _Graph()
            x = g.input("x", draw(arrays(dtype, shape)))
            if draw(st.booleans()):
                x = g.node("Abs", [x], "ax")
            k = draw(st.integers(0, len(shape)))
            neutral = -0.0 if value == 0.0 and dtype in ("FLOAT", "DOUBLE") and draw(st.booleans()) else value
            g.inits["k"] = np.full((1,) * k, neutral, _np_dtype(dtype))
            g.node(op, ["k", x] if commutative and draw(st.booleans()) else [x, "k"], "y")
            return g.case(rule, ["y"])

        return build()

    return strategy


def _identity_remove() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(0, 4, 3))
        g = _Graph()
        x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64", "BOOL"))), shape)))
        if draw(st.booleans()):  # an output that is an input, under another name
            return g.case("identity-remove", [g.node("Identity", [x], "y")])
        r = g.node("Not" if g.feeds[x].dtype == np.bool_ else "Abs", [x], "r")
        return g.case("identity-remove", [r, g.node("Identity", [r], "y")])

    return build()


def _dropout_remove() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        g = _Graph()
        x = g.input("x", draw(float_arrays(shape)))
        if draw(st.booleans()):
            x = g.node("Relu", [x], "r")
        g.node("Dropout", [x], "y")
        return g.case("dropout-remove", ["y"], opset=draw(st.sampled_from((7, 10, 11))))

    return build()


def _analysis_case(rule: str, kind: str) -> Callable[[], "SearchStrategy[RuleCase]"]:
    """Graphs where a rewrite needs a fact that only the analysis rule `rule` derives (see the docs of
    tests/test_rules_analysis.py): a sunk unary (shape-unary), a sunk binary (shape-binary), a transposed
    constant created by a rewrite (shape-transpose, constant-terms)."""
    def strategy() -> "SearchStrategy[RuleCase]":
        st = _st()

        @st.composite
        def build(draw: Callable) -> RuleCase:
            shape = draw(shapes(1, 4, 3))
            p = draw(perms(len(shape)))
            t_shape = tuple(shape[i] for i in p)
            g = _Graph()
            also: tuple[str, ...] = ("transpose-sink-binary-const", *_SANDWICH)
            back = inverse(p)
            if kind == "unary":
                x = g.input("x", draw(float_arrays(shape)))
                g.nodes.append(_transpose_node(x, "t", p))
                _draw_unary(draw, g, "t", "u", st)
                if g.nodes[-1].op_type == "Cast" or g.nodes[-1].op_type == "IsNaN":
                    g.nodes[-1] = oh.make_node("Relu", ["t"], ["u"])
                _binary_const(draw, st, g, "u", t_shape, "m")
                also += ("transpose-sink-unary",)
            elif kind == "binary":
                op = draw(st.sampled_from(("Add", "Sub", "Mul", "Div")))  # shape-binary needs equal shapes
                g.input("a", draw(float_arrays(shape)))
                g.input("b", draw(float_arrays(shape, low=0.5) if op == "Div" else float_arrays(shape)))
                g.nodes += [_transpose_node("a", "ta", p), _transpose_node("b", "tb", p)]
                g.node(op, ["ta", "tb"], "u")
                _binary_const(draw, st, g, "u", t_shape, "m")
                also += ("transpose-sink-binary",)
            else:  # a constant transposed by one sinking step is sunk again through a second transpose
                q = draw(perms(len(shape)))
                x = g.input("x", draw(float_arrays(shape)))
                g.nodes += [_transpose_node(x, "t0", q), _transpose_node("t0", "t", p)]
                qp_shape = tuple(shape[q[i]] for i in p)
                _binary_const(draw, st, g, "t", qp_shape, "m")
                also = ("transpose-sink-binary-const",)
                back = inverse(tuple(q[i] for i in p))
            g.nodes.append(_transpose_node("m", "y", back))
            return g.case(rule, ["y"], also=also)

        return build()

    return strategy


#: rule name -> strategy of graphs where the rule fires (eqsat.testing.check assembles all families').
PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "transpose-merge": _transpose_merge,
    "transpose-identity": _transpose_identity,
    "transpose-sink-unary": _transpose_sink_unary,
    "transpose-sink-binary": _transpose_sink_binary,
    "transpose-sink-binary-const": _transpose_sink_binary_const,
    "transpose-sink-pad": _transpose_sink_pad,
    "transpose-sink-reduce": _transpose_sink_reduce,
    "transpose-to-reshape": _transpose_to_reshape,
    "reshape-transpose-reshape": _reshape_transpose_reshape,
    "squeeze-unsqueeze-cancel": _squeeze_unsqueeze_cancel,
    "cast-noop": _cast_noop,
    "cast-chain-lossless": _cast_chain_lossless,
    "cast-fp16-roundtrip": _cast_fp16_roundtrip,
    "relu-merge": _relu_merge,
    "mul-one": _neutral_element("mul-one", "Mul", 1.0),
    "add-zero": _neutral_element("add-zero", "Add", 0.0),
    "identity-remove": _identity_remove,
    "dropout-remove": _dropout_remove,
    "shape-unary": _analysis_case("shape-unary", "unary"),
    "shape-binary": _analysis_case("shape-binary", "binary"),
    "shape-transpose": _analysis_case("shape-transpose", "transposed-constant"),
    "constant-terms": _analysis_case("constant-terms", "transposed-constant"),
}
