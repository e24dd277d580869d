"""Fresh value names (eqsat.frontend.names): never a name the model already holds, in any graph or subgraph; node
names written unique (onnxruntime refuses two nodes of one name)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx_ir as ir
import onnxruntime as ort
import pytest

import eqsat
from eqsat.frontend.names import add_constant, fresh_name, unique_node_names, value_names
from tests.rule_graphs import model, node


def _with_if_body() -> ir.Model:
    """x -> Relu -> r; If(c) whose branches define `inner` and read the outer `r`; an initializer `w`."""
    then = oh.make_graph(
        [node("Neg", ["r"], "inner"), node("Identity", ["inner"], "out_then")],
        "then",
        [],
        [oh.make_tensor_value_info("out_then", onnx.TensorProto.FLOAT, None)],
    )
    other = oh.make_graph(
        [node("Abs", ["r"], "inner2")], "else", [], [oh.make_tensor_value_info("inner2", onnx.TensorProto.FLOAT, None)]
    )
    m = model(
        [node("Relu", ["x"], "r"), oh.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
        [("x", "FLOAT", (2, 3)), ("c", "BOOL", ())],
        [("y", "FLOAT", None)],
        initializers={"w": np.ones(2, np.float32)},
    )
    return ir.serde.deserialize_model(m)


def test_value_names_cover_every_graph_and_subgraph() -> None:
    names = value_names(_with_if_body().graph)
    assert {"x", "c", "r", "y", "w", "inner", "out_then", "inner2"} <= names


def test_fresh_name_never_returns_a_taken_name() -> None:
    taken = {"a", "a__1", "a__3"}
    minted = [fresh_name("a", taken) for _ in range(4)]
    assert minted == ["a__2", "a__4", "a__5", "a__6"]
    assert fresh_name("b", taken) == "b" and {"b", *minted} <= taken


def test_add_constant_avoids_names_of_values_in_bodies_and_of_earlier_constants() -> None:
    m = _with_if_body()
    before = value_names(m.graph)
    made = [add_constant(m.graph, base, np.arange(3, dtype=np.int64)) for base in ("inner", "inner", "w", "new")]
    assert len({v.name for v in made}) == 4 and not {v.name for v in made[:3]} & before
    assert made[3].name == "new"
    for v in made:
        assert m.graph.initializers[v.name] is v and v.const_value.numpy().tolist() == [0, 1, 2]
        assert v.dtype == ir.DataType.INT64 and v.shape == ir.Shape([3])


def test_unique_node_names_leaves_the_given_nodes_theirs_and_mints_no_taken_name() -> None:
    nodes = [oh.make_node("Relu", ["x"], [f"v{k}"], name=name) for k, name in enumerate(["r", "r", "r__1", "", ""])]
    unique_node_names(nodes, {1})
    assert [n.name for n in nodes] == ["r__2", "r", "r__1", "", ""]


def _named_alike(case: str) -> onnx.ModelProto:
    """Lowering names a node after the value it writes (an output alias `<output>_identity`): `kept`, a TopK kept
    as it is named `r`, the name of the value a Relu writes; `alias`, a Neg writing `y_identity` beside the alias
    of the output `y` (y = a * 1 is a's value)."""
    if case == "kept":
        nodes = [
            oh.make_node("Relu", ["x"], ["r"], name="relu0"),
            oh.make_node("TopK", ["r", "k"], ["v", "i"], name="r", axis=1),
        ]
        return model(
            nodes, [("x", "FLOAT", (2, 3))], [("v", "FLOAT", None), ("i", "INT64", None)], {"k": np.array([2])}
        )
    nodes = [node("Relu", ["x"], "a"), node("Mul", ["a", "one"], "y"), node("Neg", ["x"], "y_identity")]
    outputs = [("a", "FLOAT", None), ("y", "FLOAT", None), ("y_identity", "FLOAT", None)]
    return model(nodes, [("x", "FLOAT", (2, 3))], outputs, {"one": np.array(1.0, np.float32)})


@pytest.mark.parametrize("case", ["kept", "alias"])
def test_written_node_names_are_unique_kept_nodes_keeping_theirs(case: str) -> None:
    out = eqsat.optimize(_named_alike(case), verify=False).proto
    names = [n.name for n in out.graph.node]
    assert len(set(names)) == len(names), names
    if case == "kept":
        assert [n.name for n in out.graph.node if n.op_type == "TopK"] == ["r"]
    ort.InferenceSession(out.SerializeToString(), providers=["CPUExecutionProvider"])  # refuses two of one name
