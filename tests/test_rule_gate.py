"""Rules installed when they can first match (eqsat.engine.rule_gate): a rule waits until what its query names
exists, runs in the very step it could first match, and the output is the same as with every rule installed from the
start."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from hypothesis import HealthCheck, given, settings

import eqsat
from eqsat import session
from eqsat.engine import prepared, rule_gate
from eqsat.engine.backend import EgglogError
from eqsat.engine.rule import Rule, fact, rw
from eqsat.engine.rule_closure import constructors_in, created
from eqsat.engine.rule_gate import Gate, parts
from eqsat.rewrites.registry import all_rules
from eqsat.testing import GraphCase, onnx_graphs, run
from tests.conftest import build_model

F = onnx.TensorProto.FLOAT


def _everything_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the gate open every rule of the selection at once (the reference the gated runs must equal)."""
    monkeypatch.setattr(rule_gate, "present", lambda name, available: True)
    prepared.clear()


def _both(model: onnx.ModelProto, monkeypatch: pytest.MonkeyPatch, **options: object) -> tuple:
    """The model optimized on a fresh backend, gated, and with every rule installed from the start; both runs take
    as many iterations, stop for the same reason and end with as many e-nodes and e-classes."""
    prepared.clear()
    gated = eqsat.optimize(model, verify=False, **options)
    with monkeypatch.context() as patch:
        _everything_installed(patch)
        everything = eqsat.optimize(model, verify=False, **options)
    prepared.clear()
    ours, theirs = gated.report.saturation, everything.report.saturation
    assert (ours.iterations, ours.stop_reason) == (theirs.iterations, theirs.stop_reason)
    assert (ours.enodes, ours.eclasses) == (theirs.enodes, theirs.eclasses), "each step matched the same rows"
    return gated, everything


def _conv_scale(scale: float) -> onnx.ModelProto:
    """Conv then Mul by a constant, per channel (`scale`) or not: conv-scale-fold reads per-channel, which
    per-channel-facts sets only when the constant is one."""
    w = np.ones((2, 3, 1, 1), np.float32)
    s = np.full((1, 2, 1, 1) if scale else (1, 1, 4, 4), 2.0, np.float32)  # per channel, or varying along H and W
    nodes = [oh.make_node("Conv", ["x", "w"], ["c"]), oh.make_node("Mul", ["c", "s"], ["y"])]
    return build_model(nodes, [("x", F, [1, 3, 4, 4])], [("y", F, [1, 2, 4, 4])], {"w": w, "s": s})


def test_a_rule_is_parsed_into_its_query_and_actions() -> None:
    command = '(rule ((= y (Relu x)) (= s (shape x))) ((set (shape y) s)) :ruleset analysis :name "r#0")'
    assert parts(command) == ("(= y (Relu x)) (= s (shape x))", "(set (shape y) s)")
    (gated,) = rule_gate.gated((command,))
    assert (gated.name, gated.ruleset, gated.reads) == ("r#0", "analysis", frozenset({"Relu"}))


def test_every_catalogue_rule_reads_the_same_from_its_body_or_its_command() -> None:
    """The gate reads a command's query and actions from the body it was rendered from (as the closure read them);
    parsing the rendered command gives the same requirements and the same creations, rule for rule."""
    commands = tuple(command for rule in all_rules() for command in rule.commands())
    for gated_rule in rule_gate.gated(commands):
        facts, actions = parts(gated_rule.command)
        assert constructors_in(facts) == gated_rule.reads, gated_rule.name
        assert created(facts, actions) == gated_rule.makes, gated_rule.name


def test_a_rule_waits_for_what_its_query_names() -> None:
    site = fact("(= y (Relu x))", "(view-of y x)")  # sets a rule-only fact
    reader = rw("(Neg y)", "y", "(view-of y x)")
    commands = (
        *Rule("site", "cleanup", "exact", "t", "t", (site,), "analysis").commands(),
        *Rule("reader", "cleanup", "exact", "t", "t", (reader,)).commands(),
    )
    gate = Gate(commands)
    assert gate.ready() == []
    assert [r.name for r in gate.ready({"Relu"})] == ["site#0"]
    assert gate.after(["other#0"]) == []
    assert gate.after(["site#0"]) == [], "view-of now exists, but no Neg"
    assert [r.name for r in gate.ready({"Neg"})] == ["reader#0"]


def test_the_rule_fired_opens_its_readers_and_a_pop_forgets_them() -> None:
    site = fact("(= y (Relu x))", "(view-of y x)")
    reader = rw("(Relu y)", "y", "(view-of y x)")
    commands = (
        *Rule("site", "cleanup", "exact", "t", "t", (site,), "analysis").commands(),
        *Rule("reader", "cleanup", "exact", "t", "t", (reader,)).commands(),
    )
    gate = Gate(commands)
    gate.push()
    assert [r.name for r in gate.ready({"Relu"})] == ["site#0"]
    assert [r.name for r in gate.after(["site#0"])] == ["reader#0"]
    gate.pop()
    assert not gate.installed and gate.available == set()
    assert [r.name for r in gate.promote()] == ["site#0", "reader#0"], "what the run installed comes back below"
    assert list(gate.installed) == ["site#0", "reader#0"] and gate.promote() == []


def test_a_fold_whose_guard_fails_is_never_installed_and_one_whose_guard_holds_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    per_channel, broadcast = _conv_scale(True), _conv_scale(False)
    prepared.clear()
    folded = eqsat.optimize(per_channel, verify=False).report.saturation
    assert "conv-scale-fold#0" in folded.installed_rules and folded.rules_fired.get("conv-scale-fold")
    prepared.clear()  # a kept backend holds what earlier runs installed
    kept = eqsat.optimize(broadcast, verify=False).report.saturation
    assert "per-channel-facts#0" in kept.installed_rules, "the site rule ran"
    assert "conv-scale-fold#0" not in kept.installed_rules, "its reader never could match"
    for model in (per_channel, broadcast):
        gated, everything = _both(model, monkeypatch)
        assert gated.proto.SerializeToString() == everything.proto.SerializeToString()
        assert gated.report.saturation.rules_fired.keys() == everything.report.saturation.rules_fired.keys()
        assert gated.report.saturation.rules_installed < everything.report.saturation.rules_installed


def test_rules_opened_by_an_analysis_step_run_in_that_iteration(monkeypatch: pytest.MonkeyPatch) -> None:
    """Concat's shape needs cdim, whose rules wait on cdim-demand (set in analysis): the analysis saturation runs
    again with them, so every step sees what it saw with all rules installed, and the run takes as many iterations.
    (Match counts may differ: egglog matches a row again when its classes are rebuilt, and a rule installed later
    meets fewer rebuilds.)"""
    nodes = [
        oh.make_node("Transpose", ["a"], ["ta"], perm=[1, 0]),
        oh.make_node("Transpose", ["b"], ["tb"], perm=[1, 0]),
        oh.make_node("Concat", ["ta", "tb"], ["c"], axis=0),
        oh.make_node("Relu", ["c"], ["y"]),
    ]
    model = build_model(nodes, [("a", F, [3, 2]), ("b", F, [3, 4])], [("y", F, [6, 3])])
    gated, everything = _both(model, monkeypatch)
    assert gated.report.saturation.iterations == everything.report.saturation.iterations
    assert gated.report.saturation.rules_fired.keys() == everything.report.saturation.rules_fired.keys()
    assert gated.proto.SerializeToString() == everything.proto.SerializeToString()


def test_a_kept_backend_installs_nothing_the_second_time_and_gives_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = _conv_scale(True)
    prepared.clear()
    first = eqsat.optimize(model, verify=False)
    second = eqsat.optimize(model, verify=False)
    assert first.report.saturation.install_seconds > 0 and second.report.saturation.install_seconds == 0
    assert first.report.saturation.installed_rules == second.report.saturation.installed_rules
    assert second.report.saturation.rules_fired.keys() == first.report.saturation.rules_fired.keys()
    assert second.proto.SerializeToString() == first.proto.SerializeToString()
    prepared.clear()


def test_a_model_after_another_on_a_kept_backend_gives_its_own_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two models of one selection share a kept backend: the second starts with what the first installed (in
    another order than a fresh backend's), and gives the bytes it gives on a fresh backend and with every rule
    installed."""
    nodes = [
        oh.make_node("Conv", ["x", "w"], ["c"]),
        oh.make_node("Relu", ["c"], ["r"]),
        oh.make_node("Mul", ["r", "s"], ["y"]),
    ]
    w = np.ones((2, 3, 1, 1), np.float32)
    relu_scale = build_model(
        nodes, [("x", F, [1, 3, 4, 4])], [("y", F, [1, 2, 4, 4])], {"w": w, "s": np.full((1, 2, 1, 1), 2, np.float32)}
    )
    per_channel = _conv_scale(True)
    fresh = {}
    for model in (per_channel, relu_scale):
        prepared.clear()
        fresh[id(model)] = eqsat.optimize(model, verify=False).proto.SerializeToString()
    for first, second in ((per_channel, relu_scale), (relu_scale, per_channel)):
        prepared.clear()
        eqsat.optimize(first, verify=False)
        kept = eqsat.optimize(second, verify=False)
        assert kept.proto.SerializeToString() == fresh[id(second)]
        _, everything = _both(second, monkeypatch)
        assert everything.proto.SerializeToString() == fresh[id(second)]
    prepared.clear()


def test_an_op_read_from_a_fact_table_opens_the_rules_on_it() -> None:
    """matmul-bias-chain folds (x @ W - c1) - c2 into x @ W - (c1 + c2): its action builds `(Binary op c1 c2)` with
    op read from additive-chain's op column, an Add on a model that holds none: rules that read Add wait for it."""
    chain = Rule(
        "chain",
        "cleanup",
        "exact",
        "t",
        "t",
        (fact("(= y (Sub x c)) (additive-chain op1 op2 op)", "(union y (Binary op x c))"),),
    )
    reader = Rule("reader", "cleanup", "exact", "t", "t", (rw("(Add a b)", "a", "(= a b)"),))
    gate = Gate((*chain.commands(), *reader.commands()))
    assert [r.name for r in gate.ready({"Sub"})] == ["chain#0"]
    assert [r.name for r in gate.after(["chain#0"])] == ["reader#0"]


def test_a_single_run_installs_as_it_goes(monkeypatch: pytest.MonkeyPatch) -> None:
    prepared.clear()
    with prepared.single_run():
        gated = eqsat.optimize(_conv_scale(True), verify=False)
    _everything_installed(monkeypatch)
    everything = eqsat.optimize(_conv_scale(True), verify=False)
    assert gated.proto.SerializeToString() == everything.proto.SerializeToString()
    prepared.clear()


@pytest.mark.slow
@settings(max_examples=100, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(onnx_graphs(max_nodes=8))
def test_random_graphs_give_the_same_output_gated_or_not(case: GraphCase) -> None:
    """The same graph, cost and values gated or with every rule installed from the start, and nearly always the same
    bytes: rule order can only change which of equally cheap e-nodes a constant class is evaluated from (at most one
    graph in each of three draws of 1,000: internal initializer names differ, or a folded constant by one rounding,
    as two orders of an fp-reassoc fold may)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        gated, everything = _both(case.model, monkeypatch)
    assert gated.report.saturation.rules_fired.keys() == everything.report.saturation.rules_fired.keys()
    if gated.proto.SerializeToString() == everything.proto.SerializeToString():
        return
    assert [n.op_type for n in gated.proto.graph.node] == [n.op_type for n in everything.proto.graph.node]
    assert gated.extraction.dag_cost(gated.cost_model) == pytest.approx(
        everything.extraction.dag_cost(everything.cost_model)
    )
    for ours, theirs in zip(run(gated.proto, case.feeds), run(everything.proto, case.feeds)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)  # fp-reassoc: another order of one fold


def test_the_session_reports_what_the_gate_installed() -> None:
    prepared.clear()
    run = session.saturate(_conv_scale(True)).saturation
    assert run.rules_installed == len(run.installed_rules) < run.rules_total
    assert f"{run.rules_installed} of {run.rules_total} egglog rules installed" in run.to_text()
    prepared.clear()


def test_the_session_reports_which_installed_rules_matched() -> None:
    """conv-scale-fold matches the per-channel scale; on the broadcast one per-channel-facts is installed and never
    matches (its value guard fails), so it is installed but not matched."""
    for model, folds in ((_conv_scale(True), True), (_conv_scale(False), False)):
        prepared.clear()
        run = session.saturate(model).saturation
        assert set(run.matched_rules) <= set(run.installed_rules)
        assert list(run.matched_rules) == sorted(run.matched_rules)
        assert {name.split("#")[0] for name in run.matched_rules} == run.rules_fired.keys()
        assert ("conv-scale-fold#0" in run.matched_rules) is folds
        assert ("per-channel-facts#0" in run.matched_rules) is folds
        assert "per-channel-facts#0" in run.installed_rules
    prepared.clear()


def test_a_backend_whose_install_fails_is_broken() -> None:
    backend = prepared.fresh(())
    with pytest.raises(EgglogError):
        backend.install(['(rule ((= y (NoSuchOp x))) ((union y x)) :ruleset explore :name "bad#0")'])
    assert backend.broken


def test_the_command_report_says_how_many_rules_were_installed() -> None:
    from eqsat.view.display import report_text

    prepared.clear()
    report = eqsat.optimize(_conv_scale(True), verify=False).report
    run = report.saturation
    assert f"{run.rules_installed} of {run.rules_total} egglog rules installed" in report_text(report)
    prepared.clear()
