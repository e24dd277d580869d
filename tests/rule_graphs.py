"""Small graphs for the rule tests (tests/test_rules_*.py): start graphs written out node by node."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import onnx
import onnx.helper as oh
import pytest

from eqsat.engine.egraph import EGraph
from eqsat.testing import ValueSpec, make_model, to_proto

NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)


def node(op: str, inputs: Sequence[str], output: str, **attrs: Any) -> onnx.NodeProto:
    return oh.make_node(op, list(inputs), [output], **attrs)


def transpose(x: str, y: str, perm: Sequence[int]) -> onnx.NodeProto:
    return oh.make_node("Transpose", [x], [y], perm=list(perm))


def model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[ValueSpec],
    outputs: Sequence[ValueSpec] = ("y",),
    initializers: Mapping[str, np.ndarray] | None = None,
    opset: int = 17,
) -> onnx.ModelProto:
    """`make_model` with the output `y` (type and shape inferred) by default."""
    return make_model(nodes, inputs, outputs, initializers, opset)


def gelu_erf(
    form: str = "bert",
    *,
    divisor: float | None = math.sqrt(2.0),
    scale: float | None = None,
    dtype: str = "FLOAT",
    opset: int = 20,
    half: float = 0.5,
) -> onnx.ModelProto:
    """BERT: (x * (erf(x / sqrt2) + 1)) * 0.5; gpt: (x * 0.5) * (erf(..) + 1); `scale`: x * 0.7071 instead."""
    np_dtype = np.float16 if dtype == "FLOAT16" else np.float32
    inits = {"one": np.array(1.0, np_dtype), "half": np.array(half, np_dtype)}
    if scale is not None:
        inits["k"] = np.array(scale, np_dtype)
        nodes = [node("Mul", ["x", "k"], "u")]
    else:
        inits["k"] = np.array(divisor, np_dtype)
        nodes = [node("Div", ["x", "k"], "u")]
    nodes += [node("Erf", ["u"], "e"), node("Add", ["e", "one"], "h")]
    if form == "bert":
        nodes += [node("Mul", ["x", "h"], "xh"), node("Mul", ["xh", "half"], "y")]
    else:
        nodes += [node("Mul", ["x", "half"], "xs"), node("Mul", ["xs", "h"], "y")]
    return model(nodes, [("x", dtype, (2, 3, 8))], initializers=inits, opset=opset)


def sandwich(
    middle: Sequence[onnx.NodeProto],
    shape: Sequence[int] = (1, 3, 4, 5),
    dtype: str = "FLOAT",
    initializers: Mapping[str, np.ndarray] | None = None,
    perm: Sequence[int] = NCHW_TO_NHWC,
    back: Sequence[int] = NHWC_TO_NCHW,
) -> onnx.ModelProto:
    """x -> Transpose(perm) -> t -> middle (reads t, writes m) -> Transpose(back) -> y."""
    nodes = [transpose("x", "t", perm), *middle, transpose("m", "y", back)]
    return model(nodes, [("x", dtype, shape)], ["y"], initializers)


def has_enode(egraph: EGraph, op: str, child_op: str) -> bool:
    """Some `op` e-node has a child class holding a `child_op` e-node (an Input, a Transpose, ...)."""
    for n in egraph.nodes:
        if n.op == op and any(egraph.node(m).op == child_op for c in n.children for m in egraph.eclass(c).nodes):
            return True
    return False


def attribute(m: Any, op: str, name: str) -> Any:
    """The value of attribute `name` of the only `op` node of model `m`."""
    proto = to_proto(m)
    (found,) = [n for n in proto.graph.node if n.op_type == op]
    (attr,) = [a for a in found.attribute if a.name == name]
    return oh.get_attribute_value(attr)


def property_settings() -> Any:
    """Settings of every rule property test: 35 examples, no deadline (each one saturates and extracts; the
    ~110 properties take most of the suite's time; deeper runs: `eqsat check-rules --examples N`); marked
    slow (5-15 s each: `python -m pytest -m "not slow"` leaves them out)."""
    from hypothesis import HealthCheck, settings

    chosen = settings(max_examples=35, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    return lambda test: pytest.mark.slow(chosen(test))
