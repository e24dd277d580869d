"""Constant nodes lifted to initializers (eqsat.frontend.fold.lift_constants): exactly what onnx_ir's
LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0) makes of the same model, for a Constant
of every attribute kind, one that is a graph output (kept), and one inside an If branch."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx_ir as ir
from onnx_ir.passes.common import LiftConstantsToInitializersPass

from eqsat.frontend import io
from eqsat.frontend.fold import lift_constants

F, I64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64

#: One Constant per attribute kind (name, attribute, value), each read by an Identity.
KINDS = [
    ("float_tensor", "value", onnx.numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "t0")),
    ("int_tensor", "value", onnx.numpy_helper.from_array(np.array([3, -1], dtype=np.int64), "t1")),
    ("bool_scalar", "value", onnx.numpy_helper.from_array(np.array(True), "t2")),
    ("empty_tensor", "value", onnx.numpy_helper.from_array(np.zeros((0, 4), dtype=np.float32), "t3")),
    ("string_tensor", "value", oh.make_tensor("t4", onnx.TensorProto.STRING, [2], [b"a", b"bc"])),
    ("one_float", "value_float", 0.5),
    ("floats", "value_floats", [1.0, 2.5]),
    ("one_int", "value_int", 7),
    ("ints", "value_ints", [1, 2, 3]),
    ("one_string", "value_string", "x"),
    ("strings", "value_strings", ["p", "q"]),
]


def _model() -> onnx.ModelProto:
    nodes, outputs = [], []
    for name, attribute, value in KINDS:
        nodes.append(oh.make_node("Constant", [], [name], name=f"c_{name}", **{attribute: value}))
        nodes.append(oh.make_node("Identity", [name], [f"{name}_out"]))
        outputs.append(oh.make_empty_tensor_value_info(f"{name}_out"))
    nodes.append(oh.make_node("Constant", [], ["as_output"], value_ints=[4, 5]))  # a graph output: stays a node
    outputs.append(oh.make_empty_tensor_value_info("as_output"))
    branch = oh.make_graph(
        [
            oh.make_node("Constant", [], ["inner"], value_floats=[9.0]),
            oh.make_node("Add", ["x", "inner"], ["then_out"]),
        ],
        "then",
        [],
        [oh.make_tensor_value_info("then_out", F, [1])],
    )
    other = oh.make_graph(
        [oh.make_node("Identity", ["x"], ["else_out"])], "else", [], [oh.make_tensor_value_info("else_out", F, [1])]
    )
    nodes.append(oh.make_node("If", ["cond"], ["if_out"], then_branch=branch, else_branch=other))
    outputs.append(oh.make_tensor_value_info("if_out", F, [1]))
    graph = oh.make_graph(
        nodes,
        "kinds",
        [oh.make_tensor_value_info("x", F, [1]), oh.make_tensor_value_info("cond", onnx.TensorProto.BOOL, [])],
        outputs,
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def test_every_constant_kind_lifts_as_onnx_ir_lifts_it() -> None:
    proto = _model()
    ours, theirs = io.from_proto(proto), io.from_proto(proto)
    assert lift_constants(ours)
    assert LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0)(theirs).modified
    assert io.to_proto(ours).SerializeToString() == io.to_proto(theirs).SerializeToString()
    constants = [n.outputs[0].name for n in ours.graph.all_nodes() if n.op_type == "Constant"]
    assert constants == ["as_output"]  # every other Constant is an initializer now, the If branch's included
    assert set(ours.graph.initializers) == {name for name, _, _ in KINDS}


def test_a_tensor_constant_is_lifted_as_the_very_tensor_it_holds() -> None:
    """The `value` tensor is taken as it is (what Attr.as_tensor returns): same object, same name."""
    model = io.from_proto(_model())
    held = {n.outputs[0].name: n.attributes["value"].value for n in model.graph if "value" in n.attributes}
    lift_constants(model)
    for name, tensor in held.items():
        assert model.graph.initializers[name].const_value is tensor


def test_nothing_to_lift_is_no_change() -> None:
    proto = _model()
    model = io.from_proto(proto)
    assert lift_constants(model)
    assert not lift_constants(model)  # only the graph-output Constant is left: never lifted
    assert isinstance(model.graph.initializers["floats"].const_value, ir.TensorProtocol)
