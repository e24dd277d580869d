"""Linear rules (rewrites/linear.py): each fires where it should, not where its guard fails, and is sound."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from eqsat.testing import (PROPERTIES, RuleCase, assert_rule_does_not_fire, assert_rule_sound, op_counts,
                           optimize_with_rules, saturate_with_rules)
from tests.rule_graphs import attribute, model, node, property_settings

RNG = np.random.default_rng(1)
A = [("a", "FLOAT", (3, 4))]
CL = ("const-operand-last",)


def rand(*shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return RNG.uniform(low, high, size=shape).astype(np.float32)


# ---- matmul-add-to-gemm ----
# MatMul + constant Add is a fused epilogue on the built-in targets, as cheap as Gemm: which one they keep is
# theirs to decide. The positive tests check the e-graph, and extract with a cost of one per op.


def ops(egraph, node) -> float:
    """Cost model: one per op (constant-only classes and leaves are free)."""
    return 0.0 if egraph.eclass(node.eclass).constant or node.op in ("Input", "Absent") else 1.0


def fewest_ops(m, rules: list[str]):
    session = saturate_with_rules(m, rules)
    return session.extract(cost=ops).model

@pytest.mark.parametrize("c_shape", [(5,), (1, 5), (3, 5), (3, 1), ()])
def test_matmul_add_to_gemm(c_shape: tuple) -> None:
    m = model([node("MatMul", ["a", "b"], "mm"), node("Add", ["mm", "c"], "y")], A,
              initializers={"b": rand(4, 5), "c": rand(*c_shape)})
    assert_rule_sound(m, "matmul-add-to-gemm")
    assert op_counts(fewest_ops(m, ["matmul-add-to-gemm"])) == {"Gemm": 1}


def test_matmul_sub_to_gemm_with_negative_beta() -> None:
    m = model([node("MatMul", ["a", "b"], "mm"), node("Sub", ["mm", "c"], "y")], A,
              initializers={"b": rand(4, 5), "c": rand(5)})
    assert_rule_sound(m, "matmul-add-to-gemm")
    result = fewest_ops(m, ["matmul-add-to-gemm"])
    assert op_counts(result) == {"Gemm": 1}
    assert attribute(result, "Gemm", "beta") == -1.0


def test_matmul_add_to_gemm_constant_first() -> None:
    m = model([node("MatMul", ["a", "b"], "mm"), node("Add", ["c", "mm"], "y")], A,
              initializers={"b": rand(4, 5), "c": rand(5)})
    assert_rule_sound(m, "matmul-add-to-gemm", also=CL)
    assert op_counts(fewest_ops(m, ["matmul-add-to-gemm", *CL])) == {"Gemm": 1}


@pytest.mark.parametrize("case", ["3d", "runtime-b", "const-minus", "enlarging"])
def test_matmul_add_to_gemm_not(case: str) -> None:
    inits = {"b": rand(4, 5), "c": rand(5)}
    inputs = A
    if case == "3d":
        inputs = [("a", "FLOAT", (2, 3, 4))]
    if case == "runtime-b":
        inits.pop("b")
        inputs = A + [("b", "FLOAT", (4, 5))]
    if case == "enlarging":
        inits["c"] = rand(2, 3, 5)
    add = node("Sub", ["c", "mm"], "y") if case == "const-minus" else node("Add", ["mm", "c"], "y")
    m = model([node("MatMul", ["a", "b"], "mm"), add], inputs, initializers=inits)
    assert_rule_does_not_fire(m, "matmul-add-to-gemm", also=CL)


@property_settings()
@given(PROPERTIES["matmul-add-to-gemm"]())
def test_matmul_add_to_gemm_property(case: RuleCase) -> None:
    case.check()


# ---- gemm-bias-fold ----

@pytest.mark.parametrize("with_c,beta,op", [(True, 1.0, "Add"), (True, 2.0, "Add"), (False, 1.0, "Add"),
                                            (True, 0.5, "Sub"), (False, 1.0, "Sub")])
def test_gemm_bias_fold(with_c: bool, beta: float, op: str) -> None:
    inits = {"b": rand(5, 4), "d": rand(5)}
    if with_c:
        inits["cc"] = rand(1, 5)
    m = model([node("Gemm", ["a", "b", *(["cc"] if with_c else [])], "g", transB=1, beta=beta),
               node(op, ["g", "d"], "y")], A, initializers=inits)
    result = assert_rule_sound(m, "gemm-bias-fold")
    assert op_counts(result.model) == {"Gemm": 1}


@pytest.mark.parametrize("case", ["const-minus", "enlarging"])
def test_gemm_bias_fold_not(case: str) -> None:
    inits = {"b": rand(4, 5), "cc": rand(5), "d": rand(2, 3, 5) if case == "enlarging" else rand(5)}
    add = node("Sub", ["d", "g"], "y") if case == "const-minus" else node("Add", ["g", "d"], "y")
    m = model([node("Gemm", ["a", "b", "cc"], "g"), add], A, initializers=inits)
    assert_rule_does_not_fire(m, "gemm-bias-fold", also=CL)


@property_settings()
@given(PROPERTIES["gemm-bias-fold"]())
def test_gemm_bias_fold_property(case: RuleCase) -> None:
    case.check()


# ---- matmul-scale-fold ----

@pytest.mark.parametrize("a_shape,s_shape", [((3, 4), (5,)), ((3, 4), (1, 5)), ((2, 3, 4), (1, 1, 5)), ((3, 4), ())])
def test_matmul_scale_fold(a_shape: tuple, s_shape: tuple) -> None:
    m = model([node("MatMul", ["a", "b"], "mm"), node("Mul", ["mm", "s"], "y")], [("a", "FLOAT", a_shape)],
              initializers={"b": rand(4, 5), "s": rand(*s_shape, low=-2, high=2)})
    result, fired = optimize_with_rules(m, ["matmul-scale-fold"])
    assert fired["matmul-scale-fold"] > 0 and op_counts(result.model) == {"MatMul": 1}
    assert_rule_sound(m, "matmul-scale-fold")


@pytest.mark.parametrize("case", ["per-row", "runtime-b"])
def test_matmul_scale_fold_not(case: str) -> None:
    inits = {"b": rand(4, 5), "s": rand(3, 1)}
    inputs = A
    if case == "runtime-b":
        inits = {"s": rand(5)}
        inputs = A + [("b", "FLOAT", (4, 5))]
    m = model([node("MatMul", ["a", "b"], "mm"), node("Mul", ["mm", "s"], "y")], inputs, initializers=inits)
    assert_rule_does_not_fire(m, "matmul-scale-fold")


@property_settings()
@given(PROPERTIES["matmul-scale-fold"]())
def test_matmul_scale_fold_property(case: RuleCase) -> None:
    case.check()


# ---- gemm-scale-fold ----

@pytest.mark.parametrize("trans_b,with_c", [(0, True), (1, True), (1, False)])
def test_gemm_scale_fold(trans_b: int, with_c: bool) -> None:
    inits = {"b": rand(5, 4) if trans_b else rand(4, 5), "s": rand(5, low=0.5, high=2)}
    if with_c:
        inits["cc"] = rand(5)
    m = model([node("Gemm", ["a", "b", *(["cc"] if with_c else [])], "g", transB=trans_b, alpha=0.5),
               node("Mul", ["g", "s"], "y")], A, initializers=inits)
    assert op_counts(assert_rule_sound(m, "gemm-scale-fold").model) == {"Gemm": 1}


def test_gemm_scale_fold_not_per_row() -> None:
    m = model([node("Gemm", ["a", "b", "cc"], "g"), node("Mul", ["g", "s"], "y")], A,
              initializers={"b": rand(4, 5), "cc": rand(5), "s": rand(3, 1)})
    assert_rule_does_not_fire(m, "gemm-scale-fold")


@property_settings()
@given(PROPERTIES["gemm-scale-fold"]())
def test_gemm_scale_fold_property(case: RuleCase) -> None:
    case.check()
