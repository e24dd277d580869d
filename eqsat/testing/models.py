"""Small models for tests: build one from onnx.helper parts, run it, count its ops, draw its feeds."""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any, Mapping, Sequence, Union

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh

if TYPE_CHECKING:  # heavy imports only where they are used
    import onnx_ir as ir


#: (name, element type, shape) of a graph input or output. The element type is a TensorProto enum value,
#: a dtype name ("FLOAT") or a numpy dtype; None dims are symbolic. An output may be given by name alone
#: (or with None type and shape): its type and shape are then inferred.
ValueSpec = Union[str, tuple[str, Any, Union[Sequence[Union[int, str, None]], None]]]


# --------------------------------------------------------------------------------------------------
# models


def dtype_name(dtype: Any) -> str:
    """ "FLOAT", "INT64", ... for a TensorProto enum value, a dtype name or a numpy dtype."""
    if isinstance(dtype, str):
        return dtype.upper()
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        return onnx.TensorProto.DataType.Name(int(dtype))
    return onnx.TensorProto.DataType.Name(oh.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def onnx_elem_type(dtype: Any) -> int:
    return int(getattr(onnx.TensorProto, dtype_name(dtype)))


def numpy_dtype(dtype: Any) -> np.dtype:
    return np.dtype(oh.tensor_dtype_to_np_dtype(onnx_elem_type(dtype)))


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[ValueSpec],
    outputs: Sequence[ValueSpec],
    initializers: Mapping[str, np.ndarray] | None = None,
    opset: int = 17,
    *,
    ir_version: int = 10,
) -> onnx.ModelProto:
    """A model from onnx.helper parts, at an IR version onnxruntime accepts.

    Outputs given by name alone get the type and shape ONNX shape inference finds for them.
    """

    def info(spec: ValueSpec) -> onnx.ValueInfoProto:
        if isinstance(spec, str) or spec[1] is None:
            return oh.make_value_info(spec if isinstance(spec, str) else spec[0], onnx.TypeProto())
        name, dtype, shape = spec
        return oh.make_tensor_value_info(name, onnx_elem_type(dtype), None if shape is None else list(shape))

    graph = oh.make_graph(
        list(nodes),
        "test",
        [info(v) for v in inputs],
        [info(v) for v in outputs],
        initializer=[onh.from_array(np.asarray(a), name) for name, a in (initializers or {}).items()],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=ir_version)
    if any(not o.type.HasField("tensor_type") or not o.type.tensor_type.HasField("shape") for o in graph.output):
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        known = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
        for out in model.graph.output:
            if (
                not out.type.HasField("tensor_type") or not out.type.tensor_type.HasField("shape")
            ) and out.name in known:
                out.type.CopyFrom(known[out.name].type)
    return model


def to_proto(model: onnx.ModelProto | "ir.Model") -> onnx.ModelProto:
    """A ModelProto for a ModelProto or an onnx_ir Model (what `Result.model` is)."""
    if isinstance(model, onnx.ModelProto):
        return model
    import onnx_ir as ir

    return ir.serde.serialize_model(model)


def op_counts(model: onnx.ModelProto | "ir.Model") -> collections.Counter[str]:
    """How many nodes of each op type the top-level graph has."""
    return collections.Counter(n.op_type for n in to_proto(model).graph.node)


def run(model: onnx.ModelProto | "ir.Model", feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Outputs of `model` on `feeds`: onnxruntime without graph optimizations, else onnx.reference."""
    from eqsat.check.verify import run as run_model

    outputs, _ = run_model(to_proto(model), dict(feeds))
    return [np.asarray(o) for o in outputs]


def random_feeds(model: onnx.ModelProto | "ir.Model", seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs for every graph input, as `eqsat.check.verify` draws them."""
    from eqsat.check.verify import make_inputs

    return make_inputs(to_proto(model), seed)
