"""Large weights kept out of protobuf round trips.

onnx's checker and shape inference, and onnxruntime's session, take a serialized model: for a model of
300 MB of weights each call copies them through protobuf several times (serialize, parse in C++, serialize
the result, parse it back), though none of them reads a weight's values. Here such calls get a light copy
of the model, without the top-level initializers of at least `LARGE_BYTES`:

    light = Light.inputs(proto)              # each large initializer a graph input of its type
    inferred = light.put_back(onnx.shape_inference.infer_shapes(light.proto))

    light = Light.placeholders(proto)        # each large float initializer's data "external"
    options.add_external_initializers(names, values)   # values: light.values(), arrays of the data

The model itself is never changed: protobuf (upb) keeps a cleared field's memory in the message's arena,
so taking weights out and putting them back would grow it by their size each time.
Shape tensors (what data propagation reads) are far below `LARGE_BYTES`.
"""

from __future__ import annotations

import dataclasses
import mmap

import numpy as np
import onnx

#: Initializers of at least this many bytes are kept aside (shape tensors, scalars and axes stay).
LARGE_BYTES = 4096
#: Where a placeholder says its data is: no file, onnxruntime is given the values instead.
PLACEHOLDER_LOCATION = "eqsat-weights-aside"


@dataclasses.dataclass(frozen=True)
class Light:
    """A copy of a model without its large initializers' data, and those initializers (the original's)."""

    proto: onnx.ModelProto
    large: dict[str, onnx.TensorProto]
    order: tuple[str, ...]  # every top-level initializer's name, in the original's order
    added_inputs: int = 0

    @classmethod
    def inputs(cls, proto: onnx.ModelProto) -> "Light":
        """Each large initializer a graph input of its type and shape (one already a graph input just loses its
        initializer; below IR 4, where every initializer must be an input, none is added)."""
        large = {t.name: t for t in proto.graph.initializer if _large(t)}
        light = _copy_without(proto, large)
        inputs = {i.name for i in proto.graph.input} | (set(large) if proto.ir_version < 4 else set())
        added = [t for t in large.values() if t.name not in inputs]
        for tensor in added:
            light.graph.input.append(
                onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims))
            )
        return cls(light, large, _names(proto), len(added))

    @classmethod
    def placeholders(cls, proto: onnx.ModelProto) -> "Light":
        """Each large floating-point initializer (what onnxruntime never needs as a constant) a placeholder whose
        data is external (`PLACEHOLDER_LOCATION`); `values()` are its data."""
        large = {t.name: t for t in proto.graph.initializer if _large(t) and _float_raw(t)}
        light = _copy_without(proto, large)
        for tensor in large.values():
            placeholder = light.graph.initializer.add(name=tensor.name, data_type=tensor.data_type, dims=tensor.dims)
            placeholder.data_location = onnx.TensorProto.EXTERNAL
            placeholder.external_data.add(key="location", value=PLACEHOLDER_LOCATION)
        return cls(light, large, _names(proto))

    def values(self) -> dict[str, np.ndarray]:
        """The large initializers' data by name, as arrays in one anonymous memory mapping: it goes back to the
        operating system as soon as nothing holds the arrays (malloc would keep freed weights in its heap, so a
        second model's copy would add to the first's)."""
        sizes = [_nbytes(t) for t in self.large.values()]
        if not sizes:
            return {}
        buffer = mmap.mmap(-1, sum(sizes))
        arrays, offset = {}, 0
        for (name, tensor), size in zip(self.large.items(), sizes):
            buffer[offset : offset + size] = tensor.raw_data  # IndexError for data of another size than dims say
            dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
            arrays[name] = np.frombuffer(buffer, dtype, size // dtype.itemsize, offset).reshape(tuple(tensor.dims))
            offset += size
        return arrays

    def put_back(self, result: onnx.ModelProto) -> onnx.ModelProto:
        """`result` (what a tool made of the light copy, e.g. shape inference's) with the large initializers in
        their places again and the inputs that stood for them gone; changed in place and returned."""
        graph = result.graph
        if self.added_inputs:
            del graph.input[len(graph.input) - self.added_inputs :]
        present = {t.name: t for t in graph.initializer}
        tensors = [
            self.large[name] if name in self.large else present[name]
            for name in self.order
            if name in present or name in self.large
        ]
        del graph.initializer[:]
        graph.initializer.extend(tensors)
        return result


def check_model(proto: onnx.ModelProto, *, full: bool = True) -> None:
    """`onnx.checker.check_model(proto, full_check=full)` with the large initializers checked one by one
    (the same checks) instead of serialized with the graph; raises what it raises."""
    light = Light.inputs(proto)
    onnx.checker.check_model(light.proto, full_check=full)
    for tensor in light.large.values():
        onnx.checker.check_tensor(tensor)


def _large(tensor: onnx.TensorProto) -> bool:
    return tensor.data_type != onnx.TensorProto.STRING and tensor.ByteSize() >= LARGE_BYTES


def _float_raw(tensor: onnx.TensorProto) -> bool:
    if not tensor.HasField("raw_data") or tensor.data_location == onnx.TensorProto.EXTERNAL:
        return False
    try:
        return bool(np.issubdtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type), np.floating))
    except (KeyError, ValueError, TypeError):  # a type numpy has no dtype for
        return False


def _nbytes(tensor: onnx.TensorProto) -> int:
    count = 1
    for d in tensor.dims:
        count *= d
    return count * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize


def _names(proto: onnx.ModelProto) -> tuple[str, ...]:
    return tuple(t.name for t in proto.graph.initializer)


def _copy_without(proto: onnx.ModelProto, left_out: dict[str, onnx.TensorProto]) -> onnx.ModelProto:
    """A copy of `proto` whose top-level graph lacks the initializers `left_out` names (nothing else differs)."""
    copy = onnx.ModelProto()
    for field, value in proto.ListFields():
        if field.name != "graph":
            _copy_field(copy, field.name, value)
    for field, value in proto.graph.ListFields():
        if field.name == "initializer":
            copy.graph.initializer.extend(t for t in value if t.name not in left_out)
        else:
            _copy_field(copy.graph, field.name, value)
    return copy


def _copy_field(target: object, name: str, value: object) -> None:
    if hasattr(value, "extend"):  # a repeated field
        getattr(target, name).extend(value)
    elif hasattr(value, "CopyFrom"):  # a message
        getattr(target, name).CopyFrom(value)
    else:
        setattr(target, name, value)
