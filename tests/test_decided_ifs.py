"""Ifs that the model's own rank requirements decide (eqsat.frontend.decided_ifs), on graphs of the shape torch exports
for `squeeze` on a dynamic dim feeding an LSTM (silero_vad's decoder): If(T == 1, Squeeze, Identity), then the
LSTM's run-time rank check If(rank != 2, Unsqueeze, Identity)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import eqsat
from eqsat.frontend import decided_ifs, io
from tests.conftest import build_model

F, I64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
HIDDEN = 3


def _branch(name: str, node: onnx.NodeProto, out: str, shape: list) -> onnx.GraphProto:
    return oh.make_graph([node], name, [], [oh.make_tensor_value_info(out, F, shape)])


def _squeeze_if_then(consumer: str) -> onnx.ModelProto:
    """x [1, 4, T] -> If(T == 1, Squeeze(x, 2), x) -> If(rank != 2, Unsqueeze(., 0), .) -> Unsqueeze(., 0) -> consumer
    (an LSTM, whose X must have rank 3: the original runs only for T = 1; or a ReduceSum, which takes any rank)."""
    rng = np.random.default_rng(0)
    nodes = [
        oh.make_node("Shape", ["x"], ["shape"]),
        oh.make_node("Gather", ["shape", "two"], ["t"], axis=0),
        oh.make_node("Equal", ["t", "one"], ["t_is_1"]),
        oh.make_node(
            "If",
            ["t_is_1"],
            ["v"],
            name="squeeze_if",
            then_branch=_branch("then", oh.make_node("Squeeze", ["x", "axis2"], ["sq"]), "sq", [1, 4]),
            else_branch=_branch("else", oh.make_node("Identity", ["x"], ["id"]), "id", [1, 4, "T"]),
        ),
        oh.make_node("Shape", ["v"], ["v_shape"]),
        oh.make_node("Size", ["v_shape"], ["v_rank"]),
        oh.make_node("Equal", ["v_rank", "two"], ["is_2d"]),
        oh.make_node("Not", ["is_2d"], ["not_2d"]),
        oh.make_node(
            "If",
            ["not_2d"],
            ["u"],
            name="rank_if",
            then_branch=_branch("then2", oh.make_node("Unsqueeze", ["v", "axis0"], ["un"]), "un", None),
            else_branch=_branch("else2", oh.make_node("Identity", ["v"], ["id2"]), "id2", None),
        ),
        oh.make_node("Unsqueeze", ["u", "axis0"], ["seq"]),
    ]
    inits = {
        "two": np.array(2, np.int64),
        "one": np.array(1, np.int64),
        "axis2": np.array([2], np.int64),
        "axis0": np.array([0], np.int64),
    }
    if consumer == "LSTM":
        nodes.append(oh.make_node("LSTM", ["seq", "W", "R", "B"], ["", "y"], hidden_size=HIDDEN, name="lstm"))
        inits |= {
            "W": rng.standard_normal((1, 4 * HIDDEN, 4)).astype(np.float32),
            "R": rng.standard_normal((1, 4 * HIDDEN, HIDDEN)).astype(np.float32),
            "B": rng.standard_normal((1, 8 * HIDDEN)).astype(np.float32),
        }
    else:
        nodes.append(oh.make_node("ReduceSum", ["seq"], ["y"], keepdims=0))
    return build_model(nodes, [("x", F, [1, 4, "T"])], [("y", F, [1, 1, HIDDEN] if consumer == "LSTM" else [])], inits)


def test_the_lstm_rank_decides_both_ifs() -> None:
    result = eqsat.optimize(_squeeze_if_then("LSTM"), input_shapes={"x": (1, 4, 1)})  # verified on T = 1
    assert result.report.ops_after["If"] == 0 and result.report.ops_before["If"] == 2
    assert any(
        note.startswith("If 'squeeze_if': then branch kept; the other makes LSTM 'lstm'")
        for note in result.report.notes
    )
    assert result.report.verification.ok


def test_ifs_stay_when_every_branch_can_run() -> None:
    """A ReduceSum takes any rank: neither branch fails, nothing is decided, both Ifs stay (verified on T = 3)."""
    result = eqsat.optimize(_squeeze_if_then("ReduceSum"), input_shapes={"x": (1, 4, 3)})
    assert result.report.ops_after["If"] == 2
    assert not [note for note in result.report.notes if note.startswith("If ")]


def test_the_decided_model_agrees_where_the_original_runs() -> None:
    import onnxruntime as ort

    model = _squeeze_if_then("LSTM")

    def run(m: onnx.ModelProto, length: int) -> np.ndarray:
        x = np.random.default_rng(length).standard_normal((1, 4, length)).astype(np.float32)
        return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]

    np.testing.assert_allclose(run(eqsat.optimize(model, verify=False).proto, 1), run(model, 1), rtol=1e-5)
    with pytest.raises(Exception, match="LSTM|rank|dimension"):  # the original rejects T != 1: the decision rests on it
        run(model, 2)


def test_unnamed_ifs_are_each_decided() -> None:
    """Two such patterns whose Ifs have no names: each condition gets its own initializer (a clash would leave
    the second If undecided)."""

    def renamed(graph: onnx.GraphProto, prefix: str) -> onnx.GraphProto:  # every value, bodies' reads included
        for n in graph.node:
            n.input[:] = [prefix + name if name else name for name in n.input]
            n.output[:] = [prefix + name if name else name for name in n.output]
            n.name = "" if n.op_type == "If" else prefix + n.name
            for attr in n.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    renamed(attr.g, prefix)
        for v in [*graph.input, *graph.output, *graph.value_info, *graph.initializer]:
            v.name = prefix + v.name
        return graph

    a, b = (renamed(_squeeze_if_then("LSTM").graph, prefix) for prefix in ("a_", "b_"))
    graph = oh.make_graph(
        [*a.node, *b.node],
        "two",
        [*a.input, *b.input],
        [*a.output, *b.output],
        initializer=[*a.initializer, *b.initializer],
    )
    m = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)], ir_version=10)
    result = eqsat.optimize(m, input_shapes={"a_x": (1, 4, 1), "b_x": (1, 4, 1)})
    assert result.report.ops_before["If"] == 4 and result.report.ops_after["If"] == 0
    assert len([note for note in result.report.notes if "then branch kept" in note]) == 2


def test_declared_ranks_prove_nothing() -> None:
    """The then branch declares a rank-4 output, but it is a Reshape to a run-time target (of length 3 here),
    which onnxruntime runs as rank 3 (a warning only): the declaration must not refute that branch. Verified
    where the then branch runs."""
    then = oh.make_graph(
        [oh.make_node("Reshape", ["x", "target"], ["r"])],
        "then",
        [],
        [oh.make_tensor_value_info("r", F, ["a", "b", "c", "d"])],
    )
    other = _branch("else", oh.make_node("Unsqueeze", ["x", "axis0"], ["u"]), "u", [1, 1, 4])
    rng = np.random.default_rng(0)
    nodes = [
        oh.make_node("If", ["c"], ["seq"], name="declared_if", then_branch=then, else_branch=other),
        oh.make_node("LSTM", ["seq", "W", "R"], ["", "y"], hidden_size=HIDDEN),
    ]
    inits = {
        "axis0": np.array([0], np.int64),
        "W": rng.standard_normal((1, 4 * HIDDEN, 4)).astype(np.float32),
        "R": rng.standard_normal((1, 4 * HIDDEN, HIDDEN)).astype(np.float32),
    }
    m = build_model(
        nodes,
        [("c", onnx.TensorProto.BOOL, []), ("x", F, [1, 4]), ("target", I64, ["n"])],
        [("y", F, [1, 1, HIDDEN])],
        inits,
    )
    result = eqsat.optimize(m, inputs={"c": np.array(True), "target": np.array([1, 1, 4], np.int64)})
    assert result.report.ops_after["If"] == 1
    assert not [note for note in result.report.notes if note.startswith("If ")]


def _ir_rank_rule(proto: onnx.ModelProto) -> str | None:
    """The rank rule check on the IR of `proto`: what the trial proto's reading must agree with."""
    for node in io.from_proto(proto).graph:
        for k, value in enumerate(node.inputs):
            rank = decided_ifs.RANK_RULES.get((node.op_type, k))
            if rank is not None and value is not None and value.shape is not None and len(value.shape) != rank:
                return f"{node.op_type} {node.name!r} read an input {k} of rank {len(value.shape)} (spec: {rank})"
    return None


def _lstm_reading(x: str, nodes: list, value_info: list, outputs: list, inits: list) -> onnx.ModelProto:
    lstm = oh.make_node("LSTM", [x, "W", "R"], ["", "y"], name="lstm", hidden_size=HIDDEN)
    graph = oh.make_graph(
        [*nodes, lstm],
        "ranks",
        [oh.make_tensor_value_info("x", F, [1, 1, 4])],
        [*outputs, oh.make_tensor_value_info("y", F, None)],
        initializer=inits,
        value_info=value_info,
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


@pytest.mark.parametrize(
    ("case", "broken"),
    [
        ("initializer-dims", "rank 2"),  # no declaration: its dims give the rank
        ("initializer-declared", None),  # its value_info (rank 3) wins over its dims
        ("output-declared", "rank 4"),  # a graph output's declaration wins over the value_info
        ("node-output-undeclared", None),  # no value_info: no rank, nothing proved
        ("node-output-declared", "rank 2"),
        ("input-missing-declared", "rank 5"),  # read, produced by nothing: the value_info gives the rank
    ],
)
def test_trial_ranks_read_as_the_ir_reads_them(case: str, broken: str | None) -> None:
    """A trial's ranks are read from its inferred proto (decided_ifs._broken_rank_rule) with the IR's rules for
    which declaration gives a value its shape: the result is the IR's, for each way a value can be declared."""
    rng = np.random.default_rng(0)
    inits = [
        onnx.numpy_helper.from_array(rng.standard_normal((1, 4 * HIDDEN, 4)).astype(np.float32), "W"),
        onnx.numpy_helper.from_array(rng.standard_normal((1, 4 * HIDDEN, HIDDEN)).astype(np.float32), "R"),
    ]
    flat = onnx.numpy_helper.from_array(np.zeros((1, 4), np.float32), "v")
    info = {rank: oh.make_tensor_value_info("v", F, [1] * rank) for rank in (2, 3, 4, 5)}
    squeeze = [oh.make_node("Identity", ["x"], ["v"])]
    proto = {
        "initializer-dims": lambda: _lstm_reading("v", [], [], [], [*inits, flat]),
        "initializer-declared": lambda: _lstm_reading("v", [], [info[3]], [], [*inits, flat]),
        "output-declared": lambda: _lstm_reading("v", squeeze, [info[2]], [info[4]], inits),
        "node-output-undeclared": lambda: _lstm_reading("v", squeeze, [], [], inits),
        "node-output-declared": lambda: _lstm_reading("v", squeeze, [info[2]], [], inits),
        "input-missing-declared": lambda: _lstm_reading("v", [], [info[5]], [], inits),
    }[case]()
    found = decided_ifs._broken_rank_rule(proto)
    assert found == _ir_rank_rule(proto)
    assert (found is None) == (broken is None) and (broken is None or f"{broken} (spec: 3)" in str(found))
