"""Activation rules (rewrites/activation.py): each fires where it should, not where its guard fails, and is
sound; Gelu or its decomposition is picked per target."""

from __future__ import annotations

import math

import numpy as np
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
from tests.rule_graphs import attribute, gelu_erf, model, node, property_settings

X = [("x", "FLOAT", (2, 3, 8))]
SQRT2 = math.sqrt(2.0)


def _gelu_tanh(*, cube: str = "pow", c1: float = 0.044715, opset: int = 20) -> object:
    """GPT-2's NewGELU: (x * 0.5) * (1 + tanh(0.7978846 * (x + 0.044715 * x^3)))."""
    inits = {
        "half": np.array(0.5, np.float32),
        "one": np.array(1.0, np.float32),
        "three": np.array(3.0, np.float32),
        "c1": np.array(c1, np.float32),
        "c2": np.array(math.sqrt(2 / math.pi), np.float32),
    }
    nodes = [node("Mul", ["x", "half"], "xs")]
    if cube == "pow":
        nodes.append(node("Pow", ["x", "three"], "cube"))
    else:
        nodes += [node("Mul", ["x", "x"], "x2"), node("Mul", ["x2", "x"], "cube")]
    nodes += [
        node("Mul", ["cube", "c1"], "c"),
        node("Add", ["x", "c"], "p"),
        node("Mul", ["p", "c2"], "u"),
        node("Tanh", ["u"], "t"),
        node("Add", ["t", "one"], "h"),
        node("Mul", ["xs", "h"], "y"),
    ]
    return model(nodes, X, initializers=inits, opset=opset)


# ---- gelu-forms (the product forms both Gelu fusions read) ----


@property_settings()
@given(PROPERTIES["gelu-forms"]())
def test_gelu_forms_property(case: RuleCase) -> None:
    case.check()


# ---- gelu-fuse ----


@pytest.mark.parametrize("form", ["bert", "gpt"])
@pytest.mark.parametrize("variant", ["div", "mul"])
def test_gelu_fuse_exported_forms(form: str, variant: str) -> None:
    m = gelu_erf(form, scale=1 / SQRT2 if variant == "mul" else None)
    result = assert_rule_sound(m, "gelu-fuse")
    assert op_counts(result.model) == {"Gelu": 1}
    (gelu,) = result.model.graph  # approximate="none" is the default: no attribute
    assert "approximate" not in gelu.attributes


def test_gelu_fuse_accepts_a_rounded_constant() -> None:
    """sqrt 2 written as 1.4142 (5 digits) still matches: the result moves by < 1e-4 relative."""
    assert op_counts(assert_rule_sound(gelu_erf(divisor=1.4142), "gelu-fuse").model) == {"Gelu": 1}


def test_gelu_fuse_needs_opset_20() -> None:
    assert_rule_does_not_fire(gelu_erf(opset=17), "gelu-fuse")


@pytest.mark.parametrize("kw", [{"divisor": 1.5}, {"divisor": 1.41}, {"half": 0.25}, {"scale": SQRT2}])
def test_gelu_fuse_not_with_other_constants(kw: dict) -> None:
    assert_rule_does_not_fire(gelu_erf(**kw), "gelu-fuse")


def test_gelu_fuse_not_on_float16() -> None:
    """onnxruntime's Gelu computes fp16 in float32: fusing would drop the decomposition's fp16 roundings."""
    assert_rule_does_not_fire(gelu_erf(dtype="FLOAT16"), "gelu-fuse")


def test_gelu_fuse_not_when_erf_reads_another_tensor() -> None:
    m = gelu_erf()
    for n in m.graph.node:
        if n.op_type == "Div":
            n.input[0] = "z"
    m.graph.node.insert(0, node("Relu", ["x"], "z"))
    assert_rule_does_not_fire(m, "gelu-fuse")


def test_gelu_fuse_regrouped_half() -> None:
    """x * (h * 0.5) (and 0.5 on the left): mul-scalar-reassoc makes it (x * h) * 0.5, a listed form."""
    inits = {"one": np.array(1.0, np.float32), "half": np.array(0.5, np.float32), "k": np.array(SQRT2, np.float32)}
    nodes = [
        node("Div", ["x", "k"], "u"),
        node("Erf", ["u"], "e"),
        node("Add", ["one", "e"], "h"),
        node("Mul", ["half", "h"], "hh"),
        node("Mul", ["x", "hh"], "y"),
    ]
    m = model(nodes, X, initializers=inits, opset=20)
    assert_rule_does_not_fire(m, "gelu-fuse", also=("const-operand-last",))
    result = assert_rule_sound(m, "gelu-fuse", also=("mul-scalar-reassoc", "const-operand-last"))
    assert op_counts(result.model) == {"Gelu": 1}


@property_settings()
@given(PROPERTIES["gelu-fuse"]())
def test_gelu_fuse_property(case: RuleCase) -> None:
    case.check()


# ---- gelu-tanh-fuse ----


@pytest.mark.parametrize("cube", ["pow", "mul"])
def test_gelu_tanh_fuse_gpt2_pattern(cube: str) -> None:
    result = assert_rule_sound(_gelu_tanh(cube=cube), "gelu-tanh-fuse")
    assert op_counts(result.model) == {"Gelu": 1}
    assert attribute(result.model, "Gelu", "approximate") == b"tanh"


def test_gelu_tanh_fuse_needs_opset_20() -> None:
    assert_rule_does_not_fire(_gelu_tanh(opset=17), "gelu-tanh-fuse")


def test_gelu_tanh_fuse_not_with_another_cubic_coefficient() -> None:
    assert_rule_does_not_fire(_gelu_tanh(c1=0.05), "gelu-tanh-fuse")


def test_gelu_tanh_fuse_regrouped_cubic() -> None:
    """0.044715 * x^3 + x with x^3 = x * (x * x): add-scaled-last and const-operand-last give a listed form."""
    inits = {
        "half": np.array(0.5, np.float32),
        "one": np.array(1.0, np.float32),
        "c1": np.array(0.044715, np.float32),
        "c2": np.array(math.sqrt(2 / math.pi), np.float32),
    }
    nodes = [
        node("Mul", ["x", "x"], "x2"),
        node("Mul", ["x", "x2"], "cube"),
        node("Mul", ["c1", "cube"], "c"),
        node("Add", ["c", "x"], "p"),
        node("Mul", ["c2", "p"], "u"),
        node("Tanh", ["u"], "t"),
        node("Add", ["one", "t"], "h"),
        node("Mul", ["x", "half"], "xs"),
        node("Mul", ["xs", "h"], "y"),
    ]
    m = model(nodes, X, initializers=inits, opset=20)
    assert_rule_does_not_fire(m, "gelu-tanh-fuse", also=("const-operand-last",))
    result = assert_rule_sound(m, "gelu-tanh-fuse", also=("add-scaled-last", "const-operand-last"))
    assert op_counts(result.model) == {"Gelu": 1}


@property_settings()
@given(PROPERTIES["gelu-tanh-fuse"]())
def test_gelu_tanh_fuse_property(case: RuleCase) -> None:
    case.check()


# ---- gelu-decompose: the target decides ----


def _gelu_node(approximate: str = "none", dtype: str = "FLOAT") -> object:
    return model([node("Gelu", ["x"], "y", approximate=approximate)], [("x", dtype, (2, 3, 8))], opset=20)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_decompose_fires_and_cpu_keeps_gelu(approximate: str) -> None:
    result = assert_rule_sound(_gelu_node(approximate), "gelu-decompose")
    assert op_counts(result.model) == {"Gelu": 1}


def test_gelu_decompose_not_on_float16() -> None:
    assert_rule_does_not_fire(_gelu_node(dtype="FLOAT16"), "gelu-decompose")


def test_gelu_tanh_decomposition_chosen_where_gelu_is_missing() -> None:
    """The npu has no Gelu kernel (a host fallback) but runs Mul/Add/Tanh on its vector unit (npu.toml:
    fp32 compiled to fp16): there the same e-graph gives the primitives; gpu keeps the fused Gelu."""
    session = saturate_with_rules(_gelu_node("tanh"), ["gelu-decompose", "gelu-tanh-fuse"])
    decomposed = op_counts(session.extract("npu", verify=False).model)
    assert "Gelu" not in decomposed and decomposed["Tanh"] == 1
    assert op_counts(session.extract("gpu", verify=False).model) == {"Gelu": 1}


@property_settings()
@given(PROPERTIES["gelu-decompose"]())
def test_gelu_decompose_property(case: RuleCase) -> None:
    case.check()


# ---- hardswish-fuse ----


def _hard_swish(
    six: float = 6.0, shift: float = 3.0, upper: float = 6.0, opset: int = 11, dims: tuple = (2, 3, 8)
) -> object:
    """x * Clip(x + shift, 0, upper) / six, as paddle2onnx writes MobileNetV3's hard-swish."""
    nodes = [
        node("Add", ["x", "three"], "s"),
        node("Clip", ["s", "lo", "hi"], "h"),
        node("Mul", ["x", "h"], "xh"),
        node("Div", ["xh", "six"], "y"),
    ]
    inits = {
        "three": np.array(shift, np.float32),
        "lo": np.array(0.0, np.float32),
        "hi": np.array(upper, np.float32),
        "six": np.array(six, np.float32),
    }
    return model(nodes, [("x", "FLOAT", dims)], initializers=inits, opset=opset)


@pytest.mark.parametrize("opset,ops", [(11, {"Mul": 1, "HardSigmoid": 1}), (14, {"HardSwish": 1})])
def test_hardswish_fuse(opset: int, ops: dict) -> None:
    """Before opset 14 the form is x * HardSigmoid(x, 1/6, 0.5); from 14 on, one HardSwish."""
    result = assert_rule_sound(_hard_swish(opset=opset), "hardswish-fuse", also=["div-const-to-mul"])
    assert op_counts(result.model) == ops


def test_hardswish_fuse_under_symbolic_dims() -> None:
    result = assert_rule_sound(_hard_swish(dims=("N", 16, "H", "W")), "hardswish-fuse", also=["div-const-to-mul"])
    assert op_counts(result.model) == {"Mul": 1, "HardSigmoid": 1}


@pytest.mark.parametrize("six,shift,upper", [(5.0, 3.0, 6.0), (6.0, 2.0, 6.0), (6.0, 3.0, 5.0)])
def test_hardswish_fuse_not_for_other_constants(six: float, shift: float, upper: float) -> None:
    assert_rule_does_not_fire(_hard_swish(six, shift, upper), "hardswish-fuse", also=["div-const-to-mul"])


@property_settings()
@given(PROPERTIES["hardswish-fuse"]())
def test_hardswish_fuse_property(case: RuleCase) -> None:
    case.check()


# ---- leakyrelu-from-max ----


def _max_mul(alpha: float, dtype: str = "FLOAT", swap: bool = False) -> object:
    np_dtype = {"FLOAT": np.float32, "FLOAT16": np.float16, "DOUBLE": np.float64, "INT32": np.int32}[dtype]
    nodes = [
        node("Mul", ["a", "x"] if swap else ["x", "a"], "ax"),
        node("Max", ["ax", "x"] if swap else ["x", "ax"], "y"),
    ]
    return model(nodes, [("x", dtype, (2, 3, 8))], initializers={"a": np.array(alpha, np_dtype)})


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("dtype", ["FLOAT", "FLOAT16"])
def test_leakyrelu_from_max(swap: bool, dtype: str) -> None:
    result = assert_rule_sound(_max_mul(0.2, dtype, swap), "leakyrelu-from-max")
    assert op_counts(result.model) == {"LeakyRelu": 1}
    assert attribute(result.model, "LeakyRelu", "alpha") == pytest.approx(0.2, rel=1e-3)  # fp16's 0.2 is 0.19995


@pytest.mark.parametrize("alpha", [1.5, -0.1, 1.0])
def test_leakyrelu_from_max_not_outside_0_1(alpha: float) -> None:
    """max(x, a x) is x for x >= 0 only when a <= 1, and a x for x < 0 only when a >= 0."""
    assert_rule_does_not_fire(_max_mul(alpha), "leakyrelu-from-max")


@pytest.mark.parametrize("dtype", ["INT32", "DOUBLE"])
def test_leakyrelu_from_max_not_for_int_or_double(dtype: str) -> None:
    """No integer LeakyRelu; a DOUBLE alpha is rounded to the float32 attribute."""
    assert_rule_does_not_fire(_max_mul(0 if dtype == "INT32" else 0.1, dtype), "leakyrelu-from-max")


@property_settings()
@given(PROPERTIES["leakyrelu-from-max"]())
def test_leakyrelu_from_max_property(case: RuleCase) -> None:
    case.check()


# ---- prelu-from-relu ----


def _relu_split(op: str = "Sub", slope=(0.25,), mul_first: bool = False) -> object:
    nodes = [
        node("Relu", ["x"], "pos"),
        node("Neg", ["x"], "nx"),
        node("Relu", ["nx"], "neg"),
        node("Mul", ["a", "neg"] if mul_first else ["neg", "a"], "an"),
        node(op, ["pos", "an"], "y"),
    ]
    return model(nodes, X, initializers={"a": np.array(slope, np.float32)})


@pytest.mark.parametrize("op", ["Sub", "Add"])
def test_prelu_from_relu_sign(op: str) -> None:
    """relu(x) - a relu(-x) has slope a; relu(x) + a relu(-x) has slope -a (checked numerically)."""
    m = _relu_split(op, slope=np.linspace(0.1, 0.8, 8))
    result = assert_rule_sound(m, "prelu-from-relu")
    assert op_counts(result.model) == {"PRelu": 1}


def test_prelu_from_relu_not_when_the_negative_part_reads_another_tensor() -> None:
    m = _relu_split()
    m.graph.node[1].input[0] = "z"
    m.graph.node.insert(0, node("Abs", ["x"], "z"))
    assert_rule_does_not_fire(m, "prelu-from-relu")


def test_prelu_from_relu_not_for_a_runtime_slope() -> None:
    nodes = [
        node("Relu", ["x"], "pos"),
        node("Neg", ["x"], "nx"),
        node("Relu", ["nx"], "neg"),
        node("Mul", ["neg", "a"], "an"),
        node("Sub", ["pos", "an"], "y"),
    ]
    assert_rule_does_not_fire(model(nodes, [*X, ("a", "FLOAT", (8,))]), "prelu-from-relu")


@pytest.mark.parametrize("minus_one", [np.array(-1.0, np.float32), np.full((8,), -1.0, np.float32)])
def test_prelu_from_relu_with_times_minus_one(minus_one: np.ndarray) -> None:
    """Keras/TF: relu(x) + a * relu(x * -1): mul-neg-one makes x * -1 a Neg, which the PRelu forms match."""
    nodes = [
        node("Relu", ["x"], "pos"),
        node("Mul", ["x", "m1"], "nx"),
        node("Relu", ["nx"], "neg"),
        node("Mul", ["a", "neg"], "an"),
        node("Add", ["pos", "an"], "y"),
    ]
    m = model(nodes, X, initializers={"a": np.linspace(0.1, 0.8, 8, dtype=np.float32), "m1": minus_one})
    result = assert_rule_sound(m, "prelu-from-relu", also=("mul-neg-one", "const-operand-last"))
    assert op_counts(result.model) == {"PRelu": 1}


def test_prelu_from_relu_not_with_times_minus_two() -> None:
    nodes = [
        node("Relu", ["x"], "pos"),
        node("Mul", ["x", "m2"], "nx"),
        node("Relu", ["nx"], "neg"),
        node("Mul", ["neg", "a"], "an"),
        node("Add", ["pos", "an"], "y"),
    ]
    m = model(nodes, X, initializers={"a": np.array([0.25], np.float32), "m2": np.array(-2.0, np.float32)})
    assert_rule_does_not_fire(m, "prelu-from-relu", also=("mul-neg-one",))


@property_settings()
@given(PROPERTIES["prelu-from-relu"]())
def test_prelu_from_relu_property(case: RuleCase) -> None:
    case.check()


# ---- prelu-to-leakyrelu ----


@pytest.mark.parametrize("slope", [0.1, -0.5, 2.0])
def test_prelu_to_leakyrelu_single_slope(slope: float) -> None:
    m = model([node("PRelu", ["x", "a"], "y")], X, initializers={"a": np.array([slope], np.float32)})
    result = assert_rule_sound(m, "prelu-to-leakyrelu")
    assert op_counts(result.model) == {"LeakyRelu": 1}


def test_prelu_to_leakyrelu_not_per_channel() -> None:
    m = model([node("PRelu", ["x", "a"], "y")], X, initializers={"a": np.linspace(0, 1, 8, dtype=np.float32)})
    assert_rule_does_not_fire(m, "prelu-to-leakyrelu")


def test_prelu_to_leakyrelu_not_for_double() -> None:
    m = model([node("PRelu", ["x", "a"], "y")], [("x", "DOUBLE", (2, 3))], initializers={"a": np.array([0.1])})
    assert_rule_does_not_fire(m, "prelu-to-leakyrelu")


@property_settings()
@given(PROPERTIES["prelu-to-leakyrelu"]())
def test_prelu_to_leakyrelu_property(case: RuleCase) -> None:
    case.check()


# ---- clip-merge, relu-clip-merge ----


def _clips(*bounds: tuple[float, float], relu: str = "") -> object:
    nodes, prev, inits = [], "x", {}
    if relu == "first":
        nodes.append(node("Relu", [prev], "r"))
        prev = "r"
    for k, (lo, hi) in enumerate(bounds):
        inits[f"lo{k}"], inits[f"hi{k}"] = np.array(lo, np.float32), np.array(hi, np.float32)
        out = "y" if k == len(bounds) - 1 and relu != "last" else f"c{k}"
        nodes.append(node("Clip", [prev, f"lo{k}", f"hi{k}"], out))
        prev = out
    if relu == "last":
        nodes.append(node("Relu", [prev], "y"))
    return model(nodes, X, initializers=inits)


def test_clip_merge_relu6_chain() -> None:
    result = assert_rule_sound(_clips((0, 6), (0, 6), (-1, 4)), "clip-merge")
    assert op_counts(result.model) == {"Clip": 1}


def test_clip_merge_intersects_bounds() -> None:
    result, fired = optimize_with_rules(_clips((-3, 6), (0, 10)), ["clip-merge"])
    assert fired["clip-merge"] > 0 and op_counts(result.model) == {"Clip": 1}
    inits = {t.name: t for t in result.model.graph.initializers.values()}
    lo, hi = [v.const_value.numpy().item() for k, v in sorted(inits.items())][:2]
    assert sorted((lo, hi)) == [0.0, 6.0]


def test_clip_merge_not_for_disjoint_intervals() -> None:
    """Clip(Clip(x, 0, 1), 2, 3) is the constant 2: not a Clip with min 2 > max 1."""
    assert_rule_does_not_fire(_clips((0, 1), (2, 3)), "clip-merge")


@pytest.mark.parametrize("upper", [2**62 + 1, 2**63 - 1], ids=["2^62+1", "int64-max"])
def test_int64_clip_bounds_beyond_f64_stay_exact(upper: int) -> None:
    """Clip's bounds are f64 parameters: an int64 bound f64 cannot hold (2^62 + 1, INT64_MAX, which exporters
    write) leaves the Clip unmodelled, so it is neither rounded nor a crash when written back."""
    x = np.array([-(2**63), -1, 5, 2**62 + 1, 2**63 - 1], np.int64)
    inits = {"lo0": np.array(0, np.int64), "hi0": np.array(upper, np.int64)}
    inits |= {"lo1": np.array(-10, np.int64), "hi1": np.array(upper, np.int64)}
    nodes = [node("Clip", ["x", "lo0", "hi0"], "c"), node("Clip", ["c", "lo1", "hi1"], "y")]
    m = model(nodes, [("x", "INT64", (5,))], initializers=inits)
    assert_rule_sound(m, "clip-merge", {"x": x}, must_fire=False)


@property_settings()
@given(PROPERTIES["clip-merge"]())
def test_clip_merge_property(case: RuleCase) -> None:
    case.check()


@pytest.mark.parametrize("where", ["first", "last"])
def test_relu_clip_merge(where: str) -> None:
    result = assert_rule_sound(_clips((-2, 6), relu=where), "relu-clip-merge")
    assert op_counts(result.model) == {"Clip": 1}


def test_relu_clip_merge_not_below_zero() -> None:
    """Relu(Clip(x, -5, -1)) is 0 everywhere: not Clip(x, 0, -1)."""
    assert_rule_does_not_fire(_clips((-5, -1), relu="last"), "relu-clip-merge")


@property_settings()
@given(PROPERTIES["relu-clip-merge"]())
def test_relu_clip_merge_property(case: RuleCase) -> None:
    case.check()


# ---- analysis relations this family's rules join: each checked on the graphs of a rule that reads it ----


@property_settings()
@given(PROPERTIES["scalar-broadcast-facts"]())
def test_scalar_broadcast_facts_property(case: RuleCase) -> None:
    case.check()


def test_scalar_broadcast_facts_are_op_generic() -> None:
    """One row for the Scalar, one for B(a, rank-0 Scalar) over the arith ops (not one per op)."""
    from eqsat.rewrites.registry import all_rules

    assert {r.name: len(r.egglog) for r in all_rules()}["scalar-broadcast-facts"] == 2
