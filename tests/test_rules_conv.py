"""Conv rules (rewrites/conv.py): each fires where it should, not where its guard fails, and is sound.

Known peer bugs covered here: grouped ConvTranspose channel mapping (weights [C_in, C_out/g, k...]), a
constant divided BY a conv (never folded), and a zero Pad never merged into MaxPool (its padding is -inf)."""

from __future__ import annotations

import warnings

import numpy as np
import onnx.helper as oh
import pytest
from hypothesis import given

import eqsat

from eqsat.engine.backend import EgglogError
from eqsat import session
from eqsat.session import Session
from eqsat.testing import (
    PROPERTIES,
    RuleCase,
    assert_rule_does_not_fire,
    assert_rule_sound,
    op_counts,
    optimize_with_rules,
    run,
    saturate_with_rules,
)
from eqsat.errors import FoldOverflowError
from tests.rule_graphs import attribute, model, node, property_settings

ZB = ("conv-zero-bias",)
X = [("x", "FLOAT", (1, 4, 5, 5))]
RNG = np.random.default_rng(0)


def rand(*shape: int, low: float = -1.0, high: float = 1.0, dtype=np.float32) -> np.ndarray:
    return RNG.uniform(low, high, size=shape).astype(dtype)


def conv_inits(
    co: int = 4, ci: int = 4, k: int = 3, group: int = 1, bias: bool = True, kind: str = "Conv", dtype=np.float32
) -> dict[str, np.ndarray]:
    w_shape = (co, ci // group, k, k) if kind == "Conv" else (ci, co // group, k, k)
    inits = {"w": rand(*w_shape, dtype=dtype)}
    if bias:
        inits["b"] = rand(co, dtype=dtype)
    return inits


def conv_node(inits: dict, x: str = "x", y: str = "conv", kind: str = "Conv", **attrs) -> object:
    return node(kind, [x, "w", *(["b"] if "b" in inits else [])], y, pads=[1, 1, 1, 1], **attrs)


def root_ops(session: Session) -> set[str]:
    """Ops of the e-nodes in the class of the first output."""
    egraph = session.egraph
    return {egraph.node(n).op for n in egraph.eclass(session.roots[0]).nodes}


def bn_inits(c: int = 4, prefix: str = "bn", dtype=np.float32) -> dict[str, np.ndarray]:
    return {
        f"{prefix}_gamma": rand(c, low=0.5, high=2.0, dtype=dtype),
        f"{prefix}_beta": rand(c, dtype=dtype),
        f"{prefix}_mean": rand(c, dtype=dtype),
        f"{prefix}_var": rand(c, low=0.5, high=2.0, dtype=dtype),
    }


BN = ["bn_gamma", "bn_beta", "bn_mean", "bn_var"]


# ---- conv-zero-bias ----


def test_conv_zero_bias_lets_a_biasless_conv_take_an_add() -> None:
    inits = {**conv_inits(bias=False), "c": rand(4, 1, 1)}
    m = model([conv_node(inits), node("Add", ["conv", "c"], "y")], X, initializers=inits)
    result = assert_rule_sound(m, "conv-zero-bias", also=("conv-bias-fold",))
    assert op_counts(result.model) == {"Conv": 1}
    (conv,) = [n for n in result.model.graph if n.op_type == "Conv"]
    assert len(conv.inputs) == 3


@pytest.mark.parametrize("kind", ["Conv", "ConvTranspose"])
def test_conv_zero_bias_with_runtime_weights(kind: str) -> None:
    """W a graph input: Conv(x, W) + c is Conv(x, W, c) all the same (zero bias, then the bias fold)."""
    w_shape = (4, 4, 3, 3)
    m = model(
        [node(kind, ["x", "w"], "conv", pads=[1, 1, 1, 1]), node("Add", ["conv", "c"], "y")],
        X + [("w", "FLOAT", w_shape)],
        initializers={"c": rand(4, 1, 1)},
    )
    result = assert_rule_sound(m, "conv-zero-bias", also=("conv-bias-fold",))
    assert op_counts(result.model) == {kind: 1}


def test_conv_zero_bias_not_when_bias_present() -> None:
    inits = {**conv_inits(bias=True), "c": rand(4, 1, 1)}
    m = model([conv_node(inits), node("Add", ["conv", "c"], "y")], X, initializers=inits)
    assert_rule_does_not_fire(m, "conv-zero-bias")


def test_conv_zero_bias_not_without_a_fold_to_feed() -> None:
    """Only convs whose output meets a constant or a BatchNormalization get the zero bias."""
    inits = conv_inits(bias=False)
    m = model([conv_node(inits), node("Relu", ["conv"], "r"), node("Add", ["r", "x"], "y")], X, initializers=inits)
    assert_rule_does_not_fire(m, "conv-zero-bias")


@property_settings()
@given(PROPERTIES["conv-zero-bias"]())
def test_conv_zero_bias_property(case: RuleCase) -> None:
    case.check()


# ---- conv-bias-fold ----


@pytest.mark.parametrize(
    "op,order,c_shape",
    [
        ("Add", "xc", (4, 1, 1)),
        ("Add", "cx", (1, 4, 1, 1)),
        ("Sub", "xc", ()),
        ("Sub", "cx", (4, 1, 1)),
        ("Add", "xc", (1,)),
    ],
)
def test_conv_bias_fold(op: str, order: str, c_shape: tuple) -> None:
    inits = {**conv_inits(), "c": rand(*c_shape)}
    m = model(
        [conv_node(inits), node(op, ["conv", "c"] if order == "xc" else ["c", "conv"], "y")], X, initializers=inits
    )
    result = assert_rule_sound(m, "conv-bias-fold", also=("const-operand-last",))
    assert op_counts(result.model) == {"Conv": 1}


def test_conv_bias_fold_grouped_conv_transpose() -> None:
    inits = {**conv_inits(co=6, ci=4, group=2, kind="ConvTranspose"), "c": rand(6, 1, 1)}
    m = model([conv_node(inits, kind="ConvTranspose", group=2), node("Add", ["conv", "c"], "y")], X, initializers=inits)
    assert op_counts(assert_rule_sound(m, "conv-bias-fold").model) == {"ConvTranspose": 1}


def test_conv_bias_fold_not_for_spatially_varying_constant() -> None:
    inits = {**conv_inits(), "c": rand(1, 4, 5, 5)}
    m = model([conv_node(inits), node("Add", ["conv", "c"], "y")], X, initializers=inits)
    assert_rule_does_not_fire(m, "conv-bias-fold", also=ZB)


def test_conv_bias_fold_not_for_runtime_operand() -> None:
    inits = conv_inits()
    m = model(
        [conv_node(inits), node("Add", ["conv", "t"], "y")], X + [("t", "FLOAT", (1, 4, 1, 1))], initializers=inits
    )
    assert_rule_does_not_fire(m, "conv-bias-fold", also=ZB)


@property_settings()
@given(PROPERTIES["conv-bias-fold"]())
def test_conv_bias_fold_property(case: RuleCase) -> None:
    case.check()


# ---- conv-scale-fold ----


@pytest.mark.parametrize("c_shape", [(4, 1, 1), (1, 4, 1, 1), (), (1, 1, 1, 1)])
def test_conv_scale_fold(c_shape: tuple) -> None:
    inits = {**conv_inits(), "c": rand(*c_shape, low=-2, high=2)}
    m = model([conv_node(inits), node("Mul", ["conv", "c"], "y")], X, initializers=inits)
    result, fired = optimize_with_rules(m, ["conv-scale-fold"])
    assert fired["conv-scale-fold"] > 0 and op_counts(result.model) == {"Conv": 1}
    assert_rule_sound(m, "conv-scale-fold")


@pytest.mark.parametrize("group,co", [(2, 6), (4, 4), (4, 8)])
def test_conv_scale_fold_grouped_conv_transpose(group: int, co: int) -> None:
    """Peer bug: ConvTranspose weights are [C_in, C_out/g, k...]: output channel o = grp * (C_out/g) + j
    lives at W[grp-th block of inputs, j], not on axis 0 (nor plainly on axis 1 when g > 1)."""
    inits = {**conv_inits(co=co, ci=4, group=group, kind="ConvTranspose"), "c": rand(co, 1, 1, low=0.5, high=3)}
    m = model(
        [conv_node(inits, kind="ConvTranspose", group=group), node("Mul", ["conv", "c"], "y")], X, initializers=inits
    )
    assert op_counts(assert_rule_sound(m, "conv-scale-fold").model) == {"ConvTranspose": 1}


def test_conv_scale_and_div_folds_chain_on_grouped_conv_transpose() -> None:
    """The grouped form's new weights (a Reshape) get w's shape and dtype from conv-weight-facts, so the next fold
    sees a constant weight of rank >= 3 again: (ConvTranspose * c1) / c2 is one ConvTranspose."""
    inits = {
        **conv_inits(co=6, ci=4, group=2, kind="ConvTranspose"),
        "c1": rand(6, 1, 1, low=0.5, high=3),
        "c2": rand(6, 1, 1, low=0.5, high=3),
    }
    m = model(
        [
            conv_node(inits, kind="ConvTranspose", group=2),
            node("Mul", ["conv", "c1"], "t"),
            node("Div", ["t", "c2"], "y"),
        ],
        X,
        initializers=inits,
    )
    result = assert_rule_sound(m, "conv-scale-fold", also=("conv-div-fold",))
    assert op_counts(result.model) == {"ConvTranspose": 1}


def test_conv_fold_commands_fit_in_600_characters() -> None:
    """Issue 23: no installed egglog command of the conv folds longer than 600 characters (the weights' facts are
    joined from conv-group-views or bound once, the views written from the per-channel constant's shape)."""
    from rewrites import registry

    folds = {
        "conv-zero-bias",
        "bias-fold-sites",
        "conv-bias-fold",
        "conv-scale-fold",
        "conv-div-fold",
        "conv-input-scale-fold",
        "conv-weight-facts",
        "per-channel-facts",
    }
    long = {r.name: max(map(len, r.commands())) for r in registry.all_rules() if r.name in folds}
    assert set(long) == folds
    assert {name: n for name, n in long.items() if n > 600} == {}


def test_conv_scale_fold_depthwise_conv_without_bias() -> None:
    inits = {**conv_inits(co=8, ci=4, group=4, bias=False), "c": rand(8, 1, 1)}
    m = model([conv_node(inits, group=4), node("Mul", ["c", "conv"], "y")], X, initializers=inits)
    result = assert_rule_sound(m, "conv-scale-fold", also=ZB + ("const-operand-last",))
    assert op_counts(result.model) == {"Conv": 1}


def test_conv_scale_fold_never_const_divided_by_conv() -> None:
    """Peer bug: c / Conv(x) is not Conv(x) / c: neither scale rule may fold it."""
    inits = {**conv_inits(), "c": rand(4, 1, 1, low=0.5, high=2)}
    m = model([conv_node(inits), node("Div", ["c", "conv"], "y")], X, initializers=inits)
    for rule in ("conv-scale-fold", "conv-div-fold"):
        assert_rule_does_not_fire(m, rule, also=ZB + ("const-operand-last",))


def test_conv_scale_fold_not_for_spatially_varying_constant() -> None:
    inits = {**conv_inits(), "c": rand(1, 1, 5, 5)}
    m = model([conv_node(inits), node("Mul", ["conv", "c"], "y")], X, initializers=inits)
    assert_rule_does_not_fire(m, "conv-scale-fold", also=ZB)


@pytest.mark.parametrize("kind,group,co", [("Conv", 1, 4), ("ConvTranspose", 2, 4)])
def test_conv_scale_fold_not_for_a_reciprocal_of_zero(kind: str, group: int, co: int) -> None:
    """Conv / c with a 0 in c: div-const-to-mul makes it Conv * Reciprocal(c), an inf in the scale; folded, the
    weights hold inf and their sums NaN where the original's sum / 0 is +-inf (coremltools real_div case).
    Lowering evaluates Reciprocal(c) to its inf without a numpy warning on stderr."""
    inits = {
        **conv_inits(co=co, ci=4, group=group, kind=kind),
        "c": np.array([1.0, 0.0, 2.0, -1.0], np.float32).reshape(4, 1, 1),
    }
    m = model([conv_node(inits, kind=kind, group=group), node("Div", ["conv", "c"], "y")], X, initializers=inits)
    for rule in ("conv-scale-fold", "conv-div-fold"):
        assert_rule_does_not_fire(m, rule, also=ZB + ("div-const-to-mul",))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = eqsat.optimize(m, strict=True)  # every rule: the model verifies (infinities where the input has them)
    assert result.report.verification.ok and op_counts(result.model)[kind] == 1


def test_conv_scale_fold_of_a_finite_reciprocal() -> None:
    """Conv / c with c positive: Conv * Reciprocal(c) has a finite scale (scale-finite-facts) and folds."""
    inits = {**conv_inits(), "c": rand(4, 1, 1, low=0.5, high=3)}
    m = model([conv_node(inits), node("Div", ["conv", "c"], "y")], X, initializers=inits)
    result, fired = optimize_with_rules(m, ["conv-scale-fold", "div-const-to-mul"])
    assert fired["conv-scale-fold"] > 0 and op_counts(result.model) == {"Conv": 1}


@property_settings()
@given(PROPERTIES["conv-scale-fold"]())
def test_conv_scale_fold_property(case: RuleCase) -> None:
    case.check()


# ---- conv-div-fold ----


def test_conv_div_fold() -> None:
    inits = {**conv_inits(), "c": rand(4, 1, 1, low=0.5, high=3)}
    m = model([conv_node(inits), node("Div", ["conv", "c"], "y")], X, initializers=inits)
    assert op_counts(assert_rule_sound(m, "conv-div-fold").model) == {"Conv": 1}


def test_conv_div_fold_not_by_a_non_positive_constant() -> None:
    c = rand(4, 1, 1, low=0.5, high=3)
    c[1] = -c[1]
    inits = {**conv_inits(), "c": c}
    m = model([conv_node(inits), node("Div", ["conv", "c"], "y")], X, initializers=inits)
    assert_rule_does_not_fire(m, "conv-div-fold")


def _fp16_conv(op: str, weight: float, scale: float) -> object:
    """fp16 Conv(x, W) op c, a 1x1 conv whose folded weight W op c overflows fp16 (100 / 1e-3 = 1e5 > 65504)."""
    inits = {"w": np.full((1, 1, 1, 1), weight, np.float16), "c": np.array(scale, np.float16)}
    nodes = [node("Conv", ["x", "w"], "conv"), node(op, ["conv", "c"], "y")]
    return model(nodes, [("x", "FLOAT16", (1, 1, 2, 2))], initializers=inits)


@pytest.mark.parametrize(
    "op, weight, scale, dropped",
    [
        ("Div", 100.0, 1e-3, "'conv-div-fold', 'div-const-to-mul'"),  # either path folds: Div, or Mul by 1 / c
        ("Mul", 300.0, 300.0, "'conv-scale-fold'"),  # not const-operand-last, the canonicalization beside it
    ],
)
def test_a_fold_whose_weight_overflows_fp16_is_dropped_and_the_model_reoptimized(
    op: str, weight: float, scale: float, dropped: str
) -> None:
    """The folded weight would be inf where the input computes finite values: lowering refuses it
    (FoldOverflowError, naming the rules near it), and optimize drops the fewest rules that avoid it,
    re-optimizes and says so; --strict refuses instead."""
    m = _fp16_conv(op, weight, scale)
    with pytest.raises(FoldOverflowError, match="beyond the largest FLOAT16"):
        session.saturate(m).extract()
    result = eqsat.optimize(m, verify=False)
    assert op_counts(result.model) == {"Conv": 1, op: 1}
    (warning,) = [w for w in result.warnings if "beyond the largest FLOAT16" in w]
    assert f"dropped {dropped} and re-optimized" in warning
    x = {"x": np.array([0.01, 0.001, 0.1, 0.002], np.float16).reshape(1, 1, 2, 2)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected, got = run(m, x)[0], run(result.proto, x)[0]
    assert np.all(np.isfinite(expected)) and np.array_equal(expected, got)
    with pytest.raises(FoldOverflowError):
        eqsat.optimize(m, verify=False, strict=True)


@property_settings()
@given(PROPERTIES["conv-div-fold"]())
def test_conv_div_fold_property(case: RuleCase) -> None:
    case.check()


# ---- conv-bn-fold ----


@pytest.mark.parametrize("bias", [False, True])
def test_conv_bn_fold(bias: bool) -> None:
    inits = {**conv_inits(bias=bias), **bn_inits()}
    m = model([conv_node(inits), node("BatchNormalization", ["conv", *BN], "y")], X, initializers=inits)
    result = assert_rule_sound(m, "conv-bn-fold", also=ZB)
    assert op_counts(result.model) == {"Conv": 1}


@pytest.mark.parametrize("group,co", [(1, 6), (2, 6), (4, 4)])
def test_conv_bn_fold_conv_transpose(group: int, co: int) -> None:
    inits = {**conv_inits(co=co, ci=4, group=group, bias=False, kind="ConvTranspose"), **bn_inits(co)}
    m = model(
        [conv_node(inits, kind="ConvTranspose", group=group), node("BatchNormalization", ["conv", *BN], "y")],
        X,
        initializers=inits,
    )
    assert op_counts(assert_rule_sound(m, "conv-bn-fold", also=ZB).model) == {"ConvTranspose": 1}


def test_conv_bn_fold_float16() -> None:
    """fp16 weights: the folded constants are computed in float32 and rounded once."""
    inits = {**conv_inits(bias=False, dtype=np.float16), **bn_inits(dtype=np.float16)}
    m = model(
        [conv_node(inits), node("BatchNormalization", ["conv", *BN], "y")],
        [("x", "FLOAT16", (1, 4, 5, 5))],
        initializers=inits,
    )
    result = assert_rule_sound(m, "conv-bn-fold", also=ZB)
    assert op_counts(result.model) == {"Conv": 1}
    (conv,) = [n for n in result.model.graph if n.op_type == "Conv"]
    assert conv.inputs[1].const_value.numpy().dtype == np.float16


@pytest.mark.parametrize("momentum", [None, 0.99])
def test_conv_bn_fold_epsilon_zero(momentum: float | None) -> None:
    """A loaded batch norm with epsilon 0 folds like any (the composed ones are marked by eps 0 AND momentum 1)."""
    inits = {**conv_inits(), **bn_inits()}
    attrs = {"epsilon": 0.0, **({"momentum": momentum} if momentum is not None else {})}
    m = model([conv_node(inits), node("BatchNormalization", ["conv", *BN], "y", **attrs)], X, initializers=inits)
    assert op_counts(assert_rule_sound(m, "conv-bn-fold", also=ZB).model) == {"Conv": 1}


def test_conv_bn_fold_not_on_the_batchnorms_bn_compose_builds() -> None:
    """Conv * s + t: bn-compose makes it a BatchNormalization(eps 0, momentum 1), which conv-bn-fold leaves to
    the scale and bias folds (and bn-decompose leaves alone)."""
    inits = {**conv_inits(), "s": rand(1, 4, 1, 1, low=0.5, high=2), "t": rand(1, 4, 1, 1)}
    m = model([conv_node(inits), node("Mul", ["conv", "s"], "m"), node("Add", ["m", "t"], "y")], X, initializers=inits)
    session = saturate_with_rules(m, ["bn-compose", "conv-bn-fold", "bn-decompose", *ZB])
    fired = session.saturation.rules_fired
    assert fired["bn-compose"] > 0 and "conv-bn-fold" not in fired and "bn-decompose" not in fired


def test_conv_bn_fold_not_after_relu() -> None:
    inits = {**conv_inits(), **bn_inits()}
    m = model(
        [conv_node(inits), node("Relu", ["conv"], "r"), node("BatchNormalization", ["r", *BN], "y")],
        X,
        initializers=inits,
    )
    assert_rule_does_not_fire(m, "conv-bn-fold", also=ZB)


def test_conv_bn_fold_not_with_runtime_statistics() -> None:
    inits = {k: v for k, v in {**conv_inits(), **bn_inits()}.items() if k != "bn_mean"}
    m = model(
        [conv_node(inits), node("BatchNormalization", ["conv", *BN], "y")],
        X + [("bn_mean", "FLOAT", (4,))],
        initializers=inits,
    )
    assert_rule_does_not_fire(m, "conv-bn-fold", also=ZB)


@property_settings()
@given(PROPERTIES["conv-bn-fold"]())
def test_conv_bn_fold_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["bn-foldable"]())
def test_bn_foldable_property(case: RuleCase) -> None:
    case.check()


def test_bn_foldable_only_for_constant_parameters_of_one_dtype() -> None:
    """The fact the folds join: set for constant parameters, not for a runtime scale (then neither the conv fold
    nor the decomposition fires)."""
    inits = bn_inits()
    m = model([node("BatchNormalization", ["x", *BN], "y")], X, initializers=inits)
    assert saturate_with_rules(m, []).saturation.rules_fired.get("bn-foldable") == 1
    runtime = model(
        [node("BatchNormalization", ["x", *BN], "y")],
        X + [("bn_gamma", "FLOAT", (4,))],
        initializers={k: v for k, v in inits.items() if k != "bn_gamma"},
    )
    assert "bn-foldable" not in saturate_with_rules(runtime, []).saturation.rules_fired


def test_bn_foldable_is_a_fact_of_the_parameters_not_of_the_class() -> None:
    """Two batch norms in one e-class, A with constant parameters, B with a runtime scale or float16 parameters
    on a float input: only A is decomposed (the fact is keyed on each node's own parameters)."""
    from eqsat.engine.backend import Backend
    from eqsat.rewrites.registry import all_rules
    from eqsat.engine.saturate import RULESETS

    rules = {r.name: r for r in all_rules()}

    def leaf(name: str, kind: str, dtype: str, dims: tuple[int, ...], const: bool) -> str:
        shape = " ".join(map(str, dims))
        return (
            f'(let $g_{name} ({kind} "{name}")) (set (dtype $g_{name}) "{dtype}") '
            f"(set (shape $g_{name}) (vec-of {shape}))" + (f" (is-const $g_{name})" if const else "")
        )

    for scale_kind, dtype in (("Input", "FLOAT"), ("Const", "FLOAT16")):
        backend = Backend()
        backend.declare()
        backend.run("\n".join(f"(ruleset {name})" for name in RULESETS))
        lines = [leaf("x", "Input", "FLOAT", (1, 4, 3, 3), False), leaf("x2", "Input", "FLOAT", (1, 4, 3, 3), False)]
        lines += [leaf(p, "Const", "FLOAT", (4,), True) for p in ("gA", "bA", "mA", "vA")]
        lines.append(leaf("gB", scale_kind, dtype, (4,), scale_kind == "Const"))
        lines += [leaf(p, "Const", dtype, (4,), True) for p in ("bB", "mB", "vB")]
        lines += [
            "(let $g_A (BatchNormalization $g_x $g_gA $g_bA $g_mA $g_vA 1e-05 0.9))",
            "(let $g_B (BatchNormalization $g_x2 $g_gB $g_bB $g_mB $g_vB 1e-05 0.9))",
            '(set (dtype $g_A) "FLOAT") (set (shape $g_A) (vec-of 1 4 3 3))',
            "(union $g_A $g_B)",
        ]
        backend.run("\n".join(lines))
        backend.run_many(
            rules["bn-foldable"].commands()
            + rules["bn-unmarked"].commands()
            + rules["bn-scale-sites"].commands()
            + rules["bn-conv-folds"].commands()
            + rules["bn-decompose"].commands()
        )
        backend.run("(run-schedule (repeat 3 (saturate (run analysis)) (run explore)))")
        backend.run('(check (Mul (Input "x") sc))')  # A decomposed
        with pytest.raises(EgglogError):
            backend.run('(check (Mul (Input "x2") sc))')  # B not


# ---- bn-decompose / bn-compose ----


def test_bn_decompose_standalone() -> None:
    inits = bn_inits()
    m = model([node("Relu", ["x"], "r"), node("BatchNormalization", ["r", *BN], "y")], X, initializers=inits)
    assert_rule_sound(m, "bn-decompose")
    assert "Add" in root_ops(saturate_with_rules(m, ["bn-decompose"]))


def test_bn_decompose_not_with_runtime_scale() -> None:
    inits = {k: v for k, v in bn_inits().items() if k != "bn_gamma"}
    m = model([node("BatchNormalization", ["x", *BN], "y")], X + [("bn_gamma", "FLOAT", (4,))], initializers=inits)
    assert_rule_does_not_fire(m, "bn-decompose")


@pytest.mark.parametrize("bias", [True, False])
def test_bn_decompose_leaves_a_batchnorm_conv_bn_fold_folds(bias: bool) -> None:
    """On a Conv with constant weights (a bias or none), conv-bn-fold folds the batch norm: no Mul and Add too."""
    inits = {**conv_inits(bias=bias), **bn_inits()}
    m = model([conv_node(inits), node("BatchNormalization", ["conv", *BN], "y")], X, initializers=inits)
    assert_rule_does_not_fire(m, "bn-decompose", also=("conv-bn-fold", *ZB))
    result, fired = optimize_with_rules(m, ["conv-bn-fold", "bn-decompose", *ZB])
    assert fired["conv-bn-fold"] > 0 and op_counts(result.model) == {"Conv": 1}


def test_bn_decompose_still_splits_a_batchnorm_on_a_conv_with_runtime_weights() -> None:
    """bn-folds stays 0 where conv-bn-fold cannot fold (weights fed at run time): the decomposition still fires."""
    inits = {**bn_inits(), "b": rand(4)}
    m = model(
        [node("Conv", ["x", "w", "b"], "conv", pads=[1, 1, 1, 1]), node("BatchNormalization", ["conv", *BN], "y")],
        X + [("w", "FLOAT", (4, 4, 3, 3))],
        initializers=inits,
    )
    assert_rule_sound(m, "bn-decompose", also=("conv-bn-fold", *ZB))
    assert "Add" in root_ops(saturate_with_rules(m, ["bn-decompose", "conv-bn-fold", *ZB]))


@property_settings()
@given(PROPERTIES["bn-conv-folds"]())
def test_bn_conv_folds_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["bn-decompose"]())
def test_bn_decompose_property(case: RuleCase) -> None:
    case.check()


def test_bn_compose_mul_add() -> None:
    inits = {"s": rand(4, 1, 1), "t": rand(1, 4, 1, 1)}
    m = model([node("Mul", ["x", "s"], "m"), node("Add", ["m", "t"], "y")], X, initializers=inits)
    assert_rule_sound(m, "bn-compose")
    assert "BatchNormalization" in root_ops(saturate_with_rules(m, ["bn-compose"]))


def test_bn_compose_not_for_spatially_varying_shift() -> None:
    inits = {"s": rand(4, 1, 1), "t": rand(4, 5, 5)}
    m = model([node("Mul", ["x", "s"], "m"), node("Add", ["m", "t"], "y")], X, initializers=inits)
    assert_rule_does_not_fire(m, "bn-compose")


def test_bn_compose_not_for_integers() -> None:
    inits = {"s": np.array([2, 3, 4, 5], np.int64).reshape(4, 1, 1), "t": np.ones((4, 1, 1), np.int64)}
    m = model(
        [node("Mul", ["x", "s"], "m"), node("Add", ["m", "t"], "y")], [("x", "INT64", (1, 4, 5, 5))], initializers=inits
    )
    assert_rule_does_not_fire(m, "bn-compose")


@property_settings()
@given(PROPERTIES["bn-compose"]())
def test_bn_compose_property(case: RuleCase) -> None:
    case.check()


# ---- conv-input-scale-fold ----


@pytest.mark.parametrize(
    "kind,group,ci,co",
    [("Conv", 1, 4, 6), ("Conv", 2, 4, 6), ("Conv", 4, 4, 8), ("ConvTranspose", 1, 4, 6), ("ConvTranspose", 2, 4, 6)],
)
def test_conv_input_scale_fold(kind: str, group: int, ci: int, co: int) -> None:
    """Grouped and depthwise (channel multiplier 2) convs scale W per group; ConvTranspose along axis 0."""
    inits = {**conv_inits(co=co, ci=ci, group=group, kind=kind), "s": rand(ci, 1, 1, low=-2, high=2)}
    m = model(
        [node("Mul", ["x", "s"], "xs"), conv_node(inits, x="xs", y="y", kind=kind, group=group)], X, initializers=inits
    )
    assert op_counts(assert_rule_sound(m, "conv-input-scale-fold").model) == {kind: 1}


def test_conv_input_scale_fold_not_for_spatially_varying_scale() -> None:
    inits = {**conv_inits(), "s": rand(1, 1, 5, 5)}
    m = model([node("Mul", ["x", "s"], "xs"), conv_node(inits, x="xs", y="y")], X, initializers=inits)
    assert_rule_does_not_fire(m, "conv-input-scale-fold")


@property_settings()
@given(PROPERTIES["conv-input-scale-fold"]())
def test_conv_input_scale_fold_property(case: RuleCase) -> None:
    case.check()


# ---- scale-through-relu / scale-through-leaky-relu ----


@pytest.mark.parametrize(
    "act,rule,attrs", [("Relu", "scale-through-relu", {}), ("LeakyRelu", "scale-through-leaky-relu", {"alpha": 0.1})]
)
def test_scale_through_activation_backward(act: str, rule: str, attrs: dict) -> None:
    inits = {**conv_inits(), "c": rand(4, 1, 1, low=0.5, high=2)}
    m = model(
        [conv_node(inits), node(act, ["conv"], "a", **attrs), node("Mul", ["a", "c"], "y")], X, initializers=inits
    )
    result = assert_rule_sound(m, rule, also=("conv-scale-fold",))
    assert op_counts(result.model) == {"Conv": 1, act: 1}


@pytest.mark.parametrize(
    "act,rule,attrs", [("Relu", "scale-through-relu", {}), ("LeakyRelu", "scale-through-leaky-relu", {"alpha": 0.1})]
)
def test_scale_through_activation_forward(act: str, rule: str, attrs: dict) -> None:
    inits = {**conv_inits(), "s": rand(4, 1, 1, low=0.5, high=2)}
    m = model(
        [node("Mul", ["x", "s"], "xs"), node(act, ["xs"], "a", **attrs), conv_node(inits, x="a", y="y")],
        X,
        initializers=inits,
    )
    result = assert_rule_sound(m, rule, also=("conv-input-scale-fold",))
    assert op_counts(result.model) == {act: 1, "Conv": 1}


@pytest.mark.parametrize("act,rule", [("Relu", "scale-through-relu"), ("LeakyRelu", "scale-through-leaky-relu")])
def test_scale_through_activation_not_for_negative_scale(act: str, rule: str) -> None:
    c = rand(4, 1, 1, low=0.5, high=2)
    c[2] = -1.0
    inits = {**conv_inits(), "c": c, "s": c.copy()}
    m = model(
        [
            conv_node(inits),
            node(act, ["conv"], "a"),
            node("Mul", ["a", "c"], "m"),
            node("Mul", ["m", "s"], "ms"),
            node(act, ["ms"], "a2"),
            conv_node(inits, x="a2", y="y"),
        ],
        X,
        initializers=inits,
    )
    assert_rule_does_not_fire(m, rule)


@property_settings()
@given(PROPERTIES["scale-through-relu"]())
def test_scale_through_relu_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["scale-through-leaky-relu"]())
def test_scale_through_leaky_relu_property(case: RuleCase) -> None:
    case.check()


# ---- scale-through-add ----

FOLDS = ZB + ("conv-scale-fold", "conv-bias-fold")


def test_scale_through_add_backward_into_bias() -> None:
    inits = {**conv_inits(bias=False), "t": rand(1, 4, 1, 1), "c": rand(4, 1, 1)}
    m = model([conv_node(inits), node("Add", ["conv", "t"], "a"), node("Mul", ["a", "c"], "y")], X, initializers=inits)
    assert op_counts(assert_rule_sound(m, "scale-through-add", also=FOLDS).model) == {"Conv": 1}


def test_scale_through_add_forward_through_relu() -> None:
    inits = {**conv_inits(), "s": rand(4, 1, 1, low=0.5, high=2), "t": rand(4, 1, 1)}
    m = model(
        [
            node("Mul", ["x", "s"], "xs"),
            node("Add", ["xs", "t"], "m"),
            node("Relu", ["m"], "r"),
            conv_node(inits, x="r", y="y"),
        ],
        X,
        initializers=inits,
    )
    result = assert_rule_sound(m, "scale-through-add", also=("scale-through-relu", "conv-input-scale-fold"))
    assert op_counts(result.model) == {"Add": 1, "Relu": 1, "Conv": 1}


def test_scale_through_add_forward_needs_positive_scale_and_a_conv() -> None:
    s = rand(4, 1, 1, low=0.5, high=2)
    inits = {**conv_inits(), "s": -s, "p": s, "t": rand(4, 1, 1)}
    negative = model(
        [node("Mul", ["x", "s"], "xs"), node("Add", ["xs", "t"], "m"), conv_node(inits, x="m", y="y")],
        X,
        initializers=inits,
    )
    assert_rule_does_not_fire(negative, "scale-through-add")
    no_conv = model(
        [node("Mul", ["x", "p"], "xs"), node("Add", ["xs", "t"], "m"), node("Relu", ["m"], "y")], X, initializers=inits
    )
    assert_rule_does_not_fire(no_conv, "scale-through-add")


@property_settings()
@given(PROPERTIES["scale-through-add"]())
def test_scale_through_add_property(case: RuleCase) -> None:
    case.check()


# ---- conv-pad-merge ----


def test_conv_pad_merge_adds_spatial_pads() -> None:
    inits = {**conv_inits(), "pads": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)}
    m = model([node("Pad", ["x", "pads"], "p"), conv_node(inits, x="p", y="y")], X, initializers=inits)
    result = assert_rule_sound(m, "conv-pad-merge")
    assert op_counts(result.model) == {"Conv": 1}
    assert attribute(result.model, "Conv", "pads") == [2, 3, 3, 2]


def test_conv_pad_merge_opset_10_attributes() -> None:
    inits = conv_inits()
    m = model(
        [node("Pad", ["x"], "p", pads=[0, 0, 1, 1, 0, 0, 1, 1]), node("Conv", ["p", "w", "b"], "y")],
        X,
        initializers=inits,
        opset=10,
    )
    result = assert_rule_sound(m, "conv-pad-merge")
    assert op_counts(result.model) == {"Conv": 1}
    assert attribute(result.model, "Conv", "pads") == [1, 1, 1, 1]


def test_conv_pad_merge_four_spatial_axes() -> None:
    """A conv of rank 6 (four spatial axes; main's rows stopped at three): the Pad's spatial pads become the conv's.
    The runtimes have no 4-D conv kernel, so the arithmetic of the rows is checked at ranks 3 to 5 by the property."""
    pads = [0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 1]
    inits = {"w": rand(2, 1, 2, 2, 2, 2), "pads": np.array(pads, np.int64)}
    nodes = [node("Pad", ["x", "pads"], "p"), node("Conv", ["p", "w"], "y")]
    m = model(nodes, [("x", "FLOAT", (1, 1, 3, 3, 3, 3))], initializers=inits)
    egraph = saturate_with_rules(m, ["conv-pad-merge"]).egraph
    # the conv's pads attribute: none on the loaded conv, the Pad's spatial pads on the merged one
    assert sorted(list(n.attrs[4]) for n in egraph.nodes if n.op == "Conv") == [[], [1, 0, 1, 0, 0, 1, 0, 1]]


def test_conv_pad_merge_never_into_max_pool() -> None:
    """Peer bug: MaxPool pads with -inf, so a zero Pad before it must stay."""
    m = model(
        [node("Pad", ["x", "pads"], "p"), node("MaxPool", ["p"], "y", kernel_shape=[2, 2])],
        X,
        initializers={"pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)},
    )
    assert_rule_does_not_fire(m, "conv-pad-merge")
    result, _ = optimize_with_rules(m, ["conv-pad-merge"])
    assert op_counts(result.model) == {"Pad": 1, "MaxPool": 1}


@pytest.mark.parametrize(
    "pads,extra,attrs",
    [
        ([0, 0, 1, 1, 0, 0, 1, 1], {"mode": "reflect"}, {}),
        ([0, 1, 1, 1, 0, 0, 1, 1], {}, {}),  # pads the channel axis
        ([0, 0, -1, 0, 0, 0, 1, 1], {}, {}),  # crops
        ([0, 0, 1, 1, 0, 0, 1, 1], {}, {"auto_pad": "SAME_UPPER"}),
        ([0, 0, 1, 1, 0, 0, 1, 1], {"value": 1.0}, {}),
    ],
)
def test_conv_pad_merge_not(pads: list, extra: dict, attrs: dict) -> None:
    inits = {"w": rand(4, 4, 3, 3), "pads": np.array(pads, np.int64)}
    inputs = ["x", "pads"]
    if "value" in extra:
        inits["v"] = np.array(extra.pop("value"), np.float32)
        inputs.append("v")
    m = model([node("Pad", inputs, "p", **extra), node("Conv", ["p", "w"], "y", **attrs)], X, initializers=inits)
    assert_rule_does_not_fire(m, "conv-pad-merge")


@property_settings()
@given(PROPERTIES["conv-pad-merge"]())
def test_conv_pad_merge_property(case: RuleCase) -> None:
    case.check()


# ---- const-operand-last ----


def test_const_operand_last() -> None:
    m = model([node("Mul", ["c", "x"], "y")], X, initializers={"c": rand(4, 1, 1)})
    session = saturate_with_rules(m, ["const-operand-last"])
    assert "const-operand-last" in session.saturation.rules_fired
    assert_rule_sound(m, "const-operand-last")


def test_const_operand_last_not_for_runtime_operands() -> None:
    m = model([node("Mul", ["a", "x"], "y")], X + [("a", "FLOAT", (1, 4, 1, 1))])
    assert_rule_does_not_fire(m, "const-operand-last")


@property_settings()
@given(PROPERTIES["const-operand-last"]())
def test_const_operand_last_property(case: RuleCase) -> None:
    case.check()


# ---- analysis: scale-broadcast-shape, scale-positive-facts ----


def test_scale_broadcast_shape_lets_a_scaled_bias_fold() -> None:
    """(Conv + t) * c, c a single element of full rank: t * c gets t's shape and folds into the bias."""
    inits = {**conv_inits(), "t": rand(1, 4, 1, 1), "c": np.array(1.5, np.float32).reshape(1, 1, 1, 1)}
    m = model([conv_node(inits), node("Add", ["conv", "t"], "a"), node("Mul", ["a", "c"], "y")], X, initializers=inits)
    result = assert_rule_sound(m, "scale-broadcast-shape", also=("scale-through-add", *FOLDS))
    assert op_counts(result.model) == {"Conv": 1}


def test_scale_broadcast_shape_not_for_equal_shapes() -> None:
    m = model([node("Add", ["x", "z"], "y")], X + [("z", "FLOAT", (1, 4, 5, 5))])
    assert_rule_does_not_fire(m, "scale-broadcast-shape")


@property_settings()
@given(PROPERTIES["scale-broadcast-shape"]())
def test_scale_broadcast_shape_property(case: RuleCase) -> None:
    case.check()


def test_scale_positive_facts_let_a_batchnorm_scale_pass_relu() -> None:
    """BatchNormalization(Relu(Conv)): gamma / sqrt(var + eps) is positive (derived), so it moves into the conv."""
    inits = {**conv_inits(), **bn_inits()}
    m = model(
        [conv_node(inits), node("Relu", ["conv"], "r"), node("BatchNormalization", ["r", *BN], "y")],
        X,
        initializers=inits,
    )
    also = ("bn-decompose", "scale-through-relu", "conv-scale-fold")
    result = assert_rule_sound(m, "scale-positive-facts", also=also)
    _, fired = optimize_with_rules(m, ["scale-positive-facts", *also])
    assert fired["scale-through-relu"] > 0
    assert "BatchNormalization" not in op_counts(result.model)


def test_scale_positive_facts_not_for_negative_constants() -> None:
    m = model([node("Mul", ["x", "c"], "y")], X, initializers={"c": np.array(-2.0, np.float32)})
    assert_rule_does_not_fire(m, "scale-positive-facts")


@property_settings()
@given(PROPERTIES["scale-positive-facts"]())
def test_scale_positive_facts_property(case: RuleCase) -> None:
    case.check()


def test_scale_finite_facts_let_a_batchnorm_scale_fold() -> None:
    """BatchNormalization(Relu(Conv)): gamma / sqrt(var + eps) is finite (derived: a positive divisor), so the
    scale that passes the Relu folds into the conv."""
    inits = {**conv_inits(), **bn_inits()}
    m = model(
        [conv_node(inits), node("Relu", ["conv"], "r"), node("BatchNormalization", ["r", *BN], "y")],
        X,
        initializers=inits,
    )
    also = ("bn-decompose", "scale-through-relu", "conv-scale-fold")
    result = assert_rule_sound(m, "scale-finite-facts", also=also)
    assert "BatchNormalization" not in op_counts(result.model) and op_counts(result.model)["Conv"] == 1


def test_scale_finite_facts_not_for_infinities() -> None:
    m = model([node("Mul", ["x", "c"], "y")], X, initializers={"c": np.array(np.inf, np.float32)})
    assert_rule_does_not_fire(m, "scale-finite-facts")


@property_settings()
@given(PROPERTIES["scale-finite-facts"]())
def test_scale_finite_facts_property(case: RuleCase) -> None:
    case.check()


# ---- conv-merge (multi-pattern, TENSAT) ----


def branches(
    outs: tuple = (64, 96, 16), bias: tuple | None = None, act: str | None = None, c: int = 192, hw: int = 28, **attrs
) -> object:
    """Inception-like block: one 1x1 conv per entry of `outs` over the same x (bias per entry, default all),
    each followed by `act` (or a graph output itself)."""
    nodes, inits, ys = [], {}, []
    for k, co in enumerate(outs):
        inits[f"w{k}"] = rand(co, c, 1, 1)
        inputs = ["x", f"w{k}"]
        if bias is None or bias[k]:
            inits[f"b{k}"] = rand(co)
            inputs.append(f"b{k}")
        nodes.append(node("Conv", inputs, f"c{k}", kernel_shape=[1, 1], **attrs))
        if act:
            nodes.append(node(act, [f"c{k}"], f"a{k}"))
        ys.append(f"a{k}" if act else f"c{k}")
    return model(nodes, [("x", "FLOAT", (1, c, hw, hw))], ys, initializers=inits)


def graph_cost(m, target: str) -> float:
    """`m` costed as a graph of its own by `target`'s model (fused epilogues only where `m` has them)."""
    from eqsat.extract.cost import roofline

    return saturate_with_rules(m, []).input_extraction().dag_cost(roofline(target))


def test_conv_merge_three_projections() -> None:
    m = branches((4, 6, 2), c=8, hw=5)
    session = saturate_with_rules(m, ["conv-merge"])
    assert session.saturation.rules_fired["conv-merge-sites"] == 3
    # runs of consecutive sites in const-rank order: 2 pairs, then the first pair grown by the third
    assert session.saturation.rules_fired["conv-merge"] == 3
    result = session.extract("gpu", verify=True)
    assert op_counts(result.model) == {"Conv": 1, "Split": 1}
    (split,) = [n for n in result.model.graph if n.op_type == "Split"]
    assert split.attributes["axis"].value == 1
    assert_rule_sound(m, "conv-merge", target="gpu")


@pytest.mark.parametrize("bias", [None, (False,) * 6, (True, False, True, True, False, True)])
def test_conv_merge_any_number(bias: tuple | None) -> None:
    """Six convs over one x become one conv and a Split (main merged at most four), biases present, absent or
    mixed (the absent ones as zeros)."""
    m = branches((4, 6, 2, 3, 5, 1), bias=bias, c=8, hw=5)
    result = assert_rule_sound(m, "conv-merge", target="gpu")
    assert op_counts(result.model) == {"Conv": 1, "Split": 1}
    (split,) = [n for n in result.model.graph if n.op_type == "Split"]
    assert len(split.outputs) == 6


@pytest.mark.parametrize("bias", [(False, False, False), (True, False, True)])
def test_conv_merge_absent_biases(bias: tuple) -> None:
    """All absent: the merged conv has none; a mix: the absent ones become zeros (conv-merge's zero bias)."""
    m = branches((4, 6, 2), bias=bias, c=8, hw=5)
    result = assert_rule_sound(m, "conv-merge", target="gpu")
    assert op_counts(result.model) == {"Conv": 1, "Split": 1}
    (conv,) = [n for n in result.model.graph if n.op_type == "Conv"]
    assert len([i for i in conv.inputs if i is not None]) == (3 if any(bias) else 2)


MERGE = ("conv-merge", "conv-merge-epilogue")


def test_conv_merge_epilogue_keeps_the_activation_before_the_split() -> None:
    """Relu(Out(Split(merged))) -> Out(Split(Relu(merged))): the Relu reads the conv, as runtimes fuse it."""
    m = branches((4, 6, 2), act="Relu", c=8, hw=5)
    result = assert_rule_sound(m, "conv-merge-epilogue", also=("conv-merge",), target="gpu")
    assert op_counts(result.model) == {"Conv": 1, "Relu": 1, "Split": 1}
    (relu,) = [n for n in result.model.graph if n.op_type == "Relu"]
    assert relu.inputs[0].producer().op_type == "Conv"


def test_conv_merge_epilogue_on_a_split_conv_of_the_model() -> None:
    """A conv whose output the model itself splits, each part through the same Clip: one Clip before the Split."""
    inits = {
        **conv_inits(co=6),
        "lo": np.array(0.0, np.float32),
        "hi": np.array(6.0, np.float32),
        "sizes": np.array([2, 4], np.int64),
    }
    nodes = [
        conv_node(inits),
        oh.make_node("Split", ["conv", "sizes"], ["s0", "s1"], axis=1),
        node("Clip", ["s0", "lo", "hi"], "y0"),
        node("Clip", ["s1", "lo", "hi"], "y1"),
    ]
    m = model(nodes, X, ["y0", "y1"], initializers=inits)
    result = assert_rule_sound(m, "conv-merge-epilogue")
    assert op_counts(result.model) == {"Conv": 1, "Clip": 1, "Split": 1}


@pytest.mark.parametrize("case", ["split-of-input", "not-an-epilogue"])
def test_conv_merge_epilogue_not(case: str) -> None:
    sizes = {"sizes": np.array([1, 3], np.int64)}
    split = oh.make_node("Split", ["x" if case == "split-of-input" else "conv", "sizes"], ["s0", "s1"], axis=1)
    act = "Relu" if case == "split-of-input" else "Exp"
    inits = {**conv_inits(), **sizes} if case != "split-of-input" else sizes
    nodes = ([] if case == "split-of-input" else [conv_node(inits)]) + [
        split,
        node(act, ["s0"], "y0"),
        node(act, ["s1"], "y1"),
    ]
    m = model(nodes, X, ["y0", "y1"], initializers=inits)
    assert_rule_does_not_fire(m, "conv-merge-epilogue")


@property_settings()
@given(PROPERTIES["conv-merge-epilogue"]())
def test_conv_merge_epilogue_property(case: RuleCase) -> None:
    case.check()


@pytest.mark.parametrize("hw,merged_on", [(28, {"gpu", "npu"}), (7, {"cpu", "gpu", "npu"})])
def test_conv_merge_is_the_targets_choice(hw: int, merged_on: set) -> None:
    """Three 1x1 convs (192 -> 64, 96, 16 channels) with Relus, as in GoogLeNet's inception 3a.

    gpu: 8 us launches and NCHW convs paying half their activation traffic again: one conv reading x once beats
    three, Split included (28 x 28: 19.8 us against 27.7). npu: memory-bound (12 GB/s): reading x once saves more
    than the Split moves (201.5 us against 210.8). cpu at 28 x 28: the convs are compute-bound (the merged one
    takes 55 us, the three 63 us), and the Split costs a launch, 1.1 MB moved and a reorder out of the blocked
    NCHWc layout (25 us): the three convs stay; at 7 x 7 the launches dominate and the merge wins (10.6 us
    against 12.5).
    No target's result costs more than the input, costed as a graph of its own (fusions only where they are).
    """
    m = branches(act="Relu", hw=hw)
    session = saturate_with_rules(m, MERGE)
    for target in ("cpu", "gpu", "npu"):
        result = session.extract(target, verify=True)
        assert result.report.verification.ok
        ops = op_counts(result.model)
        assert ops == ({"Conv": 1, "Relu": 1, "Split": 1} if target in merged_on else {"Conv": 3, "Relu": 3}), target
        assert graph_cost(result.model, target) <= graph_cost(m, target) * (1 + 1e-9), target


def test_conv_merge_mixed_epilogues_never_leave_a_dearer_graph() -> None:
    """The per-node cost model's limit: two branches end in Relu, the third in a residual Add (gpu fuses both
    into a conv). The triple merge leaves Relu and Add after the Split, still costed as fused with the original
    convs their classes hold: the gpu extractor picks it, though as a graph of its own it is dearer than the
    input (40 us against 24 us). Session.extract costs the chosen graph alone and keeps the input then."""
    nodes, inits = [], {}
    for k, co in enumerate((64, 64, 192)):
        inits[f"w{k}"], inits[f"b{k}"] = rand(co, 192, 1, 1), rand(co)
        nodes.append(node("Conv", ["x", f"w{k}", f"b{k}"], f"c{k}", kernel_shape=[1, 1]))
    nodes += [node("Relu", ["c0"], "y0"), node("Relu", ["c1"], "y1"), node("Add", ["c2", "r"], "y2")]
    x = [("x", "FLOAT", (1, 192, 7, 7)), ("r", "FLOAT", (1, 192, 7, 7))]
    m = model(nodes, x, ["y0", "y1", "y2"], initializers=inits)
    result = saturate_with_rules(m, MERGE).extract("gpu", verify=True)
    assert graph_cost(result.model, "gpu") <= graph_cost(m, "gpu") * (1 + 1e-9)
    assert any(note.startswith("input kept") for note in result.report.extraction.notes)


@pytest.mark.parametrize(
    "case", ["strides", "pads", "dilations", "group", "runtime-weight", "kernel", "inputs", "conv-transpose"]
)
def test_conv_merge_not(case: str) -> None:
    inits = {"w0": rand(4, 4, 3, 3), "w1": rand(6, 4, 3, 3)}
    inputs = X
    attrs = [{"pads": [1, 1, 1, 1]}, {"pads": [1, 1, 1, 1]}]
    reads = ["x", "x"]
    kind = "Conv"
    if case == "strides":
        attrs[1]["strides"] = [2, 2]
    if case == "pads":
        attrs[1]["pads"] = [0, 0, 0, 0]
    if case == "dilations":
        attrs[1]["dilations"] = [2, 2]
    if case == "group":
        inits = {"w0": rand(4, 2, 3, 3), "w1": rand(6, 2, 3, 3)}
        attrs = [{**a, "group": 2} for a in attrs]
    if case == "runtime-weight":
        inits.pop("w1")
        inputs = X + [("w1", "FLOAT", (6, 4, 3, 3))]
    if case == "kernel":  # no kernel_shape attribute: the weights differ in their spatial dims
        inits["w1"] = rand(6, 4, 1, 1)
        attrs = [{}, {}]
    if case == "inputs":
        inputs = X + [("z", "FLOAT", (1, 4, 5, 5))]
        reads = ["x", "z"]
    if case == "conv-transpose":
        kind = "ConvTranspose"
        inits = {"w0": rand(4, 4, 3, 3), "w1": rand(4, 6, 3, 3)}
    m = model(
        [node(kind, [reads[k], f"w{k}"], f"c{k}", **attrs[k]) for k in range(2)],
        inputs,
        ["c0", "c1"],
        initializers=inits,
    )
    assert_rule_does_not_fire(m, "conv-merge")


@property_settings()
@given(PROPERTIES["conv-merge"]())
def test_conv_merge_property(case: RuleCase) -> None:
    case.check()


def test_conv_merge_sites_only_for_constant_group_one_weights() -> None:
    """A runtime weight or a grouped conv is no merge site; the conv with a loaded constant weight is."""
    inputs = X + [("w1", "FLOAT", (6, 4, 3, 3))]
    m = model(
        [
            node("Conv", ["x", "w0"], "y0", pads=[1, 1, 1, 1]),
            node("Conv", ["x", "w1"], "y1", pads=[1, 1, 1, 1]),
            node("Conv", ["x", "w2"], "y2", pads=[1, 1, 1, 1], group=2),
        ],
        inputs,
        ["y0", "y1", "y2"],
        initializers={"w0": rand(4, 4, 3, 3), "w2": rand(4, 2, 3, 3)},
    )
    assert saturate_with_rules(m, []).saturation.rules_fired.get("conv-merge-sites") == 1


@property_settings()
@given(PROPERTIES["conv-merge-sites"]())
def test_conv_merge_sites_property(case: RuleCase) -> None:
    case.check()


# ---- analysis relations this family's rules join: each checked on the graphs of a rule that reads it ----


@property_settings()
@given(PROPERTIES["conv-merge-order"]())
def test_conv_merge_order_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["per-channel-facts"]())
def test_per_channel_facts_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["conv-pad-sites"]())
def test_conv_pad_sites_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["bn-unmarked"]())
def test_bn_unmarked_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["conv-weight-facts"]())
def test_conv_weight_facts_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["bias-fold-sites"]())
def test_bias_fold_sites_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["bn-scale-sites"]())
def test_bn_scale_sites_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["conv-sites"]())
def test_conv_sites_property(case: RuleCase) -> None:
    case.check()
