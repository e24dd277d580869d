"""Normalization rules (rewrites/normalization.py): each fires where it should, not where its guard fails,
and is sound; the extractor picks LayerNormalization or its decomposition per target."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from hypothesis import given

from eqsat.testing import (
    PROPERTIES,
    RuleCase,
    assert_rule_does_not_fire,
    assert_rule_sound,
    op_counts,
    optimize_with_rules,
    saturate_with_rules,
)
from eqsat.extract.cost import load_target, roofline
from tests.rule_graphs import attribute, model, node, property_settings

LN_RULES = ["layernorm-fuse", "layernorm-fuse-scale", "layernorm-fuse-bias"]
#: Pow(d, 2) and Mul(d, Reciprocal(std)) reach the form the fusions match through this rule: run with every fusion.
FORMS = "norm-moment-forms"
D = 8
X3 = [("x", "FLOAT", (1, 4, D))]


def _reduce_mean(x: str, y: str, axes: list[int], keepdims: int, opset: int):
    if opset >= 18:  # axes are an input from opset 18 on
        return node("ReduceMean", [x, "axes"], y, keepdims=keepdims)
    return node("ReduceMean", [x], y, axes=axes, keepdims=keepdims)


def _moments(
    axes: list[int],
    *,
    square: str = "pow",
    norm: str = "div",
    x: str = "x",
    mean_of: str = "x",
    keepdims: int = 1,
    opset: int = 17,
) -> tuple[list, dict]:
    """x -> (x - mean) / sqrt(var + eps) over `axes` as exporters write it (BERT/GPT-2: pow, div)."""
    nodes = [_reduce_mean(mean_of, "mean", axes, keepdims, opset), node("Sub", [x, "mean"], "d")]
    nodes.append(node("Pow", ["d", "two"], "sq") if square == "pow" else node("Mul", ["d", "d"], "sq"))
    nodes += [
        _reduce_mean("sq", "var", axes, keepdims, opset),
        node("Add", ["var", "eps"], "ve"),
        node("Sqrt", ["ve"], "std"),
    ]
    if norm == "div":
        nodes.append(node("Div", ["d", "std"], "n"))
    else:  # "recip": d * Reciprocal(std); "recip-first": Reciprocal(std) * d
        nodes += [
            node("Reciprocal", ["std"], "rstd"),
            node("Mul", ["rstd", "d"] if norm == "recip-first" else ["d", "rstd"], "n"),
        ]
    inits = {"two": np.array(2.0, np.float32), "eps": np.array(1e-12, np.float32)}
    if opset >= 18:
        inits["axes"] = np.array(axes, np.int64)
    return nodes, inits


def _layernorm_model(
    *, gamma=(D,), beta=(D,), opset: int = 17, dtype: str = "FLOAT", shape=(1, 4, D), axes=(-1,), **kw
) -> object:
    nodes, inits = _moments(list(axes), opset=opset, **kw)
    out = "n"
    rng = np.random.default_rng(0)
    np_dtype = np.float16 if dtype == "FLOAT16" else np.float32
    inits = {k: v.astype(np_dtype) if v.dtype == np.float32 else v for k, v in inits.items()}
    if gamma is not None:
        inits["gamma"] = rng.uniform(0.5, 1.5, gamma).astype(np_dtype)
        nodes.append(node("Mul", [out, "gamma"], "scaled"))
        out = "scaled"
    if beta is not None:
        inits["beta"] = rng.uniform(-1, 1, beta).astype(np_dtype)
        nodes.append(node("Add", [out, "beta"], "y"))
        out = "y"
    return model(nodes, [("x", dtype, shape)], [out], inits, opset=opset)


# ---- layernorm-fuse (+ scale, bias): the BERT/GPT-2 decomposition ----


@pytest.mark.parametrize("square,norm", [("pow", "div"), ("mul", "div"), ("pow", "recip"), ("mul", "recip")])
def test_layernorm_fuse_bert_pattern_becomes_one_node(square: str, norm: str) -> None:
    m = _layernorm_model(square=square, norm=norm)
    result, fired = optimize_with_rules(m, [*LN_RULES, FORMS])
    assert all(fired[r] > 0 for r in LN_RULES), fired
    assert op_counts(result.model) == {"LayerNormalization": 1}
    assert_rule_sound(m, "layernorm-fuse-bias", also=(*LN_RULES[:2], FORMS))


@pytest.mark.parametrize("opset", [17, 18, 20])
def test_layernorm_fuse_without_affine(opset: int) -> None:
    m = _layernorm_model(gamma=None, beta=None, opset=opset, axes=(2,))
    result = assert_rule_sound(m, "layernorm-fuse", also=(FORMS,))
    assert op_counts(result.model) == {"LayerNormalization": 1}


def test_layernorm_fuse_needs_opset_17() -> None:
    assert_rule_does_not_fire(_layernorm_model(opset=14), "layernorm-fuse", also=(FORMS,))


def test_layernorm_fuse_not_over_another_axis() -> None:
    """Moments over axis 1 of (1, 4, 8) are not a LayerNormalization over the last axis."""
    assert_rule_does_not_fire(_layernorm_model(axes=(1,), gamma=None, beta=None), "layernorm-fuse", also=(FORMS,))


def test_layernorm_fuse_needs_the_same_x_in_mean_and_sub() -> None:
    nodes, inits = _moments([-1], mean_of="z")
    m = model([node("Relu", ["x"], "z"), *nodes], X3, ["n"], inits)
    assert_rule_does_not_fire(m, "layernorm-fuse", also=(FORMS,))


def test_layernorm_fuse_not_without_keepdims() -> None:
    """keepdims=0 broadcasts the mean along another axis: (1, 4) against (1, 4, 8) is not per row."""
    nodes, inits = _moments([-1], keepdims=0)
    m = model(nodes, [("x", "FLOAT", (4, 4, 4))], ["n"], inits)
    assert_rule_does_not_fire(m, "layernorm-fuse", also=(FORMS,))


def test_layernorm_fuse_not_on_float16() -> None:
    """The kernel computes in float32: fusing an fp16 decomposition would drop its fp16 roundings."""
    assert_rule_does_not_fire(_layernorm_model(dtype="FLOAT16"), "layernorm-fuse", also=(FORMS,))


def test_layernorm_fuse_scale_not_for_a_per_row_gamma() -> None:
    """A gamma of shape (1, 4, 1) scales rows, not the normalized axis: not a LayerNormalization scale."""
    assert_rule_does_not_fire(
        _layernorm_model(gamma=(1, 4, 1), beta=None), "layernorm-fuse-scale", also=("layernorm-fuse", FORMS)
    )


def test_layernorm_fuse_scale_not_for_a_full_size_gamma() -> None:
    """A gamma with one value per element (1, 4, 8) varies along the rows too."""
    assert_rule_does_not_fire(
        _layernorm_model(gamma=(1, 4, D), beta=None), "layernorm-fuse-scale", also=("layernorm-fuse", FORMS)
    )


def test_layernorm_fuse_bias_not_for_a_runtime_bias() -> None:
    nodes, inits = _moments([-1])
    m = model([*nodes, node("Add", ["n", "b"], "y")], [*X3, ("b", "FLOAT", (D,))], ["y"], inits)
    assert_rule_does_not_fire(m, "layernorm-fuse-bias", also=("layernorm-fuse", FORMS))


@property_settings()
@given(PROPERTIES["layernorm-fuse"]())
def test_layernorm_fuse_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["layernorm-fuse-scale"]())
def test_layernorm_fuse_scale_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["layernorm-fuse-bias"]())
def test_layernorm_fuse_bias_property(case: RuleCase) -> None:
    case.check()


# ---- layernorm-fuse over several trailing axes ----


@pytest.mark.parametrize("opset,gamma", [(17, (4, D)), (18, (1, 4, D)), (18, (4, D))])
def test_layernorm_fuse_over_trailing_axes(opset: int, gamma: tuple) -> None:
    """Moments over axes [1, 2] of (2, 4, 8) -> LayerNormalization(axis=1) with (4, 8) scale and bias."""
    m = _layernorm_model(axes=(1, 2), shape=(2, 4, D), gamma=gamma, beta=gamma, opset=opset)
    result, fired = optimize_with_rules(m, [*LN_RULES, FORMS])
    assert all(fired[r] > 0 for r in LN_RULES), fired
    assert op_counts(result.model) == {"LayerNormalization": 1}
    assert attribute(result.model, "LayerNormalization", "axis") == 1
    assert_rule_sound(m, "layernorm-fuse-bias", also=(*LN_RULES[:2], FORMS))


def test_layernorm_fuse_not_over_non_trailing_axes() -> None:
    """Axes [1, 2] of a rank-4 x, or [1, 3] (not contiguous): not the axes a LayerNormalization normalizes."""
    for axes in ((1, 2), (1, 3)):
        assert_rule_does_not_fire(
            _layernorm_model(axes=axes, shape=(2, 3, 4, 5), gamma=None, beta=None), "layernorm-fuse", also=(FORMS,)
        )


def test_layernorm_fuse_not_over_a_symbolic_dim() -> None:
    """The scale is a tensor of the normalized dims: a symbolic one among them stops the fusion."""
    assert_rule_does_not_fire(
        _layernorm_model(axes=(1, 2), shape=(2, "S", D), gamma=None, beta=None), "layernorm-fuse", also=(FORMS,)
    )


def test_layernorm_fuse_scale_not_for_a_gamma_along_part_of_the_axes() -> None:
    """Over axes [1, 2], a gamma of shape (4, 1) broadcasts along axis 2: the fused scale would need an
    Expand; not fused (its shape is not the normalized dims (4, 8))."""
    m = _layernorm_model(axes=(1, 2), shape=(2, 4, D), gamma=(4, 1), beta=None)
    assert_rule_does_not_fire(m, "layernorm-fuse-scale", also=("layernorm-fuse", FORMS))


# ---- layernorm-fuse-transposed: a channels-first LayerNorm ----

TRANSPOSED_RULES = [
    "layernorm-fuse-transposed",
    "layernorm-fuse-scale",
    "layernorm-fuse-bias",
    "transpose-sink-binary-const",
    "transpose-merge",
    "transpose-identity",
    "const-operand-last",
]


@pytest.mark.parametrize("affine", [False, True])
def test_layernorm_fuse_transposed_channels_first(affine: bool) -> None:
    """ConvNeXt's LayerNorm over axis 1 of NCHW, gamma and beta (C, 1, 1): LayerNormalization between two
    Transposes, the affine part sunk into it."""
    shape = (2, D, 3, 4)
    m = _layernorm_model(
        axes=(1,), shape=shape, gamma=(D, 1, 1) if affine else None, beta=(D, 1, 1) if affine else None
    )
    result = assert_rule_sound(m, "layernorm-fuse-transposed", also=(*TRANSPOSED_RULES[1:], FORMS))
    assert op_counts(result.model) == {"Transpose": 2, "LayerNormalization": 1}


def test_layernorm_fuse_transposed_not_over_split_axes() -> None:
    """Axes [1, 3] are not contiguous: no single LayerNormalization axis after one transpose."""
    m = _layernorm_model(axes=(1, 3), shape=(2, 3, 4, 5), gamma=None, beta=None)
    assert_rule_does_not_fire(m, "layernorm-fuse-transposed", also=(FORMS,))


def test_layernorm_fuse_transposed_not_for_trailing_axes_or_a_symbolic_channel() -> None:
    """Trailing axes are layernorm-fuse's (no transposes); a symbolic normalized dim has no static scale."""
    assert_rule_does_not_fire(_layernorm_model(gamma=None, beta=None), "layernorm-fuse-transposed", also=(FORMS,))
    m = _layernorm_model(axes=(1,), shape=(2, "C", 3, 4), gamma=None, beta=None)
    assert_rule_does_not_fire(m, "layernorm-fuse-transposed", also=(FORMS,))


@property_settings()
@given(PROPERTIES["layernorm-fuse-transposed"]())
def test_layernorm_fuse_transposed_property(case: RuleCase) -> None:
    case.check()


# ---- the folded form x * (g * rsqrt(v + eps)) + (b - m * g * rsqrt(v + eps)) ----

FOLD_RULES = [*LN_RULES, FORMS, "norm-rsqrt-forms", "norm-unfold-shift", "norm-regroup-scale"]


def _folded_model(
    rsqrt: str = "pow",
    gamma: bool = True,
    beta: str = "sub",
    axes=(-1,),
    shape=(2, 4, D),
    mean_of: str = "x",
    gamma_input: bool = False,
    pre: tuple = (),
    cshape=None,
) -> object:
    """TF/Keras' LayerNormalization as tf2onnx writes it: k = g * rsqrt(var + eps); x * k + (b - mean * k)
    (gamma and beta of shape `cshape`, default the normalized dims)."""
    rng = np.random.default_rng(3)
    nd = cshape or tuple(shape[a] for a in axes)
    inits = {"axes": np.array(axes, np.int64), "eps": np.array(1e-5, np.float32)}
    nodes = [
        *pre,
        node("ReduceMean", [mean_of, "axes"], "m", keepdims=1),
        node("Sub", ["x", "m"], "d"),
        node("Mul", ["d", "d"], "sq"),
        node("ReduceMean", ["sq", "axes"], "v", keepdims=1),
        node("Add", ["v", "eps"], "ve"),
    ]
    if rsqrt == "pow":
        inits["mhalf"] = np.array(-0.5, np.float32)
        nodes.append(node("Pow", ["ve", "mhalf"], "r"))
    elif rsqrt == "div":
        inits["one"] = np.array(1.0, np.float32)
        nodes += [node("Sqrt", ["ve"], "s"), node("Div", ["one", "s"], "r")]
    else:
        nodes += [node("Sqrt", ["ve"], "s"), node("Reciprocal", ["s"], "r")]
    inputs = [("x", "FLOAT", shape)]
    k = "r"
    if gamma:
        if gamma_input:
            inputs.append(("g", "FLOAT", nd))
        else:
            inits["g"] = rng.uniform(0.5, 1.5, nd).astype(np.float32)
        nodes.append(node("Mul", ["g", "r"], "k"))
        k = "k"
    nodes += [node("Mul", ["x", k], "xk"), node("Mul", ["m", k], "mk")]
    if beta == "sub":
        inits["b"] = rng.uniform(-1, 1, nd).astype(np.float32)
        nodes += [node("Sub", ["b", "mk"], "sh"), node("Add", ["xk", "sh"], "y")]
    elif beta == "neg":
        nodes += [node("Neg", ["mk"], "sh"), node("Add", ["sh", "xk"], "y")]
    else:
        nodes.append(node("Sub", ["xk", "mk"], "y"))
    return model(nodes, inputs, ["y"], inits, opset=18)


@pytest.mark.parametrize(
    "rsqrt,gamma,beta,axes",
    [
        ("pow", True, "sub", (-1,)),
        ("div", True, "sub", (-1,)),
        ("recip", False, "sub", (-1,)),
        ("pow", True, "none", (-1,)),
        ("recip", True, "neg", (-1,)),
        ("pow", True, "sub", (1, 2)),
    ],
)
def test_folded_layernorm_becomes_one_node(rsqrt: str, gamma: bool, beta: str, axes: tuple) -> None:
    m = _folded_model(rsqrt, gamma, beta, axes)
    result, fired = optimize_with_rules(m, FOLD_RULES)
    assert fired["norm-unfold-shift"] > 0 and fired["layernorm-fuse"] > 0, fired
    assert op_counts(result.model) == {"LayerNormalization": 1}
    assert_rule_sound(m, "norm-unfold-shift", also=FOLD_RULES)


@pytest.mark.parametrize("beta", ["sub", "none"])
def test_folded_instancenorm_becomes_one_node(beta: str) -> None:
    """The same folded form over the spatial axes with per-channel gamma and beta: InstanceNormalization."""
    rules = [
        "instancenorm-fuse",
        "instancenorm-fuse-affine",
        FORMS,
        "norm-rsqrt-forms",
        "norm-unfold-shift",
        "norm-regroup-scale",
    ]
    m = _folded_model("div", beta=beta, axes=(2, 3), shape=(1, 3, 4, 5), cshape=(1, 3, 1, 1))
    result, fired = optimize_with_rules(m, rules)
    assert fired["norm-regroup-scale"] > 0 and fired["instancenorm-fuse"] > 0, fired
    assert op_counts(result.model) == {"InstanceNormalization": 1}
    assert_rule_sound(m, "norm-unfold-shift", also=rules)


def test_rsqrt_forms_alone_are_sound() -> None:
    for rsqrt in ("pow", "div"):
        assert_rule_sound(_folded_model(rsqrt), "norm-rsqrt-forms", also=(FORMS,))


def test_norm_unfold_shift_needs_the_mean_of_x() -> None:
    """x * k + (b - mean(z) * k) with z != x is no normalization of x."""
    m = _folded_model(mean_of="z", pre=(node("Relu", ["x"], "z"),))
    assert_rule_does_not_fire(m, "norm-unfold-shift", also=(FORMS,))


def test_norm_regroup_scale_needs_a_constant_gamma() -> None:
    """A runtime gamma is not a LayerNormalization scale: (x - m) * (g * r) stays as it is."""
    m = _folded_model(gamma_input=True)
    assert_rule_does_not_fire(m, "norm-regroup-scale", also=("norm-rsqrt-forms", "norm-unfold-shift", FORMS))


def test_rsqrt_forms_not_for_another_exponent() -> None:
    m = _folded_model("pow")
    for init in m.graph.initializer:
        if init.name == "mhalf":
            init.CopyFrom(onnx.numpy_helper.from_array(np.array(-0.25, np.float32), "mhalf"))
    assert_rule_does_not_fire(m, "norm-rsqrt-forms", also=(FORMS,))


# ---- (n + b) * g: the affine in the other order ----


def _add_then_mul_model(beta_input: bool = False, norm: str = "ln") -> object:
    axes, shape = ((-1,), (1, 4, D)) if norm == "ln" else ((2, 3), (1, 3, 4, 5))
    nodes, inits = _moments(list(axes), opset=17)
    rng = np.random.default_rng(4)
    cshape = (D,) if norm == "ln" else (1, 3, 1, 1)
    inits["gamma"] = rng.uniform(0.5, 1.5, cshape).astype(np.float32)
    inputs = [("x", "FLOAT", shape)]
    if beta_input:
        inputs.append(("beta", "FLOAT", cshape))
    else:
        inits["beta"] = rng.uniform(-1, 1, cshape).astype(np.float32)
    nodes += [node("Add", ["n", "beta"], "nb"), node("Mul", ["gamma", "nb"], "y")]
    return model(nodes, inputs, ["y"], inits, opset=17)


@pytest.mark.parametrize("norm", ["ln", "in"])
def test_add_then_mul_affine_is_fused(norm: str) -> None:
    rules = (
        [*LN_RULES, FORMS, "norm-distribute-affine", "const-operand-last"]
        if norm == "ln"
        else ["instancenorm-fuse", "instancenorm-fuse-affine", FORMS, "norm-distribute-affine", "const-operand-last"]
    )
    m = _add_then_mul_model(norm=norm)
    result, fired = optimize_with_rules(m, rules)
    assert fired["norm-distribute-affine"] > 0, fired
    assert op_counts(result.model) == {"LayerNormalization" if norm == "ln" else "InstanceNormalization": 1}
    assert_rule_sound(m, "norm-distribute-affine", also=rules)


def test_add_then_mul_affine_needs_constants() -> None:
    """b * g would be computed at run time: not distributed."""
    assert_rule_does_not_fire(
        _add_then_mul_model(beta_input=True), "norm-distribute-affine", also=("layernorm-fuse", FORMS)
    )


@property_settings()
@given(PROPERTIES["norm-moment-forms"]())
def test_norm_moment_forms_property(case: RuleCase) -> None:
    case.check()


def test_norm_moment_forms_not_for_a_square_of_something_else() -> None:
    """Pow(z, 2) for z not x - mean(x): left alone (the rule is local to the normalizations)."""
    nodes, inits = _moments([-1], mean_of="z", square="pow")
    m = model([node("Relu", ["x"], "z"), *nodes], X3, ["n"], inits)
    assert_rule_does_not_fire(m, FORMS)


@property_settings()
@given(PROPERTIES["norm-rsqrt-forms"]())
def test_norm_rsqrt_forms_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["norm-unfold-shift"]())
def test_norm_unfold_shift_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["norm-regroup-scale"]())
def test_norm_regroup_scale_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["norm-distribute-affine"]())
def test_norm_distribute_affine_property(case: RuleCase) -> None:
    case.check()


# ---- layernorm-decompose: the target decides ----


def _ln_node_model(bias: bool = True, dtype: str = "FLOAT", axis: int = -1) -> object:
    rng = np.random.default_rng(1)
    np_dtype = np.float16 if dtype == "FLOAT16" else np.float32
    inits = {"g": rng.uniform(0.5, 1.5, D).astype(np_dtype)}
    if bias:
        inits["b"] = rng.uniform(-1, 1, D).astype(np_dtype)
    if axis != -1:
        inits["g"] = rng.uniform(0.5, 1.5, (4, D)).astype(np_dtype)
        inits.pop("b", None)
    inputs = ["x", "g", "b"] if bias and axis == -1 else ["x", "g"]
    return model(
        [node("LayerNormalization", inputs, "y", axis=axis, epsilon=1e-5)],
        [("x", dtype, (1, 4, D))],
        initializers=inits,
    )


@pytest.mark.parametrize("bias", [True, False])
def test_layernorm_decompose_fires_and_cpu_keeps_the_fused_op(bias: bool) -> None:
    m = _ln_node_model(bias)
    result = assert_rule_sound(m, "layernorm-decompose")
    assert op_counts(result.model) == {"LayerNormalization": 1}


def test_layernorm_decompose_not_on_float16() -> None:
    assert_rule_does_not_fire(_ln_node_model(dtype="FLOAT16"), "layernorm-decompose")


def test_layernorm_decompose_only_over_the_last_axis() -> None:
    assert_rule_does_not_fire(_ln_node_model(axis=1), "layernorm-decompose")


@pytest.mark.parametrize("target,expected", [("cpu", "fused"), ("gpu", "fused"), ("npu", "decomposed")])
def test_layernorm_extraction_per_target(target: str, expected: str) -> None:
    """cpu/gpu run LayerNormalization: fused. The npu has no LayerNormalization kernel (a host fallback,
    200 us) but runs every primitive of the decomposition on its vector unit (npu.toml: fp32 compiled to
    fp16), so there the same e-graph gives the decomposition."""
    m = _layernorm_model()
    session = saturate_with_rules(m, [*LN_RULES, FORMS, "layernorm-decompose"])
    ops = op_counts(session.extract(target, verify=False).model)
    if expected == "fused":
        assert ops == {"LayerNormalization": 1}
    else:
        assert "LayerNormalization" not in ops and ops["ReduceMean"] == 2 and ops["Sqrt"] == 1


def test_layernorm_costs_on_npu_explain_the_choice() -> None:
    """The costs behind test_layernorm_extraction_per_target: on the npu the fused node is a host
    fallback, while each primitive of the decomposition runs on the NPU far below that penalty."""
    session = saturate_with_rules(_layernorm_model(), [*LN_RULES, FORMS, "layernorm-decompose"])
    cost, penalty = roofline("npu"), load_target("npu").unsupported_penalty
    g = session.egraph
    fused = [cost(g, n) for n in g.nodes if n.op == "LayerNormalization"]
    primitives = [
        cost(g, n) for n in g.nodes if n.op in ("ReduceMean", "Sub", "Sqrt") and not g.eclass(n.eclass).constant
    ]
    assert fused and primitives and min(fused) >= penalty
    assert sum(primitives) < penalty


@property_settings()
@given(PROPERTIES["layernorm-decompose"]())
def test_layernorm_decompose_property(case: RuleCase) -> None:
    case.check()


# ---- instancenorm-fuse (+ affine) ----


def _instancenorm_model(axes=(2, 3), gamma=True, beta=True, shape=(1, 3, 4, 5)) -> object:
    nodes, inits = _moments(list(axes))
    rng = np.random.default_rng(2)
    out = "n"
    if gamma:
        inits["gamma"] = rng.uniform(0.5, 1.5, (1, shape[1], 1, 1)).astype(np.float32)
        nodes.append(node("Mul", ["gamma", out], "scaled"))
        out = "scaled"
    if beta:
        inits["beta"] = rng.uniform(-1, 1, (1, shape[1], 1, 1)).astype(np.float32)
        nodes.append(node("Add", [out, "beta"], "y"))
        out = "y"
    return model(nodes, [("x", "FLOAT", shape)], [out], inits, opset=13)


def test_instancenorm_fuse_spatial_moments() -> None:
    m = _instancenorm_model(gamma=False, beta=False)
    result = assert_rule_sound(m, "instancenorm-fuse", also=(FORMS,))
    assert op_counts(result.model) == {"InstanceNormalization": 1}


def test_instancenorm_fuse_affine_per_channel() -> None:
    m = _instancenorm_model()
    result, fired = optimize_with_rules(m, ["instancenorm-fuse", "instancenorm-fuse-affine", FORMS])
    assert fired["instancenorm-fuse-affine"] > 0
    assert op_counts(result.model) == {"InstanceNormalization": 1}
    assert_rule_sound(m, "instancenorm-fuse-affine", also=("instancenorm-fuse", FORMS))


IN_CL_RULES = [
    "instancenorm-fuse-channels-last",
    "instancenorm-fuse-affine",
    "transpose-sink-binary-const",
    "transpose-merge",
    "transpose-identity",
    "const-operand-last",
]


@pytest.mark.parametrize("affine", [False, True])
def test_instancenorm_fuse_channels_last(affine: bool) -> None:
    """Moments over H, W of NHWC (per-channel gamma/beta (3,)): InstanceNormalization between two Transposes."""
    c = (3,) if affine else None
    m = _layernorm_model(axes=(1, 2), shape=(2, 4, 5, 3), gamma=c, beta=c)
    result = assert_rule_sound(m, "instancenorm-fuse-channels-last", also=(*IN_CL_RULES[1:], FORMS))
    assert op_counts(result.model) == {"Transpose": 2, "InstanceNormalization": 1}


def test_instancenorm_fuse_channels_last_needs_a_static_channel_and_all_spatial_axes() -> None:
    m = _layernorm_model(axes=(1, 2), shape=(2, 4, 5, "C"), gamma=None, beta=None)
    assert_rule_does_not_fire(m, "instancenorm-fuse-channels-last", also=(FORMS,))
    m = _layernorm_model(axes=(1,), shape=(2, 4, 5, 3), gamma=None, beta=None)
    assert_rule_does_not_fire(m, "instancenorm-fuse-channels-last", also=(FORMS,))


@property_settings()
@given(PROPERTIES["instancenorm-fuse-channels-last"]())
def test_instancenorm_fuse_channels_last_property(case: RuleCase) -> None:
    case.check()


def test_norm_fusions_not_over_a_single_element() -> None:
    """Normalizing one element gives exactly 0 (beta after the affine part); the fused kernels leave a
    rounding residue amplified by 1 / sqrt(eps) (fuzz seed 20003), so neither fusion applies there."""
    assert_rule_does_not_fire(
        _layernorm_model(gamma=None, beta=None, shape=(2, 1, 1), axes=(2,)), "layernorm-fuse", also=(FORMS,)
    )
    nodes, inits = _moments([2])
    m = model(nodes, [("x", "FLOAT", (2, 1, 1))], ["n"], inits, opset=17)
    assert_rule_does_not_fire(m, "instancenorm-fuse", also=(FORMS,))


def test_instancenorm_fuse_not_over_the_channel_axis() -> None:
    assert_rule_does_not_fire(
        _instancenorm_model(axes=(1, 2, 3), gamma=False, beta=False), "instancenorm-fuse", also=(FORMS,)
    )


def test_instancenorm_fuse_not_over_part_of_the_spatial_axes() -> None:
    assert_rule_does_not_fire(
        _instancenorm_model(axes=(3,), gamma=False, beta=False), "instancenorm-fuse", also=(FORMS,)
    )


def test_instancenorm_fuse_affine_not_for_a_spatial_gamma() -> None:
    """A gamma of shape (1, 1, 4, 1) varies along a spatial axis: not an InstanceNormalization scale."""
    nodes, inits = _moments([2, 3])
    inits["g"] = np.linspace(0.5, 1.5, 4, dtype=np.float32).reshape(1, 1, 4, 1)
    m = model([*nodes, node("Mul", ["n", "g"], "y")], [("x", "FLOAT", (1, 3, 4, 5))], ["y"], inits, opset=13)
    assert_rule_does_not_fire(m, "instancenorm-fuse-affine", also=("instancenorm-fuse", FORMS))


@property_settings()
@given(PROPERTIES["instancenorm-fuse"]())
def test_instancenorm_fuse_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["instancenorm-fuse-affine"]())
def test_instancenorm_fuse_affine_property(case: RuleCase) -> None:
    case.check()


def test_layernorm_not_fused_in_bundled_fp16_bert() -> None:
    """The bundled fp16-mixed BERT, upgraded to opset 17, keeps its LayerNorm decompositions: Casts sit
    between the primitives and the arithmetic around them is fp16 (fusing would drop fp16 roundings)."""
    from eqsat.session import saturate
    from eqsat.rewrites.registry import all_rules

    path = Path(__file__).parent / "models" / "bert_l2_h128_fp16_mixed.onnx"
    rules = [
        r for r in all_rules() if r.family == "analysis" or r.ruleset == "analysis" or r.name in (*LN_RULES, FORMS)
    ]
    session = saturate(path, rules=rules, opset=17)
    assert session.saturation.error is None
    assert "layernorm-fuse" not in session.saturation.rules_fired


# ---- issue 24 item 4: Reciprocal(std) * d at opset 21 (axes as an input), LayerNorm over two trailing axes and
# the InstanceNorm of an NCHW tensor whose moments are taken after a Transpose to NHWC ----

LN21 = dict(square="mul", norm="recip-first", opset=21)


def _eps_input(m: onnx.ModelProto) -> onnx.ModelProto:
    """The same model with eps a graph input (not a constant)."""
    (eps,) = [i for i in m.graph.initializer if i.name == "eps"]
    m.graph.initializer.remove(eps)
    m.graph.input.append(onnx.helper.make_tensor_value_info("eps", onnx.TensorProto.FLOAT, []))
    return m


def _ln21(shape=(2, 4, 6, D), gamma=(6, D)) -> onnx.ModelProto:
    return _layernorm_model(axes=(-2, -1), shape=shape, gamma=gamma, beta=gamma, **LN21)


def test_layernorm_fuse_two_trailing_axes_opset_21_rstd_first() -> None:
    """ReduceMean(axes input [-2, -1]), Sub, Mul(d, d), ReduceMean, Add eps, Sqrt, Reciprocal, Mul(rstd, d),
    Mul gamma (6, 8), Add beta -> LayerNormalization(axis=-2 as 2); verified at two batch sizes."""
    m = _ln21()
    result, fired = optimize_with_rules(m, [*LN_RULES, FORMS])
    assert fired[FORMS] > 0 and all(fired[r] > 0 for r in LN_RULES), fired
    assert op_counts(result.model) == {"LayerNormalization": 1}
    assert attribute(result.model, "LayerNormalization", "axis") == 2
    assert_rule_sound(m, "layernorm-fuse-bias", also=(*LN_RULES[:2], FORMS))
    import eqsat

    dynamic = eqsat.optimize(_ln21(shape=("N", 4, 6, D)))
    assert op_counts(dynamic.proto) == {"LayerNormalization": 1}
    assert dynamic.report.verification is not None and dynamic.report.verification.ok


def test_layernorm_fuse_two_trailing_axes_opset_21_negatives() -> None:
    """Axes [1, 2] of a rank-4 x are not trailing; eps a graph input is not the attribute; a gamma (4, 1, 1)
    varies along an axis that is not normalized: no LayerNormalization takes it."""
    wrong_axes = _layernorm_model(axes=(1, 2), shape=(2, 4, 6, D), gamma=None, beta=None, **LN21)
    assert_rule_does_not_fire(wrong_axes, "layernorm-fuse", also=(FORMS,))
    assert_rule_does_not_fire(_eps_input(_ln21()), "layernorm-fuse", also=(FORMS,))
    m = _ln21(gamma=(4, 1, 1))
    assert_rule_does_not_fire(m, "layernorm-fuse-scale", also=("layernorm-fuse", FORMS))
    result, fired = optimize_with_rules(m, [*LN_RULES, FORMS])
    assert fired["layernorm-fuse"] > 0 and op_counts(result.model)["Mul"] == 1


def _instancenorm_after_nhwc(
    gamma=(3,), axes=(1, 2), eps_input: bool = False, shape=(2, 3, 5, 7), opset: int = 21
) -> onnx.ModelProto:
    """NCHW x -> Transpose to NHWC -> moments over `axes` (Reciprocal(std) * d) -> Mul gamma -> Add beta ->
    Transpose back to NCHW."""
    nodes, inits = _moments(list(axes), x="t", mean_of="t", square="mul", norm="recip-first", opset=opset)
    rng = np.random.default_rng(3)
    inits["gamma"] = rng.uniform(0.5, 1.5, gamma).astype(np.float32)
    inits["beta"] = rng.uniform(-1, 1, gamma).astype(np.float32)
    nodes = [
        node("Transpose", ["x"], "t", perm=[0, 2, 3, 1]),
        *nodes,
        node("Mul", ["n", "gamma"], "g"),
        node("Add", ["g", "beta"], "yt"),
        node("Transpose", ["yt"], "y", perm=[0, 3, 1, 2]),
    ]
    m = model(nodes, [("x", "FLOAT", shape)], ["y"], inits, opset=opset)
    return _eps_input(m) if eps_input else m


def test_instancenorm_after_a_transpose_to_nhwc_folds_the_transposes() -> None:
    """The moments of Transpose(x, NHWC) over H, W with per-channel gamma/beta (3,), then Transpose back: one
    InstanceNormalization of x (the four Transposes cancel); verified at two batch sizes."""
    m = _instancenorm_after_nhwc()
    result = assert_rule_sound(m, "instancenorm-fuse-channels-last", also=(*IN_CL_RULES[1:], FORMS))
    assert op_counts(result.model) == {"InstanceNormalization": 1}
    import eqsat

    dynamic = eqsat.optimize(_instancenorm_after_nhwc(shape=("N", 3, 5, 7)))
    assert op_counts(dynamic.proto) == {"InstanceNormalization": 1}
    assert dynamic.report.verification is not None and dynamic.report.verification.ok


def test_instancenorm_after_a_transpose_to_nhwc_negatives() -> None:
    """Moments over H only (axes [1]) are no InstanceNorm; eps a graph input is not the attribute; a gamma
    (7, 1) varies along W: the affine part stays outside the kernel."""
    also = (FORMS,)
    assert_rule_does_not_fire(_instancenorm_after_nhwc(axes=(1,)), "instancenorm-fuse-channels-last", also=also)
    assert_rule_does_not_fire(_instancenorm_after_nhwc(eps_input=True), "instancenorm-fuse-channels-last", also=also)
    m = _instancenorm_after_nhwc(gamma=(7, 1))
    result, fired = optimize_with_rules(m, [*IN_CL_RULES, FORMS])
    assert fired["instancenorm-fuse-channels-last"] > 0
    assert "instancenorm-fuse-affine" not in fired and op_counts(result.model)["Mul"] == 1


# ---- norm-moment-forms: RMSNorm's x * rsqrt(mean(x^2) + eps) ----


def _rms(recip: str, *, order: str = "x_first", gated: str = "ve", shape: tuple = (1, 4, D)) -> object:
    """x * r for r = 1 / Sqrt(mean(x^2) + eps) written as Reciprocal or Div(1, .); `gated` the Sqrt's operand
    ("ve": the variance plus eps; "z": a plain input, not a variance)."""
    nodes = [
        node("Mul", ["x", "x"], "sq"),
        node("ReduceMean", ["sq"], "ms", axes=[-1]),
        node("Add", ["ms", "eps"], "ve"),
    ]
    nodes.append(node("Sqrt", [gated], "std"))
    nodes.append(node("Reciprocal", ["std"], "r") if recip == "reciprocal" else node("Div", ["one", "std"], "r"))
    nodes.append(node("Mul", ["x", "r"] if order == "x_first" else ["r", "x"], "n"))
    nodes.append(node("Mul", ["n", "gamma"], "y"))
    inits = {
        "eps": np.array(1e-6, np.float32),
        "one": np.array(1.0, np.float32),
        "gamma": np.linspace(0.5, 1.5, D, dtype=np.float32),
    }
    inputs = [("x", "FLOAT", shape)] + ([("z", "FLOAT", (shape[0], shape[1], 1))] if gated == "z" else [])
    return model(nodes, inputs, ["y"], inits, opset=17)


@pytest.mark.parametrize("recip", ["reciprocal", "div"])
@pytest.mark.parametrize("order", ["x_first", "r_first"])
def test_norm_moment_forms_rmsnorm_divides(recip: str, order: str) -> None:
    """RMSNorm (LLaMA, T5) as exported: x * Reciprocal(Sqrt(..)) or x * Div(1, Sqrt(..)) becomes x / Sqrt(..),
    one node less; checked with a dynamic batch at two sizes."""
    m = _rms(recip, order=order, shape=("N", 4, D))
    rng = np.random.default_rng(5)
    also = ("norm-rsqrt-forms",) if recip == "div" else ()
    for n in (2, 3):
        feeds = {"x": rng.uniform(-3, 3, (n, 4, D)).astype(np.float32)}
        result = assert_rule_sound(m, FORMS, feeds, also=also)
        counts = op_counts(result.model)
        assert counts.get("Reciprocal", 0) == 0 and counts["Div"] == 1, counts
        assert sum(counts.values()) == 6, counts


def test_norm_moment_forms_not_for_a_root_of_something_else() -> None:
    """x * Reciprocal(Sqrt(z)) for z not a mean plus epsilon: left alone (the rule is local to normalizations)."""
    assert_rule_does_not_fire(_rms("reciprocal", gated="z"), FORMS)


def test_norm_moment_forms_not_for_a_reciprocal_without_root() -> None:
    """x * Reciprocal(mean(x^2) + eps): no Sqrt, not the normalization's form."""
    m = _rms("reciprocal")
    graph = m.graph
    sqrt = next(n for n in graph.node if n.op_type == "Sqrt")
    sqrt.op_type = "Abs"
    assert_rule_does_not_fire(m, FORMS)


# ---- analysis relations the normalization rules join: checked on the graphs of a rule that reads it ----


@property_settings()
@given(PROPERTIES["layernorm-dims"]())
def test_layernorm_dims_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["norm-moment-sites"]())
def test_norm_moment_sites_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["norm-sites"]())
def test_norm_sites_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["norm-shapes"]())
def test_norm_shapes_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["norm-moment-shapes"]())
def test_norm_moment_shapes_property(case: RuleCase) -> None:
    case.check()
