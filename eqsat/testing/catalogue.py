"""Graph builders (hypothesis strategies) for the rule catalogue families: normalization, activation, quant,
elementwise, and the cast and cleanup rules added with them. `eqsat.testing.PROPERTIES` includes these.

Each builder draws a small graph where its rule's guard holds (shapes, dtypes, constants, opset) and the
values keep the comparison meaningful: LayerNormalization rows have at least four elements of spread
values (onnxruntime's kernel computes the variance as E[x^2] - E[x]^2, which loses digits on
near-constant rows: a property of the fused kernel that `fp-reassoc` tolerates only for spread data),
quantization scales keep the rounding within the precision-changing tolerance, float-to-integer casts stay
in range.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from eqsat.testing.cases import RuleCase, _Graph
from eqsat.testing.models import _elem_type, _np_dtype
from eqsat.testing.properties import _neutral_element
from eqsat.testing.strategies import _st, arrays, broadcastable_shapes, float_arrays, perms, shapes


SQRT2 = math.sqrt(2.0)
OPSET_AXES_INPUT = 18  # ReduceMean takes its axes as an input from opset 18 on


def _reduce_mean(g: _Graph, x: str, y: str, axes: list[int], opset: int) -> str:
    if opset >= OPSET_AXES_INPUT:
        g.inits[f"{y}_axes"] = np.array(axes, np.int64)
        return g.node("ReduceMean", [x, f"{y}_axes"], y, keepdims=1)
    return g.node("ReduceMean", [x], y, axes=list(axes), keepdims=1)


def _const(g: _Graph, name: str, value: Any, dtype: Any) -> str:
    g.inits[name] = np.asarray(value, _np_dtype(dtype))
    return name


def _moments(draw: Callable, st: Any, g: _Graph, x: str, axes: list[int], dtype: str, opset: int) -> str:
    """(x - mean) / sqrt(var + eps) over `axes`, in a drawn exporter variant; returns the output name."""
    m = _reduce_mean(g, x, "mean", axes, opset)
    d = g.node("Sub", [x, m], "d")
    if draw(st.booleans()):
        sq = g.node("Pow", [d, _const(g, "two", 2.0, "FLOAT" if draw(st.booleans()) else dtype)], "sq")
    else:
        sq = g.node("Mul", [d, d], "sq")
    var = _reduce_mean(g, sq, "var", axes, opset)
    eps = _const(g, "eps", draw(st.sampled_from((1e-5, 1e-12, 1e-3))), dtype)
    std = g.node("Sqrt", [g.node("Add", [var, eps], "ve")], "std")
    if draw(st.booleans()):
        return g.node("Div", [d, std], "n")
    return g.node("Mul", [d, g.node("Reciprocal", [std], "rstd")], "n")


def _spread(draw: Callable, st: Any, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Values in [-8, 8] plus a drawn offset: rows are far from constant."""
    base = draw(float_arrays(shape, _np_dtype(dtype), -8.0, 8.0))
    return (base + np.asarray(draw(st.sampled_from((0.0, 3.0, -2.0))), base.dtype)).astype(base.dtype)


def _layernorm(rule: str, affine: str) -> Callable[[], Any]:
    """Moments over the last axis (LN decomposition), then nothing / Mul(gamma) / Mul(gamma) + Add(beta)."""
    also = {"layernorm-fuse": (), "layernorm-fuse-scale": ("layernorm-fuse",),
            "layernorm-fuse-bias": ("layernorm-fuse", "layernorm-fuse-scale")}[rule]

    def strategy() -> Any:
        st = _st()

        @st.composite
        def build(draw: Callable) -> RuleCase:
            rank = draw(st.integers(1, 4))
            shape = draw(shapes(rank - 1, rank - 1, 3)) + (draw(st.integers(4, 8)),)
            dtype = "FLOAT"
            opset = draw(st.sampled_from((17, 18, 20)))
            g = _Graph()
            x = g.input("x", _spread(draw, st, shape, dtype))
            axis = rank - 1 if draw(st.booleans()) else -1
            out = _moments(draw, st, g, x, [axis], dtype, opset)
            gamma_shape = draw(st.sampled_from(((shape[-1],), (1,) * (rank - 1) + (shape[-1],))))
            if affine in ("scale", "bias") and (affine == "scale" or draw(st.booleans())):
                gamma = _const(g, "gamma", draw(float_arrays(gamma_shape, _np_dtype(dtype), -2, 2)), dtype)
                out = g.node("Mul", [out, gamma] if draw(st.booleans()) else [gamma, out], "scaled")
            if affine == "bias":
                beta = _const(g, "beta", draw(float_arrays(gamma_shape, _np_dtype(dtype), -2, 2)), dtype)
                out = g.node("Add", [out, beta] if draw(st.booleans()) else [beta, out], "y")
            return g.case(rule, [out], also=also, opset=opset)

        return build()

    return strategy


def _layernorm_decompose() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        rank = draw(st.integers(1, 4))
        shape = draw(shapes(rank - 1, rank - 1, 3)) + (draw(st.integers(4, 8)),)
        g = _Graph()
        x = g.input("x", _spread(draw, st, shape, "FLOAT"))
        inputs = [x, _const(g, "gamma", draw(float_arrays((shape[-1],), np.float32, -2, 2)), "FLOAT")]
        if draw(st.booleans()):
            inputs.append(_const(g, "beta", draw(float_arrays((shape[-1],), np.float32, -2, 2)), "FLOAT"))
        g.node("LayerNormalization", inputs, "y", axis=-1, epsilon=draw(st.sampled_from((1e-5, 1e-3))))
        return g.case("layernorm-decompose", ["y"], opset=draw(st.sampled_from((17, 18))))

    return build()


def _instancenorm(rule: str) -> Callable[[], Any]:
    def strategy() -> Any:
        st = _st()

        @st.composite
        def build(draw: Callable) -> RuleCase:
            rank = draw(st.integers(3, 4))
            spatial = (draw(st.integers(4, 6)),) + draw(shapes(rank - 3, rank - 3, 2))
            shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3))) + spatial
            dtype = "FLOAT"
            opset = draw(st.sampled_from((13, 17, 18)))
            g = _Graph()
            x = g.input("x", _spread(draw, st, shape, dtype))
            out = _moments(draw, st, g, x, list(range(2, rank)), dtype, opset)
            if rule == "instancenorm-fuse-affine":
                per_channel = (1, shape[1]) + (1,) * (rank - 2)
                gamma = _const(g, "gamma", draw(float_arrays(per_channel, _np_dtype(dtype), -2, 2)), dtype)
                out = g.node("Mul", [out, gamma] if draw(st.booleans()) else [gamma, out], "scaled")
                if draw(st.booleans()):
                    beta = _const(g, "beta", draw(float_arrays(per_channel, _np_dtype(dtype), -2, 2)), dtype)
                    out = g.node("Add", [out, beta] if draw(st.booleans()) else [beta, out], "y")
            also = ("instancenorm-fuse",) if rule == "instancenorm-fuse-affine" else ()
            return g.case(rule, [out], also=also, opset=opset)

        return build()

    return strategy


def _gelu_product(draw: Callable, st: Any, g: _Graph, x: str, h: str, dtype: str) -> str:
    """x * h * 0.5 in one of the association orders exporters write."""
    half = _const(g, "half", 0.5, dtype)
    form = draw(st.integers(0, 3))
    if form < 2:
        xh = g.node("Mul", [x, h] if form == 0 else [h, x], "xh")
        return g.node("Mul", [xh, half], "y")
    xs = g.node("Mul", [x, half], "xhalf")
    return g.node("Mul", [xs, h] if form == 2 else [h, xs], "y")


def _gelu(rule: str) -> Callable[[], Any]:
    def strategy() -> Any:
        st = _st()

        @st.composite
        def build(draw: Callable) -> RuleCase:
            shape = draw(shapes(1, 3, 4))
            dtype = "FLOAT"
            g = _Graph()
            x = g.input("x", draw(float_arrays(shape, _np_dtype(dtype), -5, 5)))
            one = _const(g, "one", 1.0, dtype)
            if rule == "gelu-fuse":
                if draw(st.booleans()):
                    u = g.node("Div", [x, _const(g, "k", SQRT2, dtype)], "u")
                else:
                    u = g.node("Mul", [x, _const(g, "k", 1 / SQRT2, dtype)], "u")
                h = g.node("Add", [g.node("Erf", [u], "e"), one], "h")
            else:
                if draw(st.booleans()):
                    cube = g.node("Pow", [x, _const(g, "three", 3.0, dtype)], "cube")
                else:
                    cube = g.node("Mul", [g.node("Mul", [x, x], "x2"), x], "cube")
                c = g.node("Mul", [cube, _const(g, "c1", 0.044715, dtype)], "c")
                inner = g.node("Mul", [g.node("Add", [x, c], "p"), _const(g, "c2", math.sqrt(2 / math.pi), dtype)], "u")
                h = g.node("Add", [g.node("Tanh", [inner], "t"), one], "h")
            out = _gelu_product(draw, st, g, x, h, dtype)
            return g.case(rule, [out], opset=20)

        return build()

    return strategy


def _gelu_decompose() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        g = _Graph()
        x = g.input("x", draw(float_arrays(draw(shapes(1, 3, 4)), np.float32, -5, 5)))
        g.node("Gelu", [x], "y", approximate=draw(st.sampled_from(("none", "tanh"))))
        return g.case("gelu-decompose", ["y"], opset=20)

    return build()


def _leakyrelu_from_max() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 3, 4))
        dtype = draw(st.sampled_from(("FLOAT", "FLOAT16")))
        g = _Graph()
        x = g.input("x", draw(arrays(dtype, shape)))
        a = _const(g, "a", draw(st.sampled_from((0.01, 0.1, 0.2, 0.5, 0.999))), dtype)
        ax = g.node("Mul", [x, a] if draw(st.booleans()) else [a, x], "ax")
        g.node("Max", [x, ax] if draw(st.booleans()) else [ax, x], "y")
        return g.case("leakyrelu-from-max", ["y"], opset=draw(st.sampled_from((13, 17))))

    return build()


def _hardswish_fuse() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        g = _Graph()
        x = g.input("x", draw(float_arrays(draw(shapes(1, 3, 4)), np.float32, -6, 6)))
        shifted = g.node("Add", [x, _const(g, "three", 3.0, "FLOAT")], "s")
        h = g.node("Clip", [shifted, _const(g, "lo", 0.0, "FLOAT"), _const(g, "hi", 6.0, "FLOAT")], "h")
        by_six = draw(st.booleans())
        scale = _const(g, "k", 6.0 if by_six else 1 / 6, "FLOAT")
        if draw(st.booleans()):  # (x * h) / 6
            xh = g.node("Mul", [x, h] if draw(st.booleans()) else [h, x], "xh")
            g.node("Div" if by_six else "Mul", [xh, scale], "y")
        else:                    # x * (h / 6)
            hs = g.node("Div" if by_six else "Mul", [h, scale], "hs")
            g.node("Mul", [x, hs] if draw(st.booleans()) else [hs, x], "y")
        return g.case("hardswish-fuse", ["y"], opset=draw(st.sampled_from((11, 14, 17))))

    return build()


def _prelu_from_relu() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        dtype = draw(st.sampled_from(("FLOAT", "FLOAT16")))
        g = _Graph()
        x = g.input("x", draw(arrays(dtype, shape)))
        a_shape = draw(broadcastable_shapes(shape))
        a = _const(g, "a", draw(float_arrays(a_shape, _np_dtype(dtype), -2, 2)), dtype)
        pos = g.node("Relu", [x], "pos")
        neg = g.node("Relu", [g.node("Neg", [x], "nx")], "neg")
        scaled = g.node("Mul", [neg, a] if draw(st.booleans()) else [a, neg], "an")
        if draw(st.booleans()):
            g.node("Sub", [pos, scaled], "y")
        else:
            g.node("Add", [pos, scaled] if draw(st.booleans()) else [scaled, pos], "y")
        return g.case("prelu-from-relu", ["y"])

    return build()


def _prelu_to_leakyrelu() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        dtype = draw(st.sampled_from(("FLOAT", "FLOAT16")))
        g = _Graph()
        x = g.input("x", draw(arrays(dtype, shape)))
        slope = draw(st.sampled_from((0.01, 0.25, -0.5, 1.5)))
        k = draw(st.integers(0, len(shape)))
        g.inits["a"] = np.full((1,) * k, slope, _np_dtype(dtype))
        g.node("PRelu", [x, "a"], "y")
        return g.case("prelu-to-leakyrelu", ["y"])

    return build()


def _clip(g: _Graph, x: str, y: str, lo: float | None, hi: float | None, dtype: str, opset: int) -> str:
    if opset < 11:
        attrs = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
        return g.node("Clip", [x], y, **attrs)
    inputs = [x, _const(g, f"{y}_lo", lo, dtype) if lo is not None else ""]
    if hi is not None:
        inputs.append(_const(g, f"{y}_hi", hi, dtype))
    return g.node("Clip", inputs, y)


def _clip_merge() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 3, 4))
        opset = draw(st.sampled_from((6, 13, 17)))
        dtype = "FLOAT" if opset < 12 else draw(st.sampled_from(("FLOAT", "FLOAT", "FLOAT16", "INT32")))
        g = _Graph()
        x = g.input("x", draw(arrays(dtype, shape, -10, 10)))
        bounds = sorted(draw(st.lists(st.sampled_from((-6.0, -1.0, 0.0, 1.0, 3.0, 6.0)), min_size=4, max_size=4)))
        # overlapping intervals [a, b] and [c, d]: a <= d and c <= b
        a, c, b, d = bounds if draw(st.booleans()) else (bounds[0], bounds[1], bounds[3], bounds[2])
        if draw(st.booleans()):
            a, b, c, d = c, d, a, b
        inner = _clip(g, x, "c1", a if draw(st.integers(0, 4)) else None, b, dtype, opset)
        _clip(g, inner, "y", c, d if draw(st.integers(0, 4)) else None, dtype, opset)
        return g.case("clip-merge", ["y"], opset=opset)

    return build()


def _relu_clip_merge() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 3, 4))
        opset = draw(st.sampled_from((6, 13, 17)))  # Relu takes integers from opset 14 on
        dtype = "FLOAT" if opset < 14 else draw(st.sampled_from(("FLOAT", "FLOAT16", "INT32")))
        g = _Graph()
        x = g.input("x", draw(arrays(dtype, shape, -10, 10)))
        lo = draw(st.sampled_from((-6.0, -1.0, 0.0, 2.0)))
        hi = max(lo, 0.0) + draw(st.sampled_from((0.0, 1.0, 6.0)))
        if draw(st.booleans()):
            g.node("Relu", [_clip(g, x, "c", lo, hi, dtype, opset)], "y")
        else:
            _clip(g, g.node("Relu", [x], "r"), "y", lo, hi, dtype, opset)
        return g.case("relu-clip-merge", ["y"], opset=opset)

    return build()


# ---- quant ----

def _qparams(draw: Callable, st: Any, g: _Graph, qtype: str, channels: int | None, prefix: str = "") -> tuple[str, str]:
    """Scale (per tensor, or per channel when `channels`) and zero point initializers."""
    shape = () if channels is None else (channels,)
    scale = np.asarray(draw(float_arrays(shape, np.float32, 0.01, 0.2)), np.float32)
    info = np.iinfo(_np_dtype(qtype))
    zp = np.asarray(draw(arrays(qtype, shape, max(info.min, -20), min(info.max, 150))), _np_dtype(qtype))
    g.inits[f"{prefix}s"], g.inits[f"{prefix}z"] = scale, zp
    return f"{prefix}s", f"{prefix}z"


def _qdq_cancel() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        qtype = draw(st.sampled_from(("INT8", "UINT8")))
        per_axis = len(shape) > 1 and draw(st.booleans())
        g = _Graph()
        x = g.input("x", draw(arrays(qtype, shape, -128, 255)))
        s, z = _qparams(draw, st, g, qtype, shape[1] if per_axis else None)
        attrs = {"axis": 1} if per_axis else {}
        dq = g.node("DequantizeLinear", [x, s, z], "dq", **attrs)
        g.node("QuantizeLinear", [dq, s, z], "y", **attrs)
        outs = ["y", "dq"] if draw(st.booleans()) else ["y"]
        return g.case("qdq-cancel", outs, opset=draw(st.sampled_from((13, 17))))

    return build()


def _dq_q_drop() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        g = _Graph()
        values = draw(float_arrays(shape, np.float32, -4, 4))
        big = max(float(np.max(np.abs(values))), 1e-2)
        flat = values.reshape(-1)  # both signs at the largest magnitude: the output's scale is >= 60 steps
        flat[0] = big
        flat[-1] = -big if flat.size > 1 else big
        x = g.input("x", values)
        # `big` is 60 to 400 steps: beyond ~127 steps Quantize saturates (the Clip must clamp alike); the
        # rounding error <= s / 2 stays under 1% of the output's scale (>= 60 steps)
        g.inits["s"] = np.array(big / draw(st.sampled_from((60.0, 100.0, 200.0, 400.0))), np.float32)
        zp = draw(st.sampled_from((np.array(128, np.uint8), np.array(0, np.int8), np.array(3, np.int8),
                                   np.array(-5, np.int8), np.array(0, np.uint8), None)))
        params = ["s"]
        if zp is not None:
            g.inits["z"] = zp
            params.append("z")
        q = g.node("QuantizeLinear", [x, *params], "q")
        g.node("DequantizeLinear", [q, *params], "y")
        return g.case("dq-q-drop", ["y"], allow=("precision-changing",))

    return build()


def _qdq_zero_point_default() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        g = _Graph()
        g.inits["s"] = np.array(draw(st.sampled_from((0.05, 0.1))), np.float32)
        if draw(st.booleans()):  # Quantize with an explicit uint8 zero point 0
            x = g.input("x", draw(float_arrays(shape, np.float32, -4, 4)))
            g.inits["z"] = np.zeros((1,) * draw(st.integers(0, 1)), np.uint8)
            g.node("QuantizeLinear", [x, "s", "z"], "y")
        else:
            qtype = draw(st.sampled_from(("INT8", "UINT8", "INT32")))
            x = g.input("x", draw(arrays(qtype, shape, -128, 255)))
            g.inits["z"] = np.zeros((), _np_dtype(qtype))
            g.node("DequantizeLinear", [x, "s", "z"], "y")
        return g.case("qdq-zero-point-default", ["y"])

    return build()


def _qdq_sink(rule: str) -> Callable[[], Any]:
    """DQ -> layout op -> Q (the pair meets and cancels), or a lone DQ -> layout op, or layout op -> Q."""
    def strategy() -> Any:
        st = _st()

        @st.composite
        def build(draw: Callable) -> RuleCase:
            shape = draw(shapes(1, 4, 3))
            qtype = draw(st.sampled_from(("INT8", "UINT8")))
            g = _Graph()
            s, z = _qparams(draw, st, g, qtype, None)

            def layout(src: str, out: str) -> str:
                if rule == "qdq-sink-transpose":
                    return g.node("Transpose", [src], out, perm=list(draw(perms(len(shape)))))
                target = [-1] if draw(st.booleans()) else [int(np.prod(shape)), -1]  # -1: not folded away
                g.inits[f"{out}_shape"] = np.array(target, np.int64)
                return g.node("Reshape", [src, f"{out}_shape"], out)

            kind = draw(st.sampled_from(("pair", "dq", "q")))
            if kind == "q":
                x = g.input("x", draw(float_arrays(shape, np.float32, -4, 4)))
                g.node("QuantizeLinear", [layout(x, "t"), s, z], "y")
                also: tuple[str, ...] = ()
            else:
                x = g.input("x", draw(arrays(qtype, shape, -128, 255)))
                t = layout(g.node("DequantizeLinear", [x, s, z], "dq"), "t")
                if kind == "pair":
                    g.node("QuantizeLinear", [t, s, z], "y")
                else:
                    g.node("Relu", [t], "y")
                also = ("qdq-cancel",)
            return g.case(rule, ["y"], also=also)

        return build()

    return strategy


def _qdq_zero_point_shift() -> Any:
    """A DQ-of-Q pair with uint8 zero point 128 (or its int8 twin with zero point 0, the DQ's maybe absent), the
    Q sometimes also a graph output; or a uint8 constant under DQ with zero point 128."""
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        g = _Graph()
        g.inits["s"] = np.asarray(draw(st.sampled_from((0.01, 0.05, 0.2, 1.0))), np.float32)
        zshape = (1,) * draw(st.integers(0, 1))
        attrs = {"axis": 0} if draw(st.booleans()) else {}
        kind = draw(st.sampled_from(("uint8", "int8", "weight")))
        x = g.input("x", draw(float_arrays(shape, np.float32, -40, 40)))  # beyond the grid: both ends saturate
        outs = ["y"]
        if kind == "weight":
            g.inits["w"] = draw(arrays("UINT8", shape, 0, 255))
            g.inits["z"] = np.full(zshape, 128, np.uint8)
            g.node("Add", [x, g.node("DequantizeLinear", ["w", "s", "z"], "dq", **attrs)], "y")
        else:
            qtype, zp = ("UINT8", 128) if kind == "uint8" else ("INT8", 0)
            g.inits["z"] = np.full(zshape, zp, _np_dtype(qtype))
            q = g.node("QuantizeLinear", [x, "s", "z"], "q", **attrs)
            absent = kind == "int8" and draw(st.booleans())  # the DQ of an int8 pair may omit its zero point 0
            g.node("DequantizeLinear", [q, "s"] if absent else [q, "s", "z"], "y", **attrs)
            outs += ["q"] if draw(st.booleans()) else []
        return g.case("qdq-zero-point-shift", outs, opset=draw(st.sampled_from((13, 17, 19))))

    return build()


def _int_range(qtype: str) -> tuple[int, int]:
    info = np.iinfo(_np_dtype(qtype))
    return int(info.min), int(info.max)


def _rescale_params(draw: Callable, st: Any, exact: bool) -> tuple[str, float, float, str]:
    """(type of the middle grid, s1, s2, its x type): s1 = k s2 exactly (`exact`) or a ratio s1 / s2 that is not
    an integer, each a float32."""
    mid = draw(st.sampled_from(("UINT8", "INT8", "UINT16", "INT16")))
    wide = mid.endswith("16")
    if exact:
        if draw(st.booleans()):  # a short mantissa times any small integer: exact in float32
            s2 = float(np.float32(draw(st.integers(1, 1023)) * 2.0 ** -draw(st.integers(8, 16))))
            k = draw(st.integers(1, 200)) if wide else 1
        else:  # a decimal scale times a power of two
            s2 = float(np.float32(draw(st.sampled_from((0.01, 0.05, 0.003)))))
            k = 2 ** draw(st.integers(0, 7)) if wide else 1
        s1 = float(np.float32(k * s2))
        assert s1 == k * s2 and math.fmod(s1, s2) == 0.0
        return mid, s1, s2, draw(st.sampled_from(("UINT8", "INT8")))
    s1 = float(np.float32(draw(st.sampled_from((0.01, 0.05, 0.003)))))
    ratio = draw(st.floats(1.05, 8.0)) if wide else draw(st.floats(0.6, 0.95))
    s2 = float(np.float32(s1 / ratio))
    if math.fmod(s1, s2) == 0.0:  # the rounding made the ratio an integer after all
        s2 = float(np.nextafter(np.float32(s2), np.float32(1.0)))
    return mid, s1, s2, draw(st.sampled_from(("UINT8", "INT8")))


def _rescale_merge(rule: str) -> Callable[[], Any]:
    """x -> DQ(s1, z1) -> Q(s2, z2) -> DQ(s2, z2) with the middle never saturating, then (exact rule only) a
    second requantize Q(s3, z3) (per tensor or per channel), or a float consumer. x covers its type's range."""
    exact = rule == "rescale-merge"

    def strategy() -> Any:
        st = _st()

        @st.composite
        def build(draw: Callable) -> RuleCase:
            shape = (2,) + draw(shapes(0, 3, 3))
            mid, s1, s2, xtype = _rescale_params(draw, st, exact)
            (lo1, hi1), (lo2, hi2) = (_int_range(t) for t in (xtype, mid))
            z1 = draw(st.integers(lo1, hi1))
            r = s1 / s2
            z2_lo, z2_hi = math.ceil(lo2 - r * (lo1 - z1)), math.floor(hi2 - r * (hi1 - z1))
            if z2_lo > z2_hi:  # this z1 leaves no room: centre x's range instead
                z1 = (lo1 + hi1 + 1) // 2
                z2_lo, z2_hi = math.ceil(lo2 - r * (lo1 - z1)), math.floor(hi2 - r * (hi1 - z1))
            z2 = draw(st.integers(z2_lo, z2_hi))
            g = _Graph()
            values = draw(arrays(xtype, shape, lo1, hi1)).reshape(-1)
            values[0], values[-1] = lo1, hi1  # both ends of x's range: where the middle would saturate
            x = g.input("x", values.reshape(shape))
            g.inits.update({"s1": np.array(s1, np.float32), "s2": np.array(s2, np.float32)})
            absent1 = z1 == 0 and draw(st.booleans())
            absent2 = z2 == 0 and mid == "UINT8" and draw(st.booleans())
            if not absent1:
                g.inits["z1"] = np.array(z1, _np_dtype(xtype))
            if not absent2:
                g.inits["z2"] = np.array(z2, _np_dtype(mid))
            p1 = ["s1"] if absent1 else ["s1", "z1"]
            p2 = ["s2"] if absent2 else ["s2", "z2"]
            d1 = g.node("DequantizeLinear", [x, *p1], "d1")
            d2 = g.node("DequantizeLinear", [g.node("QuantizeLinear", [d1, *p2], "q2"), *p2], "d2")
            end = draw(st.sampled_from(("requantize", "float"))) if exact else "float"
            if end == "requantize":
                per_axis = draw(st.booleans())
                channels = shape[1] if per_axis and len(shape) > 1 else None
                s3 = np.asarray(draw(float_arrays(() if channels is None else (channels,), np.float32, 0.001, 0.5)), np.float32)
                t3 = draw(st.sampled_from(("UINT8", "INT8")))
                z3 = draw(st.integers(0, 10) if t3 == "UINT8" else st.integers(-5, 5))
                g.inits.update({"s3": s3, "z3": np.full(s3.shape, z3, _np_dtype(t3))})
                g.node("QuantizeLinear", [d2, "s3", "z3"], "y", **({"axis": 1} if channels else {}))
            else:  # |x - z1| reaches half of x's range: the rounding (lossy rule) stays within 1% of the output
                g.node(draw(st.sampled_from(("Abs", "Identity"))), [d2], "y")
            opset = 21 if mid.endswith("16") else draw(st.sampled_from((13, 17, 21)))
            return g.case(rule, ["y"], allow=() if exact else ("precision-changing",), opset=opset)

        return build()

    return strategy


# ---- cast ----

def _cast_int_truncate_chain() -> Any:
    from eqsat.rewrites.cast import TRUNCATING_PAIRS

    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        t1, t2 = draw(st.sampled_from(TRUNCATING_PAIRS))
        # x's dtype other than t1 (the folder drops a cast to x's own dtype: no chain left)
        d = draw(st.sampled_from([d for d in ("BOOL", "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32") if d != t1]))
        shape = draw(shapes(0, 3, 4))
        g = _Graph()
        x = g.input("x", draw(arrays(d, shape, -3e9, 3e9)))
        g.node("Cast", [x], "c1", to=_elem_type(t1))
        g.node("Cast", ["c1"], "y", to=_elem_type(t2))
        return g.case("cast-int-truncate-chain", ["y"], also=("cast-chain-lossless", "cast-noop"))

    return build()


def _cast_sink_reshape() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 3, 3))
        g = _Graph()
        d = draw(st.sampled_from(("FLOAT", "INT8", "FLOAT16")))
        x = g.input("x", draw(arrays(d, shape)))
        src = x
        also: tuple[str, ...] = ()
        if draw(st.booleans()):  # an inner cast the sunk one meets
            src = g.node("Cast", [x], "c0", to=_elem_type(draw(st.sampled_from(("DOUBLE", "INT32")))))
            also = ("cast-chain-lossless", "cast-noop")
        g.inits["shape"] = np.array([-1] if draw(st.booleans()) else [1, -1], np.int64)  # -1: never folded away
        r = g.node("Reshape", [src, "shape"], "r")
        src_dtype = d if src == x else g.nodes[0].attribute[0].i
        targets = [t for t in ("FLOAT", "DOUBLE", "INT64", "INT8") if _elem_type(t) != _elem_type(src_dtype)]
        g.node("Cast", [r], "y", to=_elem_type(draw(st.sampled_from(targets))))
        return g.case("cast-sink-reshape", ["y"], also=also)

    return build()


def _cast_fp16_arith() -> Any:
    """fp16 inputs widened to fp32, one op, rounded back to fp16 (a mixed-precision converter's island)."""
    from eqsat.rewrites.cast import NARROW_BINARY

    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        op = draw(st.sampled_from(NARROW_BINARY + ("Sqrt", "Pow")))
        a_shape = draw(shapes(0, 3, 4))
        b_shape = draw(broadcastable_shapes(a_shape))
        g = _Graph()
        a = g.input("a", draw(arrays("FLOAT16", a_shape, -300.0, 300.0)))
        a = g.node("Cast", [g.node("Abs", [a], "abs") if op == "Sqrt" else a], "a32", to=_elem_type("FLOAT"))
        if op == "Sqrt":
            z = g.node("Sqrt", [a], "z")
        elif op == "Pow":
            z = g.node("Pow", [a, _const(g, "two", 2.0, draw(st.sampled_from(("FLOAT", "FLOAT16"))))], "z")
        else:
            b = g.node("Cast", [g.input("b", draw(arrays("FLOAT16", b_shape, -300.0, 300.0)))], "b32",
                       to=_elem_type("FLOAT"))
            z = g.node(op, [a, b], "z")
        g.node("Cast", [z], "y", to=_elem_type("FLOAT16"))
        return g.case("cast-fp16-arith", ["y"])

    return build()


# ---- elementwise ----

def _div_const_to_mul() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        dtype = draw(st.sampled_from(("FLOAT", "FLOAT16", "DOUBLE")))
        g = _Graph()
        x = g.input("x", draw(arrays(dtype, shape)))
        c_shape = draw(broadcastable_shapes(shape))
        if dtype == "FLOAT16":  # float16 tensors may hold overflowing divisors: single elements only
            c_shape = (1,) * len(c_shape)
        c = draw(float_arrays(c_shape, _np_dtype(dtype), 0.5, 4.0))
        if draw(st.booleans()):
            c = -c
        if c.size > 1 and draw(st.integers(0, 3)) == 0:  # zeros: x / 0 = x * inf (NaN and inf alike)
            c.reshape(-1)[0] = 0.0
            g.feeds[x].reshape(-1)[0] = 0.0
        g.inits["c"] = c
        g.node("Div", [x, "c"], "y")
        return g.case("div-const-to-mul", ["y"])

    return build()


def _neg_neg() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(0, 4, 3))
        g = _Graph()
        x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT32", "INT8"))), shape)))
        g.node("Neg", [g.node("Neg", [x], "n1")], "y")
        return g.case("neg-neg", ["y"])

    return build()


# ---- cleanup ----

def _expand_noop() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3, min_dim=2))
        g = _Graph()
        x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64", "BOOL"))), shape)))
        # a target other than x's own shape (the folder already removes that one): ones of some rank <= x's
        g.inits["shape"] = np.ones(draw(st.integers(1, len(shape))), np.int64)
        g.node("Expand", [x, "shape"], "y")
        return g.case("expand-noop", ["y"])

    return build()


def _reshape_noop() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        g = _Graph()
        x = g.input("x", draw(arrays("FLOAT", shape)))
        target = list(shape)  # x's own shape with a -1 (and maybe a 0: copies the input dim); the folder
        target[draw(st.integers(0, len(shape) - 1))] = -1  # removes a Reshape to the literal same shape
        if len(shape) > 1 and draw(st.booleans()):
            target[[i for i, d in enumerate(target) if d != -1][0]] = 0
        g.inits["shape"] = np.array(target, np.int64)
        g.node("Relu", [g.node("Reshape", [x, "shape"], "r")], "y")
        return g.case("reshape-noop", ["y"])

    return build()


def _pad_noop() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3, min_dim=2))
        g = _Graph()
        x = g.input("x", draw(float_arrays(shape)))
        g.inits["pads"] = np.zeros(2 * len(shape), np.int64)
        g.node("Pad", [x, "pads"], "y", mode=draw(st.sampled_from(("constant", "reflect", "edge"))))
        return g.case("pad-noop", ["y"])

    return build()


def _slice_noop() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        rank = len(shape)
        axes = sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank)))
        g = _Graph()
        x = g.input("x", draw(float_arrays(shape)))
        with_axes = draw(st.booleans())
        if not with_axes:  # without an axes input, starts/ends apply to the first len(axes) axes
            axes = list(range(len(axes)))
        g.inits["starts"] = np.array([draw(st.sampled_from((0, -shape[a] - 5))) for a in axes], np.int64)
        g.inits["ends"] = np.array([draw(st.sampled_from((shape[a], 1000, np.iinfo(np.int64).max))) for a in axes],
                                   np.int64)
        inputs = [x, "starts", "ends"]
        if with_axes:
            g.inits["axes"] = np.array([a - rank if draw(st.booleans()) else a for a in axes], np.int64)
            inputs.append("axes")
            if draw(st.booleans()):
                g.inits["steps"] = np.ones(len(axes), np.int64)
                inputs.append("steps")
        g.node("Slice", inputs, "y")
        return g.case("slice-noop", ["y"])

    return build()


def _pad_merge() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        rank = len(shape)
        g = _Graph()
        x = g.input("x", draw(float_arrays(shape)))
        g.inits["p"] = np.array([draw(st.integers(0, 2)) for _ in range(2 * rank)], np.int64)
        g.inits["q"] = np.array([draw(st.integers(0, 2)) for _ in range(2 * rank)], np.int64)
        inputs = ([x, "p"], ["p1", "q"])
        if draw(st.booleans()):
            g.inits["v"] = np.array(draw(st.sampled_from((0.0, 1.5, -3.0))), np.float32)
            inputs = ([x, "p", "v"], ["p1", "q", "v"])
        g.node("Pad", inputs[0], "p1", mode="constant")
        g.node("Pad", inputs[1], "y", mode="constant")
        return g.case("pad-merge", ["y"])

    return build()


def _reshape_merge() -> Any:
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        size = int(np.prod(shape))
        g = _Graph()
        x = g.input("x", draw(float_arrays(shape)))
        g.inits["s1"] = np.array(draw(st.sampled_from(([-1], [1, -1], [-1, 1, 1]))), np.int64)
        second = list(draw(st.sampled_from(([size, -1], [-1], [1, -1], list(shape)))))
        second[-1] = -1  # never literally the inner output's shape (the folder removes that Reshape itself)
        g.inits["s2"] = np.array(second, np.int64)
        g.node("Reshape", [g.node("Reshape", [x, "s1"], "r1"), "s2"], "y")
        return g.case("reshape-merge", ["y"])

    return build()


PROPERTIES: dict[str, Callable[[], Any]] = {
    "layernorm-fuse": _layernorm("layernorm-fuse", "none"),
    "layernorm-fuse-scale": _layernorm("layernorm-fuse-scale", "scale"),
    "layernorm-fuse-bias": _layernorm("layernorm-fuse-bias", "bias"),
    "layernorm-decompose": _layernorm_decompose,
    "instancenorm-fuse": _instancenorm("instancenorm-fuse"),
    "instancenorm-fuse-affine": _instancenorm("instancenorm-fuse-affine"),
    "gelu-fuse": _gelu("gelu-fuse"),
    "gelu-tanh-fuse": _gelu("gelu-tanh-fuse"),
    "gelu-decompose": _gelu_decompose,
    "hardswish-fuse": _hardswish_fuse,
    "leakyrelu-from-max": _leakyrelu_from_max,
    "prelu-from-relu": _prelu_from_relu,
    "prelu-to-leakyrelu": _prelu_to_leakyrelu,
    "clip-merge": _clip_merge,
    "relu-clip-merge": _relu_clip_merge,
    "qdq-cancel": _qdq_cancel,
    "dq-q-drop": _dq_q_drop,
    "qdq-zero-point-default": _qdq_zero_point_default,
    "qdq-sink-transpose": _qdq_sink("qdq-sink-transpose"),
    "qdq-sink-reshape": _qdq_sink("qdq-sink-reshape"),
    "qdq-zero-point-shift": _qdq_zero_point_shift,
    "rescale-merge": _rescale_merge("rescale-merge"),
    "rescale-merge-lossy": _rescale_merge("rescale-merge-lossy"),
    "cast-int-truncate-chain": _cast_int_truncate_chain,
    "cast-sink-reshape": _cast_sink_reshape,
    "cast-fp16-arith": _cast_fp16_arith,
    "div-const-to-mul": _div_const_to_mul,
    "sub-zero": _neutral_element("sub-zero", "Sub", 0.0, commutative=False),
    "div-one": _neutral_element("div-one", "Div", 1.0, commutative=False),
    "neg-neg": _neg_neg,
    "expand-noop": _expand_noop,
    "reshape-noop": _reshape_noop,
    "pad-noop": _pad_noop,
    "slice-noop": _slice_noop,
    "pad-merge": _pad_merge,
    "reshape-merge": _reshape_merge,
}

__all__ = ["PROPERTIES"]
