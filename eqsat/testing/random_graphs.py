"""Random valid ONNX graphs over every supported op family, for fuzzing: `onnx_graphs`, and the `GraphCase`
both it and `eqsat.testing.layout_graphs.random_graphs` draw."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
import onnx
import onnx.helper as oh

from eqsat.testing.cases import DrawnGraph, RuleCase
from eqsat.testing.dynamic_dims import (
    Baked,
    Sym,
    aliased,
    at_b,
    declared,
    draw_chain,
    dynamic_shape,
    is_dynamic,
    product,
    reshape_spec,
    static,
)
from eqsat.testing.models import make_model, onnx_elem_type
from eqsat.testing.soundness import _graph_text, assert_optimization_sound
from eqsat.testing.strategies import broadcastable_shapes, float_arrays, hypothesis_strategies, inverse, perms, shapes

if TYPE_CHECKING:  # heavy imports only where they are used
    from hypothesis.strategies import SearchStrategy

    from eqsat.result import Result


@dataclasses.dataclass(frozen=True)
class GraphCase:
    """A drawn graph and its inputs, for checks of all rules together."""

    model: onnx.ModelProto
    feeds: Mapping[str, np.ndarray]
    allow: tuple[str, ...] = ()
    more_feeds: tuple[Mapping[str, np.ndarray], ...] = ()  # the inputs at other sizes of the dynamic dims

    def check(self) -> "Result":
        """`assert_optimization_sound` on this case, at each size of its dynamic dims."""
        for feeds in self.more_feeds:
            assert_optimization_sound(self.model, feeds, allow=self.allow)
        return assert_optimization_sound(self.model, self.feeds, allow=self.allow)

    def all_feeds(self) -> list[Mapping[str, np.ndarray]]:
        """`feeds`, then `more_feeds`."""
        return [self.feeds, *self.more_feeds]

    def __repr__(self) -> str:
        text = repr(RuleCase("(all)", self.model, self.feeds, allow=self.allow))
        for feeds in self.more_feeds:
            text += "\nalso at: " + ", ".join(f"{k}: {v.dtype.name}{list(v.shape)}" for k, v in feeds.items())
        return text


#: What `onnx_graphs` draws from, by family (pass a subset as `families`):
#: layout (Transpose with inverses, Reshape, Flatten, Squeeze/Unsqueeze, Pad, Slice, Expand),
#: elementwise (unary ops, binary ops between values and with broadcast constants, neutral constants),
#: cast (round trips through DOUBLE, FLOAT16 and, on exactly computed values, integers),
#: quant (QuantizeLinear/DequantizeLinear pairs, per tensor and per channel, layout ops in between,
#: DQ'd conv weights), conv (Conv with pads, strides, groups, biases; BatchNormalization; scale/bias/
#: activation chains), linear (MatMul, Gemm, MatMul+Add, scaled MatMul), reduce (ReduceSum/Mean/Max,
#: sum-times-1/N, GlobalAveragePool, pools), normalization (decomposed LayerNorm/InstanceNorm,
#: LayerNormalization), activation (Gelu decompositions, Clip chains, Max(x, a*x), Softmax),
#: opaque (Concat, Split: ops no rule models, kept intact), share (diamonds: two branches of one value
#: joined again), chains (run-time Reshape and Expand targets computed from shapes: eqsat.testing.dynamic_dims).
GRAPH_FAMILIES = (
    "layout",
    "elementwise",
    "cast",
    "quant",
    "conv",
    "linear",
    "reduce",
    "normalization",
    "activation",
    "opaque",
    "share",
    "chains",
)
#: Largest tensor (elements) `onnx_graphs` creates: small graphs run fast and still show layout bugs.
GRAPH_MAX_ELEMENTS = 512


@dataclasses.dataclass(frozen=True)
class _FuzzValue:
    name: str
    shape: tuple[int, ...]  # sizes at A; a dynamic dim is a Sym
    exact: bool  # computed bit-exactly under every rewrite (see _GraphFuzzer)
    perm: tuple[int, ...] | None = None  # the Transpose that produced it (an inverse may follow)


class _GraphFuzzer:
    """Draws one graph step by step over a pool of float32 values.

    A value is `exact` when only ops whose results no rule changes by even one ulp computed it (layout
    ops, Relu, Abs, Neg, Max/Min, Clip, Q/DQ): discontinuous ops (Floor, Round, integer casts, Quantize)
    are applied only to exact values, so a legitimate fp-reassoc rewrite upstream (a folded BatchNorm)
    can never move a value across a rounding boundary and look like a bug.
    """

    def __init__(self, draw: Callable, st: Any, families: Sequence[str], opset: int, lossy: bool = False) -> None:
        self.draw, self.st, self.opset = draw, st, opset
        self.lossy = lossy  # precision-changing rules admitted: no Q -> DQ of computed values then
        self.families = tuple(families)
        self.g = DrawnGraph()
        self.pool: list[_FuzzValue] = []
        self.rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        self.k = 0
        self.shapes: dict[str, str] = {}  # value -> its Shape, read again by shape chains
        self.dynamic = False  # some input has a dynamic dim

    # ---- helpers ----
    def fresh(self, base: str) -> str:
        self.k += 1
        return f"{base}{self.k}"

    def pick(self, options: Sequence[Any]) -> Any:
        return self.draw(self.st.sampled_from(list(options)))

    def chance(self, p: float = 0.5) -> bool:
        return self.draw(self.st.integers(0, 99)) < int(p * 100)

    def const(self, base: str, array: np.ndarray) -> str:
        name = self.fresh(base)
        self.g.inits[name] = np.asarray(array)
        return name

    def floats(self, shape: Sequence[int], low: float = -2.0, high: float = 2.0) -> np.ndarray:
        return self.rng.uniform(low, high, size=tuple(static(shape))).astype(np.float32)

    def ints(self, values: Sequence[int]) -> str:
        return self.const("i", np.array(static(values), np.int64))

    def node(self, op: str, inputs: Sequence[str], **attrs: Any) -> str:
        out = self.fresh(op[:3].lower())
        self.g.nodes.append(oh.make_node(op, list(inputs), [out], name=f"n_{out}", **attrs))
        return out

    def add(self, name: str, shape: Sequence[int], exact: bool, perm: tuple[int, ...] | None = None) -> _FuzzValue:
        value = _FuzzValue(name, tuple(d if isinstance(d, Sym) else int(d) for d in shape), exact, perm)
        self.pool.append(value)
        return value

    def axes_node(self, op: str, x: str, axes: Sequence[int], since: int, **attrs: Any) -> str:
        """`op` with `axes` as an attribute before opset `since`, as an input from it on."""
        if self.opset >= since:
            return self.node(op, [x, self.ints(axes)], **attrs)
        return self.node(op, [x], axes=list(axes), **attrs)

    def reduce(self, op: str, x: str, axes: Sequence[int], keepdims: int) -> str:
        return self.axes_node(op, x, axes, 13 if op == "ReduceSum" else 18, keepdims=keepdims)

    def scalar(self, value: float) -> str:
        return self.const("s", np.array(value, np.float32))

    def channel_const(self, x: _FuzzValue, low: float, high: float) -> str:
        """A constant that broadcasts against `x` without enlarging it: per channel, per last axis,
        a scalar or full size."""
        rank, shape = len(x.shape), x.shape
        options: list[tuple[int, ...]] = [(), (1,), (shape[-1],)] if rank else [()]
        if rank >= 3:
            options += [(shape[1],) + (1,) * (rank - 2), (1, shape[1]) + (1,) * (rank - 2)]
        options.append(shape)
        return self.const("c", self.floats(self.pick([o for o in options if not is_dynamic(o)]), low, high))

    # ---- the steps: each returns the new value, or None when `x` does not suit it ----
    def step(self, x: _FuzzValue) -> _FuzzValue | None:
        """A step of a family drawn from `families` (chains more often in graphs with dynamic dims); a step
        that would bake a dynamic dim into a constant is undone (None)."""
        chains = self.dynamic and "chains" in self.families and self.chance(0.3)
        family = "chains" if chains else self.pick(self.families)
        marks = len(self.g.nodes), len(self.pool), set(self.g.inits), dict(self.shapes)
        try:
            return getattr(self, f"_{family}")(x)
        except Baked:
            del self.g.nodes[marks[0] :], self.pool[marks[1] :]
            for name in set(self.g.inits) - marks[2]:
                del self.g.inits[name]
            self.shapes = marks[3]
            return None

    def _chains(self, x: _FuzzValue) -> _FuzzValue | None:
        return draw_chain(self, x, GRAPH_MAX_ELEMENTS)

    def _layout(self, x: _FuzzValue) -> _FuzzValue | None:
        rank, shape = len(x.shape), x.shape
        kind = self.pick(
            (
                "transpose",
                "transpose",
                "sandwich",
                "sandwich",
                "reshape",
                "flatten",
                "unsqueeze",
                "squeeze",
                "pad",
                "slice",
                "expand",
            )
        )
        if kind == "sandwich" and rank >= 2:  # Transpose(p) -> elementwise or pad -> Transpose(p^-1)
            perm = self.draw(perms(rank))
            t = self.add(
                self.node("Transpose", [x.name], perm=list(perm)), [shape[i] for i in perm], x.exact, tuple(perm)
            )
            inner = self.pick((self._elementwise, self._elementwise, self._activation, self._layout))(t) or t
            if len(inner.shape) != rank:
                return inner
            back = inverse(perm)
            out = self.node("Transpose", [inner.name], perm=list(back))
            return self.add(out, [inner.shape[i] for i in back], inner.exact, back)
        if kind == "transpose" and rank >= 2:
            perm = inverse(x.perm) if x.perm is not None and self.chance(0.6) else self.draw(perms(rank))
            out = self.node("Transpose", [x.name], perm=list(perm))
            return self.add(out, [shape[i] for i in perm], x.exact, tuple(perm))
        if kind == "reshape" and rank >= 1:
            if rank >= 2 and self.chance():  # merge two neighbouring axes
                i = self.draw(self.st.integers(0, rank - 2))
                new = [*shape[:i], shape[i] * shape[i + 1], *shape[i + 2 :]]
            else:
                new = list(shape)
                new.insert(self.draw(self.st.integers(0, rank)), 1)
            spec = list(new)
            if self.chance(0.3):
                spec[self.draw(self.st.integers(0, len(spec) - 1))] = -1
            elif self.chance(0.3):  # 0 copies the input's dim at the same index
                same = [i for i in range(min(rank, len(spec))) if spec[i] == shape[i]]
                if same:
                    spec[self.pick(same)] = 0
            out = self.node("Reshape", [x.name, self.ints(reshape_spec(spec, shape))])
            return self.add(out, new, x.exact)
        if kind == "flatten" and rank >= 1:
            axis = self.draw(self.st.integers(0, rank))
            out = self.node("Flatten", [x.name], axis=axis)
            return self.add(out, [product(shape[:axis]), product(shape[axis:])], x.exact)
        if kind == "unsqueeze" and rank <= 4:
            axis = self.draw(self.st.integers(0, rank))
            out = self.axes_node("Unsqueeze", x.name, [axis if self.chance() else axis - rank - 1], 13)
            return self.add(out, [*shape[:axis], 1, *shape[axis:]], x.exact)
        if kind == "squeeze" and 1 in shape and rank >= 2:
            axis = self.pick([i for i, d in enumerate(shape) if d == 1])
            out = self.axes_node("Squeeze", x.name, [axis], 13)
            return self.add(out, [d for i, d in enumerate(shape) if i != axis], x.exact)
        if kind == "pad" and rank >= 1:
            pads = [self.draw(self.st.integers(0, 1)) for _ in range(2 * rank)]
            new = [d + pads[i] + pads[i + rank] for i, d in enumerate(shape)]
            if int(np.prod(new)) > GRAPH_MAX_ELEMENTS:
                return None
            inputs = [x.name, self.ints(pads)]
            if self.chance(0.3):
                inputs.append(self.scalar(self.pick((0.0, 1.5))))
            out = self.node("Pad", inputs)
            return self.add(out, new, x.exact)
        if kind == "slice" and rank >= 1:
            explicit_axes = self.chance(0.7)  # without axes, starts/ends apply to axis 0
            axis = self.draw(self.st.integers(0, rank - 1)) if explicit_axes else 0
            dim = shape[axis]  # a dynamic dim is at least its size at A at run time: bounds drawn within it hold
            start = self.draw(self.st.integers(0, int(dim) - 1))
            end = self.draw(self.st.integers(start + 1, int(dim)))
            bound = end if end < dim or self.chance() else 2**62
            inputs = [x.name, self.ints([start]), self.ints([bound])]
            if explicit_axes:
                inputs.append(self.ints([axis if self.chance() else axis - rank]))
                if self.chance(0.3):
                    inputs.append(self.ints([1]))
            out = self.node("Slice", inputs)
            size = dim - start if bound == 2**62 else end - start
            return self.add(out, [size if i == axis else d for i, d in enumerate(shape)], x.exact)
        if kind == "expand" and rank >= 1:
            ones = [i for i, d in enumerate(shape) if d == 1]
            new = list(shape)
            if ones and self.chance():
                new[self.pick(ones)] = self.draw(self.st.integers(1, 3))
            if int(np.prod(new)) > GRAPH_MAX_ELEMENTS:
                return None
            out = self.node("Expand", [x.name, self.ints([1 if isinstance(d, Sym) else d for d in new])])
            return self.add(out, new, x.exact)
        return None

    _CONTINUOUS = (
        "Relu",
        "Sigmoid",
        "Tanh",
        "Abs",
        "Neg",
        "Softsign",
        "Erf",
        "Sin",
        "Cos",
        "Softplus",
        "Identity",
        "Exp",
    )
    _PRESERVES_EXACT = ("Relu", "Abs", "Neg", "Identity")

    def _elementwise(self, x: _FuzzValue) -> _FuzzValue | None:
        kind = self.pick(("unary", "unary", "binary", "const", "const", "neutral", "discontinuous"))
        if kind == "unary":
            op = self.pick(self._CONTINUOUS)
            if op == "Exp":  # bounded first: Exp(Tanh(x)) stays in [1/e, e]
                x = self.add(self.node("Tanh", [x.name]), x.shape, False)
            out = self.node(op, [x.name])
            return self.add(out, x.shape, x.exact and op in self._PRESERVES_EXACT)
        if kind == "discontinuous":
            if not x.exact:
                return None
            op = self.pick(("Floor", "Ceil", "Round", "Sign"))
            return self.add(self.node(op, [x.name]), x.shape, True)
        if kind == "binary":
            partners = [v for v in self.pool if _broadcasts_to(v.shape, x.shape)]
            y = self.pick(partners)
            op = self.pick(("Add", "Sub", "Mul", "Max", "Min"))
            a, b = (x.name, y.name) if self.chance() else (y.name, x.name)
            return self.add(self.node(op, [a, b]), x.shape, x.exact and y.exact and op in ("Max", "Min"))
        if kind == "const":
            op = self.pick(("Add", "Sub", "Mul", "Div", "Pow"))
            if op == "Pow":
                return self.add(self.node("Pow", [x.name, self.scalar(self.pick((2.0, 1.0)))]), x.shape, False)
            c = self.channel_const(x, 0.5, 2.0) if op == "Div" else self.channel_const(x, -2.0, 2.0)
            inputs = [c, x.name] if op != "Div" and self.chance(0.3) else [x.name, c]
            return self.add(self.node(op, inputs), x.shape, False)
        op, value = self.pick((("Mul", 1.0), ("Add", 0.0), ("Sub", 0.0), ("Div", 1.0)))
        rank = len(x.shape)
        c = self.const("k", np.full((1,) * self.draw(self.st.integers(0, rank)), value, np.float32))
        inputs = [c, x.name] if op in ("Mul", "Add") and self.chance() else [x.name, c]
        return self.add(self.node(op, inputs), x.shape, x.exact)

    def _cast(self, x: _FuzzValue) -> _FuzzValue | None:
        options = ["DOUBLE", "FLOAT16"] + (["INT32", "INT64", "BOOL"] if x.exact else [])
        via = self.pick(options)
        mid = self.node("Cast", [x.name], to=onnx_elem_type(via))
        if via == "DOUBLE" and self.chance(0.3):  # a step in double precision
            mid = self.node("Relu" if self.chance() else "Neg", [mid])
        out = self.node("Cast", [mid], to=onnx.TensorProto.FLOAT)
        return self.add(out, x.shape, x.exact and via in ("DOUBLE", "INT32", "INT64", "BOOL"))

    def _qparams(self, channels: int | None) -> tuple[str, str, str]:
        """(scale, zero point, elem type name) per tensor (channels None) or per channel."""
        qtype = self.pick(("INT8", "UINT8"))
        shape = () if channels is None else (channels,)
        scale = self.rng.uniform(0.01, 0.05, size=shape).astype(np.float32)
        if qtype == "INT8":
            zp = self.rng.integers(-5, 6, size=shape).astype(np.int8)
        else:
            zp = self.rng.integers(120, 136, size=shape).astype(np.uint8)
        return self.const("qs", scale), self.const("qz", zp), qtype

    def _quant(self, x: _FuzzValue) -> _FuzzValue | None:
        rank, shape = len(x.shape), x.shape
        # Q -> DQ of a computed value only where no precision-changing rule may drop it (dq-q-drop also
        # drops Quantize's clamp) and on exact values (Quantize rounds: see the class doc)
        if x.exact and not self.lossy:
            per_channel = rank >= 2 and not isinstance(shape[1], Sym) and self.chance(0.3)
            scale, zp, _ = self._qparams(shape[1] if per_channel else None)
            attrs = {"axis": 1} if per_channel else {}
            q = self.node("QuantizeLinear", [x.name, scale, zp], **attrs)
            q_shape = list(shape)
            if not per_channel and rank >= 2 and self.chance(0.4):  # layout on the quantized tensor
                perm = self.draw(perms(rank))
                q = self.node("Transpose", [q], perm=list(perm))
                q_shape = [shape[i] for i in perm]
            dq = self.node("DequantizeLinear", [q, scale, zp] if self.chance(0.8) else [q, scale], **attrs)
            if self.chance(0.3) and rank >= 2:  # DQ -> Transpose -> Q -> DQ: a pattern the sinking rules move
                perm = self.draw(perms(rank))
                t = self.node("Transpose", [dq], perm=list(perm))
                q2 = self.node("QuantizeLinear", [t, scale, zp]) if not per_channel else None
                if q2 is not None:
                    dq = self.node("DequantizeLinear", [q2, scale, zp])
                    return self.add(dq, [q_shape[i] for i in perm], True)
                return self.add(t, [q_shape[i] for i in perm], True, tuple(perm))
            return self.add(dq, q_shape, True)
        if rank == 4:
            return self._conv(x, quantized_weights=True)
        return None

    def _conv(self, x: _FuzzValue, quantized_weights: bool = False) -> _FuzzValue | None:
        if len(x.shape) != 4:
            return self._batchnorm_or_scale(x) if len(x.shape) in (3, 4) and self.chance() else None
        n, c, h, w = x.shape
        kind = self.pick(("conv", "conv", "conv", "bn", "pad-conv"))
        if kind == "bn":
            return self._batchnorm_or_scale(x)
        depthwise = c > 1 and self.chance(0.25)
        group = c if depthwise else 1
        cout = c if depthwise else self.draw(self.st.integers(1, 4))
        k = self.pick((1, 3)) if min(h, w) >= 3 else 1
        stride = self.pick((1, 1, 2))
        pads = [self.draw(self.st.integers(0, k // 2 + (1 if k == 1 else 0))) for _ in range(4)]
        src = x.name
        if kind == "pad-conv":  # an explicit Pad of the spatial axes, merged into the conv by a rule
            explicit = [0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]]
            src = self.node("Pad", [x.name, self.ints(explicit)])
            h, w = h + pads[0] + pads[2], w + pads[1] + pads[3]
            pads = [0, 0, 0, 0]
        oh_, ow = (h + pads[0] + pads[2] - k) // stride + 1, (w + pads[1] + pads[3] - k) // stride + 1
        if oh_ < 1 or ow < 1 or n * cout * oh_ * ow > GRAPH_MAX_ELEMENTS:
            return None
        fan_in = (c // group) * k * k
        weights = self.floats((cout, c // group, k, k), -1.0, 1.0) / np.float32(np.sqrt(fan_in))
        if quantized_weights:
            wq = np.clip(np.round(weights / 0.02), -127, 127).astype(np.int8)
            w_name = self.node("DequantizeLinear", [self.const("wq", wq), self.const("ws", np.array(0.02, np.float32))])
        else:
            w_name = self.const("w", weights.astype(np.float32))
        inputs = [src, w_name]
        if self.chance(0.6):
            inputs.append(self.const("b", np.zeros(cout, np.float32) if self.chance(0.2) else self.floats((cout,))))
        attrs: dict[str, Any] = {"group": group} if group > 1 or self.chance(0.2) else {}
        if self.chance(0.7):
            attrs["kernel_shape"] = [k, k]
        if any(pads):
            attrs["pads"] = pads
        if stride > 1 or self.chance(0.2):
            attrs["strides"] = [stride, stride]
        out = self.add(self.node("Conv", inputs, **attrs), (n, cout, oh_, ow), False)
        # a chain the conv family folds: BN, per-channel scale and shift, an activation
        for link in self.draw(self.st.lists(self.st.sampled_from(("bn", "mul", "add", "div", "act")), max_size=3)):
            if link == "bn":
                out = self._batchnorm(out)
            elif link in ("mul", "add", "div"):
                shape = self.pick(((cout, 1, 1), (1, cout, 1, 1), ()))
                low, high = (0.5, 2.0) if link != "add" else (-1.0, 1.0)
                if link == "mul" and self.chance(0.3):
                    low, high = (-2.0, -0.5)
                op = {"mul": "Mul", "add": "Add", "div": "Div"}[link]
                c_name = self.const("c", self.floats(shape, low, high))
                inputs = [c_name, out.name] if link != "div" and self.chance(0.3) else [out.name, c_name]
                out = self.add(self.node(op, inputs), out.shape, False)
            else:
                activated = self._activation(out, only=("Relu", "LeakyRelu", "Clip"))
                if activated is None:
                    return None
                out = activated
        return out

    def _batchnorm(self, x: _FuzzValue) -> _FuzzValue:
        c = x.shape[1]
        names = [
            self.const("bs", self.floats((c,), 0.5, 1.5)),
            self.const("bb", self.floats((c,))),
            self.const("bm", self.floats((c,), -0.5, 0.5)),
            self.const("bv", self.floats((c,), 0.5, 2.0)),
        ]
        out = self.node("BatchNormalization", [x.name, *names], epsilon=self.pick((1e-5, 1e-3)))
        return self.add(out, x.shape, False)

    def _batchnorm_or_scale(self, x: _FuzzValue) -> _FuzzValue | None:
        if len(x.shape) >= 3:
            return self._batchnorm(x)
        return None

    def _linear(self, x: _FuzzValue) -> _FuzzValue | None:
        rank, shape = len(x.shape), x.shape
        if rank < 1:
            return None
        k, m = shape[-1], self.draw(self.st.integers(1, 5))
        new = (*shape[:-1], m)
        if int(np.prod(new)) > GRAPH_MAX_ELEMENTS:
            return None
        weights = self.floats((k, m), -1.0, 1.0) / np.float32(np.sqrt(k))
        if rank == 2 and self.chance(0.3):
            trans_b = self.chance()
            b = self.const("gw", weights.T.copy() if trans_b else weights)
            inputs = [x.name, b]
            if self.chance(0.7):
                inputs.append(self.const("gc", self.floats(self.pick(((m,), (1, m), ())))))
            attrs = {"transB": 1} if trans_b else {}
            if self.chance(0.3):
                attrs["alpha"] = self.pick((0.5, 2.0))
            if len(inputs) == 3 and self.chance(0.3):
                attrs["beta"] = self.pick((0.5, 2.0))
            return self.add(self.node("Gemm", inputs, **attrs), new, False)
        out = self.add(self.node("MatMul", [x.name, self.const("mw", weights)]), new, False)
        if self.chance(0.5):
            bias = self.const("mb", self.floats((m,)))
            out = self.add(self.node("Add", [out.name, bias] if self.chance() else [bias, out.name]), new, False)
        if self.chance(0.3):
            out = self.add(self.node("Mul", [out.name, self.scalar(self.pick((0.5, 2.0, -1.5)))]), new, False)
        return out

    def _reduce(self, x: _FuzzValue) -> _FuzzValue | None:
        rank, shape = len(x.shape), x.shape
        if rank < 1:
            return None
        kind = self.pick(("reduce", "reduce", "sum-mean", "global", "pool"))
        if kind in ("global", "pool") and (rank != 4 or min(shape[2:]) < 2 and kind == "pool"):
            kind = "reduce"
        if kind == "global":
            if self.chance():
                return self.add(self.node("GlobalAveragePool", [x.name]), (*shape[:2], 1, 1), False)
            out = self.reduce("ReduceMean", x.name, [2, 3] if self.chance() else [-2, -1], 1)
            return self.add(out, (*shape[:2], 1, 1), False)
        if kind == "pool":
            op = self.pick(("MaxPool", "AveragePool"))
            out = self.node(op, [x.name], kernel_shape=[2, 2], strides=[2, 2])
            return self.add(out, (*shape[:2], shape[2] // 2, shape[3] // 2), x.exact and op == "MaxPool")
        axes = sorted(self.draw(self.st.sets(self.st.integers(0, rank - 1), min_size=1, max_size=rank)))
        keepdims = self.pick((0, 1))
        new = (
            [1 if i in axes else d for i, d in enumerate(shape)]
            if keepdims
            else [d for i, d in enumerate(shape) if i not in axes]
        )
        shown = [a - rank if self.chance(0.3) else a for a in axes]
        if kind == "sum-mean":
            n = int(np.prod([shape[a] for a in axes]))
            total = self.reduce("ReduceSum", x.name, shown, keepdims)
            scaled = (
                self.node("Mul", [total, self.scalar(float(np.float32(1.0 / n)))])
                if self.chance()
                else self.node("Div", [total, self.scalar(float(n))])
            )
            return self.add(scaled, new, False)
        op = self.pick(("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"))
        return self.add(self.reduce(op, x.name, shown, keepdims), new, x.exact and op in ("ReduceMax", "ReduceMin"))

    def _normalization(self, x: _FuzzValue) -> _FuzzValue | None:
        rank, shape = len(x.shape), x.shape
        if rank < 2:
            return None
        affine_shape: tuple[Any, ...]
        if rank == 4 and self.chance(0.3):
            axes, affine_shape = [2, 3], (shape[1], 1, 1)  # instance norm, decomposed
        else:
            axes, affine_shape = [rank - 1], (shape[-1],)
            if self.opset >= 17 and not is_dynamic(affine_shape) and self.chance(0.3):
                inputs = [x.name, self.const("lg", self.floats(affine_shape, 0.5, 1.5))]
                if self.chance():
                    inputs.append(self.const("lb", self.floats(affine_shape)))
                return self.add(self.node("LayerNormalization", inputs, axis=-1, epsilon=1e-5), shape, False)
        shown = axes if self.chance() else [a - rank for a in axes]
        mean = self.reduce("ReduceMean", x.name, shown, 1)
        d = self.node("Sub", [x.name, mean])
        sq = self.node("Pow", [d, self.scalar(2.0)]) if self.chance() else self.node("Mul", [d, d])
        var = self.reduce("ReduceMean", sq, shown, 1)
        std = self.node("Sqrt", [self.node("Add", [var, self.scalar(self.pick((1e-5, 1e-6, 1e-3)))])])
        out = self.node("Div", [d, std])
        if not is_dynamic(affine_shape) and self.chance(0.7):
            out = self.node("Mul", [out, self.const("ng", self.floats(affine_shape, 0.5, 1.5))])
            if self.chance(0.7):
                out = self.node("Add", [out, self.const("nb", self.floats(affine_shape))])
        return self.add(out, shape, False)

    def _activation(self, x: _FuzzValue, only: Sequence[str] | None = None) -> _FuzzValue | None:
        kind = self.pick(
            only
            or ("LeakyRelu", "Elu", "HardSigmoid", "Clip", "Clip", "gelu", "gelu-tanh", "max-leaky", "Softmax", "Relu")
        )
        if kind == "Relu":
            return self.add(self.node("Relu", [x.name]), x.shape, x.exact)
        if kind in ("LeakyRelu", "Elu"):
            return self.add(self.node(kind, [x.name], alpha=self.pick((0.01, 0.1, 0.2, 1.0))), x.shape, False)
        if kind == "HardSigmoid":
            return self.add(self.node(kind, [x.name], alpha=0.2, beta=0.5), x.shape, False)
        if kind == "Clip":
            out = x.name
            if self.chance(0.3):
                out = self.node("Relu", [out])
            for _ in range(self.draw(self.st.integers(1, 2))):
                lo = self.pick((0.0, -1.0, -6.0, None))
                hi = self.pick((6.0, 1.0, None)) if lo is not None else self.pick((6.0, 1.0))
                inputs = [out, self.scalar(lo) if lo is not None else ""]
                if hi is not None:
                    inputs.append(self.scalar(hi))
                out = self.node("Clip", inputs)
            return self.add(out, x.shape, x.exact)
        if kind == "max-leaky":
            alpha = self.pick((0.01, 0.1, 0.3))
            scaled = self.node("Mul", [x.name, self.scalar(alpha)] if self.chance() else [self.scalar(alpha), x.name])
            return self.add(self.node("Max", [x.name, scaled] if self.chance() else [scaled, x.name]), x.shape, False)
        if kind == "Softmax":
            if not x.shape:
                return None
            axis = self.draw(self.st.integers(-len(x.shape), len(x.shape) - 1))
            return self.add(self.node("Softmax", [x.name], axis=axis), x.shape, False)
        if kind == "gelu" and self.opset >= 20 and self.chance(0.3):
            return self.add(self.node("Gelu", [x.name]), x.shape, False)
        if kind == "gelu":
            inner = (
                self.node("Div", [x.name, self.scalar(1.4142135381698608)])
                if self.chance()
                else self.node("Mul", [x.name, self.scalar(0.7071067690849304)])
            )
            p = self.node("Add", [self.node("Erf", [inner]), self.scalar(1.0)])
        else:  # tanh approximation
            cube = (
                self.node("Pow", [x.name, self.scalar(3.0)])
                if self.chance()
                else self.node("Mul", [x.name, self.node("Mul", [x.name, x.name])])
            )
            s = self.node("Add", [x.name, self.node("Mul", [cube, self.scalar(0.044714998453855515)])])
            p = self.node(
                "Add", [self.node("Tanh", [self.node("Mul", [s, self.scalar(0.7978845834732056)])]), self.scalar(1.0)]
            )
        if self.chance():
            out = self.node("Mul", [self.node("Mul", [x.name, self.scalar(0.5)]), p])
        else:
            out = self.node("Mul", [self.node("Mul", [x.name, p]), self.scalar(0.5)])
        return self.add(out, x.shape, False)

    def _opaque(self, x: _FuzzValue) -> _FuzzValue | None:
        rank, shape = len(x.shape), x.shape
        if rank < 1:
            return None
        axis = self.draw(self.st.integers(0, rank - 1))
        if shape[axis] % 2 == 0 and self.chance():
            half = shape[axis] // 2
            a, b = self.fresh("spl"), self.fresh("spl")
            self.g.nodes.append(
                oh.make_node("Split", [x.name, self.ints([half, half])], [a, b], axis=axis, name=f"n_{a}")
            )
            new = [half if i == axis else d for i, d in enumerate(shape)]
            self.add(a, new, x.exact)
            return self.add(b, new, x.exact)
        partners = [
            v
            for v in self.pool
            if len(v.shape) == rank and all(d == e for i, (d, e) in enumerate(zip(v.shape, shape)) if i != axis)
        ]
        y = self.pick(partners)
        new = [d + y.shape[axis] if i == axis else d for i, d in enumerate(shape)]
        if int(np.prod(new)) > GRAPH_MAX_ELEMENTS:
            return None
        return self.add(self.node("Concat", [x.name, y.name], axis=axis), new, x.exact and y.exact)

    def _share(self, x: _FuzzValue) -> _FuzzValue | None:
        """A diamond: two branches of `x` (shape-preserving) joined by a binary op."""
        branches = []
        for _ in range(2):
            op = self.pick(("Relu", "Neg", "Sigmoid", "transpose-pair", "scale", "Identity"))
            if op == "transpose-pair" and len(x.shape) >= 2:
                perm = self.draw(perms(len(x.shape)))
                t = self.node("Transpose", [x.name], perm=list(perm))
                branches.append(self.node("Transpose", [self.node("Relu", [t])], perm=list(inverse(perm))))
            elif op == "scale":
                branches.append(self.node("Mul", [x.name, self.channel_const(x, 0.5, 2.0)]))
            else:
                branches.append(self.node(op if op != "transpose-pair" else "Relu", [x.name]))
        join = self.pick(("Add", "Mul", "Max", "Sub"))
        return self.add(self.node(join, branches), x.shape, False)


def _broadcasts_to(shape: Sequence[int], target: Sequence[int]) -> bool:
    """`shape` broadcasts to exactly `target` (numpy rules)."""
    if len(shape) > len(target):
        return False
    return all(d in (1, t) for d, t in zip(reversed(shape), reversed(target)))


def onnx_graphs(
    max_nodes: int = 10,
    *,
    families: Sequence[str] = GRAPH_FAMILIES,
    allow: Sequence[str] = (),
    opsets: Sequence[int] = (13, 17, 18, 20),
    symbolic: bool = True,
) -> "SearchStrategy[GraphCase]":
    """Random valid small ONNX graphs over the ops eqsat models (and a few it keeps opaque), with inputs.

    A graph has one or two float32 inputs (rank 1-4; 4-D NCHW when the conv family can use them, the
    second one of the same or a broadcastable shape), then up to `max_nodes` steps, each drawn from
    `families` (see GRAPH_FAMILIES) and applied to the last value or, half of the time, to any earlier
    one, so sub-graphs are shared; constants are random, scaled so values stay of moderate magnitude;
    one to three outputs (distinct values, never a graph input). With `symbolic`, a third of the graphs
    declare some input dims dynamic (named `batch`, `N`, `seq`, ... or unnamed: eqsat.testing.dynamic_dims),
    and the case carries feeds at a second size of each (`more_feeds`; neither size is 1). The opset is drawn
    from `opsets` (attributes vs inputs follow it). Every drawn model passes the full ONNX checker (a failure here is
    a bug of the strategy).
    `allow` is passed on to the GraphCase (soundness classes admitted when checking it).

        @given(onnx_graphs())
        def test_sound(case):
            case.check()       # assert_optimization_sound(case.model, case.feeds, allow=case.allow)
    """
    st = hypothesis_strategies()
    unknown = set(families) - set(GRAPH_FAMILIES)
    if unknown or not families:
        raise ValueError(f"unknown graph families {sorted(unknown)}; choose from {GRAPH_FAMILIES}")

    @st.composite
    def build(draw: Callable) -> GraphCase:
        opset = draw(st.sampled_from(list(opsets)))
        fz = _GraphFuzzer(draw, st, families, opset, lossy="precision-changing" in allow)
        four_d = any(f in families for f in ("conv", "quant")) and draw(st.booleans())
        shape: tuple[Any, ...]
        if four_d:
            shape = (draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 5)), draw(st.integers(1, 5)))
        else:
            shape = draw(shapes(1, 4, 4))
        if symbolic and draw(st.integers(0, 2)) == 0:
            shape = dynamic_shape(draw, st, shape)
            fz.dynamic = is_dynamic(shape)
        inputs = [("x", shape)]
        if draw(st.booleans()):
            inputs.append(("x2", draw(st.sampled_from([shape, draw(broadcastable_shapes(shape))]))))
            if fz.dynamic:
                inputs[1] = ("x2", aliased(draw, st, inputs[1][1], shape))
        renamed = {d.label for _, s in inputs for d in s if isinstance(d, Sym) and d.alias is not None}
        at_b_rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1))) if fz.dynamic else None
        feeds_b: dict[str, np.ndarray] = {}
        for name, in_shape in inputs:
            value = draw(float_arrays(tuple(int(d) for d in in_shape), np.float32, -4.0, 4.0))
            fz.g.inputs.append((name, "FLOAT", [declared(d) for d in in_shape]))
            fz.g.feeds[name] = value
            if at_b_rng is not None:
                feeds_b[name] = at_b_rng.uniform(-4.0, 4.0, size=at_b(in_shape)).astype(np.float32)
            fz.add(name, in_shape, True)
        steps = draw(st.integers(1, max_nodes))
        for _ in range(steps):
            x = fz.pool[-1] if draw(st.booleans()) else draw(st.sampled_from(fz.pool))
            made = fz.step(x)
            if made is None:  # the family did not suit this value: a plain unary op instead
                fz.add(fz.node(draw(st.sampled_from(("Relu", "Neg", "Tanh"))), [x.name]), x.shape, x.exact)
        graph_inputs = {name for name, _ in inputs}
        candidates = [v.name for v in fz.pool if v.name not in graph_inputs]
        outputs = [candidates[-1]]
        for _ in range(draw(st.integers(0, 2))):
            extra = draw(st.sampled_from(candidates))
            if extra not in outputs:
                outputs.append(extra)
        model = make_model(fz.g.nodes, fz.g.inputs, outputs, fz.g.inits, opset)
        if fz.dynamic or any(not o.type.tensor_type.HasField("shape") for o in model.graph.output):
            # declared from the drawn dims: ONNX's inference may not know a run-time Reshape's rank (opset 13)
            dims = {v.name: v.shape for v in fz.pool}
            declared_outputs = [(o, "FLOAT", [declared(d, renamed) for d in dims[o]]) for o in outputs]
            model = make_model(fz.g.nodes, fz.g.inputs, declared_outputs, fz.g.inits, opset)
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception as exc:  # pragma: no cover - a bug of this strategy, not of eqsat
            raise AssertionError(f"onnx_graphs drew an invalid model ({exc}):\n{_graph_text(model)}") from exc
        return GraphCase(model, fz.g.feeds, tuple(allow), (feeds_b,) if feeds_b else ())

    return build()
