"""What verification knows of a model before running it (eqsat.check.verify_facts): shape facts at chosen sizes,
read from a skeleton serialized once, small constants read when asked, outputs that depend on random ops."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto

from eqsat.check import verify_facts
from eqsat.check.verify_facts import ShapeFacts, random_outputs

F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def _shaped() -> onnx.ModelProto:
    """x[batch, 8] @ w (8x16, large: a typed input in the skeleton) + b (small), reshaped to the drawn `shape`,
    a Constant read by a Mul: inputs sized by `infer`, a constant folded in, both kinds of initializer."""
    rng = np.random.default_rng(0)
    graph = oh.make_graph(
        [
            oh.make_node("MatMul", ["x", "w"], ["m"]),
            oh.make_node("Add", ["m", "b"], ["a"]),
            oh.make_node("Constant", [], ["two"], value=onnx.numpy_helper.from_array(np.full(1, 2, np.float32))),
            oh.make_node("Mul", ["a", "two"], ["t"]),
            oh.make_node("Reshape", ["t", "shape"], ["y"]),
        ],
        "g",
        [oh.make_tensor_value_info("x", F32, ["batch", 8]), oh.make_tensor_value_info("shape", I64, [2])],
        [oh.make_tensor_value_info("y", F32, None)],
        [
            onnx.numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "w"),
            onnx.numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b"),
        ],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def _edited_in_place(model: onnx.ModelProto, shapes: dict[str, tuple], constants: dict[str, np.ndarray]) -> dict:
    """The facts of the skeleton edited as a message (the inputs resized, the constants added) and inferred."""
    edited = onnx.ModelProto()
    edited.CopyFrom(model)
    g = edited.graph
    large = [t for t in g.initializer if np.prod(t.dims) > verify_facts.SMALL]
    kept = [v for v in g.input if v.name not in constants]
    del g.input[:]
    g.input.extend(kept)
    g.input.extend(oh.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in large)
    small = [t for t in g.initializer if t not in large]
    del g.initializer[:]
    g.initializer.extend(small)
    for v in g.input:
        if v.name in shapes:
            del v.type.tensor_type.shape.dim[:]
            for size in shapes[v.name]:
                v.type.tensor_type.shape.dim.add().dim_value = size
    g.initializer.extend(onnx.numpy_helper.from_array(a, n) for n, a in constants.items())
    inferred = onnx.shape_inference.infer_shapes(edited, strict_mode=False, data_prop=True)
    return {
        v.name: tuple(d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim)
        for v in (*inferred.graph.value_info, *inferred.graph.output)
    }


@pytest.mark.parametrize("batch", [2, 5])
def test_infer_reads_the_skeleton_as_if_edited_in_place(batch: int) -> None:
    model = _shaped()
    facts = ShapeFacts(model)
    constants = {"shape": np.array([batch * 4, 4], np.int64)}
    found = facts.infer({"x": (batch, 8)}, constants)
    expected = _edited_in_place(model, {"x": (batch, 8)}, constants)
    assert found["y"] == (batch * 4, 4) and found["m"] == (batch, 16)
    assert {k: found[k] for k in expected} == expected
    assert found["w"] == (8, 16) and found["shape"] == (2,)
    unfolded = facts.infer({"x": (batch, 8)})  # without the constant: the reshaped rank only
    assert unfolded["m"] == (batch, 16) and unfolded["y"] == (None, None) and unfolded["shape"] == (2,)
    expected = _edited_in_place(model, {"x": (batch, 8)}, {})
    assert {k: unfolded[k] for k in expected} == expected


def test_infer_serializes_the_shared_skeleton_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each inference hands onnx bytes that start with the skeleton serialized at construction: only the feeds and
    the constants are serialized per call (main copied and serialized the whole skeleton every time)."""
    model = _shaped()
    facts = ShapeFacts(model)
    seen: list[Any] = []
    infer = onnx.shape_inference.infer_shapes
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", lambda m, **kw: seen.append(m) or infer(m, **kw))
    facts.infer({"x": (2, 8)})
    facts.infer({"x": (3, 8)}, {"shape": np.array([12, 4], np.int64)})
    assert len(seen) == 2 and all(isinstance(m, bytes) for m in seen)
    head = facts._head
    assert head is not None and all(m.startswith(head) for m in seen)
    assert facts.infer({"x": (3, 8)}, {"shape": np.array([12, 4], np.int64)})["y"] == (12, 4)


def test_small_constants_are_read_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []
    to_array = onnx.numpy_helper.to_array
    monkeypatch.setattr(onnx.numpy_helper, "to_array", lambda t, *a: read.append(t.name) or to_array(t, *a))
    facts = ShapeFacts(_shaped())
    assert read == []  # none read while the facts are made
    assert "two" in facts.constants and "b" in facts.constants and "w" not in facts.constants
    assert sorted(facts.constants) == ["b", "two"] and len(facts.constants) == 2
    assert facts.constants["two"].tolist() == [2.0] and facts.constants["two"] is facts.constants["two"]
    assert len(read) == 1  # read once, kept


def _random_in_a_branch() -> onnx.ModelProto:
    then = oh.make_graph(
        [oh.make_node("RandomUniformLike", ["x"], ["n"])], "then", [], [oh.make_tensor_value_info("n", F32, [4])]
    )
    orelse = oh.make_graph(
        [oh.make_node("Identity", ["x"], ["i"])], "else", [], [oh.make_tensor_value_info("i", F32, [4])]
    )
    graph = oh.make_graph(
        [
            oh.make_node("If", ["c"], ["y"], then_branch=then, else_branch=orelse),
            oh.make_node("Relu", ["x"], ["z"]),
        ],
        "g",
        [oh.make_tensor_value_info("c", TensorProto.BOOL, []), oh.make_tensor_value_info("x", F32, [4])],
        [oh.make_tensor_value_info("y", F32, [4]), oh.make_tensor_value_info("z", F32, [4])],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def _random_in_a_function() -> onnx.ModelProto:
    noise = oh.make_function(
        "custom", "Noise", ["a"], ["b"], [oh.make_node("RandomNormalLike", ["a"], ["b"])], [oh.make_opsetid("", 17)]
    )
    graph = oh.make_graph(
        [oh.make_node("Noise", ["x"], ["y"], domain="custom"), oh.make_node("Relu", ["x"], ["z"])],
        "g",
        [oh.make_tensor_value_info("x", F32, [4])],
        [oh.make_tensor_value_info("y", F32, [4]), oh.make_tensor_value_info("z", F32, [4])],
    )
    return oh.make_model(
        graph, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("custom", 1)], functions=[noise]
    )


@pytest.mark.parametrize("make", [_random_in_a_branch, _random_in_a_function])
def test_a_random_op_in_a_subgraph_or_a_function_is_found(make: Any) -> None:
    assert random_outputs(make()) == ["y"]


def test_a_model_without_random_ops_is_not_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an op that may be random anywhere (subgraphs and functions included), no node is examined."""
    monkeypatch.setattr(verify_facts, "_is_random", lambda *a: pytest.fail("followed a model without random ops"))
    model = _shaped()
    assert random_outputs(model) == []
    model.functions.append(
        oh.make_function("custom", "Twice", ["a"], ["b"], [oh.make_node("Add", ["a", "a"], ["b"])], [])
    )
    assert random_outputs(model) == []
