"""Declarations by demand (eqsat.engine.terms.declared): a prepared backend declares the sorts, the core tables and
what its rules name; loading a graph declares what it builds, between the push and the pop of its run, so a kept
backend serves a later model, or a body, holding an op the backend's rules never named."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh

import eqsat
from eqsat.engine import prepared, terms
from eqsat.engine.backend import Backend
from eqsat.engine.bulk import Rows
from eqsat.engine.rule_closure import model_opset, present_constructors, usable_rules
from eqsat.rewrites.registry import select
from eqsat.session import load
from tests.rule_graphs import model, node

SHAPE = [1, 4, 6, 6]


def _cnn(*tail: onnx.NodeProto, out: str = "r") -> onnx.ModelProto:
    """x -> Conv (+bias) -> Relu (`r`), then `tail`; the output `y` is `out`."""
    rng = np.random.default_rng(0)
    weights = {
        "w": rng.standard_normal((4, 4, 3, 3)).astype(np.float32),
        "b": rng.standard_normal(4).astype(np.float32),
    }
    nodes = [node("Conv", ["x", "w", "b"], "c", pads=[1, 1, 1, 1]), node("Relu", ["c"], "r"), *tail]
    nodes.append(node("Identity", [out], "y"))
    return model(nodes, [("x", "FLOAT", SHAPE)], initializers=weights)


def _softmaxed() -> onnx.ModelProto:
    """The CNN with a Softmax after it: an op no rule names (a rule set for the CNN has the same commands)."""
    return _cnn(node("Softmax", ["r"], "s", axis=1), out="s")


def _commands(m: onnx.ModelProto) -> tuple[str, ...]:
    normalized = load(m).normalized
    usable = usable_rules(select(), present_constructors(normalized), opset=model_opset(normalized))
    return tuple(usable.commands)


def _declared(backend: Backend) -> set[str]:
    """The tables egglog holds for `backend` (print-size lists every constructor, function and relation)."""
    return set(backend.sizes())


def test_a_cnn_backend_declares_what_its_rules_name_and_no_more() -> None:
    commands = _commands(_cnn())
    backend = prepared.fresh(commands)
    declared = _declared(backend)
    named = {terms.GENERIC_OF.get(name, name) for name in terms.heads(commands)}
    tables = {name for name, line in terms.declared().items() if not line.startswith("(sort")}
    assert "Conv" in declared and named & tables <= declared, "every table a rule names is declared"
    assert "MatMul" not in declared and "Softmax" not in declared
    assert not declared & set(terms.LIST_FUNCTIONS), "a CNN's rules name no list function"
    assert not {name for name in declared if name.startswith("load-")} - {"load-vec"}, "load tables wait for a graph"
    assert len(declared) < len(tables) / 2


def test_declared_follows_names_and_their_families() -> None:
    """An op names its family's constructor; what nothing declares (a primitive, a rule's name) is ignored."""
    picked = terms.declared(["Relu", "merged", "vec-of", "no-such-table"])
    assert {"Unary", "merged"} <= set(picked) and "Relu" not in picked and "need-merged" not in picked
    assert set(terms.CORE) <= set(picked) and "vec-of" not in picked and "no-such-table" not in picked
    assert list(picked) == [name for name in terms.declared() if name in picked], "in declaration order"


def test_what_a_load_declares_is_gone_at_pop_and_declared_again() -> None:
    """A constructor declared by a load after a push is forgotten by egglog at the pop; the backend knows it and
    declares it again for the next load."""
    backend = Backend()
    backend.declare([])
    rows = Rows()
    rows.add("Input", 0, "x")
    rows.add("Softmax", 1, 0, -1)
    for _ in range(2):
        backend.push()
        backend.load_rows(rows)
        assert backend.sizes()["Softmax"] == 1
        backend.pop()
        assert "Softmax" not in _declared(backend) and "load-Softmax" not in _declared(backend)


def test_a_later_model_with_an_op_the_kept_backend_never_declared() -> None:
    """The CNN's kept backend serves the CNN + Softmax (same rule commands): the Softmax is declared by its load,
    twice in a row (each run's declarations end at its pop), and the CNN alone gives the same output after."""
    cnn, softmaxed = _cnn(), _softmaxed()
    assert _commands(cnn) == _commands(softmaxed)
    prepared.clear()
    first = eqsat.optimize(cnn)
    (backend,) = prepared._kept.values()
    assert "Softmax" not in _declared(backend)
    results = [eqsat.optimize(softmaxed) for _ in range(2)]
    assert prepared._kept[backend.installed] is backend, "the same kept backend served them"
    for result in results:
        assert result.report.verification.ok
        assert "Softmax" in [n.op_type for n in result.proto.graph.node]
    assert results[0].proto.SerializeToString() == results[1].proto.SerializeToString()
    assert eqsat.optimize(cnn).proto.SerializeToString() == first.proto.SerializeToString()
    prepared.clear()
    assert eqsat.optimize(softmaxed).proto.SerializeToString() == results[0].proto.SerializeToString()
    prepared.clear()


def test_bodies_with_an_op_their_parent_lacks() -> None:
    """Both branches of an If hold a Softmax, the parent none: each body declares it in its own push of the
    parent's backend, the second again after the first's pop, and the parent loads without it."""

    def branch(name: str) -> onnx.GraphProto:
        nodes = [node("Relu", ["r"], f"{name}_r"), node("Softmax", [f"{name}_r"], f"{name}_s", axis=1)]
        return oh.make_graph(nodes, name, [], [oh.make_tensor_value_info(f"{name}_s", onnx.TensorProto.FLOAT, SHAPE)])

    m = _cnn(
        oh.make_node("If", ["cond"], ["i"], then_branch=branch("then"), else_branch=branch("else")),
        node("Relu", ["i"], "o"),
        out="o",
    )
    m.graph.input.append(oh.make_tensor_value_info("cond", onnx.TensorProto.BOOL, []))
    prepared.clear()
    result = eqsat.optimize(m)
    stats = result.report.subgraphs
    assert result.report.verification.ok and stats.optimized + stats.kept == 2 and not stats.problems
    (backend,) = prepared._kept.values()
    assert "Softmax" not in _declared(backend)
    prepared.clear()
    with prepared.single_run():  # the command's way: the parent loaded after the bodies' pops, without a push
        assert eqsat.optimize(m).proto.SerializeToString() == result.proto.SerializeToString()
    prepared.clear()
