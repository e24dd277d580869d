"""Generic constructors (eqsat.engine.terms.GENERIC): `(Unary op x)`, `(Binary op a b)`, `(Reduce op x axes k)`.

Rules name ops as before and egglog gets the family (eqsat.engine.rule.render); a row over every op of a family is
guarded by an op fact; loading, decoding and the rule closure see each row as the op it is."""

from __future__ import annotations

from eqsat.engine import terms
from eqsat.engine.backend import Backend
from eqsat.engine.bulk import Rows
from eqsat.engine.egraph import EGraph, decode
from eqsat.engine.rule import Rule, render, rw
from eqsat.engine.saturate import Limits, install_rules, run
from eqsat.rewrites.registry import all_rules


def test_ops_are_rendered_as_their_family() -> None:
    text = "(= __root (Relu (Add a (ReduceSum x ax 1)))) (= y (LeakyRelu (IsNaN z) al)) (= w (Softmax (Cast v t) k))"
    rendered = (
        '(= __root (Unary "Relu" (Binary "Add" a (Reduce "ReduceSum" x ax 1)))) '
        '(= y (UnaryF "LeakyRelu" (Unary "IsNaN" z) al)) (= w (Softmax (UnaryS "Cast" v t) k))'
    )
    assert render(text) == rendered
    assert render(rendered) == rendered, "rendering twice changes nothing"
    assert render("(Unary op (Binary op a b))") == "(Unary op (Binary op a b))"
    named = '(union (Ref 1) (Input "a (Relu) \\" (Add b"))'  # a value name is a string: never rendered
    assert render(named) == named


def test_a_family_is_one_constructor() -> None:
    declared = terms.declarations()
    assert "(constructor Unary (String T) T)" in declared and "(constructor Binary (String T T) T)" in declared
    assert "(constructor Reduce (String T IVec i64) T)" in declared
    # the elementwise unary ops with parameters: one family per signature
    assert (
        "(constructor UnaryF (String T f64) T)" in declared and "(constructor UnaryS (String T String) T)" in declared
    )
    assert "(constructor UnaryFF (String T f64 f64) T)" in declared
    assert terms.GENERIC["UnaryFF"] == ("HardSigmoid", "Clip") and terms.GENERIC["UnaryS"] == ("Gelu", "Cast")
    assert not [op for op in terms.GENERIC_OF if f"(constructor {op} " in declared]


def test_the_installed_text_names_families_only() -> None:
    """Every installed egglog rule names ops of the families through them (what `eqsat rules -v` shows)."""
    commands = [c for rule in all_rules() for c in rule.commands()]
    for op in terms.GENERIC_OF:
        assert not [c for c in commands if f"({op} " in c or f"({op})" in c], op


def _loaded() -> tuple[Backend, Rows]:
    rows = Rows()
    rows.add("Input", 0, "x")
    rows.add("ReduceSum", 3, 2, rows.vec((1,)), 0)
    rows.add("Add", 2, 0, 1)
    rows.add("Relu", 1, 0)
    backend = Backend()
    backend.declare()
    backend.load(terms.static_facts())
    backend.load_rows(rows)
    return backend, rows


def test_a_generic_row_decodes_as_its_op() -> None:
    backend, rows = _loaded()
    tables = backend.snapshot()
    assert "Relu" not in tables and len(tables["Unary"].rows) == 1 and len(tables["Binary"].rows) == 1
    graph = decode(tables, range(4))
    x, relu, add, red = (graph.refs[i] for i in range(4))
    assert [n.op for n in graph.nodes] == ["Input", "Relu", "Add", "ReduceSum"]  # the ops' order in terms.OPS
    assert [(n.children, n.attrs) for n in graph.class_nodes(relu)] == [((x,), ())]
    assert [(n.children, n.attrs) for n in graph.class_nodes(add)] == [((x, relu), ())]
    assert [(n.op, n.children, n.attrs) for n in graph.class_nodes(red)] == [("ReduceSum", (add,), ((1,), 0))]
    assert sorted(rows.ops()) == [("Add", 2, (0, 1)), ("ReduceSum", 3, (2,)), ("Relu", 1, (0,))]


def _saturated(commands: list[str], terms_over_x: list[str]) -> EGraph:
    """A fresh backend with `commands` installed, Ref 0 the input x and `terms_over_x` loaded, run 4 iterations."""
    backend = Backend()
    backend.declare()
    install_rules(backend, commands)
    backend.load(terms.static_facts())
    backend.load(['(union (Ref 0) (Input "x"))', *terms_over_x])
    run(backend, Limits(iterations=4))
    return decode(backend.snapshot())


def test_a_generic_row_matches_the_ops_its_fact_names() -> None:
    """`(Unary op (Unary op x))` guarded by `(idempotent op)`: Abs(Abs(x)) merges, Neg(Neg(x)) and Relu(Abs(x))
    do not."""
    merge = Rule(
        "m", "cleanup", "exact", "test", "doc", (rw("(Unary op (Unary op x))", "(Unary op x)", "(idempotent op)"),)
    )
    graph = _saturated(
        merge.commands(),
        [
            "(union (Ref 1) (Abs (Abs (Ref 0))))",
            "(union (Ref 2) (Neg (Neg (Ref 0))))",
            "(union (Ref 3) (Relu (Abs (Ref 0))))",
        ],
    )
    abs_x = next(n.eclass for n in graph.nodes if n.op == "Abs" and n.children == (graph.refs[0],))
    assert graph.refs[1] == abs_x
    assert graph.refs[2] != graph.refs[0] and len(list(graph.class_nodes(graph.refs[2]))) == 1
    assert len(list(graph.class_nodes(graph.refs[3]))) == 1


def test_one_row_sinks_every_op_of_a_parameter_family() -> None:
    """`(UnaryFF op (Transpose x p) a b)`: Clip and HardSigmoid over a Transpose both sink, each keeping its own
    parameters; decoded, each is its own op."""
    sink = next(r for r in all_rules() if r.name == "transpose-sink-unary")
    graph = _saturated(
        sink.commands(),
        [
            "(union (Ref 1) (Clip (Transpose (Ref 0) (vec-of 1 0)) 0.0 6.0))",
            "(union (Ref 2) (HardSigmoid (Transpose (Ref 0) (vec-of 1 0)) 0.2 0.5))",
        ],
    )
    x = graph.refs[0]
    for ref, op, attrs in ((1, "Clip", (0.0, 6.0)), (2, "HardSigmoid", (0.2, 0.5))):
        transposes = [n for n in graph.class_nodes(graph.refs[ref]) if n.op == "Transpose"]
        assert len(transposes) == 1 and transposes[0].attrs == ((1, 0),)
        inner = list(graph.class_nodes(transposes[0].children[0]))
        assert [(n.op, n.children, n.attrs) for n in inner] == [(op, (x,), attrs)]
    assert len(sink.egglog) == 4, "one row per unary family"
