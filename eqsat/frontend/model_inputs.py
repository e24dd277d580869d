"""What a caller feeds a model and what its inputs declare: the graph inputs without initializers, their
dims (a size, or a dynamic dim and its name), and a shape a user gives for one, checked."""

from __future__ import annotations

from typing import Sequence

import onnx

from eqsat.errors import BadInputError


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The graph inputs that are not initializers: what a caller feeds."""
    initializers = {t.name for t in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in initializers]


def input_dims(value: onnx.ValueInfoProto) -> list[onnx.TensorShapeProto.Dimension]:
    return list(value.type.tensor_type.shape.dim)


def dim_name(dim: onnx.TensorShapeProto.Dimension) -> str:
    """The dim_param of a dynamic dim, "" when it has none or one that names nothing ("?", as paddle2onnx
    writes for every unknown dim)."""
    return dim.dim_param if any(c.isalnum() for c in dim.dim_param) else ""


def static_size(dim: onnx.TensorShapeProto.Dimension) -> int | None:
    return dim.dim_value if dim.HasField("dim_value") and dim.dim_value >= 0 else None


def check_shape(value: onnx.ValueInfoProto, shape: Sequence[int], flag: str, source: str) -> None:
    """Raise `BadInputError` unless `shape` has the input's rank and agrees with its stated dims."""
    dims = input_dims(value)
    shown = "x".join(map(str, shape)) or "scalar"
    if len(shape) != len(dims):
        raise BadInputError(source, f"{flag}: input {value.name!r} has rank {len(dims)}, got shape {shown}")
    for axis, (dim, size) in enumerate(zip(dims, shape)):
        if static_size(dim) is not None and dim.dim_value != size:
            raise BadInputError(
                source, f"{flag}: input {value.name!r} has size {dim.dim_value} on axis {axis}, got shape {shown}"
            )
