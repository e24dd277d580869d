"""Ifs that the model's own rank requirements decide (eqsat.decided_ifs), on graphs of the shape torch exports
for `squeeze` on a dynamic dim feeding an LSTM (silero_vad's decoder): If(T == 1, Squeeze, Identity), then the
LSTM's run-time rank check If(rank != 2, Unsqueeze, Identity)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import eqsat
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
        oh.make_node("If", ["t_is_1"], ["v"], name="squeeze_if",
                     then_branch=_branch("then", oh.make_node("Squeeze", ["x", "axis2"], ["sq"]), "sq", [1, 4]),
                     else_branch=_branch("else", oh.make_node("Identity", ["x"], ["id"]), "id", [1, 4, "T"])),
        oh.make_node("Shape", ["v"], ["v_shape"]),
        oh.make_node("Size", ["v_shape"], ["v_rank"]),
        oh.make_node("Equal", ["v_rank", "two"], ["is_2d"]),
        oh.make_node("Not", ["is_2d"], ["not_2d"]),
        oh.make_node("If", ["not_2d"], ["u"], name="rank_if",
                     then_branch=_branch("then2", oh.make_node("Unsqueeze", ["v", "axis0"], ["un"]), "un", None),
                     else_branch=_branch("else2", oh.make_node("Identity", ["v"], ["id2"]), "id2", None)),
        oh.make_node("Unsqueeze", ["u", "axis0"], ["seq"]),
    ]
    inits = {"two": np.array(2, np.int64), "one": np.array(1, np.int64), "axis2": np.array([2], np.int64),
             "axis0": np.array([0], np.int64)}
    if consumer == "LSTM":
        nodes.append(oh.make_node("LSTM", ["seq", "W", "R", "B"], ["", "y"], hidden_size=HIDDEN, name="lstm"))
        inits |= {"W": rng.standard_normal((1, 4 * HIDDEN, 4)).astype(np.float32),
                  "R": rng.standard_normal((1, 4 * HIDDEN, HIDDEN)).astype(np.float32),
                  "B": rng.standard_normal((1, 8 * HIDDEN)).astype(np.float32)}
    else:
        nodes.append(oh.make_node("ReduceSum", ["seq"], ["y"], keepdims=0))
    return build_model(nodes, [("x", F, [1, 4, "T"])], [("y", F, [1, 1, HIDDEN] if consumer == "LSTM" else [])], inits)


def test_the_lstm_rank_decides_both_ifs() -> None:
    result = eqsat.optimize(_squeeze_if_then("LSTM"), input_shapes={"x": (1, 4, 1)})  # verified on T = 1
    assert result.report.ops_after["If"] == 0 and result.report.ops_before["If"] == 2
    assert any(note.startswith("If 'squeeze_if': then branch kept; the other makes LSTM 'lstm'")
               for note in result.report.notes)
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
