"""The egglog 13.2 behaviours eqsat relies on. If an egglog upgrade breaks one, this fails loudly."""

from __future__ import annotations

import importlib.metadata

import pytest

from eqsat.engine import terms
from eqsat.engine.backend import Backend, EgglogError
from eqsat.engine.egraph import decode
from eqsat.engine.rule import Rule, rw
from eqsat.engine.saturate import install_rules, run


def _loaded() -> Backend:
    backend = Backend()
    backend.declare()
    backend.load(terms.static_facts())
    backend.load(
        [
            '(union (Ref 0) (Input "x"))',
            "(set (shape (Ref 0)) (vec-of 1 2 3 4))",
            '(set (dtype (Ref 0)) "FLOAT")',
            "(union (Ref 1) (Transpose (Ref 0) (vec-of 0 2 3 1)))",
            "(union (Ref 2) (Relu (Ref 1)))",
            "(union (Ref 3) (Transpose (Ref 2) (vec-of 0 3 1 2)))",
        ]
    )
    return backend


def test_pinned_version() -> None:
    assert importlib.metadata.version("egglog").startswith("13.2."), "eqsat is tested against egglog 13.2"


def test_bulk_load_and_serialize_roundtrip() -> None:
    graph = decode(_loaded().snapshot())
    assert set(graph.refs) == {0, 1, 2, 3}
    assert all(n.op != "Ref" for n in graph.nodes), "handle nodes must be dropped"
    x = graph.refs[0]
    assert graph.eclass(x).shape == (1, 2, 3, 4) and graph.eclass(x).dtype == "FLOAT"
    transpose = next(n for n in graph.nodes if n.op == "Transpose")
    assert transpose.attrs == ((0, 2, 3, 1),) and transpose.children == (x,)


def test_decoding_hands_the_readers_it_found_to_the_graph() -> None:
    """decode finds each class's readers once and the graph keeps them (EGraph.parents): the same as the graph
    would find from its nodes, as do the constant flags it computed before building the classes."""
    import dataclasses

    from eqsat.engine.egraph import EGraph, _mark_constants

    graph = decode(_loaded().snapshot())
    fresh = EGraph(graph.nodes, graph.classes, graph.roots, graph.refs)
    assert "parents" in graph.__dict__ and graph.parents == fresh.parents
    unmarked = dataclasses.replace(fresh, classes=tuple(dataclasses.replace(c, constant=False) for c in graph.classes))
    assert _mark_constants(unmarked).classes == graph.classes


def test_rules_run_report_and_vec_map() -> None:
    backend = _loaded()
    merge = Rule(
        "t-merge",
        "layout",
        "exact",
        "test",
        "doc",
        (
            rw("(Transpose (Transpose x p) q)", '(Transpose x (unstable-vec-map (unstable-fn "vec-get" p) q))'),
            rw("(Transpose x p)", "x", "(= p (vec-of 0 1 2 3))"),
            rw("(Relu (Transpose x p))", "(Transpose (Relu x) p)"),
        ),
        ruleset="explore",
    )
    install_rules(backend, merge.commands())
    report = run(backend)
    assert report.stop_reason == "saturated"
    assert report.rules_fired.get("t-merge", 0) >= 3
    graph = decode(backend.snapshot())
    assert any(n.op == "Relu" and n.children == (graph.refs[0],) for n in graph.class_nodes(graph.refs[3]))


def test_conflicting_facts_raise_an_ordinary_error() -> None:
    """shape keeps its first fact (symbols that meet are unified by the session, eqsat.engine.unify); the
    facts that must agree (shape-dim, shape-rank: :no-merge) raise an ordinary error on a conflict."""
    backend = _loaded()
    backend.load(["(set (shape (Ref 0)) (vec-of 9))"])  # a second fact: kept aside, no error
    with pytest.raises(EgglogError, match="Illegal merge attempted for function shape"):
        backend.load(["(set (shape-rank (Ref 0)) 1)", "(set (shape-rank (Ref 0)) 2)"])
    assert decode(backend.snapshot()).refs  # the e-graph stays usable


def test_table_load_through_input_files() -> None:
    """egglog's `input` reads the load tables (eqsat.engine.bulk); strings a table cannot carry go as text."""
    from eqsat.engine.bulk import ABSENT, Rows

    rows = Rows()
    rows.text.append(f"(union (Ref {ABSENT}) (Absent))")
    rows.add("Input", 0, "x")
    assert not rows.add("Input", 1, " padded\tname"), "edge spaces and tabs cannot cross a tab-separated file"
    rows.text.append('(union (Ref 1) (Input " padded\\tname"))')
    rows.add("shape", 0, rows.vec((2, 3)))
    rows.add("dtype", 0, "FLOAT")
    rows.add("Clip", 2, 0, float("-inf"), 6.0)
    rows.add("Gemm", 3, 0, 1, ABSENT, 0.5, 1.0, 0, 1)
    rows.add("Transpose", 4, 0, rows.vec((1, 0)))
    rows.add("Scalar", 5, 1e-45, "FLOAT", rows.vec(()))
    backend = Backend()
    backend.declare()
    backend.load_rows(rows)
    tables = backend.snapshot()
    assert not any(t.rows for name, t in tables.items() if name.startswith("load-")), "load rows are deleted"
    graph = decode(tables, range(6))
    x, padded = graph.refs[0], graph.refs[1]
    assert graph.eclass(x).shape == (2, 3) and graph.eclass(x).dtype == "FLOAT"
    assert [n.attrs for n in graph.class_nodes(padded)] == [(" padded\tname",)]
    (clip,) = graph.class_nodes(graph.refs[2])
    assert clip.op == "Clip" and clip.children == (x,) and clip.attrs == (float("-inf"), 6.0)
    (gemm,) = graph.class_nodes(graph.refs[3])
    assert gemm.children[:2] == (x, padded) and [n.op for n in graph.class_nodes(gemm.children[2])] == ["Absent"]
    assert gemm.attrs == (0.5, 1.0, 0, 1)
    assert next(iter(graph.class_nodes(graph.refs[4]))).attrs == ((1, 0),)
    assert next(iter(graph.class_nodes(graph.refs[5]))).attrs == (1e-45, "FLOAT", ())


def test_the_command_loads_the_bindings_without_the_egglog_package() -> None:
    """`eqsat` (eqsat.ui.startup, for eqsat.ui.cli.run_command) loads egglog's compiled bindings alone (the package's
    Python layer costs
    ~0.2 s of start-up); eqsat.engine.backend must then work without importing the package."""
    import subprocess
    import sys

    code = (
        "import sys; from eqsat.ui.startup import load_egglog_bindings_alone as load; load(); "
        "from eqsat.engine.backend import Backend; b = Backend(); b.declare(); b.run('(push)'); "
        "assert 'egglog' not in sys.modules, 'the egglog package was imported'; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
