"""Installing only the rules a model can use (eqsat.engine.rule_closure) and keeping prepared backends for the
process (eqsat.engine.prepared): what is left out can never be needed, and a kept backend gives the same result."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import eqsat
from eqsat.frontend import normalize
from eqsat.engine import prepared, rule_gate
from eqsat import session
from eqsat.errors import InternalError
from eqsat.engine.rule import Egglog, Rule, fact, rw
from eqsat.engine.rule_closure import (
    ALWAYS_PRESENT,
    CONSTRUCTORS,
    constructors_in,
    least_opset,
    model_opset,
    present_constructors,
    usable_rules,
)
from eqsat.engine.rule_terms import ANY, CONST, BodyTerms, Reading
from eqsat.rewrites.registry import select
from eqsat.engine.terms import model_facts, standard_facts
from tests.conftest import build_model
from tests.rule_graphs import gelu_erf

F = onnx.TensorProto.FLOAT


def _rule(name: str, lhs: str, rhs: str) -> Rule:
    return Rule(name, "cleanup", "exact", "test", "test rule", (rw(lhs, rhs),))


def _relu_chain() -> onnx.ModelProto:
    nodes = [oh.make_node("Relu", ["x"], ["r"]), oh.make_node("Relu", ["r"], ["y"])]
    return build_model(nodes, [("x", F, [2, 3])], [("y", F, [2, 3])])


def test_constructors_are_read_from_the_egglog_text() -> None:
    assert constructors_in("(= __root (Relu (Transpose x p))) (= s (shape x))") == {"Relu", "Transpose"}
    assert constructors_in("(set (shape y) (vec-of 1 2))") == frozenset()


def test_generic_constructors_count_by_op() -> None:
    """A literal op of a family counts as that op; an op variable as the family (some op of it must be present)."""
    assert constructors_in('(= __root (Unary "Relu" (Binary op a b)))') == {"Relu", "Binary"}
    assert constructors_in("(= __root (Unary op (Transpose x p)))") == {"Unary", "Transpose"}


def _generic(name: str, lhs: str, rhs: str, *guards: str) -> Rule:
    return Rule(name, "cleanup", "exact", "test", "test rule", (rw(lhs, rhs, *guards),))


def test_a_generic_query_needs_some_op_of_its_family() -> None:
    twice = _generic("twice", "(Unary op (Unary op x))", "(Unary op x)")  # unguarded: any unary op may match
    assert usable_rules([twice], present_constructors(_relu_chain())).commands
    matmul = build_model([oh.make_node("MatMul", ["x", "x"], ["y"])], [("x", F, [2, 2])], [("y", F, [2, 2])])
    assert not usable_rules([twice], present_constructors(matmul)).commands


def test_a_guarded_generic_query_needs_an_op_its_guards_admit() -> None:
    """`(Unary op (Unary op x)) (idempotent op)` can match only an idempotent op: a Relu chain (Relu is not in the
    relation) leaves it out, an Abs chain keeps it; the requirement reads `Unary:idempotent`."""
    merge = _generic("merge", "(Unary op (Unary op x))", "(Unary op x)", "(idempotent op)")
    assert constructors_in(merge.egglog[0].facts) == {"Unary:idempotent"}
    assert not usable_rules([merge], present_constructors(_relu_chain())).commands
    nodes = [oh.make_node("Abs", ["x"], ["a"]), oh.make_node("Abs", ["a"], ["y"])]
    abs_chain = build_model(nodes, [("x", F, [2, 3])], [("y", F, [2, 3])])
    assert usable_rules([merge], present_constructors(abs_chain)).commands


def test_a_generic_action_creates_only_the_op_it_names() -> None:
    """An action `(Unary op ..)` with the matched op creates no op (a Sigmoid rule stays out on a Relu model); one
    naming Sigmoid creates it."""
    sink = _generic("sink", "(Unary op (Transpose x p))", "(Transpose (Unary op x) p)")
    on_sigmoid = _rule("on-sigmoid", "(Sigmoid (Sigmoid x))", "(Sigmoid x)")
    nodes = [oh.make_node("Transpose", ["x"], ["t"], perm=[1, 0]), oh.make_node("Relu", ["t"], ["y"])]
    model = build_model(nodes, [("x", F, [2, 3])], [("y", F, [3, 2])])
    usable = usable_rules([sink, on_sigmoid], present_constructors(model))
    assert len(usable.commands) == 1 and "Sigmoid" not in usable.constructors
    to_sigmoid = _generic("to-sigmoid", '(Unary "Relu" x)', '(Unary "Sigmoid" x)')
    usable = usable_rules([sink, on_sigmoid, to_sigmoid], present_constructors(model))
    assert len(usable.commands) == 3 and "Sigmoid" in usable.constructors


def test_a_rule_on_an_absent_op_is_left_out() -> None:
    on_relu = _rule("on-relu", "(Relu (Relu x))", "(Relu x)")
    on_sigmoid = _rule("on-sigmoid", "(Sigmoid (Sigmoid x))", "(Sigmoid x)")
    usable = usable_rules([on_relu, on_sigmoid], present_constructors(_relu_chain()))
    assert [c for c in usable.commands if "on-relu" in c] and not [c for c in usable.commands if "on-sigmoid" in c]


def test_a_rule_is_installed_when_another_rule_can_create_its_op() -> None:
    """Relu -> Sigmoid (a test rule) makes the Sigmoid rule usable, in registry order, on a Relu-only model."""
    on_sigmoid = _rule("on-sigmoid", "(Sigmoid (Sigmoid x))", "(Sigmoid x)")
    to_sigmoid = _rule("to-sigmoid", "(Relu x)", "(Sigmoid x)")
    usable = usable_rules([on_sigmoid, to_sigmoid], present_constructors(_relu_chain()))
    assert len(usable.commands) == 2 and "on-sigmoid" in usable.commands[0]
    assert "Sigmoid" in usable.constructors


def test_body_ops_count_as_present() -> None:
    then = oh.make_graph([oh.make_node("Sigmoid", ["x"], ["t"])], "then", [], [oh.make_tensor_value_info("t", F, [2])])
    other = oh.make_graph([oh.make_node("Relu", ["x"], ["e"])], "else", [], [oh.make_tensor_value_info("e", F, [2])])
    node = oh.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)
    model = build_model([node], [("c", onnx.TensorProto.BOOL, []), ("x", F, [2])], [("y", F, [2])])
    assert {"Sigmoid", "Relu"} <= present_constructors(model)


def test_the_report_says_how_many_rules_were_installed() -> None:
    report = eqsat.optimize(_relu_chain()).report.saturation
    total = sum(len(r.egglog) for r in select())
    assert report.rules_total == total and 0 < report.rules_installed < total
    assert f"{report.rules_installed} of {total} egglog rules installed" in report.to_text()


def test_an_unexpected_constructor_is_an_internal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The safety net: if the selection ever misses a constructor the encoding creates, the run stops
    loudly instead of silently running without the rules that could match it."""
    monkeypatch.setattr(session, "present_constructors", lambda model: ALWAYS_PRESENT)
    with pytest.raises(InternalError, match="Relu"):
        eqsat.optimize(_relu_chain(), verify=False)


def test_a_kept_backend_is_lent_to_one_caller_at_a_time() -> None:
    usable = usable_rules(select(), ALWAYS_PRESENT)
    prepared.clear()
    with prepared.checkout(usable) as first:
        with prepared.checkout(usable) as second:
            assert second is not first  # lent: the second caller gets one of its own
    with prepared.checkout(usable) as again:
        assert again is first
        again.broken = True  # an egglog panic while lent
    with prepared.checkout(usable) as after:
        assert after is not first
    prepared.clear()


def test_a_kept_backend_gives_the_same_output_as_a_fresh_one(models_dir: Path) -> None:
    model = models_dir / "nhwc_tfstyle_resnet_legacy.onnx"
    prepared.clear()
    fresh = eqsat.optimize(model, verify=False).proto.SerializeToString()
    kept = eqsat.optimize(model, verify=False).proto.SerializeToString()
    assert fresh == kept


def _relu_then_if() -> onnx.ModelProto:
    """Relu(Relu(x)) read by an If whose branches Relu it again: a body on its parent's backend."""
    out = [oh.make_tensor_value_info(f"out_{b}", F, [2, 3]) for b in ("then", "else")]
    then_graph = oh.make_graph(
        [oh.make_node("Relu", ["r"], ["t"]), oh.make_node("Relu", ["t"], ["out_then"])], "then", [], [out[0]]
    )
    else_graph = oh.make_graph([oh.make_node("Neg", ["r"], ["out_else"])], "else", [], [out[1]])
    nodes = [
        oh.make_node("Relu", ["x"], ["r0"]),
        oh.make_node("Relu", ["r0"], ["r"]),
        oh.make_node("If", ["cond"], ["y"], then_branch=then_graph, else_branch=else_graph),
    ]
    return build_model(nodes, [("x", F, [2, 3]), ("cond", onnx.TensorProto.BOOL, [])], [("y", F, [2, 3])])


@pytest.mark.parametrize("build", [_relu_chain, _relu_then_if])
def test_a_single_run_loads_its_model_without_a_push_and_spends_the_backend(
    build,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    """Within prepared.single_run (the command on one file) the first top-level model is loaded without egglog's
    push and pop, its backend spent and not kept; a body still pushes and pops; a later model inside (a bisection
    probe) pushes and pops as usual and its backend is kept; the outputs are those of a run outside."""
    prepared.clear()
    expected = eqsat.optimize(build()).proto.SerializeToString()
    prepared.clear()
    pushes: list[int] = []
    original_push = session.Backend.push
    monkeypatch.setattr(session.Backend, "push", lambda self: (pushes.append(1), original_push(self))[1])
    bodies = 0 if build is _relu_chain else 1  # the If's then branch pushes in every run
    with prepared.single_run():
        first = eqsat.optimize(build())
        assert not prepared._kept and len(pushes) == bodies  # spent, so dropped
        second = eqsat.optimize(build())
        assert prepared._kept and len(pushes) == 2 * bodies + 1  # as outside a single run
    assert first.report.verification.ok and second.report.verification.ok
    assert first.proto.SerializeToString() == second.proto.SerializeToString() == expected
    assert not prepared.take_single_load()
    prepared.clear()


def test_a_backend_loads_only_the_standard_facts_its_rules_read() -> None:
    """inv-perm's 33 standard facts (every perm up to rank 4) are loaded for a rule that names the table, not for one
    that does not."""
    cancel = rw("(Transpose (Transpose x p) q)", "x", "(= q (inv-perm p))")
    reads = Rule("transpose-cancel", "cleanup", "exact", "test", "t", (cancel,))
    plain = _rule("relu-relu", "(Relu (Relu x))", "(Relu x)")
    with_table = prepared.fresh(tuple(reads.commands()))
    without = prepared.fresh(tuple(plain.commands()))
    assert with_table.sizes().get("inv-perm") == sum(1 for f in standard_facts() if "(inv-perm " in f) == 33
    assert not without.sizes().get("inv-perm")


def test_rank_five_inverse_perms_are_loaded_once_a_backend_meets_rank_five() -> None:
    """The standard facts hold every perm up to rank 4 (33); the 120 of rank 5 are loaded once, below a run's push,
    when a model reaches rank 5 and the backend's rules read inv-perm; a model's perms above rank 5 are its own."""
    cancel = rw("(Transpose (Transpose x p) q)", "x", "(= q (inv-perm p))")
    reads = prepared.fresh(tuple(Rule("transpose-cancel", "cleanup", "exact", "test", "t", (cancel,)).commands()))
    assert reads.sizes().get("inv-perm") == 33
    prepared.reach_perm_rank(reads, 4)
    assert reads.sizes().get("inv-perm") == 33
    prepared.reach_perm_rank(reads, 7)
    assert reads.sizes().get("inv-perm") == 153 and reads.perm_rank == 5
    reads.push()
    prepared.reach_perm_rank(reads, 5)  # nothing more: loaded below
    reads.pop()
    assert reads.sizes().get("inv-perm") == 153
    plain = prepared.fresh(tuple(_rule("relu-relu", "(Relu (Relu x))", "(Relu x)").commands()))
    prepared.reach_perm_rank(plain, 5)
    assert not plain.sizes().get("inv-perm"), "no rule reads them"
    six = [f for f in model_facts([(5, 4, 3, 2, 1, 0), (0, 2, 1, 3, 4)], 14) if "(inv-perm " in f]
    assert six == ["(set (inv-perm (vec-of 5 4 3 2 1 0)) (vec-of 5 4 3 2 1 0))"]


def test_a_rank_five_transpose_pair_around_a_constant_add_still_cancels() -> None:
    """Sinking a Transpose through an Add of a constant reads the perm's inverse (inv-perm): at rank 5 it comes with
    the model's facts, and the pair cancels."""
    nodes = [
        oh.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 4, 1]),
        oh.make_node("Add", ["t", "c"], ["a"]),
        oh.make_node("Transpose", ["a"], ["y"], perm=[0, 4, 1, 2, 3]),
    ]
    c = np.arange(24, dtype=np.float32).reshape(1, 3, 2, 2, 2)
    model = build_model(nodes, [("x", F, [1, 2, 3, 2, 2])], [("y", F, [1, 2, 3, 2, 2])], {"c": c})
    prepared.clear()
    assert [n.op_type for n in eqsat.optimize(model).proto.graph.node] == ["Add"]


@pytest.mark.parametrize("name", ["nhwc_tfstyle_resnet_legacy.onnx", "resnet18_w8_fp16.onnx"])
def test_standard_facts_left_out_change_no_output(name: str, models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = models_dir / name
    prepared.clear()
    some = eqsat.optimize(model, verify=False).proto.SerializeToString()
    monkeypatch.setattr(prepared, "facts_read_by", lambda named: standard_facts())
    prepared.clear()
    assert eqsat.optimize(model, verify=False).proto.SerializeToString() == some
    prepared.clear()


@pytest.mark.slow  # every bundled model, twice
def test_rules_left_out_are_never_needed(bundled_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same output, byte for byte, with only the usable rules installed as they can match (the closure and the
    rule gate) and with every rule installed from the start."""
    selected = eqsat.optimize(bundled_model, verify=False)
    monkeypatch.setattr(session, "present_constructors", lambda model: CONSTRUCTORS)
    monkeypatch.setattr(session, "model_opset", lambda model: None)  # no opset gate either
    monkeypatch.setattr(rule_gate, "present", lambda name, available: True)  # nor the rule gate
    everything = eqsat.optimize(bundled_model, verify=False)
    assert everything.report.saturation.rules_installed == everything.report.saturation.rules_total
    assert selected.report.saturation.rules_installed < everything.report.saturation.rules_installed
    assert selected.proto.SerializeToString() == everything.proto.SerializeToString()


def test_outputs_agree_on_a_small_model_with_all_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = [
        oh.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
        oh.make_node("Relu", ["t"], ["r"]),
        oh.make_node("Transpose", ["r"], ["y"], perm=[0, 3, 1, 2]),
    ]
    model = build_model(nodes, [("x", F, [1, 2, 3, 4])], [("y", F, [1, 2, 3, 4])], {"unused": np.ones(1, np.float32)})
    selected = eqsat.optimize(model).proto.SerializeToString()
    monkeypatch.setattr(session, "present_constructors", lambda model: CONSTRUCTORS)
    monkeypatch.setattr(session, "model_opset", lambda model: None)
    assert eqsat.optimize(model).proto.SerializeToString() == selected


def test_rule_only_facts_are_never_loaded(models_dir: Path) -> None:
    """RULE_ONLY_FACTS gate rules like constructors: the encoder must never set them itself."""
    from eqsat.frontend import io
    from eqsat.engine import terms
    from eqsat.engine.encode import encode
    from eqsat.engine.rule_closure import RULE_ONLY_FACTS

    work, _ = normalize.normalize_proto(io.load_proto(models_dir / "nhwc_tfstyle_resnet_legacy.onnx")[0])
    rows = encode(work).rows
    loaded = "\n".join([*rows.text, *terms.static_facts()])
    assert not [
        name for name in RULE_ONLY_FACTS if f"({name} " in loaded or any(table.endswith(name) for table in rows.tables)
    ]


def test_a_backend_broken_during_a_run_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """An egglog panic leaves the e-graph unusable (its pop fails): the run still returns its result, and the
    kept backend is dropped, so the next run gets a fresh one and the same output."""
    from eqsat.engine.backend import Backend

    class Panic(BaseException):  # pyo3's PanicException derives from BaseException
        pass

    def failing_pop(self: Backend) -> None:
        self.broken = True
        raise Panic("egglog panicked")

    prepared.clear()
    reference = eqsat.optimize(_relu_chain(), verify=False).proto.SerializeToString()
    monkeypatch.setattr(Backend, "pop", failing_pop)
    assert eqsat.optimize(_relu_chain(), verify=False).proto.SerializeToString() == reference
    assert not prepared._kept
    monkeypatch.undo()
    assert eqsat.optimize(_relu_chain(), verify=False).proto.SerializeToString() == reference
    prepared.clear()


def test_an_op_read_from_a_fact_table_counts_as_created() -> None:
    """matmul-bias-chain turns (MatMul - c1) - c2 into MatMul - (c1 + c2): the Add comes from additive-chain's op
    column, not from a node the model has, so a model without an Add gets the rules that read one; a ReduceL1 over
    unit axes becomes an Abs (reduce-as-unary) likewise. Neither op is assumed where no table row can make it."""
    from eqsat.rewrites.registry import select

    weights = {"c": np.ones((1, 4), np.float32), "w": np.ones((4, 4), np.float32)}
    nodes = [
        oh.make_node("MatMul", ["x", "w"], ["m"]),
        oh.make_node("Sub", ["m", "c"], ["s"]),
        oh.make_node("Sub", ["s", "c"], ["y"]),
    ]
    chain = build_model(nodes, [("x", F, [2, 4])], [("y", F, [2, 4])], weights)
    present = present_constructors(chain)
    assert "Add" not in present and "Add" in usable_rules(select(), present).constructors
    reduce = oh.make_node("ReduceL1", ["x", "axes"], ["y"], keepdims=1)
    axes = {"axes": np.array([1], np.int64)}
    l1 = build_model([reduce], [("x", F, [2, 1])], [("y", F, [2, 1])], axes, opset=18)
    assert "Abs" in usable_rules(select(), present_constructors(l1)).constructors
    assert "Abs" not in usable_rules(select(), present_constructors(_relu_chain())).constructors


# Why the closure installs a rule on an op the model lacks: each op or rule-only fact it adds is traced to the
# egglog rule whose actions made it available (bench_install --why).


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


# Constant classes (eqsat.engine.rule_terms): an op the rules build only over constants sits only in constant classes,
# which lowering folds; a body whose unions can only join such classes is left out.


def _conv_bn_pool(batch: int | str = 1) -> onnx.ModelProto:
    """Conv -> BatchNormalization -> Relu -> GlobalAveragePool (resnet18's ops but Add/MaxPool/Gemm): bn-scale-sites
    builds gamma / sqrt(var + eps) from the constants, so Div and Sqrt exist only in constant classes."""
    rng = np.random.default_rng(0)
    weights = {
        "w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
        "b": rng.standard_normal(4).astype(np.float32),
        "g": rng.uniform(0.5, 1.5, 4).astype(np.float32),
        "be": rng.standard_normal(4).astype(np.float32),
        "mu": rng.standard_normal(4).astype(np.float32),
        "va": rng.uniform(0.5, 1.5, 4).astype(np.float32),
    }
    nodes = [
        oh.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        oh.make_node("BatchNormalization", ["c", "g", "be", "mu", "va"], ["n"]),
        oh.make_node("Relu", ["n"], ["r"]),
        oh.make_node("GlobalAveragePool", ["r"], ["y"]),
    ]
    return build_model(nodes, [("x", F, [batch, 3, 8, 8])], [("y", F, [batch, 4, 1, 1])], weights)


def _names(commands: tuple[str, ...]) -> set[str]:
    return {c.rsplit(':name "', 1)[1].rstrip('")') for c in commands}


def test_ops_built_from_batchnorm_constants_admit_no_normalization_fusion() -> None:
    """Div and Sqrt appear only in bn-scale-sites' gamma / sqrt(var + eps), a constant: the rewrites whose root is such
    a Div (norm-rsqrt-forms) and the LayerNormalization/InstanceNormalization fusions that would match it are left out,
    and so are the ops they would create. On main the cascade installed them (LayerNormalization available)."""
    usable = usable_rules(select(), present_constructors(_conv_bn_pool()))
    assert {"Div", "Sqrt", "ReduceMean"} <= usable.constructors  # still available: in constant classes
    assert not {"LayerNormalization", "InstanceNormalization", "Reciprocal"} & usable.constructors
    names = _names(usable.commands)
    assert "norm-rsqrt-forms#1" not in names and "layernorm-fuse#0" not in names
    assert {"bn-scale-sites#0", "conv-bn-fold#0", "bn-decompose#0", "scale-positive-facts#3"} <= names


def test_a_run_time_division_keeps_the_normalization_rules() -> None:
    """The same model with a LayerNormalization written out over run-time values (x - mean) / sqrt(var + eps): Div and
    Sqrt now sit outside constant classes, and the fusion is installed (and fires)."""
    nodes = [
        oh.make_node("ReduceMean", ["x"], ["m"], axes=[-1]),
        oh.make_node("Sub", ["x", "m"], ["d"]),
        oh.make_node("Mul", ["d", "d"], ["q"]),
        oh.make_node("ReduceMean", ["q"], ["v"], axes=[-1]),
        oh.make_node("Add", ["v", "eps"], ["ve"]),
        oh.make_node("Sqrt", ["ve"], ["s"]),
        oh.make_node("Div", ["d", "s"], ["y"]),
    ]
    eps = {"eps": np.array(1e-5, np.float32)}
    model = build_model(nodes, [("x", F, ["N", 8])], [("y", F, ["N", 8])], eps, opset=17)
    usable = usable_rules(select(), present_constructors(model))
    assert "layernorm-fuse#0" in _names(usable.commands) and "LayerNormalization" in usable.constructors
    assert [n.op_type for n in eqsat.optimize(model).proto.graph.node] == ["LayerNormalization"]


@pytest.mark.parametrize("batch", [1, "N"])
def test_constant_only_rules_left_out_change_no_output(batch: int | str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Conv/BatchNorm/pool model (static batch, and a dynamic one: verified at two sizes) gives the same bytes with
    the rules its closure leaves out as with every rule installed."""
    model = _conv_bn_pool(batch)
    selected = eqsat.optimize(model)
    assert selected.report.verification is not None and selected.report.verification.ok
    monkeypatch.setattr(session, "present_constructors", lambda model: CONSTRUCTORS)
    everything = eqsat.optimize(model)
    assert selected.report.saturation.rules_installed < everything.report.saturation.rules_installed
    assert selected.proto.SerializeToString() == everything.proto.SerializeToString()


def _reading(egglog: Egglog, **levels: str) -> Reading:
    from eqsat.engine.rule_terms import ClosureState

    return BodyTerms.of(egglog.facts, egglog.actions).read(ClosureState(levels, {}))


def test_a_rewrite_of_a_constant_only_op_is_confined() -> None:
    """Div(1, Sqrt(v)) -> Reciprocal(Sqrt(v)): with Div only in constant classes its root is constant and Reciprocal is
    new (fresh), so the union changes no class lowering reads; with Div and Sqrt anywhere it may."""
    rsqrt = rw("(Div (Scalar 1.0 d s) (Sqrt v))", "(Reciprocal (Sqrt v))")
    assert _reading(rsqrt, Div=CONST, Sqrt=CONST, Scalar=ANY).confined
    assert not _reading(rsqrt, Div=ANY, Sqrt=ANY, Scalar=ANY).confined


def test_a_union_with_a_run_time_class_is_not_confined() -> None:
    """x * 1 -> x joins the constant-looking product with x itself: unless x is known constant, x's class would
    become constant (folded), so the rewrite is kept."""
    one = rw("(Mul x (Scalar 1.0 d s))", "x")
    assert not _reading(one, Mul=ANY, Scalar=ANY).confined
    assert _reading(rw("(Mul x (Scalar 1.0 d s))", "x", "(is-const x)"), Mul=ANY, Scalar=ANY).confined


def test_an_op_built_over_constants_sits_in_constant_classes() -> None:
    """An action building Div over is-const operands creates Div in constant classes only (CONST); over a run-time
    operand, anywhere (ANY)."""
    over_constants = fact(
        "(= y (Relu x)) (is-const a) (is-const b)", "(let q (Div a (Sqrt b))) (set (shape q) (shape y))"
    )
    assert _reading(over_constants, Relu=ANY).created == {"Div": CONST, "Sqrt": CONST}
    at_run_time = fact("(= y (Relu x)) (is-const b)", "(union y (Div x (Sqrt b)))")
    assert _reading(at_run_time, Relu=ANY).created == {"Div": ANY, "Sqrt": CONST}


def test_a_matched_op_variable_is_read_per_level() -> None:
    """(Unary op (Reshape x s z)) -> Reshape(Unary op x): for a constant-only op (Sqrt) the node matched is constant, so
    is its Reshape's input, and the rewrite stays among constants; for Relu it creates a run-time Relu (and, installed
    for it, a constant Sqrt where it matches one)."""
    sink = rw("(Unary op (Reshape x s z))", "(Reshape (Unary op x) s z)")
    assert _reading(sink, Sqrt=CONST, Reshape=ANY).confined
    reading = _reading(sink, Sqrt=CONST, Relu=ANY, Reshape=ANY)
    assert not reading.confined and reading.created == {"Relu": ANY, "Reshape": ANY, "Sqrt": CONST}


def test_list_plumbing_makes_nothing_constant() -> None:
    """A TAppend of constant items is rule plumbing lowering never evaluates: the rewrite giving it its TCons form
    (tensor-list-append) is not confined, or a Concat of merged conv weights would be left without a value
    (test_rules_conv.py::test_conv_merge_three_projections)."""
    append = rw("(TAppend (TCons h (TNil)) (TNil))", "(TCons h (TNil))", "(is-const h)")
    assert not _reading(append, TAppend=ANY, TCons=ANY, TNil=ANY).confined
    assert _reading(rw("(TCons h (TNil))", "(TCons h (TNil))", "(is-const h)"), TCons=ANY, TNil=ANY).confined


def test_a_guard_on_the_model_opset_is_read_from_the_query() -> None:
    assert least_opset("(= __root (Relu x)) (= o (model-opset)) (>= o 17)") == 17
    assert least_opset("(= (model-opset) o) (> o 12)") == 13
    assert least_opset("(= o (model-opset)) (>= o 6) (>= o 11) (>= n 30)") == 11
    assert least_opset("(dtype-group op dt since) (= o (model-opset)) (>= o since)") == 0  # not a literal
    assert least_opset("(= __root (Relu x)) (>= n 20)") == 0  # n is not the opset


def _installed(model: onnx.ModelProto) -> set[str]:
    normalized = session.load(model).normalized
    usable = usable_rules(select(), present_constructors(normalized), opset=model_opset(normalized))
    return {command.split(':name "')[1].split('"')[0] for command in usable.commands}


def test_a_rule_guarded_on_a_newer_opset_is_left_out() -> None:
    """A BERT Gelu written out with Erf (tests.rule_graphs.gelu_erf). At opset 14 gelu-fuse's guard (opset >= 20)
    never holds: its bodies are not installed, nor a rule that would only match the Gelu it creates. At opset 20
    they are."""
    old, new = _installed(gelu_erf(opset=14)), _installed(gelu_erf(opset=20))
    assert {"gelu-fuse#0", "gelu-fuse#1"} <= new
    assert not {"gelu-fuse#0", "gelu-fuse#1"} & old
    assert any(name.startswith("gelu-decompose") for name in new)  # on the Gelu gelu-fuse creates
    assert not any(name.startswith("gelu-decompose") for name in old)


def test_opset_gated_rules_left_out_change_no_output(monkeypatch: pytest.MonkeyPatch) -> None:
    model = gelu_erf(opset=14)
    gated = eqsat.optimize(model)
    monkeypatch.setattr(session, "model_opset", lambda model: None)
    ungated = eqsat.optimize(model)
    assert gated.report.saturation.rules_installed < ungated.report.saturation.rules_installed
    assert gated.proto.SerializeToString() == ungated.proto.SerializeToString()
    assert [n.op_type for n in eqsat.optimize(gelu_erf(opset=20)).proto.graph.node] == ["Gelu"]
