"""The rule-testing helpers themselves (eqsat.testing): they catch what they claim to catch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

import eqsat.rewrites.layout
import eqsat.rewrites.elementwise
import eqsat.rewrites.normalization
from eqsat.ui import cli
from eqsat.engine.rule import Rule, rw
from eqsat import testing
from eqsat.testing import soundness
from eqsat.testing.cases import DrawnGraph, rule_case
from eqsat.testing import (
    assert_rule_does_not_fire,
    assert_rule_sound,
    check_rules,
    make_model,
    op_counts,
    optimize_with_rules,
    run,
)
from tests.rule_graphs import model, node, transpose

#: A deliberately unsound merge: composes the perms in the wrong order (q o p instead of p o q).
BAD_MERGE = Rule(
    "bad-merge",
    "layout",
    "exact",
    "test",
    "Transpose(Transpose(x, p), q) -> Transpose(x, q o p)",
    (rw("(Transpose (Transpose x p) q)", '(Transpose x (unstable-vec-map (unstable-fn "vec-get" q) p))'),),
    ruleset="simplify",
)


@pytest.fixture
def bad_merge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eqsat.rewrites.layout, "RULES", [*eqsat.rewrites.layout.RULES, BAD_MERGE])


def _two_transposes(shape=(2, 2, 2)):
    return model([transpose("x", "t", (1, 0, 2)), transpose("t", "y", (0, 2, 1))], [("x", "FLOAT", shape)])


def test_module_docstring_runs() -> None:
    import doctest

    failed, tried = doctest.testmod(testing, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried > 5 and failed == 0


def test_make_model_infers_output_types() -> None:
    m = make_model([node("Transpose", ["x"], "y", perm=[1, 0])], [("x", "INT64", (2, 3))], ["y"])
    (out,) = m.graph.output
    assert out.type.tensor_type.elem_type == 7 and [d.dim_value for d in out.type.tensor_type.shape.dim] == [3, 2]
    (y,) = run(m, {"x": np.arange(6).reshape(2, 3)})
    np.testing.assert_array_equal(y, np.arange(6).reshape(2, 3).T)


def test_optimize_with_rules_runs_only_the_named_rules() -> None:
    m = model(
        [node("Relu", ["x"], "r"), node("Relu", ["r"], "i"), transpose("i", "t", (1, 0)), transpose("t", "y", (1, 0))],
        [("x", "FLOAT", (2, 3))],
    )
    result, fired = optimize_with_rules(m, ["relu-merge"])
    assert "relu-merge" in fired and "transpose-merge" not in fired
    assert op_counts(result.model) == {"Relu": 1, "Transpose": 2}
    with pytest.raises(KeyError, match="no-such-rule"):
        optimize_with_rules(m, ["no-such-rule"])


def test_unsound_rule_is_caught_in_the_egraph(bad_merge: None) -> None:
    """On a cube the wrong perm keeps every shape fact consistent: only evaluation can tell."""
    with pytest.raises(AssertionError, match=r"(?s)rule bad-merge: e-graph unsound.*max \|diff\|"):
        assert_rule_sound(_two_transposes(), "bad-merge")


def test_unsound_rule_is_caught_by_conflicting_facts(bad_merge: None) -> None:
    with pytest.raises(AssertionError, match="rule bad-merge: egglog failed.*Illegal merge"):
        assert_rule_sound(_two_transposes((2, 3, 4)), "bad-merge")


def test_unsound_rule_is_caught_end_to_end(bad_merge: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(soundness, "assert_egraph_sound", lambda *args, **kwargs: 0)
    m = model([transpose("x", "t", (1, 0, 2)), transpose("t", "y", (0, 2, 1))], [("x", "FLOAT", (2, 2, 2))])
    with pytest.raises(AssertionError, match="rule bad-merge: output 'y' of the optimized model differs"):
        assert_rule_sound(m, "bad-merge")


def test_ill_typed_rewrite_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = Rule(
        "bad-transpose",
        "layout",
        "exact",
        "test",
        "Relu(x) -> Relu(Transpose(x, [0]))",
        (rw("(Relu x)", "(Relu (Transpose x (vec-of 0)))"),),
        ruleset="simplify",
    )
    monkeypatch.setattr(eqsat.rewrites.layout, "RULES", [*eqsat.rewrites.layout.RULES, bad])
    m = model([node("Relu", ["x"], "y")], [("x", "FLOAT", (2, 3))])
    with pytest.raises(
        AssertionError, match=r"(?s)rule bad-transpose: e-graph unsound.*Transpose\(x, \(0,\)\): cannot be evaluated"
    ):
        assert_rule_sound(m, "bad-transpose")


def test_rule_that_does_not_fire_fails_soundness_check() -> None:
    with pytest.raises(AssertionError, match="rule relu-merge did not fire"):
        assert_rule_sound(model([node("Relu", ["x"], "y")], [("x", "FLOAT", (2,))]), "relu-merge")


def test_rule_that_fires_fails_negative_check() -> None:
    m = model([node("Relu", ["x"], "r"), node("Relu", ["r"], "y")], [("x", "FLOAT", (2,))])
    with pytest.raises(AssertionError, match="rule relu-merge fired"):
        assert_rule_does_not_fire(m, "relu-merge")


def test_tolerance_is_relative_to_output_scale() -> None:
    ok, _ = soundness._difference(np.array([1000.0], np.float32), np.array([1000.05], np.float32), None, "exact")
    assert ok
    ok, how = soundness._difference(np.array([1.0], np.float32), np.array([1.01], np.float32), None, "exact")
    assert not ok and "max |diff|" in how
    ok, _ = soundness._difference(
        np.array([1.0], np.float32), np.array([1.005], np.float32), None, "precision-changing"
    )
    assert ok
    ok, _ = soundness._difference(np.array([np.nan, 1.0]), np.array([1.0, 1.0]), None, "exact")
    assert not ok


@given(testing.shapes(2, 4, 3).flatmap(lambda s: testing.perms(len(s)).map(lambda p: (s, p))))
def test_inverse_perm(shape_perm) -> None:
    shape, perm = shape_perm
    x = np.arange(int(np.prod(shape))).reshape(shape)
    np.testing.assert_array_equal(np.transpose(np.transpose(x, perm), testing.inverse(perm)), x)


@given(testing.shapes(0, 4, 3).flatmap(lambda s: testing.broadcastable_shapes(s).map(lambda b: (s, b))))
def test_broadcastable_shapes_never_enlarge(shape_b) -> None:
    shape, b = shape_b
    assert np.broadcast_shapes(shape, b) == tuple(shape)


@given(testing.float_arrays((3, 4)))
def test_float_arrays_are_finite_and_moderate(a: np.ndarray) -> None:
    assert a.dtype == np.float32 and np.all(np.isfinite(a)) and np.max(np.abs(a)) <= 8


def test_check_rules_passes_on_sound_rules() -> None:
    assert check_rules(3, ["relu-merge", "transpose-merge"]) == []


def test_check_rules_reports_unsound_rule(bad_merge: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        testing.PROPERTIES,
        "bad-merge",
        lambda: testing.PROPERTIES["transpose-merge"]().map(
            lambda case: testing.RuleCase("bad-merge", case.model, case.feeds)
        ),
    )
    (failure,) = check_rules(20, ["bad-merge"], shrink=False)
    assert failure.startswith("bad-merge: AssertionError")


def test_check_rules_reports_rule_without_property(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(testing.PROPERTIES, "relu-merge")
    assert check_rules(1, ["relu-merge"]) == ["relu-merge: no property in eqsat.testing.PROPERTIES"]


BAD_NEG = Rule(
    "bad-neg", "elementwise", "exact", "test", "Neg(x) -> x (wrong)", (rw("(Neg x)", "x"),), ruleset="simplify"
)


@rule_case
def _neg_case(draw, st) -> testing.RuleCase:
    g = DrawnGraph()
    x = g.input("x", draw(testing.float_arrays(draw(testing.shapes(1, 3, 3)))))
    g.node("Neg", [x], "y")
    return g.case("bad-neg", ["y"])


def test_cli_check_rules_shows_the_values_a_wrong_rule_changes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A planted wrong rule (Neg(x) -> x): the failure prints the shrunk graph, its inputs' dtypes, shapes and
    values, and where the values differ."""
    monkeypatch.setattr(eqsat.rewrites.elementwise, "RULES", [*eqsat.rewrites.elementwise.RULES, BAD_NEG])
    monkeypatch.setitem(testing.PROPERTIES, "bad-neg", _neg_case)
    assert cli.main(["check-rules", "--quick", "--rule", "bad-neg"]) == 1
    out = capsys.readouterr().out
    shown = out.split("shrunk input:")[1]
    assert "Neg" in shown and "x: float32[" in shown
    assert "worst at [" in out and "expected" in out and "got" in out
    assert "checking bad-neg ..." in out and "FAILED bad-neg: AssertionError" in out
    assert "1 rules checked with 10 examples each: 1 failed" in out


def test_cli_check_rules_by_family(capsys: pytest.CaptureFixture[str]) -> None:
    from eqsat.rewrites.registry import all_rules

    assert cli.main(["check-rules", "--quick", "--family", "pool", "--examples", "2"]) == 0
    out = capsys.readouterr().out
    pool = [r.name for r in all_rules() if r.family == "pool"]
    assert all(f"checked {name} in" in out for name in pool)
    assert f"{len(pool)} rules checked with 2 examples each: all sound" in out
    assert cli.main(["check-rules", "--family", "no-such-family"]) == 2


def test_check_rules_reports_progress_within_a_rule() -> None:
    seen: list[tuple[str, int, int]] = []
    assert check_rules(3, ["relu-merge"], progress=lambda *a: seen.append(a)) == []
    assert seen == [("relu-merge", 0, 3), ("relu-merge", 1, 3), ("relu-merge", 2, 3), ("relu-merge", 3, 3)]


def test_cli_check_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check-rules", "--examples", "2", "--rule", "add-zero"]) == 0
    assert "all sound" in capsys.readouterr().out
    assert cli.main(["check-rules", "--rule", "no-such-rule"]) == 2


def _layernorm_of(x: np.ndarray, expand_to: tuple[int, ...]) -> tuple:
    """Expand(x) -> LayerNormalization over the last axis (gamma of 1s, no beta): fuzz seed 30037's graph."""
    m = model(
        [node("Expand", ["x", "to"], "e"), node("LayerNormalization", ["e", "g"], "y", axis=-1, epsilon=1e-5)],
        [("x", "FLOAT", x.shape)],
        initializers={"to": np.array(expand_to, np.int64), "g": np.ones(expand_to[-1], np.float32)},
    )
    return m, {"x": x}


def test_layernorm_of_constant_rows_is_within_its_forward_error_bound() -> None:
    """Fuzz seed 30037: rows made constant by Expand have variance 0, so the decomposition's x - mean (an
    ulp of x) is amplified by 1 / sqrt(eps) and differs from onnxruntime's kernel by 7.5e-5 on a class
    whose value is 0. Both are correct to within LayerNorm's forward error bound, which the check allows."""
    x = np.array([0.094573, 3.6037095, -2.846723, 3.5891955], np.float32).reshape(2, 2, 1)
    m, feeds = _layernorm_of(x, (2, 2, 3))
    assert_rule_sound(m, "layernorm-decompose", feeds)


def test_normalization_error_bound_is_tight_on_rows_that_vary() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    x[0] = 2.5  # a constant row
    m, _ = _layernorm_of(x, x.shape)
    graph = testing.saturate_with_rules(m, []).egraph
    (ln,) = [n for n in graph.nodes if n.op == "LayerNormalization"]
    bound = soundness._normalization_error_bound(
        graph, ln.eclass, {ln.children[0]: x, ln.children[1]: np.ones(16, np.float32)}
    )
    assert bound.shape == (4, 16)
    assert np.all(bound[1:] < 1e-5)  # about 2 (n + 2) u max|x| / std
    assert np.all(bound[0] > 1e-4)  # 2 (n + 2) u 2.5 / sqrt(1e-5)


BAD_LN_EPS = Rule(
    "bad-ln-eps",
    "normalization",
    "fp-reassoc",
    "test",
    "LayerNorm with its epsilon times 1000",
    (rw("(LayerNormalization x s b a eps st)", "(LayerNormalization x s b a (* eps 1000.0) st)"),),
    ruleset="simplify",
)


def test_wrong_layernorm_rewrite_is_caught_despite_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound only widens what ill-conditioned rows may differ by: a wrong epsilon on rows of variance
    0.01 still fails."""
    monkeypatch.setattr(eqsat.rewrites.normalization, "RULES", [*eqsat.rewrites.normalization.RULES, BAD_LN_EPS])
    x = (0.1 * np.random.default_rng(1).standard_normal((3, 8))).astype(np.float32)
    m, feeds = _layernorm_of(x, x.shape)
    with pytest.raises(AssertionError, match="forward error bound: False"):
        assert_rule_sound(m, "bad-ln-eps", feeds)


def test_precision_changing_differences_are_measured_against_the_rounded_values() -> None:
    """`a - Cast16(a)` is nothing but float16's rounding of `a`: dropping the round trip (precision-changing,
    allowed here) leaves an output off by 2**-11 |a|, all of its own scale. The harness measures it against
    the inputs' magnitude, which the dropped rounding step is relative to (a false alarm in CI before);
    exact and fp-reassoc rules keep the output's scale."""
    import onnx.helper as oh
    from onnx import TensorProto

    from eqsat.testing.soundness import assert_optimization_sound, precision_floor

    graph = oh.make_graph(
        [
            oh.make_node("Cast", ["a"], ["h"], to=TensorProto.FLOAT16),
            oh.make_node("Cast", ["h"], ["f"], to=TensorProto.FLOAT),
            oh.make_node("Sub", ["a", "f"], ["y"]),
        ],
        "g",
        [oh.make_tensor_value_info("a", TensorProto.FLOAT, [1, 1])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])],
    )
    m = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    feeds = {"a": np.array([[0.0396]], np.float32)}
    result = assert_optimization_sound(m, feeds, allow=("precision-changing",))
    assert [n.op_type for n in result.proto.graph.node] == ["Sub"]
    assert precision_floor("precision-changing", feeds) == pytest.approx(0.0396)
    assert precision_floor("fp-reassoc", feeds) == precision_floor("exact", feeds) == 1e-3
