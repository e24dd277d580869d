"""Verification and costing at scale: the original's outputs computed in a thread while the e-graph work runs
(eqsat.check.ahead), sessions without a memory pattern for large graphs, and the roofline
model's per-graph facts kept for the few graphs a run costs in turn."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto

import eqsat
from eqsat.check.ahead import ReferenceAhead
from eqsat.check.verify import verify
from eqsat.engine.egraph import EClass, EGraph, ENode
from eqsat.errors import BadInputError
from eqsat.extract import cost as cost_module
from eqsat.extract import load_target, roofline
from eqsat.session import Session
from tests.conftest import custom_op_model

F32 = TensorProto.FLOAT


def _dense(make_model) -> onnx.ModelProto:
    """x[batch, 8] -> MatMul(w) -> Add(b) -> Relu -> Mul(1): a weight, a dynamic batch, something to fold."""
    rng = np.random.default_rng(0)
    weights = {
        "w": rng.standard_normal((8, 8)).astype(np.float32),
        "b": rng.standard_normal(8).astype(np.float32),
        "one": np.ones(1, np.float32),
    }
    nodes = [
        oh.make_node("MatMul", ["x", "w"], ["m"]),
        oh.make_node("Add", ["m", "b"], ["a"]),
        oh.make_node("Relu", ["a"], ["r"]),
        oh.make_node("Mul", ["r", "one"], ["y"]),
    ]
    return make_model(nodes, [("x", F32, ["batch", 8])], [("y", F32, ["batch", 8])], weights)


def test_optimize_runs_the_original_during_saturation_and_verifies_as_before(make_model, monkeypatch) -> None:
    events: list[str] = []
    started, extract = ReferenceAhead.start, Session.extract

    def start(self: ReferenceAhead, *args, **kwargs) -> None:
        events.append("reference started")
        started(self, *args, **kwargs)

    def extracting(self: Session, *args, **kwargs):
        events.append("extract")
        return extract(self, *args, **kwargs)

    monkeypatch.setattr(ReferenceAhead, "start", start)
    monkeypatch.setattr(Session, "extract", extracting)
    model = _dense(make_model)
    result = eqsat.optimize(model)
    assert events == ["reference started", "extract"]
    checked = result.report.verification
    assert checked.verified and checked.ok and len(checked.assignments) == 2  # both batch sizes
    sequential = verify(model, result.proto, soundness=result.session.soundness)  # the original run after, alone
    assert checked.to_dict() == sequential.to_dict()
    for ahead, alone in zip(checked.reference.runs, sequential.reference.runs):
        assert ahead.feeds.keys() == alone.feeds.keys()
        assert all(np.array_equal(ahead.feeds[k], alone.feeds[k]) for k in ahead.feeds)
        assert all(np.array_equal(a, b) for a, b in zip(ahead.outputs, alone.outputs))


def test_optimize_without_verification_starts_no_reference(make_model, monkeypatch) -> None:
    def start(self: ReferenceAhead, *args, **kwargs) -> None:
        raise AssertionError("no reference without verification")

    monkeypatch.setattr(ReferenceAhead, "start", start)
    assert not eqsat.optimize(_dense(make_model), verify=False).report.verification


def test_reference_ahead_raises_where_its_result_is_asked_for() -> None:
    assert ReferenceAhead().result() is None  # never started
    ahead = ReferenceAhead(strict=True)
    ahead.start(custom_op_model(), source="in.onnx")
    with pytest.raises(BadInputError, match=r"^in\.onnx: cannot be verified.*Mystery"):
        ahead.result()
    quiet = ReferenceAhead()
    quiet.start(custom_op_model(), source="in.onnx")
    reference = quiet.result()
    assert reference is not None and "Mystery" in reference.unverified


def _chain(length: int) -> EGraph:
    """x -> Relu -> Relu ...: `length` classes of [2, 8] floats, one node each."""
    nodes = tuple(
        ENode(i, "Input" if i == 0 else "Relu", i, () if i == 0 else (i - 1,), ("x",) if i == 0 else ())
        for i in range(length)
    )
    classes = tuple(EClass(i, "T", (i,), (2, 8), "FLOAT", False) for i in range(length))
    return EGraph(nodes, classes, (length - 1,))


def test_roofline_derives_each_graphs_facts_once_while_graphs_alternate(monkeypatch) -> None:
    """A run costs the e-graph, the chosen graph on its own, then the e-graph again: its facts are not derived
    twice, and the prices are those of a fresh model."""
    calls: list[int] = []
    estimate = cost_module._estimate_numel

    def counted(egraph: EGraph):
        calls.append(len(egraph.nodes))
        return estimate(egraph)

    monkeypatch.setattr(cost_module, "_estimate_numel", counted)
    model = roofline(load_target("cpu"))
    big, small, third = _chain(6), _chain(3), _chain(4)
    first = [model(big, n) for n in big.nodes]
    fresh = roofline(load_target("cpu"))
    assert [model(small, n) for n in small.nodes] == [fresh(small, n) for n in small.nodes]
    again = [model(big, n) for n in big.nodes]
    [model(third, n) for n in third.nodes]
    assert again == first and [model(big, n) for n in big.nodes] == first
    assert calls.count(6) == 1 and calls.count(3) == 2 and calls.count(4) == 1  # `small`: its own and the fresh one's


def test_large_graphs_get_sessions_without_a_memory_pattern(make_model, monkeypatch) -> None:
    """Above MEM_PATTERN_MAX_NODES onnxruntime plans no memory pattern (its planning grows faster than the
    graph); the outputs are the same either way."""
    from eqsat.check import verify as verifying

    model = _dense(make_model)
    feeds = {"x": np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)}
    small = verifying.Runner(model)
    expected, _ = small.run(feeds)
    assert small._ort().get_session_options().enable_mem_pattern
    monkeypatch.setattr(verifying, "MEM_PATTERN_MAX_NODES", len(model.graph.node) - 1)
    large = verifying.Runner(model)
    got, runtime = large.run(feeds)
    assert runtime == "onnxruntime" and not large._ort().get_session_options().enable_mem_pattern
    assert all(np.array_equal(a, b) for a, b in zip(expected, got))


def test_absent_classes_are_the_classes_holding_an_absent_node() -> None:
    nodes = (ENode(0, "Input", 0, (), ("x",)), ENode(1, "Absent", 1, (), ()), ENode(2, "Relu", 2, (0,), ()))
    classes = tuple(EClass(i, "T", (i,), (2,), "FLOAT", False) for i in range(3))
    assert EGraph(nodes, classes, (2,)).absent_classes == frozenset({1})


def test_the_reference_is_planned_where_it_starts_and_only_onnxruntime_runs_in_the_thread(
    make_model, monkeypatch
) -> None:
    """Shape inference and drawing (they hold the GIL) happen in `start`'s thread; the reference thread only makes
    the session and runs the planned feeds, and the outputs are the sequential call's."""
    import threading

    from eqsat.check import verify_facts, verify_values
    from eqsat.check.verify import expected_outputs

    where: list[str] = []
    infer, draw = verify_facts.ShapeFacts.infer, verify_values.Plan.draw

    def inferring(self, *args, **kwargs):  # noqa: ANN001, ANN202
        where.append(threading.current_thread().name)
        return infer(self, *args, **kwargs)

    def drawing(self, *args, **kwargs):  # noqa: ANN001, ANN202
        where.append(threading.current_thread().name)
        return draw(self, *args, **kwargs)

    monkeypatch.setattr(verify_facts.ShapeFacts, "infer", inferring)
    monkeypatch.setattr(verify_values.Plan, "draw", drawing)
    model = _dense(make_model)
    ahead = ReferenceAhead()
    ahead.start(model)
    reference = ahead.result()
    assert where and set(where) == {threading.current_thread().name}
    alone = expected_outputs(model)
    assert reference is not None and len(reference.runs) == len(alone.runs) == 2
    assert reference.notes == alone.notes and reference.runtime == alone.runtime == "onnxruntime"
    for ahead_run, alone_run in zip(reference.runs, alone.runs):
        assert all(np.array_equal(ahead_run.feeds[k], alone_run.feeds[k]) for k in alone_run.feeds)
        assert all(np.array_equal(a, b) for a, b in zip(ahead_run.outputs, alone_run.outputs))
