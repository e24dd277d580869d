"""Analysis rules (rewrites/analysis.py): the facts they derive for nodes that rewrites create let other
rules fire; without them those rules stay silent. Every property run also checks each derived shape and
dtype fact against the evaluated value of its class (eqsat.testing.assert_egraph_sound).

Loaded nodes get their facts from ONNX shape inference, so each test is built so that the only match of
the enabled rewrite is on a node created by another rewrite:
- shape-unary:     Add(Relu(Transpose(x)), c): sinking Relu creates Relu(x), whose shape
                   transpose-sink-binary-const needs.
- shape-binary:    Add(Mul(Transpose(a), Transpose(b)), c): sinking Mul creates Mul(a, b), likewise.
- shape-transpose: Add(Transpose(Transpose(x, q), p), c) without transpose-merge: the first sinking step
                   creates Transpose(c, p^-1), a constant whose shape the second step needs.
- constant-terms:  transpose-sink-binary-const needs is-const on its constant operand.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from onnx import TensorProto

from eqsat.testing import (
    PROPERTIES,
    RuleCase,
    assert_egraph_sound,
    assert_rule_sound,
    op_counts,
    optimize_with_rules,
    random_feeds,
    saturate_with_rules,
)
from tests.rule_graphs import NCHW_TO_NHWC, NHWC_TO_NCHW, has_enode, model, node, property_settings, sandwich, transpose

SINK_CONST = "transpose-sink-binary-const"
CANCEL = ("transpose-merge", "transpose-identity")
BIAS = {"c": np.array([0.5, -1.0, 2.0], np.float32)}  # per-channel, NHWC


def _unary_then_const():
    return sandwich([node("Relu", ["t"], "r"), node("Add", ["r", "c"], "m")], initializers=BIAS)


def _binary_then_const():
    return model(
        [
            transpose("a", "ta", NCHW_TO_NHWC),
            transpose("b", "tb", NCHW_TO_NHWC),
            node("Mul", ["ta", "tb"], "p"),
            node("Add", ["p", "c"], "s"),
            transpose("s", "y", NHWC_TO_NCHW),
        ],
        [("a", "FLOAT", (1, 3, 4, 5)), ("b", "FLOAT", (1, 3, 4, 5))],
        initializers=BIAS,
    )


def _double_transpose_then_const():
    return model(
        [transpose("x", "t0", (0, 2, 1, 3)), transpose("t0", "t", (0, 3, 1, 2)), node("Add", ["t", "c"], "y")],
        [("x", "FLOAT", (1, 3, 4, 5))],
        initializers={"c": np.arange(60, dtype=np.float32).reshape(1, 5, 4, 3)},
    )


# ---- shape-unary ----


def test_shape_unary_lets_a_sunk_unary_sink_further() -> None:
    m = _unary_then_const()
    rules = [SINK_CONST, "transpose-sink-unary", *CANCEL]
    result, fired = optimize_with_rules(m, rules)
    assert fired["shape-unary"] > 0 and fired[SINK_CONST] > 0
    assert op_counts(result.model) == {"Relu": 1, "Add": 1}
    assert_rule_sound(m, "shape-unary", also=rules)


def test_without_shape_unary_the_sunk_unary_has_no_shape() -> None:
    session = saturate_with_rules(
        _unary_then_const(), [SINK_CONST, "transpose-sink-unary", *CANCEL], without=["shape-unary"]
    )
    assert "transpose-sink-unary" in session.saturation.rules_fired
    assert SINK_CONST not in session.saturation.rules_fired


@pytest.mark.parametrize("enabled", [True, False])
def test_shape_unary_gives_sunk_cast_its_dtype_and_shape(enabled: bool) -> None:
    """Sinking Cast(Transpose(x), DOUBLE) creates Cast(x, DOUBLE): dtype DOUBLE, x's shape."""
    m = sandwich([node("Cast", ["t"], "m", to=TensorProto.DOUBLE)])
    session = saturate_with_rules(m, ["transpose-sink-unary"], without=[] if enabled else ["shape-unary"])
    g = session.egraph
    (cast,) = [
        n for n in g.nodes if n.op == "Cast" and any(g.node(k).op == "Input" for k in g.eclass(n.children[0]).nodes)
    ]
    facts = (g.eclass(cast.eclass).dtype, g.eclass(cast.eclass).shape)
    assert facts == (("DOUBLE", (1, 3, 4, 5)) if enabled else (None, None))


@property_settings()
@given(PROPERTIES["shape-unary"]())
def test_shape_unary_property(case: RuleCase) -> None:
    case.check()


# ---- shape-binary ----


def test_shape_binary_lets_a_sunk_binary_sink_further() -> None:
    m = _binary_then_const()
    rules = [SINK_CONST, "transpose-sink-binary", *CANCEL]
    result, fired = optimize_with_rules(m, rules)
    assert fired["shape-binary"] > 0 and fired[SINK_CONST] > 0
    assert op_counts(result.model) == {"Mul": 1, "Add": 1}
    assert_rule_sound(m, "shape-binary", also=rules)


def test_without_shape_binary_the_sunk_binary_has_no_shape() -> None:
    session = saturate_with_rules(
        _binary_then_const(), [SINK_CONST, "transpose-sink-binary", *CANCEL], without=["shape-binary"]
    )
    assert "transpose-sink-binary" in session.saturation.rules_fired
    assert SINK_CONST not in session.saturation.rules_fired


@property_settings()
@given(PROPERTIES["shape-binary"]())
def test_shape_binary_property(case: RuleCase) -> None:
    case.check()


# ---- shape-transpose ----


def test_shape_transpose_lets_a_transposed_constant_sink_again() -> None:
    m = _double_transpose_then_const()
    session = saturate_with_rules(m, [SINK_CONST])
    assert session.saturation.rules_fired["shape-transpose"] > 0
    assert has_enode(session.egraph, "Add", "Input")  # Add(x, Transpose(Transpose(c, p^-1), q^-1))
    assert_egraph_sound(session, random_feeds(m))


def test_without_shape_transpose_the_transposed_constant_has_no_shape() -> None:
    session = saturate_with_rules(_double_transpose_then_const(), [SINK_CONST], without=["shape-transpose"])
    assert SINK_CONST in session.saturation.rules_fired  # the first step needs no derived fact
    assert not has_enode(session.egraph, "Add", "Input")


@property_settings()
@given(PROPERTIES["shape-transpose"]())
def test_shape_transpose_property(case: RuleCase) -> None:
    case.check()


# ---- constant-terms ----


@pytest.mark.parametrize("const", [BIAS["c"], np.array(2.0, np.float32)])
def test_constant_terms_lets_constants_sink(const: np.ndarray) -> None:
    m = sandwich([node("Mul", ["t", "c"], "m")], initializers={"c": const})
    result, fired = optimize_with_rules(m, [SINK_CONST, *CANCEL])
    assert fired["constant-terms"] > 0 and fired[SINK_CONST] > 0
    assert op_counts(result.model) == {"Mul": 1}
    assert_rule_sound(m, "constant-terms", also=[SINK_CONST, *CANCEL])


def test_without_constant_terms_nothing_is_known_constant() -> None:
    session = saturate_with_rules(
        sandwich([node("Mul", ["t", "c"], "m")], initializers=BIAS), [SINK_CONST, *CANCEL], without=["constant-terms"]
    )
    assert SINK_CONST not in session.saturation.rules_fired


@property_settings()
@given(PROPERTIES["constant-terms"]())
def test_constant_terms_property(case: RuleCase) -> None:
    case.check()


# ---- splat-facts ----


def _times_scalar_one():
    return model(
        [node("Relu", ["x"], "r"), node("Mul", ["r", "k"], "y")],
        [("x", "FLOAT", (2, 3))],
        initializers={"k": np.array(1.0, np.float32)},
    )


def test_splat_facts_let_a_neutral_element_go() -> None:
    """A Scalar 1 is a splat by this rule (a tensor of ones is one from the loader), so mul-one sees it."""
    result, fired = optimize_with_rules(_times_scalar_one(), ["mul-one"])
    assert fired["splat-facts"] > 0 and fired["mul-one"] > 0
    assert op_counts(result.model) == {"Relu": 1}
    assert_rule_sound(_times_scalar_one(), "splat-facts", also=("mul-one",))


def test_without_splat_facts_a_scalar_one_is_not_seen() -> None:
    session = saturate_with_rules(_times_scalar_one(), ["mul-one"], without=["splat-facts"])
    assert "mul-one" not in session.saturation.rules_fired


@property_settings()
@given(PROPERTIES["splat-facts"]())
def test_splat_facts_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["list-functions"]())
def test_list_functions_property(case: RuleCase) -> None:
    case.check()


# ---- shape-facts-agree: two different static sizes (or ranks) for one e-class are a real conflict ----


def _relu_chain() -> object:
    from eqsat.testing.models import make_model
    import onnx.helper as oh

    return make_model(
        [oh.make_node("Relu", ["x"], ["r"]), oh.make_node("Sigmoid", ["r"], ["s"]), oh.make_node("Neg", ["s"], ["y"])],
        [("x", "FLOAT", ("n", 4))],
        ["y"],
    )


def test_shape_facts_agree_reports_two_sizes_for_one_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """ "shape-facts-agree" refuses r loaded as [n, 5] where Relu keeps x's [n, 4]: reported as a conflict and
    saturated again on static facts, never merged; without the planted fact there is no conflict."""
    from eqsat.session import saturate
    from eqsat.testing.runs import plant_shape_facts

    clean = saturate(_relu_chain())
    assert clean.saturation.error is None and "static shape facts only" not in clean.saturation.note

    def wrong(facts) -> None:  # noqa: ANN001 - eqsat.frontend.symbols.ShapeFacts
        facts.shapes["r"] = (facts.shapes["r"][0], 5)

    plant_shape_facts(monkeypatch, wrong)
    assert "static shape facts only" in saturate(_relu_chain()).saturation.note


@property_settings()
@given(PROPERTIES["shape-facts-agree"]())
def test_shape_facts_agree_property(case: RuleCase) -> None:
    case.check()


# ---- reshape-facts ----


def _reshape_transpose_reshape():
    """x [2, 3, 4, 5] -> Reshape [6, 4, 5] -> Transpose (0, 2, 1) -> Reshape [2, 3, 5, 4]."""
    inits = {"m": np.array([6, 4, 5], np.int64), "s": np.array([2, 3, 5, 4], np.int64)}
    nodes = [node("Reshape", ["x", "m"], "r"), transpose("r", "t", (0, 2, 1)), node("Reshape", ["t", "s"], "y")]
    return model(nodes, [("x", "FLOAT", (2, 3, 4, 5))], initializers=inits, outputs=[("y", "FLOAT", None)])


def test_reshape_facts_let_reshape_transpose_reshape_fire() -> None:
    result, fired = optimize_with_rules(_reshape_transpose_reshape(), ["reshape-transpose-reshape"])
    assert fired["reshape-facts"] > 0 and fired["reshape-transpose-reshape"] > 0
    assert op_counts(result.model) == {"Transpose": 1}
    assert_rule_sound(_reshape_transpose_reshape(), "reshape-facts", also=("reshape-transpose-reshape",))


def test_without_reshape_facts_the_reshapes_stay() -> None:
    session = saturate_with_rules(
        _reshape_transpose_reshape(), ["reshape-transpose-reshape"], without=["reshape-facts"]
    )
    assert "reshape-transpose-reshape" not in session.saturation.rules_fired


@property_settings()
@given(PROPERTIES["reshape-facts"]())
def test_reshape_facts_property(case: RuleCase) -> None:
    case.check()


# ---- operand-orders ----


def _prelu_parts(scaled_first: bool):
    """Relu(x) + Relu(-x) * a, or a * Relu(-x) + Relu(x) (the product and the sum in the other order)."""
    nodes = [
        node("Relu", ["x"], "pos"),
        node("Neg", ["x"], "nx"),
        node("Relu", ["nx"], "neg"),
        node("Mul", ["a", "neg"] if scaled_first else ["neg", "a"], "an"),
        node("Add", ["an", "pos"] if scaled_first else ["pos", "an"], "y"),
    ]
    return model(nodes, [("x", "FLOAT", (2, 3))], initializers={"a": np.array([0.1, 0.2, 0.3], np.float32)})


@pytest.mark.parametrize("scaled_first", [False, True])
def test_operand_orders_let_prelu_from_relu_read_either_order(scaled_first: bool) -> None:
    result, fired = optimize_with_rules(_prelu_parts(scaled_first), ["prelu-from-relu"])
    assert fired["operand-orders"] > 0 and fired["prelu-from-relu"] > 0
    assert op_counts(result.model) == {"PRelu": 1}
    assert_rule_sound(_prelu_parts(scaled_first), "operand-orders", also=("prelu-from-relu",))


def test_without_operand_orders_prelu_from_relu_stays_silent() -> None:
    session = saturate_with_rules(_prelu_parts(True), ["prelu-from-relu"], without=["operand-orders"])
    assert "prelu-from-relu" not in session.saturation.rules_fired


@property_settings()
@given(PROPERTIES["operand-orders"]())
def test_operand_orders_property(case: RuleCase) -> None:
    case.check()


def test_list_function_bases_are_standard_facts() -> None:
    """The four functions of lists with a constant value at empty arguments start from standard facts: two rows each
    (demand, step); three for each of the other six (demand, base, step; zeros-resolved has three steps and
    data-order two), two for merged (demand, one map over its set: no recursion)."""
    from eqsat.engine import terms
    from eqsat.rewrites.analysis import LIST_ROWS

    assert set(terms.LIST_BASES.values()) <= set(terms.standard_facts())
    assert not any("(= (vec-length v) 0)" in row.facts and "need-elements" in row.facts for row in LIST_ROWS)
    assert len(LIST_ROWS) == 31
