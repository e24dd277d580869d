"""Make chosen dynamic input dims static before optimizing (onnxsim's --overwrite-input-shape).

Every dim of a fixed input takes the size given; a dim_param fixed that way takes that size wherever else
it appears (other inputs, outputs, value_info), so shape inference and folding see one static size.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import onnx

from eqsat.errors import BadInputError
from eqsat.frontend.model_inputs import check_shape, dim_name, graph_inputs


def fix_input_shapes(
    proto: onnx.ModelProto, shapes: Mapping[str, Sequence[int]], source: str = "<model>"
) -> onnx.ModelProto:
    """A copy of `proto` whose inputs named in `shapes` have those static dims; a `BadInputError` for an
    unknown input, a wrong rank, a size that contradicts a stated dim, or one dim_param given two sizes."""
    if not shapes:
        return proto
    by_name = {v.name: v for v in graph_inputs(proto)}
    bound: dict[str, int] = {}
    for name, shape in shapes.items():
        if name not in by_name:
            known = ", ".join(by_name) or "none"
            raise BadInputError(
                source, f"--fix-input-shape: the model has no input named {name!r} (its inputs: {known})"
            )
        check_shape(by_name[name], shape, "--fix-input-shape", source)
        for dim, size in zip(by_name[name].type.tensor_type.shape.dim, shape):
            if dim_name(dim) and bound.setdefault(dim.dim_param, size) != size:
                raise BadInputError(
                    source, f"--fix-input-shape: dim {dim.dim_param!r} is given sizes {bound[dim.dim_param]} and {size}"
                )
    fixed = onnx.ModelProto()
    fixed.CopyFrom(proto)
    graph = fixed.graph
    for value in graph.input:
        for dim, size in zip(value.type.tensor_type.shape.dim, shapes.get(value.name, ())):
            dim.dim_value = size  # clears dim_param (one of)
    for value in (*graph.input, *graph.output, *graph.value_info):
        for dim in value.type.tensor_type.shape.dim:
            if dim_name(dim) in bound:
                dim.dim_value = bound[dim.dim_param]
    return fixed
