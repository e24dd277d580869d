"""Elementwise rules (rewrites/elementwise.py): each fires where it should, not where its guard fails, and
is sound."""

from __future__ import annotations

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
    run,
    saturate_with_rules,
)
from tests.rule_graphs import model, node, property_settings

X = [("x", "FLOAT", (2, 3, 4))]


# ---- div-const-to-mul ----


@pytest.mark.parametrize("c", [np.array(1.4142135, np.float32), np.linspace(0.5, 2, 4, dtype=np.float32)])
def test_div_const_to_mul(c: np.ndarray) -> None:
    m = model([node("Div", ["x", "c"], "y")], X, initializers={"c": c})
    _, fired = optimize_with_rules(m, ["div-const-to-mul"])
    assert fired["div-const-to-mul"] > 0
    assert_rule_sound(m, "div-const-to-mul")


def test_div_const_to_mul_folds_a_scalar_reciprocal() -> None:
    """Div(x, 4) gets the alternative Mul(x, Scalar 0.25): the reciprocal of a single-element constant is
    computed in the e-graph (rounded to the constant's dtype once, at lowering)."""
    m = model([node("Div", ["x", "c"], "y")], X, initializers={"c": np.array(4.0, np.float32)})
    g = saturate_with_rules(m, ["div-const-to-mul", "div-pow2-to-mul"]).egraph  # 4: the exact rule's case
    muls = [n for n in g.nodes if n.op == "Mul"]
    assert len(muls) == 1 and any(
        g.node(k).op == "Scalar" and g.node(k).attrs[0] == 0.25 for k in g.eclass(muls[0].children[1]).nodes
    )
    assert muls[0].eclass == next(n.eclass for n in g.nodes if n.op == "Div")


@pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning")
def test_div_const_to_mul_with_zero_divisors_is_exact() -> None:
    """x / 0 and x * (1 / 0) agree in IEEE arithmetic: +-inf with the same signs, NaN for 0 / 0 and NaN x
    (signed zeros included), so a constant with zero elements needs no guard."""
    c = np.array([0.0, -0.0, 2.0, -4.0], np.float32)
    m = model([node("Div", ["x", "c"], "y")], [("x", "FLOAT", (3, 4))], initializers={"c": c})
    x = {"x": np.array([[0, 0, 0, 0], [1, -1, 3, -3], [np.inf, -np.inf, np.nan, 1]], np.float32)}
    assert_rule_sound(m, "div-const-to-mul", x)
    session = saturate_with_rules(m, ["div-const-to-mul"])
    as_mul = session.extract(
        cost=lambda graph, n: 10.0 if n.op == "Div" else 1.0
    ).model  # the Mul form (a tie keeps the Div)
    assert op_counts(as_mul) == {"Mul": 1}
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(run(as_mul, x)[0], run(m, x)[0])


@pytest.mark.parametrize("dtype", ["FLOAT", "DOUBLE"])
def test_div_const_to_mul_not_by_a_tensor_holding_a_tiny_subnormal(dtype: str) -> None:
    """1 / 1e-39 overflows FLOAT (1 / 1e-310 DOUBLE) where x / 1e-39 is finite for a small x: a tensor divisor
    with such an element stays a Div."""
    np_dtype, tiny = (np.float32, 1e-39) if dtype == "FLOAT" else (np.float64, 1e-310)
    c = np.array([tiny, 3.0, -2.0, 0.5], np_dtype)
    m = model([node("Div", ["x", "c"], "y")], [("x", dtype, (3, 4))], initializers={"c": c})
    assert_rule_does_not_fire(m, "div-const-to-mul")
    x = {"x": np.full((3, 4), 1e-5, np_dtype)}
    assert np.all(np.isfinite(run(m, x)[0]))


# ---- div-pow2-to-mul: the exact case of a division by a constant ----


@pytest.mark.parametrize("dtype", ["FLOAT", "FLOAT16", "DOUBLE"])
@pytest.mark.parametrize("v", [8.0, -0.25, 1024.0, 2.0**-10])
def test_div_pow2_to_mul_is_exact(dtype: str, v: float) -> None:
    """x / 2^k = x * 2^-k bit for bit (one rounding of the same real product), so the rule is `exact` and the
    fp-reassoc div-const-to-mul leaves these divisors to it; checked bit for bit on values whose quotient is
    subnormal, huge or rounded, at two batch sizes."""
    np_dtype = {"FLOAT": np.float32, "FLOAT16": np.float16, "DOUBLE": np.float64}[dtype]
    m = model([node("Div", ["x", "c"], "y")], [("x", dtype, ("N", 3))], initializers={"c": np.array(v, np_dtype)})
    _, fired = optimize_with_rules(m, ["div-pow2-to-mul", "div-const-to-mul"])
    assert fired.get("div-pow2-to-mul", 0) > 0 and "div-const-to-mul" not in fired, fired
    tiny, big = np.finfo(np_dtype).tiny, np.finfo(np_dtype).max
    for rows in (2, 5):
        x = np.random.default_rng(rows).standard_normal((rows, 3)).astype(np_dtype)
        x[0] = [tiny * 3, big / 3, np_dtype(1) / 3]
        session = saturate_with_rules(m, ["div-pow2-to-mul"])
        as_mul = session.extract(cost=lambda graph, n: 10.0 if n.op == "Div" else 1.0).model
        assert op_counts(as_mul) == {"Mul": 1}
        with np.errstate(over="ignore", under="ignore"):
            np.testing.assert_array_equal(run(as_mul, {"x": x})[0], run(m, {"x": x})[0])


@pytest.mark.parametrize("v", [3.0, 0.1, 1.4142135, 6.0])
def test_div_pow2_to_mul_not_for_other_divisors(v: float) -> None:
    """x / 3 and x * (1 / 3) differ by an ulp: the fp-reassoc rule takes these, the exact one must not."""
    m = model([node("Div", ["x", "c"], "y")], X, initializers={"c": np.array(v, np.float32)})
    assert_rule_does_not_fire(m, "div-pow2-to-mul")
    _, fired = optimize_with_rules(m, ["div-pow2-to-mul", "div-const-to-mul"])
    assert fired.get("div-const-to-mul", 0) > 0
    assert_rule_does_not_fire(
        model([node("Div", ["x", "c"], "y")], X, initializers={"c": np.array([2.0, 4.0], np.float32)[:1].repeat(4)}),
        "div-pow2-to-mul",
    )  # a tensor of powers of two: its elements are not visible to rules


@property_settings()
@given(PROPERTIES["div-pow2-to-mul"]())
def test_div_pow2_to_mul_property(case: RuleCase) -> None:
    case.check()


@pytest.mark.parametrize(
    "dtype,c",
    [
        ("FLOAT16", np.array(1e-5, np.float16)),  # 1 / c = 1e5 > 65504: inf in float16
        ("FLOAT16", np.array([1e-5, 1.0], np.float16)),  # a float16 tensor's elements are not visible to rules
        ("FLOAT16", np.array([0.5, 2.0], np.float16)),
        ("FLOAT", np.array(1e-40, np.float32)),  # subnormal: 1 / c = 1e40 overflows float32
    ],
)
def test_div_const_to_mul_not_when_the_reciprocal_may_overflow(dtype: str, c: np.ndarray) -> None:
    """0 / c = 0 but 0 * (1 / c) = 0 * inf = NaN: the rewrite needs a finite reciprocal."""
    m = model([node("Div", ["x", "c"], "y")], [("x", dtype, (2,))], initializers={"c": c})
    assert_rule_does_not_fire(m, "div-const-to-mul")


def test_div_const_to_mul_small_float16_scalar_within_range() -> None:
    m = model(
        [node("Div", ["x", "c"], "y")], [("x", "FLOAT16", (2, 3))], initializers={"c": np.array(2e-5, np.float16)}
    )
    assert_rule_sound(m, "div-const-to-mul", {"x": np.array([[0, 1e-3, -1e-3], [0.5, 1, -1]], np.float16)})


def test_div_const_to_mul_not_for_integers() -> None:
    """Integer division truncates: 7 / 2 = 3, 7 * 0.5 is not even an integer op."""
    m = model([node("Div", ["x", "c"], "y")], [("x", "INT32", (2, 3))], initializers={"c": np.array(2, np.int32)})
    assert_rule_does_not_fire(m, "div-const-to-mul")


def test_div_const_to_mul_not_for_a_runtime_divisor() -> None:
    assert_rule_does_not_fire(model([node("Div", ["x", "c"], "y")], [*X, ("c", "FLOAT", (4,))]), "div-const-to-mul")


@pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning")
@property_settings()
@given(PROPERTIES["div-const-to-mul"]())
def test_div_const_to_mul_property(case: RuleCase) -> None:
    case.check()


# ---- sub-zero, div-one ----


@pytest.mark.parametrize("rule,op,value", [("sub-zero", "Sub", 0.0), ("div-one", "Div", 1.0)])
@pytest.mark.parametrize("dtype", ["FLOAT", "INT64"])
def test_identity_constant_removed(rule: str, op: str, value: float, dtype: str) -> None:
    np_dtype = np.float32 if dtype == "FLOAT" else np.int64
    m = model(
        [node("Relu", ["x"], "r"), node(op, ["r", "k"], "y")],
        [("x", dtype, (2, 3))],
        initializers={"k": np.array([value], np_dtype)},
    )
    result = assert_rule_sound(m, rule)
    assert op_counts(result.model) == {"Relu": 1}


@pytest.mark.parametrize("rule,op,value", [("sub-zero", "Sub", 0.0), ("div-one", "Div", 1.0)])
@pytest.mark.parametrize("shape", [(2, 3), (3,), (2, 1)])
def test_identity_constant_removed_for_a_tensor_of_them(rule: str, op: str, value: float, shape: tuple) -> None:
    """zeros / ones vectors (the `splat` fact), not only single elements."""
    m = model(
        [node("Relu", ["x"], "r"), node(op, ["r", "k"], "y")],
        [("x", "FLOAT", (2, 3))],
        initializers={"k": np.full(shape, value, np.float32)},
    )
    assert op_counts(assert_rule_sound(m, rule).model) == {"Relu": 1}


@pytest.mark.parametrize("rule,op,value", [("sub-zero", "Sub", 0.0), ("div-one", "Div", 1.0)])
def test_identity_constant_not_for_a_mixed_tensor(rule: str, op: str, value: float) -> None:
    m = model([node(op, ["x", "k"], "y")], X, initializers={"k": np.array([value, value, value, 2.0], np.float32)})
    assert_rule_does_not_fire(m, rule)


@pytest.mark.parametrize("rule,op,value", [("sub-zero", "Sub", 0.0), ("div-one", "Div", 1.0)])
def test_identity_constant_not_when_it_broadcasts(rule: str, op: str, value: float) -> None:
    """x (3,) - zeros (2, 1, 1) has shape (2, 1, 3): not x."""
    m = model(
        [node(op, ["x", "k"], "y")], [("x", "FLOAT", (3,))], initializers={"k": np.full((2, 1, 1), value, np.float32)}
    )
    assert_rule_does_not_fire(m, rule)


def test_zero_minus_x_is_not_x() -> None:
    m = model([node("Sub", ["k", "x"], "y")], X, initializers={"k": np.array(0.0, np.float32)})
    assert_rule_does_not_fire(m, "sub-zero")


@property_settings()
@given(PROPERTIES["sub-zero"]())
def test_sub_zero_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["div-one"]())
def test_div_one_property(case: RuleCase) -> None:
    case.check()


# ---- pow-one, or-false, and-true ----


@pytest.mark.parametrize("k", [np.array(1.0, np.float32), np.array([1], np.int64), np.ones((3, 4), np.float32)])
def test_pow_one_removed(k: np.ndarray) -> None:
    m = model([node("Relu", ["x"], "r"), node("Pow", ["r", "k"], "y")], X, initializers={"k": k})
    assert op_counts(assert_rule_sound(m, "pow-one").model) == {"Relu": 1}


@pytest.mark.parametrize(
    "k", [np.array(2.0, np.float32), np.array([1.0, 1.0, 1.0, 0.5], np.float32), np.ones((5, 1, 1, 1), np.float32)]
)
def test_pow_one_not(k: np.ndarray) -> None:
    """Another exponent, a mixed one, or ones that broadcast x to a larger shape."""
    m = model([node("Pow", ["x", "k"], "y")], X, initializers={"k": k})
    assert_rule_does_not_fire(m, "pow-one")


def test_pow_one_not_for_one_to_the_x() -> None:
    m = model([node("Pow", ["k", "x"], "y")], X, initializers={"k": np.array(1.0, np.float32)})
    assert_rule_does_not_fire(m, "pow-one")


B = [("x", "BOOL", (2, 3))]


@pytest.mark.parametrize("rule,op,value", [("or-false", "Or", False), ("and-true", "And", True)])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
@pytest.mark.parametrize("const_first", [False, True])
def test_logical_identity_removed(rule: str, op: str, value: bool, shape: tuple, const_first: bool) -> None:
    inputs = ["k", "n"] if const_first else ["n", "k"]
    m = model([node("Not", ["x"], "n"), node(op, inputs, "y")], B, initializers={"k": np.full(shape, value)})
    assert op_counts(assert_rule_sound(m, rule).model) == {"Not": 1}


@pytest.mark.parametrize("rule,op,value", [("or-false", "Or", False), ("and-true", "And", True)])
def test_logical_identity_not(rule: str, op: str, value: bool) -> None:
    """The absorbing value (x or true is true), a mixed constant, or one that broadcasts x."""
    for k in (np.array(not value), np.array([value, value, not value]), np.full((4, 2, 3), value)):
        m = model([node(op, ["x", "k"], "y")], B, initializers={"k": k})
        assert_rule_does_not_fire(m, rule)


@property_settings()
@given(PROPERTIES["pow-one"]())
def test_pow_one_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["or-false"]())
def test_or_false_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["and-true"]())
def test_and_true_property(case: RuleCase) -> None:
    case.check()


# ---- mul-neg-one, mul-scalar-reassoc, add-scaled-last ----


@pytest.mark.parametrize("k", [np.array(-1.0, np.float32), np.full((3, 4), -1.0, np.float32)])
@pytest.mark.parametrize("const_first", [False, True])
def test_mul_neg_one(k: np.ndarray, const_first: bool) -> None:
    m = model(
        [node("Relu", ["x"], "r"), node("Mul", ["k", "r"] if const_first else ["r", "k"], "y")],
        X,
        initializers={"k": k},
    )
    assert op_counts(assert_rule_sound(m, "mul-neg-one").model) == {"Relu": 1, "Neg": 1}


@pytest.mark.parametrize(
    "k",
    [
        np.array(-2.0, np.float32),
        np.array([-1.0, -1.0, -1.0, 1.0], np.float32),
        np.full((5, 2, 3, 4), -1.0, np.float32),
    ],
)
def test_mul_neg_one_not(k: np.ndarray) -> None:
    """Another factor, a mixed tensor, or -1s that broadcast x to a larger shape."""
    assert_rule_does_not_fire(model([node("Mul", ["x", "k"], "y")], X, initializers={"k": k}), "mul-neg-one")


@property_settings()
@given(PROPERTIES["mul-neg-one"]())
def test_mul_neg_one_property(case: RuleCase) -> None:
    case.check()


@pytest.mark.parametrize("inner_first", [False, True])
def test_mul_scalar_reassoc(inner_first: bool) -> None:
    """a * (b * 0.5) and (a * 0.5) * b both get (a * b) * 0.5."""
    inner = node("Mul", ["b", "k"] if not inner_first else ["a", "k"], "m")
    outer = node("Mul", ["a", "m"] if not inner_first else ["m", "b"], "y")
    m = model(
        [inner, outer], [("a", "FLOAT", (2, 3)), ("b", "FLOAT", (2, 3))], initializers={"k": np.array(0.5, np.float32)}
    )
    session = saturate_with_rules(m, ["mul-scalar-reassoc"])
    assert session.saturation.rules_fired["mul-scalar-reassoc"] > 0
    assert_rule_sound(m, "mul-scalar-reassoc")


@pytest.mark.parametrize(
    "k,b_shape", [(np.array([0.5, 2.0, 1.0], np.float32), (2, 3)), (np.array(0.5, np.float32), (1, 3))]
)
def test_mul_scalar_reassoc_not(k: np.ndarray, b_shape: tuple) -> None:
    """A vector factor (not a single element), or a b that broadcasts (a * b would change shape)."""
    m = model(
        [node("Mul", ["b", "k"], "m"), node("Mul", ["a", "m"], "y")],
        [("a", "FLOAT", (2, 3)), ("b", "FLOAT", b_shape)],
        initializers={"k": k},
    )
    assert_rule_does_not_fire(m, "mul-scalar-reassoc")


def test_mul_scalar_reassoc_in_integers() -> None:
    """Integers wrap and associate exactly: a factor moves out whatever its size."""
    m = model(
        [node("Mul", ["b", "k"], "m"), node("Mul", ["a", "m"], "y")],
        [("a", "INT64", (2, 3)), ("b", "INT64", (2, 3))],
        initializers={"k": np.array(3, np.int64)},
    )
    assert_rule_sound(m, "mul-scalar-reassoc")


@pytest.mark.parametrize("factor, fires", [(0.125, False), (4.0, True)])
def test_mul_scalar_reassoc_in_fp16_only_for_factors_that_cannot_overflow(factor: float, fires: bool) -> None:
    """fp16 a * (b * 0.125) is finite for a = b = 300 where (a * b) * 0.125 overflows: a factor below 1 stays
    inside; one of 4 can move out (a * b is then smaller than the output)."""
    m = model(
        [node("Mul", ["b", "k"], "m"), node("Mul", ["a", "m"], "y")],
        [("a", "FLOAT16", (3,)), ("b", "FLOAT16", (3,))],
        initializers={"k": np.array(factor, np.float16)},
    )
    feeds = {"a": np.array([300, -2, 0.5], np.float16), "b": np.array([300, 3, 0.25], np.float16)}
    if fires:
        assert_rule_sound(m, "mul-scalar-reassoc", feeds)
    else:
        assert_rule_does_not_fire(m, "mul-scalar-reassoc")


@property_settings()
@given(PROPERTIES["mul-scalar-reassoc"]())
def test_mul_scalar_reassoc_property(case: RuleCase) -> None:
    case.check()


def test_add_scaled_last() -> None:
    m = model(
        [node("Mul", ["p", "k"], "pk"), node("Add", ["pk", "x"], "y")],
        [("p", "FLOAT", (2, 3)), ("x", "FLOAT", (2, 3))],
        initializers={"k": np.array(0.25, np.float32)},
    )
    session = saturate_with_rules(m, ["add-scaled-last"])
    assert session.saturation.rules_fired["add-scaled-last"] > 0
    assert_rule_sound(m, "add-scaled-last")


@pytest.mark.parametrize("k_shape,p_shape", [((3,), (2, 3)), ((), (1, 3))])
def test_add_scaled_last_not(k_shape: tuple, p_shape: tuple) -> None:
    """A tensor factor, or a scaled term that broadcasts."""
    m = model(
        [node("Mul", ["p", "k"], "pk"), node("Add", ["pk", "x"], "y")],
        [("p", "FLOAT", p_shape), ("x", "FLOAT", (2, 3))],
        initializers={"k": np.full(k_shape, 0.25, np.float32)},
    )
    assert_rule_does_not_fire(m, "add-scaled-last")


@property_settings()
@given(PROPERTIES["add-scaled-last"]())
def test_add_scaled_last_property(case: RuleCase) -> None:
    case.check()


# ---- neg-neg ----


def test_neg_neg_removed() -> None:
    m = model([node("Neg", ["x"], "n1"), node("Neg", ["n1"], "n2"), node("Relu", ["n2"], "y")], X)
    result = assert_rule_sound(m, "neg-neg")
    assert op_counts(result.model) == {"Relu": 1}


def test_neg_neg_not_for_a_single_neg() -> None:
    m = model([node("Neg", ["x"], "n1"), node("Abs", ["n1"], "a"), node("Neg", ["a"], "y")], X)
    assert_rule_does_not_fire(m, "neg-neg")


@property_settings()
@given(PROPERTIES["neg-neg"]())
def test_neg_neg_property(case: RuleCase) -> None:
    case.check()


# ---- where-not-swap ----


def test_where_not_swap() -> None:
    m = model(
        [node("Greater", ["x", "z"], "c"), node("Not", ["c"], "n"), node("Where", ["n", "x", "b"], "y")],
        X,
        initializers={"z": np.zeros((), np.float32), "b": np.linspace(-1, 1, 4, dtype=np.float32)},
    )
    assert op_counts(assert_rule_sound(m, "where-not-swap").model) == {"Greater": 1, "Where": 1}


def test_where_not_swap_not_without_not() -> None:
    """A condition that is not a Not (IsNaN), or a Not that feeds a branch rather than the condition."""
    m = model(
        [node("IsNaN", ["x"], "c"), node("Where", ["c", "x", "b"], "y")],
        X,
        initializers={"b": np.zeros((), np.float32)},
    )
    assert_rule_does_not_fire(m, "where-not-swap")
    m = model([node("Not", ["c"], "n"), node("Where", ["c", "n", "c"], "y")], [("c", "BOOL", (2, 3))])
    assert_rule_does_not_fire(m, "where-not-swap")


@property_settings()
@given(PROPERTIES["where-not-swap"]())
def test_where_not_swap_property(case: RuleCase) -> None:
    case.check()


# ---- logical-self ----


@pytest.mark.parametrize("op", ["And", "Or"])
def test_logical_self(op: str) -> None:
    m = model(
        [node("Greater", ["x", "z"], "c"), node(op, ["c", "c"], "y")], X, initializers={"z": np.zeros((), np.float32)}
    )
    assert op_counts(assert_rule_sound(m, "logical-self").model) == {"Greater": 1}


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical_self_not_on_two_values(op: str) -> None:
    """And(a, b) with a != b, and Xor(a, a), which is all false, not a."""
    m = model([node(op, ["a", "b"], "y")], [("a", "BOOL", (2, 3)), ("b", "BOOL", (2, 3))])
    assert_rule_does_not_fire(m, "logical-self")
    m = model([node("Xor", ["a", "a"], "y")], [("a", "BOOL", (2, 3))])
    assert_rule_does_not_fire(m, "logical-self")


@property_settings()
@given(PROPERTIES["logical-self"]())
def test_logical_self_property(case: RuleCase) -> None:
    case.check()


def test_logical_self_is_one_row() -> None:
    """And and Or share one row over (Binary op a a), guarded by bool-idempotent (Xor is not)."""
    from eqsat.rewrites.registry import all_rules

    assert {r.name: len(r.egglog) for r in all_rules()}["logical-self"] == 1
