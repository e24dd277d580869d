"""Small things a new user met: no internal op names in the op table, the size table and the op table agree
on counts, costs in us/ms, `eqsat info` counts the nodes in bodies, no overflow warnings from onnx.reference
on stderr."""

from __future__ import annotations

import types
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh

import eqsat
from eqsat.breakdown import _op_label
from eqsat.check.verify import Runner
from eqsat.extract.result import ExtractionSummary
from eqsat.ui.info import describe

F32 = onnx.TensorProto.FLOAT


def test_internal_constructors_show_their_onnx_name() -> None:
    assert _op_label(types.SimpleNamespace(op="ReshapeDyn", attrs=())) == "Reshape"
    assert _op_label(types.SimpleNamespace(op="Relu", attrs=())) == "Relu"


def _folded_cast() -> onnx.ModelProto:
    """y = Relu(x + Cast(c)): the Cast of a constant folds away before encoding."""
    c = oh.make_tensor("c", onnx.TensorProto.DOUBLE, [1], [1.0])
    nodes = [
        oh.make_node("Cast", ["c"], ["cf"], to=F32),
        oh.make_node("Add", ["x", "cf"], ["a"]),
        oh.make_node("Relu", ["a"], ["y"]),
    ]
    graph = oh.make_graph(
        nodes, "g", [oh.make_tensor_value_info("x", F32, [2, 3])], [oh.make_tensor_value_info("y", F32, [2, 3])], [c]
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def test_the_size_table_and_the_op_table_agree() -> None:
    """The op table's "nodes folded" column is the size table's "folded" column (both after constant
    folding): a Cast folded away is 1 in "input" and 0 in both."""
    report = eqsat.optimize(_folded_cast()).report
    folded = {o.op: o.nodes_before for o in report.breakdown.ops}
    assert report.ops_before["Cast"] == 1 and report.ops_folded["Cast"] == 0 and folded.get("Cast", 0) == 0
    for op, n in folded.items():
        assert report.ops_folded[op] == n, op
    cast_row = next(line for line in report.to_text().splitlines() if line.strip().startswith("Cast"))
    assert cast_row.split()[1:4] == ["1", "0", "0"]


def test_extraction_costs_are_shown_in_seconds_units() -> None:
    summary = ExtractionSummary("ilp", "cpu", 0.01, 0.000325522, 0.0005, 10, 20, 8)
    text = summary.to_text()
    assert "DAG cost 325.5 us" in text and "0.000325522" not in text
    assert "DAG cost 3" in ExtractionSummary("ilp", None, 0.01, 3.0, 4.0, 10, 20, 8).to_text()


def test_info_counts_the_nodes_in_bodies(tmp_path: Path) -> None:
    from tests.test_subgraphs import _double_transpose, _if_model
    from tests.rule_graphs import node

    m = _if_model(_double_transpose("a", "x"), "a_out", [node("Neg", ["x"], "b_out")], "b_out")
    path = tmp_path / "if.onnx"
    onnx.save(m, path)
    line = next(line for line in describe(str(path)).splitlines() if line.startswith("nodes"))
    assert "1 in the graph, 4 more in If/Loop/Scan bodies (5 in all)" in line


def test_no_overflow_warning_from_the_reference_runtime() -> None:
    graph = oh.make_graph(
        [oh.make_node("Exp", ["x"], ["y"])],
        "g",
        [oh.make_tensor_value_info("x", F32, [2])],
        [oh.make_tensor_value_info("y", F32, [2])],
    )
    runner = Runner(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]))
    runner._ort = lambda: None  # as when onnxruntime cannot load the model
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (out,), how = runner.run({"x": np.array([1000.0, 1.0], np.float32)})
    assert how == "onnx.reference" and np.isinf(out[0])
