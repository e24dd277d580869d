"""What a report says at the top: the headline (ops without Constant nodes, the estimated cost change) and one
warning per condition that changed what the run could do (eqsat.run_warnings), in the text report, the
JSON `warnings` and `Result.warnings` alike: a test per kind."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import eqsat
from eqsat.breakdown import compute_ops
from eqsat.errors import VerificationError
from eqsat.session import saturate
from tests.test_display import _sandwich


def _top(result: eqsat.Result) -> list[str]:
    """The lines of the text report before its first table (the headline and the warnings)."""
    lines = result.report.to_text().splitlines()
    return lines[: lines.index("")]


def _says_at_the_top(result: eqsat.Result, words: str) -> None:
    assert any(words in w for w in result.warnings), result.warnings
    assert any(words in line and "warning:" in line for line in _top(result)), _top(result)
    data = json.loads(json.dumps(result.report.to_dict()))
    assert any(words in w for w in data["warnings"])
    assert words in result.report._repr_html_()


def _with_constants() -> onnx.ModelProto:
    """x -> Add(c) -> Relu with c a Constant node (lifted to an initializer: no optimization)."""
    c = oh.make_node("Constant", [], ["c"], value=oh.make_tensor("cv", onnx.TensorProto.FLOAT, [1], [0.0]))
    add = oh.make_node("Add", ["x", "c"], ["a"])
    relu = oh.make_node("Relu", ["a"], ["y"])
    graph = oh.make_graph(
        [c, add, relu],
        "g",
        [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
        [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def test_the_headline_does_not_count_constants_lifted() -> None:
    result = eqsat.optimize(_with_constants())
    head = result.report.headline()
    assert head["constants_before"] == 1 and head["constants_after"] == 0
    assert head["ops_before"] == compute_ops(result.report.ops_before) == 2  # Add, Relu: the Constant is no op
    assert head["ops_after"] == 1  # x + 0 -> x
    assert head["cost_before"] is not None and head["cost_after"] <= head["cost_before"]
    line = _top(result)[1]
    assert line.strip().startswith("2 -> 1 ops") and "Constant nodes 1 -> 0" in line and "est. cost (cpu)" in line
    assert json.loads(json.dumps(result.report.to_dict()))["headline"] == head


def test_shape_facts_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Symbolic facts that meet in one e-class: saturation reruns on static facts, and the report says so at the
    top (it was only in saturation.note)."""
    import eqsat.session as session_module

    real, calls = session_module._in_backend, []

    def conflict_first(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError(f"{session_module._SYMBOL_CONFLICT} (planted)")
        return real(*args, **kwargs)

    monkeypatch.setattr(session_module, "_in_backend", conflict_first)
    result = eqsat.optimize(_sandwich())
    assert "static shape facts only" in result.report.saturation.note
    _says_at_the_top(result, "shape facts dropped")


def test_a_rule_set_restricted() -> None:
    _says_at_the_top(eqsat.optimize(_sandwich(), disable=["transpose-merge"]), "rule set restricted")


@pytest.mark.parametrize("limit, words", [({"node_limit": 1}, "node limit hit"), ({"time_limit": 0}, "time limit hit")])
def test_a_limit_hit(limit: dict, words: str) -> None:
    _says_at_the_top(eqsat.optimize(_sandwich(), **limit), words)


def test_the_iteration_limit_is_no_warning() -> None:
    assert not eqsat.optimize(_sandwich(), iter_limit=1).warnings


def test_an_unverified_output() -> None:
    _says_at_the_top(eqsat.optimize(_sandwich(), verify=False), "not verified: verification was off")
    assert not eqsat.optimize(_sandwich()).warnings


def test_a_re_extraction_says_it_is_not_verified_until_checked(tmp_path) -> None:
    session = saturate(_sandwich())
    result = session.extract("gpu")
    assert result.report.verification is None and result.pending_verification
    _says_at_the_top(result, "not verified: a re-extraction")
    assert "verification not run" in result.report.to_text()
    result.save(tmp_path / "o.onnx")  # verifies first
    assert result.verified and not result.warnings and not result.pending_verification
    assert "verification verified" in result.report.to_text()
    again = session.extract("npu")
    assert again.verify().ok and again.verified and not again.warnings


def test_a_wrong_re_extraction_is_not_saved(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = saturate(_sandwich())
    result = session.extract("cpu")
    relu = next(n for n in result.proto.graph.node if n.op_type == "Relu")
    relu.op_type = "Neg"  # a wrong model
    with pytest.raises(VerificationError):
        result.save(tmp_path / "o.onnx")
    assert not (tmp_path / "o.onnx").exists() and not result.report.verification.ok


def test_a_result_verify_found_wrong_is_never_saved(tmp_path) -> None:
    """verify() finding different outputs leaves a result save() refuses, and says so in its warnings: checking
    first must not clear the way for a wrong model."""
    session = saturate(_sandwich())
    result = session.extract("cpu")
    relu = next(n for n in result.proto.graph.node if n.op_type == "Relu")
    relu.op_type = "Neg"  # a wrong model
    assert not result.verify().ok
    assert any(w.endswith("save() refuses to write it") for w in result.warnings)
    with pytest.raises(VerificationError):
        result.save(tmp_path / "o.onnx")
    assert not (tmp_path / "o.onnx").exists()


def test_a_body_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    import eqsat.subgraphs as sg
    from tests.test_subgraphs import _double_transpose, _if_model
    from tests.rule_graphs import node

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(sg, "standalone", broken)
    m = _if_model(_double_transpose("a", "x"), "a_out", [node("Neg", ["x"], "b_out")], "b_out")
    _says_at_the_top(eqsat.optimize(m), "body left as it was")


def test_warnings_are_not_repeated() -> None:
    result = eqsat.optimize(_sandwich(), disable=["transpose-merge"], verify=False)
    assert len(result.warnings) == len(set(result.warnings)) == 2
    assert np.all([w in result.report.to_text() for w in result.warnings])
