"""Pool rules (rewrites/pool.py): each fires where it should, not where its guard fails, and is sound."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from eqsat.testing import PROPERTIES, RuleCase, assert_rule_does_not_fire, assert_rule_sound, op_counts, run, to_proto
from tests.rule_graphs import model, node, property_settings

X = [("x", "FLOAT", (1, 2, 6, 6))]
#: All negative: a zero pad is the maximum of every window it enters.
NEGATIVE = {"x": -1.0 - np.random.default_rng(0).random((1, 2, 6, 6)).astype(np.float32)}


def pad_pool(pool: str, padding: list, value: float, opset: int = 17, **attrs) -> "object":
    inits = {"pads": np.array(padding, np.int64), "v": np.array(value, np.float32)}
    if opset < 11:
        nodes = [node("Pad", ["x"], "p", pads=padding, mode="constant", value=value)]
        inits = {}
    else:
        nodes = [node("Pad", ["x", "pads", "v"], "p", mode="constant")]
    return model([*nodes, node(pool, ["p"], "y", **attrs)], X, initializers=inits, opset=opset)


def pool_pads(m) -> list:
    (pool,) = to_proto(m).graph.node
    return [list(a.ints) for a in pool.attribute if a.name == "pads"][0]


# ---- pad-avgpool-merge ----


@pytest.mark.parametrize("opset", [10, 11, 18])
@pytest.mark.parametrize("own", [None, [1, 0, 0, 1]])
def test_pad_avgpool_merge(opset: int, own: list | None) -> None:
    attrs = {"kernel_shape": [3, 3], "count_include_pad": 1, **({"pads": own} if own else {})}
    m = pad_pool("AveragePool", [0, 0, 1, 1, 0, 0, 1, 1], 0.0, opset, **attrs)
    result = assert_rule_sound(m, "pad-avgpool-merge")
    assert op_counts(result.model) == {"AveragePool": 1}
    assert pool_pads(result.model) == ([2, 1, 1, 2] if own else [1, 1, 1, 1])


@pytest.mark.parametrize(
    "pads,value,attrs",
    [
        ([0, 0, 1, 1, 0, 0, 1, 1], 0.0, {"count_include_pad": 0}),  # the divisor would drop the pad
        ([0, 0, 1, 1, 0, 0, 1, 1], 1.0, {"count_include_pad": 1}),  # a non-zero pad value
        ([0, 1, 1, 1, 0, 0, 1, 1], 0.0, {"count_include_pad": 1}),  # a channel pad
        ([0, 0, -1, 1, 0, 0, 1, 1], 0.0, {"count_include_pad": 1}),  # a crop
        ([0, 0, 1, 1, 0, 0, 1, 1], 0.0, {"count_include_pad": 1, "ceil_mode": 1}),
        ([0, 0, 1, 1, 0, 0, 1, 1], 0.0, {"count_include_pad": 1, "auto_pad": "SAME_UPPER"}),
        ([0, 0, 3, 1, 0, 0, 1, 1], 0.0, {"count_include_pad": 1}),  # a pad as large as the kernel
    ],
)
def test_pad_avgpool_merge_not(pads: list, value: float, attrs: dict) -> None:
    m = pad_pool("AveragePool", pads, value, kernel_shape=[3, 3], **attrs)
    assert_rule_does_not_fire(m, "pad-avgpool-merge")


@property_settings()
@given(PROPERTIES["pad-avgpool-merge"]())
def test_pad_avgpool_merge_property(case: RuleCase) -> None:
    case.check()


# ---- pad-maxpool-merge ----


@pytest.mark.parametrize("opset", [10, 11, 18])
def test_pad_maxpool_merge_minus_inf(opset: int) -> None:
    m = pad_pool("MaxPool", [0, 0, 1, 0, 0, 0, 1, 2], -np.inf, opset, kernel_shape=[3, 3], strides=[2, 2])
    result = assert_rule_sound(m, "pad-maxpool-merge", NEGATIVE)
    assert op_counts(result.model) == {"MaxPool": 1}
    assert pool_pads(result.model) == [1, 0, 1, 2]


@pytest.mark.parametrize("pool,value,tail", [("MaxPool", -np.inf, {}), ("AveragePool", 0.0, {"count_include_pad": 1})])
def test_pad_pool_merge_four_spatial_axes(pool: str, value: float, tail: dict) -> None:
    """A pool of rank 6 (four spatial axes; main's rows stopped at three): the Pad folds the same way. The runtimes
    have no 4-D pool kernel, so the arithmetic of the rows is checked at ranks 3 to 5 by the property."""
    from eqsat.testing.runs import saturate_with_rules

    padding = [0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 1]
    inits = {"pads": np.array(padding, np.int64), "v": np.array(value, np.float32)}
    nodes = [
        node("Pad", ["x", "pads", "v"], "p", mode="constant"),
        node(pool, ["p"], "y", kernel_shape=[2] * 4, **tail),
    ]
    m = model(nodes, [("x", "FLOAT", (1, 1, 3, 3, 3, 3))], initializers=inits, opset=17)
    rule = "pad-maxpool-merge" if pool == "MaxPool" else "pad-avgpool-merge"
    egraph = saturate_with_rules(m, [rule]).egraph
    # the pool's pads attribute: none on the loaded pool, the Pad's spatial pads on the merged one
    assert sorted(list(n.attrs[4]) for n in egraph.nodes if n.op == pool) == [[], [1, 0, 1, 0, 0, 1, 0, 1]]


def test_pad_maxpool_merge_not_for_a_zero_pad() -> None:
    """onnxoptimizer's fuse_pad_into_pool and onnxruntime's PadFusion fold this one, wrongly: on negative inputs the
    explicit zeros are the maxima of the border windows, the pool's own padding (-inf) never is."""
    m = pad_pool("MaxPool", [0, 0, 1, 1, 0, 0, 1, 1], 0.0, kernel_shape=[3, 3])
    assert_rule_does_not_fire(m, "pad-maxpool-merge")
    assert_rule_does_not_fire(m, "pad-avgpool-merge")
    folded = model([node("MaxPool", ["x"], "y", kernel_shape=[3, 3], pads=[1, 1, 1, 1])], X)
    (original,), (wrong,) = run(m, NEGATIVE), run(folded, NEGATIVE)
    assert original.max() == 0.0 and wrong.max() < 0  # what the peers' fold would change


@property_settings()
@given(PROPERTIES["pad-maxpool-merge"]())
def test_pad_maxpool_merge_property(case: RuleCase) -> None:
    case.check()


@pytest.mark.parametrize(
    "rule,pool,value", [("pad-avgpool-merge", "AveragePool", 0.0), ("pad-maxpool-merge", "MaxPool", -np.inf)]
)
def test_pad_pool_merge_under_symbolic_dims(rule: str, pool: str, value: float) -> None:
    """The rules compute with the pads and the kernel only: symbolic batch and spatial dims do not stop them."""
    attrs = {"count_include_pad": 1} if pool == "AveragePool" else {}
    m = model(
        [node("Pad", ["x", "pads", "v"], "p", mode="constant"), node(pool, ["p"], "y", kernel_shape=[2, 3], **attrs)],
        [("x", "FLOAT", ("N", 2, "H", "W"))],
        initializers={"pads": np.array([0, 0, 1, 2, 0, 0, 0, 1], np.int64), "v": np.array(value, np.float32)},
    )
    feeds = {"x": np.random.default_rng(3).standard_normal((2, 2, 5, 7)).astype(np.float32)}
    assert op_counts(assert_rule_sound(m, rule, feeds).model) == {pool: 1}


# ---- analysis relations this family's rules join: each checked on the graphs of a rule that reads it ----


@property_settings()
@given(PROPERTIES["pad-pool-sites"]())
def test_pad_pool_sites_property(case: RuleCase) -> None:
    case.check()
