"""Reduce rules (rewrites/reduce.py): each fires where it should, not where its guard fails, and is sound."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from eqsat.testing import (
    PROPERTIES,
    RuleCase,
    assert_optimization_sound,
    assert_rule_does_not_fire,
    assert_rule_sound,
    op_counts,
    optimize_with_rules,
    run,
    saturate_with_rules,
)
from eqsat.rewrites.registry import all_rules
from tests.rule_graphs import model, node, property_settings

X = [("x", "FLOAT", (2, 3, 4, 5))]


def root_ops(m, rule: str) -> set[str]:
    session = saturate_with_rules(m, [rule])
    egraph = session.egraph
    return {egraph.node(n).op for n in egraph.eclass(session.roots[0]).nodes}


# ---- reducesum-mul-to-mean ----


@pytest.mark.parametrize("axes,count,keepdims", [([2, 3], 20, 1), ([1], 3, 0), ([0, 1, 2, 3], 120, 0), ([-1], 5, 1)])
def test_reducesum_mul_to_mean(axes: list, count: int, keepdims: int) -> None:
    m = model(
        [node("ReduceSum", ["x", "axes"], "rs", keepdims=keepdims), node("Mul", ["rs", "k"], "y")],
        X,
        initializers={"axes": np.array(axes, np.int64), "k": np.array(1.0 / count, np.float32)},
    )
    result = assert_rule_sound(m, "reducesum-mul-to-mean")
    assert op_counts(result.model) == {"ReduceMean": 1}


def test_reducesum_mul_to_mean_all_axes_constant_first() -> None:
    m = model(
        [node("ReduceSum", ["x"], "rs", keepdims=0), node("Mul", ["k", "rs"], "y")],
        X,
        initializers={"k": np.array(1.0 / 120, np.float32)},
    )
    result = assert_rule_sound(m, "reducesum-mul-to-mean", also=("const-operand-last",))
    assert op_counts(result.model) == {"ReduceMean": 1}


@pytest.mark.parametrize("k", [1.0 / 21, 1.0 / 19, 0.05 * (1 + 1e-5)])
def test_reducesum_mul_to_mean_not_when_count_differs(k: float) -> None:
    m = model(
        [node("ReduceSum", ["x", "axes"], "rs"), node("Mul", ["rs", "k"], "y")],
        X,
        initializers={"axes": np.array([2, 3], np.int64), "k": np.array(k, np.float32)},
    )
    assert_rule_does_not_fire(m, "reducesum-mul-to-mean")


@property_settings()
@given(PROPERTIES["reducesum-mul-to-mean"]())
def test_reducesum_mul_to_mean_property(case: RuleCase) -> None:
    case.check()


# ---- reducesum-div-to-mean ----


def test_reducesum_div_to_mean() -> None:
    m = model(
        [node("ReduceSum", ["x", "axes"], "rs"), node("Div", ["rs", "n"], "y")],
        X,
        initializers={"axes": np.array([1, 3], np.int64), "n": np.array(15.0, np.float32)},
    )
    assert op_counts(assert_rule_sound(m, "reducesum-div-to-mean").model) == {"ReduceMean": 1}


def test_reducesum_div_to_mean_opset_11_attribute() -> None:
    m = model(
        [node("ReduceSum", ["x"], "rs", axes=[2]), node("Div", ["rs", "n"], "y")],
        X,
        initializers={"n": np.array(4.0, np.float32)},
        opset=11,
    )
    assert op_counts(assert_rule_sound(m, "reducesum-div-to-mean").model) == {"ReduceMean": 1}


@pytest.mark.parametrize("dtype,n", [("FLOAT", 16.0), ("INT64", 20)])
def test_reducesum_div_to_mean_not(dtype: str, n: float) -> None:
    """A wrong count, or an integer sum (integer division truncates; a mean of integers is another op)."""
    np_dtype = np.float32 if dtype == "FLOAT" else np.int64
    m = model(
        [node("ReduceSum", ["x", "axes"], "rs"), node("Div", ["rs", "n"], "y")],
        [("x", dtype, (2, 3, 4, 5))],
        initializers={"axes": np.array([2, 3], np.int64), "n": np.array(n, np_dtype)},
    )
    assert_rule_does_not_fire(m, "reducesum-div-to-mean")


@property_settings()
@given(PROPERTIES["reducesum-div-to-mean"]())
def test_reducesum_div_to_mean_property(case: RuleCase) -> None:
    case.check()


# ---- reducemean-to-global-pool / global-pool-to-reducemean ----


@pytest.mark.parametrize("opset", [17, 18])
def test_reducemean_to_global_pool(opset: int) -> None:
    if opset >= 18:
        m = model(
            [node("ReduceMean", ["x", "axes"], "y", keepdims=1)],
            X,
            initializers={"axes": np.array([2, 3], np.int64)},
            opset=opset,
        )
    else:
        m = model([node("ReduceMean", ["x"], "y", axes=[2, 3], keepdims=1)], X, opset=opset)
    assert_rule_sound(m, "reducemean-to-global-pool")
    assert root_ops(m, "reducemean-to-global-pool") == {"ReduceMean", "GlobalAveragePool"}


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 3, 4, 5), (1, 2, 3, 2, 2)])
def test_reducemean_without_keepdims_to_flattened_global_pool(shape: tuple) -> None:
    """keepdims = 0 (Keras/TF exports): Flatten(GlobalAveragePool(x), 1), shape (N, C)."""
    m = model([node("ReduceMean", ["x"], "y", axes=list(range(2, len(shape))), keepdims=0)], [("x", "FLOAT", shape)])
    assert_rule_sound(m, "reducemean-to-global-pool")
    assert root_ops(m, "reducemean-to-global-pool") == {"ReduceMean", "Flatten"}


@pytest.mark.parametrize(
    "axes,keepdims,shape",
    [
        ([2, 3, 4, 5], 0, (1, 2, 2, 2, 2, 2)),
        ([1, 2], 1, (2, 3, 4, 5)),
        ([1, 2], 0, (2, 3, 4, 5)),
        ([3], 1, (2, 3, 4, 5)),
        ([1], 1, (2, 3)),
    ],
)
def test_reducemean_to_global_pool_not(axes: list, keepdims: int, shape: tuple) -> None:
    m = model([node("ReduceMean", ["x"], "y", axes=axes, keepdims=keepdims)], [("x", "FLOAT", shape)])
    assert_rule_does_not_fire(m, "reducemean-to-global-pool")


@property_settings()
@given(PROPERTIES["reducemean-to-global-pool"]())
def test_reducemean_to_global_pool_property(case: RuleCase) -> None:
    case.check()


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 3, 4, 5), (1, 2, 3, 2, 2)])
def test_global_pool_to_reducemean(shape: tuple) -> None:
    m = model([node("GlobalAveragePool", ["x"], "y")], [("x", "FLOAT", shape)])
    assert_rule_sound(m, "global-pool-to-reducemean")
    assert root_ops(m, "global-pool-to-reducemean") == {"ReduceMean", "GlobalAveragePool"}


def test_global_pool_to_reducemean_not_for_max_pool() -> None:
    m = model([node("GlobalMaxPool", ["x"], "y")], X)
    assert_rule_does_not_fire(m, "global-pool-to-reducemean")


@property_settings()
@given(PROPERTIES["global-pool-to-reducemean"]())
def test_global_pool_to_reducemean_property(case: RuleCase) -> None:
    case.check()


# ---- reduce-unsqueeze-fuse ----

REDUCTIONS = [
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceSumSquare",
    "ReduceLogSum",
    "ReduceLogSumExp",
]


def _reduce_unsqueeze(op: str, axes: list | None, back: list, opset: int, shape: tuple = (2, 3, 4, 5)):
    inits: dict = {}
    reduce_in = ["x"]
    attrs: dict = {"keepdims": 0}
    if axes is not None:
        if opset >= (13 if op == "ReduceSum" else 18):
            inits["axes"] = np.array(axes, np.int64)
            reduce_in.append("axes")
        else:
            attrs["axes"] = axes
    if opset >= 13:
        inits["uaxes"] = np.array(back, np.int64)
        unsq = node("Unsqueeze", ["r", "uaxes"], "y")
    else:
        unsq = node("Unsqueeze", ["r"], "y", axes=back)
    return model(
        [node("Abs", ["x"], "a"), node(op, ["a", *reduce_in[1:]], "r", **attrs), unsq],
        [("x", "FLOAT", shape)],
        initializers=inits,
        opset=opset,
    )


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("opset", [11, 13, 18])
def test_reduce_unsqueeze_fuse(op: str, opset: int) -> None:
    m = _reduce_unsqueeze(op, [1, -1], [3, 1], opset)  # the same axes, written differently
    result = assert_rule_sound(m, "reduce-unsqueeze-fuse")
    assert op_counts(result.model) == {"Abs": 1, op: 1}


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceLogSumExp"])
@pytest.mark.parametrize("shape", [(2, 3, 4), ("N", 3)])
def test_reduce_unsqueeze_fuse_all_axes(op: str, shape: tuple) -> None:
    """No axes: every axis reduced (noop_with_empty_axes = 0), a scalar; the Unsqueeze restores all of them."""
    m = _reduce_unsqueeze(op, None, list(range(len(shape))), 18, shape)
    assert op_counts(assert_rule_sound(m, "reduce-unsqueeze-fuse").model) == {"Abs": 1, op: 1}


@pytest.mark.parametrize("axes,back", [([1], [2]), ([1, 2], [1]), ([2], [0])])
def test_reduce_unsqueeze_fuse_not_on_other_axes(axes: list, back: list) -> None:
    m = _reduce_unsqueeze("ReduceMean", axes, back, 13)
    assert_rule_does_not_fire(m, "reduce-unsqueeze-fuse")


def test_reduce_unsqueeze_fuse_not_with_keepdims() -> None:
    m = model(
        [node("ReduceMax", ["x"], "r", axes=[1], keepdims=1), node("Unsqueeze", ["r", "u"], "y")],
        [("x", "FLOAT", (2, 3, 4))],
        initializers={"u": np.array([1], np.int64)},
    )
    assert_rule_does_not_fire(m, "reduce-unsqueeze-fuse")


def test_reduce_unsqueeze_fuse_not_with_noop_empty_axes() -> None:
    """noop_with_empty_axes = 1 and no axes: the reduction is the identity (the node stays opaque)."""
    m = model(
        [node("ReduceSum", ["x"], "r", keepdims=0, noop_with_empty_axes=1), node("Unsqueeze", ["r", "u"], "y")],
        [("x", "FLOAT", (2, 3))],
        initializers={"u": np.array([0, 1], np.int64)},
    )
    assert_rule_does_not_fire(m, "reduce-unsqueeze-fuse")


@property_settings()
@given(PROPERTIES["reduce-unsqueeze-fuse"]())
def test_reduce_unsqueeze_fuse_property(case: RuleCase) -> None:
    case.check()


# ---- argmax-monotone (precision-changing) ----

PC = ("precision-changing",)
XD = np.array([[0.5, -1.0, 2.0, 1.5], [3.0, -2.0, 0.25, 0.0], [-0.5, 1.0, 0.75, 4.0]], np.float32)


@pytest.mark.parametrize("arg", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("f,axis", [("Exp", 0), ("Softmax", 1), ("LogSoftmax", -1), ("Softmax", 0)])
def test_argmax_monotone(arg: str, f: str, axis: int) -> None:
    fx = node(f, ["x"], "f") if f == "Exp" else node(f, ["x"], "f", axis=axis)
    m = model([fx, node(arg, ["f"], "y", axis=axis, keepdims=0)], [("x", "FLOAT", (3, 4))])
    result = assert_rule_sound(m, "argmax-monotone", {"x": XD}, allow=PC)
    assert op_counts(result.model) == {arg: 1}


def test_argmax_monotone_off_by_default() -> None:
    m = model([node("Exp", ["x"], "f"), node("ArgMax", ["f"], "y", axis=1)], [("x", "FLOAT", (3, 4))])
    assert_rule_does_not_fire(m, "argmax-monotone")


@pytest.mark.parametrize("opset,soft_axis,arg_axis", [(17, 0, 1), (17, -1, 0), (11, 1, 1), (12, -1, 1)])
def test_argmax_monotone_not_across_axes_or_before_13(opset: int, soft_axis: int, arg_axis: int) -> None:
    """Softmax over another axis mixes the ArgMax axis's values; before opset 13 Softmax normalizes over the
    flattened trailing axes (axis and everything after it), which may not be the ArgMax axis alone."""
    m = model(
        [node("Softmax", ["x"], "f", axis=soft_axis), node("ArgMax", ["f"], "y", axis=arg_axis)],
        [("x", "FLOAT", (3, 4))],
        opset=opset,
    )
    assert_rule_does_not_fire(m, "argmax-monotone", allow=PC)


def test_argmax_monotone_changes_the_index_on_underflow_ties() -> None:
    """Why it is precision-changing: Exp(-110) and Exp(-120) are both 0 in float32, a tie ArgMin breaks by the
    first index (1), where ArgMin of x is 2."""
    m = model([node("Exp", ["x"], "f"), node("ArgMin", ["f"], "y", axis=0, keepdims=0)], [("x", "FLOAT", (3,))])
    feeds = {"x": np.array([0.0, -110.0, -120.0], np.float32)}
    result, fired = optimize_with_rules(m, ["argmax-monotone"], allow=PC)
    assert fired["argmax-monotone"] > 0
    assert int(run(m, feeds)[0]) == 1 and int(run(result.model, feeds)[0]) == 2


@property_settings()
@given(PROPERTIES["argmax-monotone"]())
def test_argmax_monotone_property(case: RuleCase) -> None:
    case.check()


# ---- reduce-unit-axes ----


def _reduce_kept(op: str, axes: list | None, shape: tuple, keepdims: int = 1):
    attrs: dict = {"keepdims": keepdims, **({"axes": axes} if axes is not None else {})}
    return model(
        [node("Abs", ["x"], "a"), node(op, ["a"], "y", **attrs)],
        [("x", "FLOAT", shape)],
        opset=13 if op != "ReduceSum" else 11,
    )


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"])
@pytest.mark.parametrize("axes,shape", [([1], (2, 1, 4)), ([0, 2], (1, 3, 1)), (None, (1, 1)), ([-1], ("N", 3, 1))])
def test_reduce_unit_axes(op: str, axes: list | None, shape: tuple) -> None:
    """Reducing only dims of size 1 with keepdims=1 leaves every element where it was: the reduction goes."""
    result = assert_rule_sound(_reduce_kept(op, axes, shape), "reduce-unit-axes")
    assert op_counts(result.model) == {"Abs": 1}


@pytest.mark.parametrize(
    "op,axes,shape,keepdims",
    [
        ("ReduceSum", [1], (2, 3, 4), 1),  # a reduced dim of 3
        ("ReduceMean", [0, 1], (1, 2), 1),  # one of the reduced dims is 2
        ("ReduceMax", None, (1, 2), 1),  # no axes: every dim reduced, one of them 2
        ("ReduceSum", [1], (2, 1, 4), 0),  # keepdims=0 drops the axis: a Reshape, not an identity
        ("ReduceL2", [1], (2, 1, 4), 1),  # |x|, not x
        ("ReduceSumSquare", [1], (2, 1, 4), 1),  # x * x
        ("ReduceMean", [1], (2, "K", 4), 1),  # a symbolic reduced dim may be anything
    ],
)
def test_reduce_unit_axes_not(op: str, axes: list | None, shape: tuple, keepdims: int) -> None:
    assert_rule_does_not_fire(_reduce_kept(op, axes, shape, keepdims), "reduce-unit-axes")


@property_settings()
@given(PROPERTIES["reduce-unit-axes"]())
def test_reduce_unit_axes_property(case: RuleCase) -> None:
    case.check()


def test_reduce_sizes_asks_once_for_every_reduction_rule() -> None:
    """reduce-sizes asks for the reduced element count once per reduction (any op, any keepdims): the unit-axes and
    sum-to-mean rules read it and have no demand row of their own; without it they never fire."""
    rules = {r.name: r for r in all_rules()}
    readers = ("reduce-unit-axes", "reduce-unit-axes-pointwise", "reducesum-mul-to-mean", "reducesum-div-to-mean")
    assert not [name for name in readers for row in rules[name].egglog if "need-dims-product" in row.actions]
    result, fired = optimize_with_rules(_reduce_kept("ReduceMax", [1], (2, 1, 4)), ["reduce-unit-axes"])
    assert fired["reduce-sizes"] > 0 and fired["reduce-unit-axes"] > 0
    session = saturate_with_rules(
        _reduce_kept("ReduceMax", [1], (2, 1, 4)), ["reduce-unit-axes"], without=["reduce-sizes"]
    )
    assert "reduce-unit-axes" not in session.saturation.rules_fired


@property_settings()
@given(PROPERTIES["reduce-sizes"]())
def test_reduce_sizes_property(case: RuleCase) -> None:
    case.check()


def _reduce_kept_input_axes(op: str, axes: list | None, shape: tuple, **attrs: int):
    """R(Abs(x), axes) with keepdims=1 at opset 18 (ReduceSum: 13), axes as an input."""
    inits = {"axes": np.array(axes, np.int64)} if axes is not None else {}
    reduce = node(op, ["a", "axes"] if axes is not None else ["a"], "y", keepdims=1, **attrs)
    return model([node("Abs", ["x"], "a"), reduce], [("x", "FLOAT", shape)], initializers=inits, opset=18)


@pytest.mark.parametrize("noop", [0, 1])
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax"])
def test_reduce_unit_axes_with_noop_attribute(op: str, noop: int) -> None:
    """noop_with_empty_axes only matters without axes: listed axes (or 0) are the plain reduction, typed."""
    m = _reduce_kept_input_axes(op, [1], (2, 1, 4), noop_with_empty_axes=noop)
    result = assert_rule_sound(m, "reduce-unit-axes")
    assert op_counts(result.model) == {"Abs": 1}


def test_reduce_noop_without_axes_stays() -> None:
    """noop_with_empty_axes = 1 with no axes returns x as it is (not modelled: the node stays opaque)."""
    m = _reduce_kept_input_axes("ReduceSum", None, (2, 3, 4), noop_with_empty_axes=1)
    assert_rule_does_not_fire(m, "reduce-unit-axes")
    result = assert_optimization_sound(m)
    assert op_counts(result.model) == {"Abs": 1, "ReduceSum": 1}


# ---- reduce-unit-axes-pointwise ----

POINTWISE = ("ReduceL1", "ReduceSumSquare", "ReduceLogSum")


@pytest.mark.parametrize("op", POINTWISE)
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("axes,shape", [([1], (2, 1, 4)), ([0, 2], (1, 3, 1)), (None, (1, 1)), ([-1], ("N", 3, 1))])
def test_reduce_unit_axes_pointwise(op: str, opset: int, axes: list | None, shape: tuple) -> None:
    """Over dims of size 1 (keepdims=1) L1 is |x|, SumSquare x * x, LogSum log x: the pointwise op replaces the
    reduction (axes as an attribute, and as an input at opset 18); a dynamic dim is checked at two sizes. Every
    e-class is checked; the cpu cost model ties a one-element reduction with its pointwise op (see the next test
    for where the pointwise form wins)."""
    m = _reduce_kept(op, axes, shape) if opset == 13 else _reduce_kept_input_axes(op, axes, shape)
    m.opset_import[0].version = opset
    rng = np.random.default_rng(3)
    for n in (2, 5):
        feeds = {"x": rng.uniform(-3, 3, tuple(n if d == "N" else d for d in shape)).astype(np.float32)}
        assert_rule_sound(m, "reduce-unit-axes-pointwise", feeds)


def test_reduce_unit_axes_pointwise_l1_of_abs() -> None:
    """ReduceL1(Abs(x)) over a dim of 1 is Abs(Abs(x)), which idempotent-merge makes one Abs."""
    m = _reduce_kept("ReduceL1", [1], (2, 1, 4))
    result = assert_rule_sound(m, "reduce-unit-axes-pointwise", also=("idempotent-merge",))
    assert op_counts(result.model) == {"Abs": 1}


@pytest.mark.parametrize(
    "op,axes,shape,keepdims",
    [
        ("ReduceL1", [1], (2, 3, 4), 1),  # a reduced dim of 3
        ("ReduceSumSquare", None, (1, 2), 1),  # no axes: every dim reduced, one of them 2
        ("ReduceLogSum", [1], (2, 1, 4), 0),  # keepdims=0 drops the axis
        ("ReduceL1", [1], (2, "K", 4), 1),  # a symbolic reduced dim may be anything
        ("ReduceL2", [1], (2, 1, 4), 1),  # sqrt(x * x) overflows where |x| does not
        ("ReduceLogSumExp", [1], (2, 1, 4), 1),  # log(exp(x)) rounds (and overflows)
    ],
)
def test_reduce_unit_axes_pointwise_not(op: str, axes: list | None, shape: tuple, keepdims: int) -> None:
    assert_rule_does_not_fire(_reduce_kept(op, axes, shape, keepdims), "reduce-unit-axes-pointwise")


@property_settings()
@given(PROPERTIES["reduce-unit-axes-pointwise"]())
def test_reduce_unit_axes_pointwise_property(case: RuleCase) -> None:
    case.check()


def test_reduce_unit_axes_pointwise_is_op_generic() -> None:
    """One row for the unary forms (reduce-as-unary: L1 -> Abs, LogSum -> Log) and one for SumSquare -> x * x, not
    a demand and a rewrite row per reduction (the demand: reduce-sizes, one row for every reduction)."""
    from eqsat.engine.terms import REDUCE_AS_UNARY
    from eqsat.rewrites.registry import all_rules

    assert {r.name: len(r.egglog) for r in all_rules()}["reduce-unit-axes-pointwise"] == 2
    assert REDUCE_AS_UNARY == {"ReduceL1": "Abs", "ReduceLogSum": "Log"}
