"""The engine end to end on small built graphs: opaque pass-through, multi-output ops, subgraphs,
limits, determinism and idempotence."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto as TP

import eqsat
from eqsat.frontend import io, normalize
from eqsat.engine.rule import Rule, rw
from eqsat.engine.saturate import Limits
from eqsat.session import saturate
from tests.conftest import BUNDLED_MODELS, build_model

F = TP.FLOAT


def _ops(model) -> list[str]:
    return [n.op_type for n in model.graph]


def test_custom_domain_op_passes_through_intact() -> None:
    nodes = [
        oh.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
        oh.make_node("Relu", ["t"], ["r"]),
        oh.make_node("MyOp", ["r"], ["c"], domain="com.example", alpha=0.5, mode="fast"),
        oh.make_node("Transpose", ["c"], ["t2"], perm=[0, 3, 1, 2]),
        oh.make_node("Transpose", ["t2"], ["y"], perm=[0, 2, 3, 1]),
    ]
    model = build_model(nodes, [("x", F, [1, 2, 3, 4])], [("y", F, [1, 3, 4, 2])])
    model.opset_import.append(oh.make_opsetid("com.example", 1))
    result = eqsat.optimize(model, verify=False)
    proto = io.to_proto(result.model)
    custom = [n for n in proto.graph.node if n.domain == "com.example"]
    assert len(custom) == 1 and custom[0].op_type == "MyOp"
    assert {a.name: oh.get_attribute_value(a) for a in custom[0].attribute} == {"alpha": 0.5, "mode": b"fast"}
    assert _ops(result.model).count("Transpose") == 1  # the pair after MyOp cancels; the one before stays
    assert [o.name for o in proto.graph.output] == ["y"]


def test_multi_output_split_is_kept_and_sound() -> None:
    nodes = [
        oh.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1),
        oh.make_node("Relu", ["a"], ["ra"]),
        oh.make_node("Identity", ["b"], ["ib"]),
        oh.make_node("Add", ["ra", "ib"], ["y"]),
    ]
    model = build_model(nodes, [("x", F, [2, 6])], [("y", F, [2, 3])], {"sizes": np.array([3, 3], np.int64)})
    result = eqsat.optimize(model)
    assert result.report.verification.ok
    assert _ops(result.model).count("Split") == 1 and "Identity" not in _ops(result.model)


def test_if_subgraph_reading_outer_values_is_kept() -> None:
    then_graph = oh.make_graph(
        [oh.make_node("Identity", ["r"], ["out_then"])], "then", [], [oh.make_tensor_value_info("out_then", F, [2, 3])]
    )
    else_graph = oh.make_graph(
        [oh.make_node("Neg", ["r"], ["out_else"])], "else", [], [oh.make_tensor_value_info("out_else", F, [2, 3])]
    )
    nodes = [
        oh.make_node("Relu", ["x"], ["r0"]),
        oh.make_node("Relu", ["r0"], ["r"]),
        oh.make_node("If", ["cond"], ["y"], then_branch=then_graph, else_branch=else_graph),
    ]
    model = build_model(nodes, [("x", F, [2, 3]), ("cond", TP.BOOL, [])], [("y", F, [2, 3])])
    result = eqsat.optimize(model)
    assert result.report.verification.ok
    assert _ops(result.model).count("If") == 1
    assert result.report.saturation.rules_fired.get("relu-merge")


def _add_chain(n: int) -> onnx.ModelProto:
    nodes, prev = [], "x0"
    for i in range(1, n):
        nodes.append(oh.make_node("Add", [prev, f"x{i}"], [f"s{i}"]))
        prev = f"s{i}"
    nodes.append(oh.make_node("Identity", [prev], ["y"]))
    return build_model(nodes, [(f"x{i}", F, [4]) for i in range(n)], [("y", F, [4])])


EXPLOSIVE = (
    Rule("add-commute", "test", "fp-reassoc", "test", "a + b -> b + a", (rw("(Add a b)", "(Add b a)"),)),
    Rule(
        "add-assoc",
        "test",
        "fp-reassoc",
        "test",
        "(a + b) + c -> a + (b + c)",
        (rw("(Add (Add a b) c)", "(Add a (Add b c))"),),
    ),
)


@pytest.mark.parametrize(
    "limits, reason",
    [
        (Limits(nodes=2_000), "node-limit"),
        (Limits(iterations=3), "iteration-limit"),
        (Limits(seconds=0.0), "time-limit"),
        pytest.param(Limits(seconds=0.5), "time-limit", marks=pytest.mark.slow),  # waits out the clock
    ],
)
def test_limits_stop_an_exploding_ruleset_and_keep_a_valid_graph(limits: Limits, reason: str) -> None:
    """No wall-clock assertion: the time limit's overshoot is checked for being reported, not for its size."""
    session = saturate(_add_chain(12), limits=limits, rules=EXPLOSIVE)
    report = session.saturation
    assert report.stop_reason == reason
    if reason == "node-limit":
        assert report.enodes > limits.nodes and report.overshoot == report.enodes - limits.nodes
        assert "overshot" in report.to_text()
    if reason == "time-limit":
        assert not report.deterministic
        assert report.time_overshoot == max(0.0, report.seconds - limits.seconds)
        assert ("overshot by" in report.to_text()) == (report.time_overshoot > 0)
        assert report.iterations >= (1 if limits.seconds else 0)  # the look-ahead still lets iterations run
    result = session.extract("cpu", extractor="greedy-dag", verify=True)
    assert result.report.verification.ok
    assert _ops(result.model).count("Add") == 11


@pytest.mark.slow  # whole models
@pytest.mark.parametrize("path", BUNDLED_MODELS, ids=[p.stem for p in BUNDLED_MODELS])
def test_bundled_models_deterministic_and_idempotent(path, tmp_path) -> None:
    first = eqsat.optimize(path, output=tmp_path / "a.onnx")
    eqsat.optimize(path, output=tmp_path / "b.onnx", verify=False)
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()
    again = eqsat.optimize(tmp_path / "a.onnx", output=tmp_path / "c.onnx")
    assert again.report.nodes_after == first.report.nodes_after
    assert sorted(_ops(again.model)) == sorted(_ops(first.model))


def test_provenance_metadata_and_explain(tmp_path, capsys) -> None:
    from eqsat.ui.cli import main

    out = tmp_path / "out.onnx"
    assert main(["optimize", str(BUNDLED_MODELS[0].parent / "nhwc_tfstyle_resnet_legacy.onnx"), "-o", str(out)]) == 0
    proto = onnx.load(str(out))
    meta = [{p.key: p.value for p in n.metadata_props} for n in proto.graph.node]
    assert all("eqsat.from" in m for m in meta if m), "every annotated node names its origin"
    _, normalized = normalize.normalize_proto(
        onnx.load(str(BUNDLED_MODELS[0].parent / "nhwc_tfstyle_resnet_legacy.onnx")), "m"
    )
    recorded = {name for m in meta for name in m.get("eqsat.from", "").split(",") if name}
    assert {n.name for n in normalized.graph.node} <= recorded, (
        "every original node (after load-time folding) "
        "is in some output node's history: folded Convs, BatchNorms and cancelled Transposes included"
    )
    again = tmp_path / "again.onnx"
    assert main(["optimize", str(out), "-o", str(again)]) == 0

    def history(m: onnx.ModelProto) -> list[str | None]:
        return [{p.key: p.value for p in n.metadata_props}.get("eqsat.from") for n in m.graph.node]

    assert history(onnx.load(str(again))) == history(proto), "a second pass keeps the first pass's history"
    sunk = next(n for n, m in zip(proto.graph.node, meta) if "transpose-sink-binary-const" in m.get("eqsat.rules", ""))
    capsys.readouterr()
    assert main(["explain", str(out), sunk.name]) == 0
    text = capsys.readouterr().out
    assert f"node     {sunk.name}: {sunk.op_type}" in text and "transpose-sink-binary-const:" in text
    assert main(["explain", str(out), "no-such-node"]) == 2


@pytest.mark.parametrize("extractor", ["tree", "greedy-dag", "ilp"])
@pytest.mark.parametrize("op", ["GlobalAveragePool", "ReduceMean"])
def test_cost_ties_keep_the_input_op(op: str, extractor: str) -> None:
    """GlobalAveragePool and ReduceMean over H, W are one e-class; at equal cost the input's op stays."""
    attrs = {"axes": [2, 3], "keepdims": 1} if op == "ReduceMean" else {}
    model = build_model(
        [oh.make_node(op, ["x"], ["y"], **attrs)], [("x", F, [1, 4, 3, 3])], [("y", F, [1, 4, 1, 1])], opset=17
    )
    session = saturate(model)
    assert session.saturation.rules_fired, "the other form must be in the e-graph for the tie to exist"
    result = session.extract(cost=lambda graph, node: 1.0, extractor=extractor)
    assert _ops(result.model) == [op]


def _initializer_shapes(result) -> dict[str, tuple[int, ...]]:
    return {t.name: tuple(t.dims) for t in io.to_proto(result.model).graph.initializer}


def test_broadcast_constants_are_written_at_their_own_rank() -> None:
    """The encoder raises a bias to the output's rank; the output writes it back as (N,), the form
    onnxruntime's MatMul + bias and Gelu fusions match (a (1, 1, N) bias cost ViT 4% under ORT_ENABLE_ALL)."""
    nodes = [oh.make_node("MatMul", ["x", "w"], ["m"]), oh.make_node("Add", ["m", "b"], ["y"])]
    model = build_model(
        nodes,
        [("x", F, [1, 5, 4])],
        [("y", F, [1, 5, 3])],
        {"w": np.ones((4, 3), np.float32), "b": np.arange(3, dtype=np.float32)},
    )
    result = eqsat.optimize(model)
    assert result.report.verification.ok
    assert _initializer_shapes(result)["b"] == (3,)


def test_constants_keep_the_rank_their_readers_need() -> None:
    """Leading 1-dims stay where they set the output's rank (no other operand has it) or where a reader
    does not broadcast (Concat)."""
    nodes = [oh.make_node("Add", ["x", "c"], ["y"]), oh.make_node("Concat", ["x3", "d"], ["z"], axis=2)]
    model = build_model(
        nodes,
        [("x", F, [4]), ("x3", F, [1, 2, 4])],
        [("y", F, [1, 1, 4]), ("z", F, [1, 2, 8])],
        {"c": np.ones((1, 1, 4), np.float32), "d": np.ones((1, 2, 4), np.float32)},
    )
    result = eqsat.optimize(model)
    assert result.report.verification.ok
    shapes = _initializer_shapes(result)
    assert shapes["c"] == (1, 1, 4) and shapes["d"] == (1, 2, 4)


def test_next_iteration_estimate_grows_with_the_last_ratio() -> None:
    from eqsat.engine.saturate import next_iteration

    assert next_iteration([]) == 0.0 and next_iteration([0.2]) == 0.2
    assert next_iteration([0.01, 0.1]) == pytest.approx(1.0)  # 10x growth: the next one is 10x again
    assert next_iteration([0.1, 0.05]) == pytest.approx(0.05)  # shrinking: no less than the last one


def _softmax(op: str, shape: list, opset: int = 11, **attrs) -> onnx.ModelProto:
    return build_model([oh.make_node(op, ["x"], ["y"], **attrs)], [("x", F, shape)], [("y", F, shape)], opset=opset)


def _encoded_ops(model: onnx.ModelProto) -> tuple[int, int]:
    """(typed, opaque) nodes of the model's encoding."""
    from eqsat.engine.encode import encode

    enc = encode(normalize.normalize_proto(model)[0])
    return enc.typed, enc.opaque


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("attrs", [{}, {"axis": -3}])
def test_softmax_before_opset_13_over_flattened_dims_is_kept(op: str, attrs: dict) -> None:
    """Before opset 13 Softmax works over the dims [axis:] flattened (axis 1 by default), not over one axis as the
    term says: on a rank-4 input such a node is kept as it is."""
    model = _softmax(op, [2, 3, 4, 5], **attrs)
    assert _encoded_ops(model) == (0, 1)
    result = eqsat.optimize(model)
    assert result.report.verification.ok
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)}
    from eqsat.testing import run

    np.testing.assert_array_equal(run(result.proto, feeds)[0], run(model, feeds)[0])


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize(
    "shape,attrs,modelled",
    [([2, 5], {}, True), ([2, 5, 1, 1], {}, True), ([2, 3, 4], {"axis": 2}, True), ([2, 5, "n"], {}, False)],
)
def test_softmax_before_opset_13_over_one_axis_is_modelled(op: str, shape: list, attrs: dict, modelled: bool) -> None:
    """Where every dim after the axis is 1 (the last axis; unit dims after it) both meanings agree: modelled, and
    written with its axis (the opset's default is not opset 13's). A symbolic dim after it may not be 1."""
    model = _softmax(op, shape, **attrs)
    assert _encoded_ops(model) == ((1, 0) if modelled else (0, 1))
    result = eqsat.optimize(model)
    assert result.report.verification.ok
    (out,) = result.proto.graph.node
    written = [("axis", attrs.get("axis", 1))] if modelled else list(attrs.items())  # opaque: kept as it was
    assert out.op_type == op and [(a.name, a.i) for a in out.attribute] == written


@pytest.mark.parametrize("opset", [11, 13])
def test_a_squeeze_whose_axes_are_written_empty_is_kept_as_it_is(opset: int) -> None:
    """Squeeze with axes written but empty (an attribute before opset 13, an input after): onnxruntime squeezes
    every dim of 1, ONNX's shape inference none. eqsat leaves the node exactly as written (it dropped the empty
    axes, and its own check then refused the output)."""
    if opset == 11:
        squeeze = oh.make_node("Squeeze", ["x"], ["s"])
        squeeze.attribute.append(oh.make_attribute("axes", [], attr_type=onnx.AttributeProto.INTS))
        inits: dict = {}
    else:
        squeeze = oh.make_node("Squeeze", ["x", "axes"], ["s"])
        inits = {"axes": np.zeros(0, np.int64)}
    m = build_model(
        [squeeze, oh.make_node("Relu", ["s"], ["y"])],
        [("x", TP.FLOAT, [2, 1, 3])],
        [("y", TP.FLOAT, ["A", "B", "C"])],
        inits,
        opset=opset,
    )
    out = eqsat.optimize(m, verify=False).proto
    onnx.checker.check_model(out, full_check=True)
    (kept,) = [n for n in out.graph.node if n.op_type == "Squeeze"]
    assert list(kept.input)[1:] == list(squeeze.input)[1:] and [a.name for a in kept.attribute] == [
        a.name for a in squeeze.attribute
    ]
