"""Reduce rules (rewrites/reduce.py): each fires where it should, not where its guard fails, and is sound."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from eqsat.testing import (PROPERTIES, RuleCase, assert_rule_does_not_fire, assert_rule_sound, op_counts,
                           saturate_with_rules)
from tests.rule_graphs import model, node, property_settings

X = [("x", "FLOAT", (2, 3, 4, 5))]


def root_ops(m, rule: str) -> set[str]:
    session = saturate_with_rules(m, [rule])
    egraph = session.egraph
    return {egraph.node(n).op for n in egraph.eclass(session.roots[0]).nodes}



# ---- reducesum-mul-to-mean ----

@pytest.mark.parametrize("axes,count,keepdims", [([2, 3], 20, 1), ([1], 3, 0), ([0, 1, 2, 3], 120, 0), ([-1], 5, 1)])
def test_reducesum_mul_to_mean(axes: list, count: int, keepdims: int) -> None:
    m = model([node("ReduceSum", ["x", "axes"], "rs", keepdims=keepdims), node("Mul", ["rs", "k"], "y")], X,
              initializers={"axes": np.array(axes, np.int64), "k": np.array(1.0 / count, np.float32)})
    result = assert_rule_sound(m, "reducesum-mul-to-mean")
    assert op_counts(result.model) == {"ReduceMean": 1}


def test_reducesum_mul_to_mean_all_axes_constant_first() -> None:
    m = model([node("ReduceSum", ["x"], "rs", keepdims=0), node("Mul", ["k", "rs"], "y")], X,
              initializers={"k": np.array(1.0 / 120, np.float32)})
    result = assert_rule_sound(m, "reducesum-mul-to-mean", also=("const-operand-last",))
    assert op_counts(result.model) == {"ReduceMean": 1}


@pytest.mark.parametrize("k", [1.0 / 21, 1.0 / 19, 0.05 * (1 + 1e-5)])
def test_reducesum_mul_to_mean_not_when_count_differs(k: float) -> None:
    m = model([node("ReduceSum", ["x", "axes"], "rs"), node("Mul", ["rs", "k"], "y")], X,
              initializers={"axes": np.array([2, 3], np.int64), "k": np.array(k, np.float32)})
    assert_rule_does_not_fire(m, "reducesum-mul-to-mean")


@property_settings()
@given(PROPERTIES["reducesum-mul-to-mean"]())
def test_reducesum_mul_to_mean_property(case: RuleCase) -> None:
    case.check()


# ---- reducesum-div-to-mean ----

def test_reducesum_div_to_mean() -> None:
    m = model([node("ReduceSum", ["x", "axes"], "rs"), node("Div", ["rs", "n"], "y")], X,
              initializers={"axes": np.array([1, 3], np.int64), "n": np.array(15.0, np.float32)})
    assert op_counts(assert_rule_sound(m, "reducesum-div-to-mean").model) == {"ReduceMean": 1}


def test_reducesum_div_to_mean_opset_11_attribute() -> None:
    m = model([node("ReduceSum", ["x"], "rs", axes=[2]), node("Div", ["rs", "n"], "y")], X,
              initializers={"n": np.array(4.0, np.float32)}, opset=11)
    assert op_counts(assert_rule_sound(m, "reducesum-div-to-mean").model) == {"ReduceMean": 1}


@pytest.mark.parametrize("dtype,n", [("FLOAT", 16.0), ("INT64", 20)])
def test_reducesum_div_to_mean_not(dtype: str, n: float) -> None:
    """A wrong count, or an integer sum (integer division truncates; a mean of integers is another op)."""
    np_dtype = np.float32 if dtype == "FLOAT" else np.int64
    m = model([node("ReduceSum", ["x", "axes"], "rs"), node("Div", ["rs", "n"], "y")], [("x", dtype, (2, 3, 4, 5))],
              initializers={"axes": np.array([2, 3], np.int64), "n": np.array(n, np_dtype)})
    assert_rule_does_not_fire(m, "reducesum-div-to-mean")


@property_settings()
@given(PROPERTIES["reducesum-div-to-mean"]())
def test_reducesum_div_to_mean_property(case: RuleCase) -> None:
    case.check()


# ---- reducemean-to-global-pool / global-pool-to-reducemean ----

@pytest.mark.parametrize("opset", [17, 18])
def test_reducemean_to_global_pool(opset: int) -> None:
    if opset >= 18:
        m = model([node("ReduceMean", ["x", "axes"], "y", keepdims=1)], X,
                  initializers={"axes": np.array([2, 3], np.int64)}, opset=opset)
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


@pytest.mark.parametrize("axes,keepdims,shape", [([2, 3, 4, 5], 0, (1, 2, 2, 2, 2, 2)), ([1, 2], 1, (2, 3, 4, 5)),
                                                 ([1, 2], 0, (2, 3, 4, 5)), ([3], 1, (2, 3, 4, 5)), ([1], 1, (2, 3))])
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
