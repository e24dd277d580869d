"""The egglog 13.2 behaviours eqsat relies on. If an egglog upgrade breaks one, this fails loudly."""

from __future__ import annotations

import importlib.metadata

import pytest

from eqsat import terms
from eqsat.backend import Backend, EgglogError
from eqsat.egraph import decode
from eqsat.rule import Rule, rw
from eqsat.saturate import install_rules, run


def _loaded() -> Backend:
    backend = Backend()
    backend.run(terms.declarations())
    backend.load(terms.static_facts())
    backend.load([
        '(union (Ref 0) (Input "x"))',
        "(set (shape (Ref 0)) (vec-of 1 2 3 4))",
        '(set (dtype (Ref 0)) "FLOAT")',
        "(union (Ref 1) (Transpose (Ref 0) (vec-of 0 2 3 1)))",
        "(union (Ref 2) (Relu (Ref 1)))",
        "(union (Ref 3) (Transpose (Ref 2) (vec-of 0 3 1 2)))",
    ])
    return backend


def test_pinned_version() -> None:
    assert importlib.metadata.version("egglog").startswith("13.2."), "eqsat is tested against egglog 13.2"


def test_bulk_load_and_serialize_roundtrip() -> None:
    graph = decode(_loaded().serialize())
    assert set(graph.refs) == {0, 1, 2, 3}
    assert all(n.op != "Ref" for n in graph.nodes), "handle nodes must be dropped"
    x = graph.refs[0]
    assert graph.eclass(x).shape == (1, 2, 3, 4) and graph.eclass(x).dtype == "FLOAT"
    transpose = next(n for n in graph.nodes if n.op == "Transpose")
    assert transpose.attrs == ((0, 2, 3, 1),) and transpose.children == (x,)


def test_rules_run_report_and_vec_map() -> None:
    backend = _loaded()
    merge = Rule("t-merge", "layout", "exact", "test", "doc",
                 (rw("(Transpose (Transpose x p) q)", '(Transpose x (unstable-vec-map (unstable-fn "vec-get" p) q))'),
                  rw("(Transpose x p)", "x", "(= p (vec-of 0 1 2 3))"),
                  rw("(Relu (Transpose x p))", "(Transpose (Relu x) p)")), ruleset="explore")
    install_rules(backend, [merge])
    report = run(backend)
    assert report.stop_reason == "saturated"
    assert report.rules_fired.get("t-merge", 0) >= 3
    graph = decode(backend.serialize())
    assert any(n.op == "Relu" and n.children == (graph.refs[0],) for n in graph.class_nodes(graph.refs[3]))


def test_conflicting_facts_raise_an_ordinary_error() -> None:
    backend = _loaded()
    with pytest.raises(EgglogError, match="merge"):
        backend.load(["(set (shape (Ref 0)) (vec-of 9))"])
    assert decode(backend.serialize()).refs  # the e-graph stays usable
