"""Hypothesis properties of the conv rules (rewrites/conv.py): for each rule, a strategy of small graphs
where its guard holds (`RuleCase`), checked by tests/test_rules_conv.py and `eqsat check-rules`."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from eqsat.ops import CONV_EPILOGUES
from eqsat.testing.cases import DrawnGraph, RuleCase, feeding, rule_case
from eqsat.testing.draw import CONST_LAST, add_activation, draw_constant, float_input
from eqsat.testing.models import numpy_dtype
from eqsat.testing.strategies import float_arrays, hypothesis_strategies

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


#: Rules that fold a bias-less conv: they need the explicit zero bias.
ZERO_BIAS = ("conv-zero-bias",)


@dataclasses.dataclass(frozen=True)
class ConvSpec:
    """A drawn convolution: kind, channels, group and geometry (spatial rank = len(kernel))."""

    kind: str
    ci: int
    co: int
    group: int
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    pads: tuple[int, ...]
    dilations: tuple[int, ...]
    spatial: tuple[int, ...]
    batch: int
    dtype: str

    @property
    def rank(self) -> int:
        return 2 + len(self.kernel)

    @property
    def x_shape(self) -> tuple[int, ...]:
        return (self.batch, self.ci, *self.spatial)

    @property
    def w_shape(self) -> tuple[int, ...]:
        if self.kind == "Conv":
            return (self.co, self.ci // self.group, *self.kernel)
        return (self.ci, self.co // self.group, *self.kernel)

    @property
    def out_shape(self) -> tuple[int, ...]:
        n = len(self.kernel)
        dims = []
        for i in range(n):
            eff = self.dilations[i] * (self.kernel[i] - 1) + 1
            total = self.pads[i] + self.pads[n + i]
            if self.kind == "Conv":
                dims.append((self.spatial[i] + total - eff) // self.strides[i] + 1)
            else:
                dims.append((self.spatial[i] - 1) * self.strides[i] + eff - total)
        return (self.batch, self.co, *dims)

    def attrs(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "kernel_shape": list(self.kernel),
            "strides": list(self.strides),
            "pads": list(self.pads),
            "dilations": list(self.dilations),
        }


def draw_conv(
    draw: Callable,
    *,
    kind: str | None = None,
    dtype: str | None = None,
    group: str | None = None,
    spatial_rank: int | None = None,
) -> ConvSpec:
    """A convolution whose output is at least 1 wide: `group` is "one", "grouped", "depthwise" or drawn."""
    st = hypothesis_strategies()
    kind = kind or draw(st.sampled_from(("Conv", "Conv", "ConvTranspose")))
    mapping = group or draw(st.sampled_from(("one", "one", "grouped", "depthwise")))
    g = 1 if mapping == "one" else draw(st.integers(2, 3))
    per_in = 1 if mapping == "depthwise" else draw(st.integers(1, 2))
    dtype = dtype or draw(st.sampled_from(("FLOAT", "FLOAT", "FLOAT", "FLOAT16")))
    # float16: several outputs of spread values, so that the output's scale (the tolerance's unit) is not
    # that of a single value that cancels out (float16 rounds intermediates at 1e-3 of their magnitude)
    wide = 2 if dtype == "FLOAT16" else 0
    per_out = draw(st.integers(1 + wide // 2, 2 + wide // 2))
    n = spatial_rank or draw(st.sampled_from((1, 2, 2)))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(n))
    dilations = tuple(draw(st.sampled_from((1, 1, 2))) if k > 1 else 1 for k in kernel)
    strides = tuple(draw(st.integers(1, 2)) for _ in range(n))
    pads = tuple(draw(st.integers(0, 1)) if k > 1 else 0 for k in kernel * 2)
    spatial = tuple(
        draw(st.integers(d * (k - 1) + 1 + wide, d * (k - 1) + 3 + wide)) for k, d in zip(kernel, dilations)
    )
    spec = ConvSpec(
        kind, g * per_in, g * per_out, g, kernel, strides, pads, dilations, spatial, draw(st.integers(1, 2)), dtype
    )
    assert all(d > 0 for d in spec.out_shape), spec
    return spec


def add_conv(
    draw: Callable,
    g: DrawnGraph,
    spec: ConvSpec,
    x: str,
    y: str,
    *,
    bias: bool | None = None,
    runtime_weights: bool = False,
) -> str:
    """y = spec.kind(x, W, [B]) with drawn weights (and a bias when `bias`, drawn when None); W a graph input
    when `runtime_weights`."""
    st = hypothesis_strategies()
    dt = numpy_dtype(spec.dtype)
    weights = draw(float_arrays(spec.w_shape, dt, -1.0, 1.0))
    if runtime_weights:
        g.input(f"{y}_w", np.asarray(weights))
    else:
        g.inits[f"{y}_w"] = weights
    inputs = [x, f"{y}_w"]
    if bias if bias is not None else draw(st.booleans()):
        g.inits[f"{y}_b"] = draw(float_arrays((spec.co,), dt, -1.0, 1.0))
        inputs.append(f"{y}_b")
    return g.node(spec.kind, inputs, y, **spec.attrs())


def channel_shapes(rank: int, channels: int) -> list[tuple[int, ...]]:
    """Shapes of a constant that varies along axis 1 only (or not at all) and broadcasts to a rank-`rank`
    tensor with `channels` channels: (C, 1, ..., 1), (1, C, 1, ..., 1), scalars and ones."""
    trailing = (1,) * (rank - 2)
    return [(channels, *trailing), (1, channels, *trailing), (), (1,), (1,) * rank]


@rule_case
def _conv_bias_fold(draw: Callable, st: Any) -> RuleCase:
    spec = draw_conv(draw)
    g = DrawnGraph()
    x = float_input(draw, g, "x", spec.x_shape, spec.dtype)
    add_conv(draw, g, spec, x, "conv")
    g.inits["c"] = draw_constant(draw, draw(st.sampled_from(channel_shapes(spec.rank, spec.co))), spec.dtype)
    op, first = draw(st.sampled_from((("Add", "conv"), ("Add", "c"), ("Sub", "conv"), ("Sub", "c"))))
    g.node(op, ["conv", "c"] if first == "conv" else ["c", "conv"], "y")
    return g.case("conv-bias-fold", ["y"], also=ZERO_BIAS + CONST_LAST)


@rule_case
def _conv_zero_bias(draw: Callable, st: Any) -> RuleCase:
    """A bias-less conv followed by a per-channel Add, Sub, Mul, Div or BatchNormalization, folded through the
    zero bias."""
    spec = draw_conv(draw)
    g = DrawnGraph()
    x = float_input(draw, g, "x", spec.x_shape, spec.dtype)
    runtime = draw(st.integers(0, 3)) == 0  # W a graph input: the bias folds hold for any W
    add_conv(draw, g, spec, x, "conv", bias=False, runtime_weights=runtime)
    then = draw(st.sampled_from(("Add", "Sub") if runtime else ("Add", "Sub", "Mul", "Div", "BatchNormalization")))
    if then == "BatchNormalization":
        g.node(then, ["conv", *_bn_params(draw, g, spec.co, spec.dtype)], "y")
        return g.case("conv-zero-bias", ["y"], also=("conv-bn-fold",))
    g.inits["c"] = draw_constant(
        draw, draw(st.sampled_from(channel_shapes(spec.rank, spec.co))), spec.dtype, positive=then == "Div"
    )
    g.node(then, ["c", "conv"] if then == "Sub" and draw(st.booleans()) and not runtime else ["conv", "c"], "y")
    return g.case("conv-zero-bias", ["y"], also=("conv-bias-fold", "conv-scale-fold", "conv-div-fold"))


def _conv_scale(rule: str, group: str | None = None) -> Callable[[], Any]:
    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        spec = draw_conv(draw, group=group)
        g = DrawnGraph()
        x = float_input(draw, g, "x", spec.x_shape, spec.dtype)
        add_conv(draw, g, spec, x, "conv")
        shape = draw(st.sampled_from(channel_shapes(spec.rank, spec.co)))
        g.inits["c"] = draw_constant(draw, shape, spec.dtype, positive=rule == "conv-div-fold")
        if rule == "conv-div-fold":
            g.node("Div", ["conv", "c"], "y")
        else:
            g.node("Mul", ["conv", "c"] if draw(st.booleans()) else ["c", "conv"], "y")
        return g.case(rule, ["y"], also=ZERO_BIAS + CONST_LAST)

    return strategy


def _bn_params(draw: Callable, g: DrawnGraph, channels: int, dtype: str, prefix: str = "bn") -> list[str]:
    dt = numpy_dtype(dtype)
    g.inits[f"{prefix}_gamma"] = draw_constant(draw, (channels,), dtype)
    g.inits[f"{prefix}_beta"] = np.asarray(draw(float_arrays((channels,), dt, -1.0, 1.0)))
    g.inits[f"{prefix}_mean"] = np.asarray(draw(float_arrays((channels,), dt, -1.0, 1.0)))
    g.inits[f"{prefix}_var"] = np.asarray(draw(float_arrays((channels,), dt, 0.25, 2.0)))
    return [f"{prefix}_{k}" for k in ("gamma", "beta", "mean", "var")]


@rule_case
def _conv_bn_fold(draw: Callable, st: Any, rule: str = "conv-bn-fold") -> RuleCase:
    """A conv's batch norm: the fold's case, and bn-foldable's (with the fold, which needs its fact)."""
    spec = draw_conv(draw)
    g = DrawnGraph()
    x = float_input(draw, g, "x", spec.x_shape, spec.dtype)
    add_conv(draw, g, spec, x, "conv")
    eps = draw(st.sampled_from((1e-5, 1e-3, 0.1, 0.0)))  # eps 0: folds too (the composed mark is eps 0, momentum 1)
    g.node(
        "BatchNormalization",
        ["conv", *_bn_params(draw, g, spec.co, spec.dtype)],
        "y",
        epsilon=eps,
        **({"momentum": draw(st.sampled_from((0.9, 0.99)))} if draw(st.booleans()) else {}),
    )
    return g.case(rule, ["y"], also=ZERO_BIAS + (("conv-bn-fold",) if rule != "conv-bn-fold" else ()))


def _norm_shape(draw: Callable, dtype: str) -> tuple[int, ...]:
    """(N, C, ...) of rank 2 to 4; float16 gets several spread outputs (see draw_conv)."""
    st = hypothesis_strategies()
    low = 3 if dtype == "FLOAT16" else 1
    rank = draw(st.integers(2, 4))
    return (draw(st.integers(1, 2)), draw(st.integers(low, 4)), *[draw(st.integers(low, 3)) for _ in range(rank - 2)])


@rule_case
def _bn_decompose(draw: Callable, st: Any) -> RuleCase:
    dtype = draw(st.sampled_from(("FLOAT", "FLOAT", "FLOAT16")))
    shape = _norm_shape(draw, dtype)
    g = DrawnGraph()
    x = float_input(draw, g, "x", shape, dtype)
    g.node(
        "BatchNormalization",
        [x, *_bn_params(draw, g, shape[1], dtype)],
        "y",
        epsilon=draw(st.sampled_from((1e-5, 0.01))),
    )
    return g.case("bn-decompose", ["y"])


@rule_case
def _bn_compose(draw: Callable, st: Any) -> RuleCase:
    dtype = draw(st.sampled_from(("FLOAT", "FLOAT", "FLOAT16")))
    shape = _norm_shape(draw, dtype)
    rank = len(shape)
    g = DrawnGraph()
    x = float_input(draw, g, "x", shape, dtype)
    g.inits["s"] = draw_constant(draw, draw(st.sampled_from(channel_shapes(rank, shape[1]))), dtype)
    g.inits["t"] = draw_constant(draw, draw(st.sampled_from(channel_shapes(rank, shape[1]))), dtype)
    g.node("Mul", [x, "s"] if draw(st.booleans()) else ["s", x], "m")
    g.node("Add", ["m", "t"] if draw(st.booleans()) else ["t", "m"], "y")
    return g.case("bn-compose", ["y"], also=CONST_LAST)


@rule_case
def _conv_input_scale_fold(draw: Callable, st: Any) -> RuleCase:
    spec = draw_conv(draw)
    g = DrawnGraph()
    x = float_input(draw, g, "x", spec.x_shape, spec.dtype)
    g.inits["s"] = draw_constant(draw, draw(st.sampled_from(channel_shapes(spec.rank, spec.ci))), spec.dtype)
    g.node("Mul", [x, "s"] if draw(st.booleans()) else ["s", x], "xs")
    add_conv(draw, g, spec, "xs", "y")
    return g.case("conv-input-scale-fold", ["y"], also=CONST_LAST)


def _scale_through(rule: str, act: str) -> Callable[[], Any]:
    """Backward: act(Conv) * c; forward: Conv(act(x * s)); c, s positive, per channel or scalar."""

    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        spec = draw_conv(draw, dtype="FLOAT")
        attrs = {"alpha": draw(st.sampled_from((0.01, 0.2)))} if act == "LeakyRelu" else {}
        g = DrawnGraph()
        x = float_input(draw, g, "x", spec.x_shape, spec.dtype)
        if draw(st.booleans()):  # backward
            add_conv(draw, g, spec, x, "conv")
            g.node(act, ["conv"], "a", **attrs)
            g.inits["c"] = draw_constant(
                draw, draw(st.sampled_from(channel_shapes(spec.rank, spec.co))), spec.dtype, positive=True
            )
            g.node("Mul", ["a", "c"], "y")
            return g.case(rule, ["y"], also=ZERO_BIAS + ("conv-scale-fold",))
        g.inits["s"] = draw_constant(
            draw, draw(st.sampled_from(channel_shapes(spec.rank, spec.ci))), spec.dtype, positive=True
        )
        g.node("Mul", [x, "s"], "xs")
        g.node(act, ["xs"], "a", **attrs)
        add_conv(draw, g, spec, "a", "y")
        return g.case(rule, ["y"], also=("conv-input-scale-fold",))

    return strategy


@rule_case
def _scale_through_add(draw: Callable, st: Any) -> RuleCase:
    spec = draw_conv(draw, dtype="FLOAT")
    g = DrawnGraph()
    x = float_input(draw, g, "x", spec.x_shape, spec.dtype)
    also = ZERO_BIAS + ("conv-scale-fold", "conv-bias-fold", "conv-input-scale-fold")
    if draw(st.booleans()):  # backward: (Conv +/- o) * c, o an input or a per-channel constant
        add_conv(draw, g, spec, x, "conv")
        if draw(st.booleans()):
            o = float_input(draw, g, "o", spec.out_shape, spec.dtype)
        else:
            g.inits["o"] = draw_constant(draw, (1, spec.co, *[1] * (spec.rank - 2)), spec.dtype)
            o = "o"
        op = draw(st.sampled_from(("Add", "Sub")))
        g.node(op, ["conv", o] if draw(st.booleans()) else [o, "conv"], "a")
        g.inits["c"] = draw_constant(draw, draw(st.sampled_from(channel_shapes(spec.rank, spec.co))), spec.dtype)
        g.node("Mul", ["a", "c"], "y")
        return g.case("scale-through-add", ["y"], also=also)
    # forward: Conv(act(x * s + t)), s > 0, t a constant, act Relu or LeakyRelu
    g.inits["s"] = draw_constant(
        draw, draw(st.sampled_from(channel_shapes(spec.rank, spec.ci))), spec.dtype, positive=True
    )
    g.inits["t"] = draw_constant(draw, draw(st.sampled_from(channel_shapes(spec.rank, spec.ci)[:2])), spec.dtype)
    g.node("Mul", [x, "s"], "xs")
    g.node("Add", ["xs", "t"], "m")
    g.node(draw(st.sampled_from(("Relu", "LeakyRelu"))), ["m"], "r")
    add_conv(draw, g, spec, "r", "y")
    return g.case(
        "scale-through-add",
        ["y"],
        also=also + ("scale-through-relu", "scale-through-leaky-relu", "scale-positive-facts"),
    )


@rule_case
def _conv_pad_merge(draw: Callable, st: Any) -> RuleCase:
    spec = draw_conv(draw, kind="Conv")
    n = len(spec.kernel)
    g = DrawnGraph()
    x = float_input(draw, g, "x", spec.x_shape, spec.dtype)
    pads = [0, 0, *[draw(st.integers(0, 2)) for _ in range(n)], 0, 0, *[draw(st.integers(0, 2)) for _ in range(n)]]
    opset = draw(st.sampled_from((10, 13, 17)))
    if opset >= 11:
        g.inits["pads"] = np.array(pads, np.int64)
        inputs = [x, "pads"]
        if draw(st.booleans()):
            g.inits["zero"] = np.zeros((), numpy_dtype(spec.dtype))
            inputs.append("zero")
        g.node("Pad", inputs, "p")
    else:
        g.node("Pad", [x], "p", pads=pads, mode="constant", value=0.0)
    add_conv(draw, g, spec, "p", "y")
    return g.case("conv-pad-merge", ["y"], opset=opset)


@rule_case
def _const_operand_last(draw: Callable, st: Any) -> RuleCase:
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    g = DrawnGraph()
    x = float_input(draw, g, "x", shape, "FLOAT")
    c_shape = draw(st.sampled_from((shape, (), (1,) * rank, shape[1:])))
    g.inits["c"] = draw_constant(draw, c_shape, "FLOAT")
    g.node(draw(st.sampled_from(("Add", "Mul"))), ["c", x], "y")
    return g.case("const-operand-last", ["y"])


def _analysis_fact(rule: str) -> Callable[[], Any]:
    """Graphs where a conv fold needs a fact only `rule` derives.

    scale-broadcast-shape: (Conv + t) * c with t per channel and c a single element of full rank: the
    backward fold builds t * c, whose shape (that of t) comes from this rule, and folds it into the bias.
    scale-positive-facts: BatchNormalization(Relu(Conv)) with gamma > 0: its decomposition scales by
    gamma / sqrt(var + eps), positive by this rule, which then passes through the Relu into the conv.
    scale-finite-facts: the same graph: that scale is finite (a positive divisor) by this rule, so it folds.
    """

    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        spec = draw_conv(draw, dtype="FLOAT")
        g = DrawnGraph()
        x = float_input(draw, g, "x", spec.x_shape, spec.dtype)
        add_conv(draw, g, spec, x, "conv")
        channel = (1, spec.co, *[1] * (spec.rank - 2))
        if rule == "scale-broadcast-shape":
            g.inits["t"] = draw_constant(draw, channel, spec.dtype)
            g.inits["c"] = draw_constant(draw, (1,) * spec.rank, spec.dtype)
            g.node("Add", ["conv", "t"], "a")
            g.node("Mul", ["a", "c"], "y")
            return g.case(rule, ["y"], also=ZERO_BIAS + ("scale-through-add", "conv-scale-fold", "conv-bias-fold"))
        g.node("Relu", ["conv"], "r")
        names = _bn_params(draw, g, spec.co, spec.dtype)
        g.inits[names[0]] = np.abs(g.inits[names[0]]) + np.float32(0.25)
        g.node("BatchNormalization", ["r", *names], "y")
        return g.case(rule, ["y"], also=ZERO_BIAS + ("bn-decompose", "scale-through-relu", "conv-scale-fold"))

    return strategy


def _conv_merge(rule: str = "conv-merge") -> Callable[[], Any]:
    """2 or 3 group-1 convs over one input with the same geometry and their own output channels; each bias
    present or absent (a mix goes through the zero bias), each followed by the same activation (always for
    conv-merge-epilogue) or none."""

    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        spec = draw_conv(draw, kind="Conv", group="one")
        dt = numpy_dtype(spec.dtype)
        g = DrawnGraph()
        x = float_input(draw, g, "x", spec.x_shape, spec.dtype)
        acts = CONV_EPILOGUES if rule == "conv-merge-epilogue" else (None, None, "Relu", "LeakyRelu", "Sigmoid")
        act = draw(st.sampled_from(acts))
        outs = []
        for k in range(draw(st.integers(2, 3))):
            branch = dataclasses.replace(spec, co=draw(st.integers(1, 3)))
            # constant weights of two elements at least (one element is a Scalar), distinct per conv
            if math.prod(branch.w_shape) < 2:
                branch = dataclasses.replace(branch, co=2)
            g.inits[f"c{k}_w"] = np.asarray(draw(float_arrays(branch.w_shape, dt, -1.0, 1.0)) + dt.type(k))
            inputs = [x, f"c{k}_w"]
            if draw(st.booleans()):
                g.inits[f"c{k}_b"] = np.asarray(draw(float_arrays((branch.co,), dt, -1.0, 1.0)))
                inputs.append(f"c{k}_b")
            y = g.node("Conv", inputs, f"c{k}", **spec.attrs())
            outs.append(add_activation(draw, g, act, y, f"a{k}", spec.dtype) if act else y)
        return g.case(rule, outs, also=("conv-merge",) if rule != "conv-merge" else ())

    return strategy


#: rule name -> strategy of graphs where the rule fires; one case in four is also checked with symbolic dims.
PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "conv-zero-bias": _conv_zero_bias,
    "conv-bias-fold": _conv_bias_fold,
    "conv-scale-fold": _conv_scale("conv-scale-fold"),
    "conv-div-fold": _conv_scale("conv-div-fold"),
    "conv-bn-fold": _conv_bn_fold,
    "bn-foldable": functools.partial(_conv_bn_fold, rule="bn-foldable"),
    "bn-decompose": _bn_decompose,
    "bn-compose": _bn_compose,
    "conv-input-scale-fold": _conv_input_scale_fold,
    "scale-through-relu": _scale_through("scale-through-relu", "Relu"),
    "scale-through-leaky-relu": _scale_through("scale-through-leaky-relu", "LeakyRelu"),
    "scale-through-add": _scale_through_add,
    "conv-pad-merge": _conv_pad_merge,
    "const-operand-last": _const_operand_last,
    "conv-merge": _conv_merge(),
    "conv-merge-sites": _conv_merge("conv-merge-sites"),
    "conv-merge-epilogue": _conv_merge("conv-merge-epilogue"),
    "conv-merge-order": feeding(_conv_merge(), "conv-merge-order"),
    "bias-fold-sites": feeding(_conv_zero_bias, "bias-fold-sites"),
    "bn-unmarked": feeding(_conv_bn_fold, "bn-unmarked"),
    "bn-scale-sites": feeding(_conv_bn_fold, "bn-scale-sites"),
    "bn-conv-folds": feeding(_conv_bn_fold, "bn-conv-folds"),
    "conv-sites": feeding(_scale_through_add, "conv-sites"),
    # conv-group-views are computed for grouped weights only
    "conv-weight-facts": feeding(_conv_scale("conv-scale-fold", group="grouped"), "conv-weight-facts"),
    "per-channel-facts": feeding(_bn_compose, "per-channel-facts"),
    "conv-pad-sites": feeding(_conv_pad_merge, "conv-pad-sites"),
    "scale-broadcast-shape": _analysis_fact("scale-broadcast-shape"),
    "scale-positive-facts": _analysis_fact("scale-positive-facts"),
    "scale-finite-facts": _analysis_fact("scale-finite-facts"),
}
