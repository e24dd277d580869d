"""If/Loop/Scan bodies optimized as graphs of their own (eqsat/subgraphs.py), verified as part of the model."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import eqsat
from eqsat.engine.lower import PROVENANCE_KEY
from eqsat.subgraphs import all_graphs, count_nodes
from tests.rule_graphs import model, node, transpose

F32 = onnx.TensorProto.FLOAT
SHAPE = [2, 3, 4]


def _branch(name: str, nodes: list[onnx.NodeProto], out: str) -> onnx.GraphProto:
    return oh.make_graph(nodes, name, [], [oh.make_tensor_value_info(out, F32, SHAPE)])


def _double_transpose(prefix: str, x: str) -> list[onnx.NodeProto]:
    """x -> Transpose -> Transpose back -> Relu: the pair cancels."""
    return [
        transpose(x, f"{prefix}_t1", (2, 0, 1)),
        transpose(f"{prefix}_t1", f"{prefix}_t2", (1, 2, 0)),
        node("Relu", [f"{prefix}_t2"], f"{prefix}_out"),
    ]


def _if_model(
    then_nodes: list[onnx.NodeProto],
    then_out: str,
    else_nodes: list[onnx.NodeProto],
    else_out: str,
    cond_input: bool = True,
    initializers: dict | None = None,
) -> onnx.ModelProto:
    body = [
        oh.make_node(
            "If",
            ["c"],
            ["y"],
            name="the_if",
            then_branch=_branch("then", then_nodes, then_out),
            else_branch=_branch("else", else_nodes, else_out),
        )
    ]
    inputs = [("x", "FLOAT", SHAPE)] + ([("c", "BOOL", [])] if cond_input else [])
    return model(body, inputs, [("y", "FLOAT", SHAPE)], initializers)


def _run(m: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    import onnxruntime as ort

    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _x() -> np.ndarray:
    return np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)


def _ops(graph: onnx.GraphProto) -> list[str]:
    return sorted(n.op_type for g in all_graphs(graph) for n in g.node)


def _agree_on_both_branches(before: onnx.ModelProto, after: onnx.ModelProto) -> None:
    for c in (True, False):
        feeds = {"x": _x(), "c": np.array(c)}
        np.testing.assert_allclose(_run(after, feeds)[0], _run(before, feeds)[0], rtol=1e-6)


def _unnamed(m: onnx.ModelProto) -> list[str]:
    return [
        n.name or n.op_type
        for g in all_graphs(m.graph)
        for n in g.node
        if not any(p.key == PROVENANCE_KEY and p.value for p in n.metadata_props)
    ]


def test_if_bodies_reading_outer_values_are_optimized_and_verified() -> None:
    m = _if_model(_double_transpose("a", "x"), "a_out", [node("Neg", ["x"], "b_out")], "b_out")
    result = eqsat.optimize(m)  # verified: the If runs on the seeded condition
    assert result.report.verification.ok
    out = result.proto
    assert _ops(out.graph) == ["If", "Neg", "Relu"]
    _agree_on_both_branches(m, out)
    stats = result.report.subgraphs
    assert (stats.optimized, stats.kept, stats.nodes_before, stats.nodes_after) == (1, 1, 4, 2)
    assert result.report.nodes_before == 5 and result.report.nodes_after == 3  # bodies counted
    assert "bodies optimized" in result.report.to_text()
    onnx.checker.check_model(out, full_check=True)


def test_conv_batchnorm_in_a_body_with_outer_weights_is_folded() -> None:
    rng = np.random.default_rng(1)
    inits = {
        "w": rng.standard_normal((3, 2, 1, 1)).astype(np.float32),
        "s": rng.uniform(0.5, 2, 3).astype(np.float32),
        "b": rng.standard_normal(3).astype(np.float32),
        "mu": rng.standard_normal(3).astype(np.float32),
        "var": rng.uniform(0.5, 2, 3).astype(np.float32),
    }
    shape = [1, 2, 4, 4]
    conv_bn = [node("Conv", ["x", "w"], "cv"), node("BatchNormalization", ["cv", "s", "b", "mu", "var"], "bn")]
    then = oh.make_graph(conv_bn, "then", [], [oh.make_tensor_value_info("bn", F32, [1, 3, 4, 4])])
    other = oh.make_graph(
        [node("Conv", ["x", "w"], "cv2")], "else", [], [oh.make_tensor_value_info("cv2", F32, [1, 3, 4, 4])]
    )
    m = model(
        [oh.make_node("If", ["c"], ["y"], name="the_if", then_branch=then, else_branch=other)],
        [("x", "FLOAT", shape), ("c", "BOOL", [])],
        [("y", "FLOAT", [1, 3, 4, 4])],
        inits,
    )
    out = eqsat.optimize(m).proto
    assert "BatchNormalization" not in _ops(out.graph)
    assert sorted(t.name for t in out.graph.initializer) == ["w"]  # the folded parameters live in the body
    for c in (True, False):
        feeds = {"x": rng.standard_normal(shape).astype(np.float32), "c": np.array(c)}
        np.testing.assert_allclose(_run(out, feeds)[0], _run(m, feeds)[0], rtol=1e-4, atol=1e-5)
    onnx.checker.check_model(out, full_check=True)
    assert not _unnamed(out)


def test_loop_body_is_optimized_and_verified() -> None:
    i64, b = onnx.TensorProto.INT64, onnx.TensorProto.BOOL
    body = oh.make_graph(
        [
            oh.make_node("Identity", ["cond_in"], ["cond_out"]),
            transpose("acc", "t1", (2, 0, 1)),
            transpose("t1", "t2", (1, 2, 0)),
            node("Mul", ["t2", "one"], "m"),
            node("Add", ["m", "x"], "acc_out"),
        ],
        "loop_body",
        [
            oh.make_tensor_value_info("i", i64, []),
            oh.make_tensor_value_info("cond_in", b, []),
            oh.make_tensor_value_info("acc", F32, SHAPE),
        ],
        [oh.make_tensor_value_info("cond_out", b, []), oh.make_tensor_value_info("acc_out", F32, SHAPE)],
    )
    m = model(
        [oh.make_node("Loop", ["n", "", "x"], ["y"], name="the_loop", body=body)],
        [("x", "FLOAT", SHAPE), ("n", "INT64", [])],
        [("y", "FLOAT", SHAPE)],
        {"one": np.ones((), np.float32)},
    )
    result = eqsat.optimize(m, verify=False)
    out = result.proto
    assert _ops(out.graph) == ["Add", "Identity", "Loop"]
    feeds = {"x": _x(), "n": np.array(3, np.int64)}
    np.testing.assert_allclose(_run(out, feeds)[0], _run(m, feeds)[0], rtol=1e-6)
    assert result.report.subgraphs.optimized == 1
    onnx.checker.check_model(out, full_check=True)
    assert not _unnamed(out)


def test_if_with_a_constant_condition_is_replaced_by_its_branch() -> None:
    m = _if_model(
        _double_transpose("a", "x"),
        "a_out",
        [node("Neg", ["x"], "b_out")],
        "b_out",
        cond_input=False,
        initializers={"c": np.array(True)},
    )
    out = eqsat.optimize(m).proto
    assert _ops(out.graph) == ["Relu"]
    np.testing.assert_allclose(_run(out, {"x": _x()})[0], np.maximum(_x(), 0), rtol=1e-6)
    (relu,) = out.graph.node
    origin = {p.key: p.value for p in relu.metadata_props}[PROVENANCE_KEY]
    assert "the_if" in origin


def test_nested_if_bodies_are_optimized() -> None:
    inner = oh.make_node(
        "If",
        ["c2"],
        ["inner_y"],
        name="inner_if",
        then_branch=_branch("ithen", _double_transpose("p", "x"), "p_out"),
        else_branch=_branch("ielse", [node("Neg", ["x"], "q_out")], "q_out"),
    )
    c2 = node("Not", ["c"], "c2")
    m = _if_model([inner], "inner_y", [node("Sigmoid", ["x"], "b_out")], "b_out")
    m.graph.node.insert(0, c2)
    out = eqsat.optimize(m).proto
    assert "Transpose" not in _ops(out.graph)
    _agree_on_both_branches(m, out)
    onnx.checker.check_model(out, full_check=True)
    assert not _unnamed(out)


def test_a_body_that_cannot_be_improved_stays_identical() -> None:
    then_nodes = [node("Relu", ["x"], "r"), node("Sigmoid", ["r"], "a_out")]
    m = _if_model(then_nodes, "a_out", [node("Neg", ["x"], "b_out")], "b_out")
    out = eqsat.optimize(m).proto
    (the_if,) = out.graph.node
    before = {a.name: a.g for a in m.graph.node[0].attribute}
    for a in the_if.attribute:
        assert [(n.op_type, list(n.input), list(n.output)) for n in a.g.node] == [
            (n.op_type, list(n.input), list(n.output)) for n in before[a.name].node
        ]
    _agree_on_both_branches(m, out)


def test_a_body_that_fails_to_optimize_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    import eqsat.subgraphs as sg

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(sg, "standalone", broken)
    m = _if_model(_double_transpose("a", "x"), "a_out", [node("Neg", ["x"], "b_out")], "b_out")
    result = eqsat.optimize(m)
    assert count_nodes(result.proto.graph) == count_nodes(m.graph)
    assert result.report.subgraphs.kept == 2 and "boom" in result.report.subgraphs.summary()
    assert not _unnamed(result.proto)


def test_a_body_kept_as_it_was_gets_unique_node_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """onnxruntime refuses two nodes of one name in a body too: one kept as it was is written with unique ones."""
    import eqsat.subgraphs as sg

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(sg, "standalone", broken)
    then = [oh.make_node("Relu", ["x"], ["r"], name="n"), oh.make_node("Neg", ["r"], ["a_out"], name="n")]
    m = _if_model(then, "a_out", [node("Neg", ["x"], "b_out")], "b_out")
    out = eqsat.optimize(m, verify=False).proto
    (the_if,) = out.graph.node
    body = next(a.g for a in the_if.attribute if a.name == "then_branch")
    assert [n.name for n in body.node] == ["n", "n__1"]
    x = _x()
    for c, want in ((True, -np.maximum(x, 0)), (False, -x)):  # onnxruntime refuses the input itself
        np.testing.assert_array_equal(_run(out, {"x": x, "c": np.array(c)})[0], want)


def test_every_body_node_names_its_origin() -> None:
    m = _if_model(_double_transpose("a", "x"), "a_out", [node("Neg", ["x"], "b_out")], "b_out")
    out = eqsat.optimize(m).proto
    assert not _unnamed(out)
    (the_if,) = out.graph.node
    then = next(a.g for a in the_if.attribute if a.name == "then_branch")
    origins = {p.value for n in then.node for p in n.metadata_props if p.key == PROVENANCE_KEY}
    assert any("a_t" in o or "Relu" in o or o for o in origins)


def test_scan_body_is_optimized_and_verified() -> None:
    body = oh.make_graph(
        [
            node("Mul", ["e", "one"], "m"),
            transpose("m", "t1", (1, 0)),
            transpose("t1", "t2", (1, 0)),
            node("Add", ["s_in", "t2"], "s_out"),
            node("Identity", ["s_out"], "scan_out"),
        ],
        "sbody",
        [oh.make_tensor_value_info("s_in", F32, [3, 4]), oh.make_tensor_value_info("e", F32, [3, 4])],
        [oh.make_tensor_value_info("s_out", F32, [3, 4]), oh.make_tensor_value_info("scan_out", F32, [3, 4])],
    )
    m = model(
        [oh.make_node("Scan", ["init", "x"], ["final", "cum"], name="the_scan", body=body, num_scan_inputs=1)],
        [("x", "FLOAT", SHAPE)],
        [("final", "FLOAT", [3, 4]), ("cum", "FLOAT", SHAPE)],
        {"init": np.zeros((3, 4), np.float32), "one": np.ones((), np.float32)},
    )
    result = eqsat.optimize(m)
    assert result.report.verification.ok
    assert _ops(result.proto.graph) == ["Add", "Identity", "Scan"]
    assert result.report.to_dict()["subgraphs"]["optimized"] == 1
    feeds = {"x": _x()}
    for got, want in zip(_run(result.proto, feeds), _run(m, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert not _unnamed(result.proto)


def test_an_outer_initializer_read_unchanged_stays_outside() -> None:
    """The else branch reads the outer initializer `k` unchanged: it stays an outer initializer, not copied
    into the body; the then branch is an Identity of `x` (kept)."""
    then = _branch("then", [node("Identity", ["x"], "a_out")], "a_out")
    other = _branch(
        "else",
        [*_double_transpose("b", "x")[:2], node("Add", ["b_t2", "k"], "b_out"), node("Relu", ["b_out"], "b_r")],
        "b_r",
    )
    m = model(
        [oh.make_node("If", ["c"], ["y"], name="the_if", then_branch=then, else_branch=other)],
        [("x", "FLOAT", SHAPE), ("c", "BOOL", [])],
        [("y", "FLOAT", SHAPE)],
        {"k": np.arange(4, dtype=np.float32)},
    )
    out = eqsat.optimize(m).proto
    assert _ops(out.graph) == ["Add", "Identity", "If", "Relu"]
    assert [t.name for t in out.graph.initializer] == ["k"]
    assert all(not a.g.initializer for a in out.graph.node[0].attribute)
    _agree_on_both_branches(m, out)
    onnx.checker.check_model(out, full_check=True)


def _two_readers(op: str) -> onnx.ModelProto:
    """y = x * 1 read by two If (or Loop) bodies: mul-one makes y x, and each body still reads y by name."""

    def body(unary: str, tag: str) -> onnx.GraphProto:
        if op == "If":
            return oh.make_graph(
                [oh.make_node(unary, ["y"], [f"o{tag}"])], f"b{tag}", [], [oh.make_tensor_value_info(f"o{tag}", 1, [2])]
            )
        loop_io = [oh.make_tensor_value_info(f"i{tag}", 7, []), oh.make_tensor_value_info(f"c{tag}", 9, [])]
        outs = [oh.make_tensor_value_info(f"d{tag}", 9, []), oh.make_tensor_value_info(f"o{tag}", 1, [2])]
        nodes = [oh.make_node("Identity", [f"c{tag}"], [f"d{tag}"]), oh.make_node(unary, ["y"], [f"o{tag}"])]
        return oh.make_graph(nodes, f"b{tag}", loop_io, outs)

    if op == "If":
        readers = [
            oh.make_node("If", ["c"], ["r1"], then_branch=body("Neg", "1"), else_branch=body("Abs", "2")),
            oh.make_node("If", ["c"], ["r2"], then_branch=body("Exp", "3"), else_branch=body("Relu", "4")),
        ]
        inputs, shape = [("x", "FLOAT", (2,)), ("c", "BOOL", ())], (2,)
    else:  # the Loops' cond input omitted (""), as exporters write it
        readers = [
            oh.make_node("Loop", ["n", ""], [f"r{k}"], body=body(u, str(k))) for k, u in ((1, "Neg"), (2, "Abs"))
        ]
        inputs, shape = [("x", "FLOAT", (2,)), ("n", "INT64", ())], (3, 2)
    one = {"one": np.array(1.0, np.float32)}
    nodes = [oh.make_node("Mul", ["x", "one"], ["y"]), *readers]
    return model(nodes, inputs, [("r1", "FLOAT", shape), ("r2", "FLOAT", shape)], initializers=one)


@pytest.mark.parametrize("op", ["If", "Loop"])
def test_an_outer_value_two_bodies_read_is_aliased_once(op: str) -> None:
    """Both bodies read y, which the outer graph computes as x now: y = Identity(x) is written once (twice is a
    duplicate definition onnxruntime refuses), and a Loop keeps its omitted cond input (onnxruntime needs two)."""
    m = _two_readers(op)
    out = eqsat.optimize(m, verify=False).proto
    assert [n.output[0] for n in out.graph.node].count("y") == 1
    feeds = {"x": np.array([1.0, -2.0], np.float32)}
    feeds |= {"c": np.array(True)} if op == "If" else {"n": np.array(3, np.int64)}
    for got, expected in zip(_run(out, feeds), _run(m, feeds)):
        np.testing.assert_array_equal(got, expected)
