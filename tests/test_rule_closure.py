"""Why the rule closure (eqsat.engine.rule_closure) installs a rule on an op the model lacks: each op or rule-only
fact it adds is traced to the egglog rule whose actions made it available."""

from __future__ import annotations

import onnx
import onnx.helper as oh

from eqsat.engine.rule import Rule, rw
from eqsat.engine.rule_closure import present_constructors, usable_rules
from eqsat.rewrites.registry import select
from tests.conftest import build_model

F = onnx.TensorProto.FLOAT


def _rule(name: str, lhs: str, rhs: str) -> Rule:
    return Rule(name, "cleanup", "exact", "test", "test rule", (rw(lhs, rhs),))


def _relu_chain() -> onnx.ModelProto:
    nodes = [oh.make_node("Relu", ["x"], ["r"]), oh.make_node("Relu", ["r"], ["y"])]
    return build_model(nodes, [("x", F, [2, 3])], [("y", F, [2, 3])])


def test_each_created_op_names_the_rule_that_created_it() -> None:
    to_sigmoid = _rule("relu-to-sigmoid", "(Relu x)", "(Sigmoid x)")
    on_sigmoid = _rule("on-sigmoid", "(Sigmoid (Sigmoid x))", "(Sigmoid x)")
    to_tanh = _rule("sigmoid-to-tanh", "(Sigmoid x)", "(Tanh x)")
    usable = usable_rules([on_sigmoid, to_tanh, to_sigmoid], present_constructors(_relu_chain()))
    assert dict(usable.created_by) == {"Sigmoid": "relu-to-sigmoid#0", "Tanh": "sigmoid-to-tanh#0"}


def test_ops_the_model_has_are_never_traced() -> None:
    same = _rule("relu-to-relu", "(Relu (Relu x))", "(Relu x)")
    assert not usable_rules([same], present_constructors(_relu_chain())).created_by


def test_a_global_pool_makes_reduce_mean_available() -> None:
    """The resnet18 cascade: GlobalAveragePool -> ReduceMean, which with the BatchNorm scale's arithmetic admits the
    normalization fusions' rules (bench_install --why)."""
    nodes = [oh.make_node("GlobalAveragePool", ["x"], ["y"])]
    model = build_model(nodes, [("x", F, [1, 4, 5, 5])], [("y", F, [1, 4, 1, 1])])
    usable = usable_rules(select(), present_constructors(model))
    assert usable.created_by["ReduceMean"] == "global-pool-to-reducemean#0"
