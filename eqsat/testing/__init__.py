"""Helpers for rule authors and tests: build small models, run them, check that a rule fires and is sound.

Every rule is tested three ways (STYLE habit 10): start -> goal, negative, numeric.

    >>> import onnx.helper as oh
    >>> from eqsat.testing import assert_rule_does_not_fire, assert_rule_sound
    >>> from eqsat.testing import make_model, op_counts, optimize_with_rules
    >>> model = make_model([oh.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
    ...                     oh.make_node("Relu", ["t"], ["r"]),
    ...                     oh.make_node("Transpose", ["r"], ["y"], perm=[0, 3, 1, 2])],
    ...                    inputs=[("x", "FLOAT", (1, 3, 4, 5))], outputs=["y"])
    >>> cancel = ["transpose-merge", "transpose-identity"]
    >>> result, fired = optimize_with_rules(model, ["transpose-sink-unary", *cancel])
    >>> dict(op_counts(result.model)), fired["transpose-sink-unary"] > 0
    ({'Relu': 1}, True)
    >>> assert_rule_does_not_fire(model, "relu-merge")
    >>> result = assert_rule_sound(model, "transpose-sink-unary", also=cancel)

`assert_rule_sound` checks soundness twice. In the e-graph, every e-node of every e-class is evaluated
on the feeds (one single-node model per e-node, onnxruntime with the reference evaluator as fallback)
and must agree with the other e-nodes of its class and with the class's shape and dtype facts: this
tests every rewrite that fired, whether or not the extractor chooses its result, and the analysis rules
that derived the facts. End to end, the extracted model must compute what the original computes, within
the tolerance of the least exact rule that fired (`eqsat.check.verify.SOUNDNESS_TOLERANCE`, relative to each
output's scale).

Hypothesis strategies (`shapes`, `perms`, `float_arrays`, `arrays`, `broadcastable_shapes`) and one graph
builder per rule (`PROPERTIES`: rule name -> strategy of `RuleCase`) drive the property tests in
tests/test_rules_*.py and `eqsat check-rules` (`check_rules`). A rule without a builder is reported by
`check_rules` and fails tests/test_rules_registry.py.

The package, one job a module: `models` (build, run, count, feed), `runs` (saturate or optimize with chosen
rules), `soundness` (the e-node evaluator and the assert_* checks), `strategies` (shapes, perms, arrays),
`cases` (RuleCase, DrawnGraph, the `rule_case` decorator), `draw` (drawing helpers several families
share), `check` (PROPERTIES gathered from rewrites/properties/, check_rules),
`random_graphs` (random_graphs, onnx_graphs). This module re-exports the public names.
"""

from __future__ import annotations

from eqsat.testing.cases import RuleCase
from eqsat.testing.models import ValueSpec, dtype_name, make_model, op_counts, random_feeds, run, to_proto
from eqsat.testing.layout_graphs import random_graphs
from eqsat.testing.random_graphs import GRAPH_FAMILIES, GRAPH_MAX_ELEMENTS, GraphCase, onnx_graphs
from eqsat.testing.runs import ALWAYS_ON_FAMILIES, optimize_with_rules, saturate_with_rules
from eqsat.testing.soundness import (
    assert_egraph_sound,
    assert_optimization_sound,
    assert_rule_does_not_fire,
    assert_rule_sound,
    symbolized,
)
from eqsat.testing.strategies import arrays, broadcastable_shapes, float_arrays, inverse, perms, shapes

__all__ = [
    "ALWAYS_ON_FAMILIES",
    "GRAPH_FAMILIES",
    "GRAPH_MAX_ELEMENTS",
    "PROPERTIES",
    "GraphCase",
    "RuleCase",
    "ValueSpec",
    "arrays",
    "assert_egraph_sound",
    "assert_optimization_sound",
    "assert_rule_does_not_fire",
    "assert_rule_sound",
    "broadcastable_shapes",
    "check_rules",
    "dtype_name",
    "float_arrays",
    "inverse",
    "make_model",
    "onnx_graphs",
    "op_counts",
    "optimize_with_rules",
    "perms",
    "random_feeds",
    "random_graphs",
    "run",
    "saturate_with_rules",
    "shapes",
    "symbolized",
    "to_proto",
]


def __getattr__(name: str):  # PROPERTIES gathers rewrites/properties/, whose modules import this package's parts
    if name in ("PROPERTIES", "check_rules"):
        from eqsat.testing import check

        return getattr(check, name)
    raise AttributeError(f"module 'eqsat.testing' has no attribute {name!r}")
