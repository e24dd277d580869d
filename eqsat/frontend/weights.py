"""Large weights kept out of protobuf round trips.

onnx's checker and shape inference, and onnxruntime's session, take a serialized model: for a model of
300 MB of weights each call copies them through protobuf several times (serialize, parse in C++, serialize
the result, parse it back), though none of them needs a weight's values. Here such calls get a light copy
of the model, whose top-level initializers of at least `LARGE_BYTES` are graph inputs of their type instead:

    light = Light.of(proto)
    inferred = light.put_back(onnx.shape_inference.infer_shapes(light.proto))

    light = Light.of(proto, floats_only=True)      # onnxruntime: weights fed as inputs, never copied
    session = onnxruntime.InferenceSession(light.proto.SerializeToString(), ...)
    session.run(None, {**light.values(), **feeds})

Lowering may also hold a model's large float weights aside from the start: it writes a *placeholder* for each
(an initializer with name, type and dims but no data) and keeps the arrays; `Light.of` feeds them as above,
`check_model` and `serialized` make each tensor only when it is checked or written, and `fill` writes them into
the model when the whole proto is asked for (eqsat.result.Result.proto).

The model itself is never changed: protobuf (upb) keeps a cleared field's memory in the message's arena,
so taking weights out and putting them back would grow it by their size each time.
Shape tensors (what data propagation reads) are far below `LARGE_BYTES`.
"""

from __future__ import annotations

import dataclasses
import mmap
import sys
from typing import Iterable, Iterator, Mapping

import numpy as np
import onnx
import onnx_ir as ir

from eqsat.errors import InternalError

#: Initializers of at least this many bytes are kept aside (shape tensors, scalars and axes stay).
LARGE_BYTES = 4096


@dataclasses.dataclass(frozen=True)
class Light:
    """A copy of a model without its large initializers' data, and those initializers (the original's)."""

    proto: onnx.ModelProto
    large: dict[str, onnx.TensorProto]
    order: tuple[str, ...]  # every top-level initializer's name, in the original's order
    added_inputs: int = 0
    from_ir: dict[str, ir.TensorProtocol] = dataclasses.field(default_factory=dict)  # large ones of an IR model

    @classmethod
    def of(cls, proto: onnx.ModelProto, *, floats_only: bool = False) -> "Light":
        """Each large initializer (floating point only, with `floats_only`: what onnxruntime never needs as a
        constant) a graph input of its type and shape; one already a graph input just loses its initializer,
        and below IR 4, where every initializer must be an input, none is added."""
        large = {
            t.name: t
            for t in proto.graph.initializer
            if (_large(t) and (not floats_only or _float_raw(t))) or is_placeholder(t)
        }
        light = _copy_without(proto, large)
        inputs = {i.name for i in proto.graph.input} | (set(large) if proto.ir_version < 4 else set())
        added = [t for t in large.values() if t.name not in inputs]
        for tensor in added:
            light.graph.input.append(
                onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims))
            )
        return cls(light, large, _names(proto), len(added))

    @classmethod
    def of_ir(cls, model: ir.Model) -> "Light":
        """`of` for an IR model, serialized once without its large initializers (a copy with them would be
        a copy of every weight); the model is the same again on return."""
        graph = model.graph
        order = list(graph.initializers.values())
        large = [v for v in order if v.const_value is not None and _large_ir(v.const_value)]
        inputs = len(graph.inputs)
        try:
            for value in large:
                del graph.initializers[value.name]  # type: ignore[arg-type]
                if value not in graph.inputs and model.ir_version >= 4:
                    graph.inputs.append(value)
            proto = ir.serde.serialize_model(model)
        finally:
            while len(graph.inputs) > inputs:
                graph.inputs.pop()
            graph.initializers.clear()
            for value in order:
                graph.initializers.add(value)
        tensors = {v.name: v.const_value for v in large if v.name and v.const_value is not None}
        added = len(proto.graph.input) - inputs
        return cls(proto, {}, tuple(v.name or "" for v in order), added, tensors)

    def values(self, known: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """The large initializers' data by name. An array of `known` whose bytes equal the initializer's is
        used as it is; the others are copied into one anonymous memory mapping, which goes back to the
        operating system as soon as nothing holds the arrays (malloc would keep freed weights in its heap, so a
        second model's copy would add to the first's)."""
        known = known or {}
        arrays: dict[str, np.ndarray] = {}
        copied: list[tuple[str, onnx.TensorProto, int]] = []
        for name, tensor in self.large.items():
            if is_placeholder(tensor):
                arrays[name] = _held(tensor, known)
                continue
            same = _same_array(known.get(name), tensor)
            if same is not None:
                arrays[name] = same
            else:
                copied.append((name, tensor, _nbytes(tensor)))
        if copied:
            buffer = mmap.mmap(-1, sum(size for _, _, size in copied))
            offset = 0
            for name, tensor, size in copied:
                buffer[offset : offset + size] = tensor.raw_data  # IndexError for data of another size than dims say
                dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
                arrays[name] = np.frombuffer(buffer, dtype, size // dtype.itemsize, offset).reshape(tuple(tensor.dims))
                offset += size
        return {name: arrays[name] for name in self.large}

    def put_back(self, result: onnx.ModelProto, *, large: bool = True) -> onnx.ModelProto:
        """`result` (what a tool made of the light copy, e.g. shape inference's) with the large initializers in
        their places again (left out without `large`) and the inputs that stood for them gone; changed in
        place and returned."""
        graph = result.graph
        if self.added_inputs:
            del graph.input[len(graph.input) - self.added_inputs :]
        present = {t.name: t for t in graph.initializer}
        del graph.initializer[:]  # the detached messages keep their data
        for name in self.order:
            if name in self.large:
                if large:
                    graph.initializer.append(self.large[name])
            elif name in self.from_ir:
                if large:
                    ir.serde.serialize_tensor_into(graph.initializer.add(), self.from_ir[name])
            elif name in present:
                graph.initializer.append(present[name])
        return result

    def attach(self, model: ir.Model) -> ir.Model:
        """`model` (the IR of what a tool made of the light copy, before `put_back`) with the large initializers
        as initializers again, in the original's order, the inputs that stood for them gone (in place). They
        are shared, not copied: an IR model's tensors as they are, a proto's as a numpy array over one copy of
        its data (what encoding and lowering then read without copying), or, for data numpy cannot hold as
        it is (external, packed, typed fields), the proto's own tensor."""
        graph = model.graph
        tensors = {**{name: _shared(t) for name, t in self.large.items()}, **self.from_ir}
        inputs = {v.name: v for v in graph.inputs}
        for _ in range(self.added_inputs):
            graph.inputs.pop()
        present = dict(graph.initializers)
        graph.initializers.clear()
        for name in self.order:
            value = present.get(name)
            if name in tensors:
                value = inputs[name]
                value.const_value = tensors[name]
            if value is not None:
                graph.initializers.add(value)
        return model


def check_model(proto: onnx.ModelProto, *, full: bool = True, held: Mapping[str, np.ndarray] | None = None) -> None:
    """`onnx.checker.check_model(proto, full_check=full)` with the large initializers checked one by one
    (the same checks) instead of serialized with the graph; a placeholder needs an array of its type and dims
    `held` for it (`numpy_helper.from_array` makes a tensor the checker accepts of any such array); raises
    what it raises (InternalError for a placeholder without its array)."""
    light = Light.of(proto)
    onnx.checker.check_model(light.proto, full_check=full)
    for tensor in light.large.values():
        if is_placeholder(tensor):
            _held(tensor, held or {})
        else:
            onnx.checker.check_tensor(tensor)


def holdable(array: np.ndarray) -> bool:
    """Whether lowering may hold `array` aside behind a placeholder: a large float array (what onnxruntime is
    fed, `Light.of(floats_only=True)`)."""
    return array.nbytes >= LARGE_BYTES and array.dtype in _HELD_DTYPES


def placeholder(name: str, array: np.ndarray) -> onnx.TensorProto:
    """An initializer of `array`'s type and dims named `name`, without its data (see the module docstring)."""
    tensor = onnx.TensorProto(name=name, data_type=onnx.helper.np_dtype_to_tensor_dtype(array.dtype))
    tensor.dims.extend(array.shape)
    return tensor


def is_placeholder(tensor: onnx.TensorProto) -> bool:
    """An initializer of some elements with no data at all: a placeholder (no valid model holds one)."""
    return (
        not tensor.HasField("raw_data")
        and tensor.data_location != onnx.TensorProto.EXTERNAL
        and tensor.data_type in _HELD_TYPES
        and not (tensor.float_data or tensor.int32_data or tensor.double_data or tensor.int64_data)
        and _numel(tensor) > 0
    )


def filled(tensor: onnx.TensorProto, held: Mapping[str, np.ndarray]) -> onnx.TensorProto:
    """`tensor`, or for a placeholder the tensor made of the array `held` for it (exactly what
    `numpy_helper.from_array` makes of it)."""
    if not is_placeholder(tensor):
        return tensor
    return onnx.numpy_helper.from_array(_held(tensor, held), tensor.name)


def fill(proto: onnx.ModelProto, held: Mapping[str, np.ndarray]) -> None:
    """Write the arrays `held` into their placeholders among `proto`'s initializers (in place)."""
    for tensor in proto.graph.initializer:
        if is_placeholder(tensor):
            tensor.CopyFrom(filled(tensor, held))


def _held(tensor: onnx.TensorProto, held: Mapping[str, np.ndarray]) -> np.ndarray:
    array = held.get(tensor.name)
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
    if array is None or array.dtype != dtype or array.shape != tuple(tensor.dims):
        raise InternalError(
            f"initializer {tensor.name!r} has no data, and no array of its type and dims is held for it"
        )
    return np.ascontiguousarray(array)


def _filled_size(tensor: onnx.TensorProto) -> int:
    """The serialized size of `filled(tensor, ...)` for a placeholder: its own plus the raw data field (9)."""
    nbytes = _nbytes(tensor)
    return tensor.ByteSize() + 1 + _varint_size(nbytes) + nbytes


def serialized(proto: onnx.ModelProto, held: Mapping[str, np.ndarray] | None = None) -> Iterator[bytes | memoryview]:
    """`proto.SerializeToString()` in pieces, byte for byte: the graph's initializers one at a time, so that
    writing a model never holds a second copy of its weights; a placeholder is written as the tensor made of
    the array `held` for it (`filled`), made only when written. Protobuf writes fields in field-number order; a
    GraphProto's initializers (field 5) come after its nodes (1) and name (2) and before the rest, and the
    graph (ModelProto field 7) between the model's fields below 7 and above. (Unknown fields of the two
    top-level messages would move; eqsat's outputs, built by lowering, have none.)"""
    graph = proto.graph
    if not any(_large(t) or is_placeholder(t) for t in graph.initializer):
        yield proto.SerializeToString()
        return
    before, after = onnx.ModelProto(), onnx.ModelProto()
    head, tail = onnx.GraphProto(), onnx.GraphProto()
    for field, value in proto.ListFields():
        if field.number != 7:
            _copy_field(before if field.number < 7 else after, field.name, value)
    for field, value in graph.ListFields():
        if field.number != 5:
            _copy_field(head if field.number < 5 else tail, field.name, value)
    entries = [(_filled_size(t) if is_placeholder(t) else t.ByteSize(), t) for t in graph.initializer]
    size = head.ByteSize() + tail.ByteSize() + sum(1 + _varint_size(n) + n for n, _ in entries)
    yield before.SerializeToString() + b"\x3a" + _varint(size) + head.SerializeToString()
    for n, tensor in entries:
        if is_placeholder(tensor) and sys.byteorder == "little":
            yield from _filled_pieces(tensor, held or {}, n)
            continue
        data = filled(tensor, held or {}).SerializeToString()
        if len(data) != n:  # the length prefixes written above would be wrong: never a corrupt file
            raise InternalError(f"initializer {tensor.name!r} serialized to {len(data)} bytes, {n} expected")
        yield b"\x2a" + _varint(n) + data
    yield tail.SerializeToString() + after.SerializeToString()


def _filled_pieces(tensor: onnx.TensorProto, held: Mapping[str, np.ndarray], n: int) -> Iterator[bytes | memoryview]:
    """The initializer entry of `filled(tensor, held)`, `n` bytes after its length prefix, byte for byte, with
    the array's data as a view of the array itself (no copy: `from_array` makes one, its serialization a second,
    the entry a third). `from_array` sets dims (field 1), data_type (2), name (8) and raw_data (9), and protobuf
    writes them in that order: the header is the tensor without raw_data, then raw_data's tag, length and bytes."""
    array = np.ascontiguousarray(_held(tensor, held))
    header = onnx.TensorProto()
    header.dims.extend(array.shape)
    if tensor.name:
        header.name = tensor.name
    header.data_type = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
    data = array.data.cast("B")
    head = header.SerializeToString()
    if len(head) + 1 + _varint_size(data.nbytes) + data.nbytes != n:
        raise InternalError(f"initializer {tensor.name!r} would serialize to other than its {n} bytes")
    yield b"\x2a" + _varint(n) + head + b"\x4a" + _varint(data.nbytes)
    yield data


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _varint_size(n: int) -> int:
    return len(_varint(n))


def large_arrays(model: ir.Model, names: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """The model's large initializers (of `names` only, when given) as the arrays it holds (shared, not copied:
    `Light.attach`), by name."""
    initializers = model.graph.initializers
    chosen = initializers.items() if names is None else ((n, initializers[n]) for n in names if n in initializers)
    return {
        name: value.const_value.numpy()
        for name, value in chosen
        if value.const_value is not None and _large_ir(value.const_value)
    }


def _large(tensor: onnx.TensorProto) -> bool:
    return tensor.data_type != onnx.TensorProto.STRING and tensor.ByteSize() >= LARGE_BYTES


def _large_ir(tensor: ir.TensorProtocol) -> bool:
    return tensor.dtype != ir.DataType.STRING and tensor.nbytes >= LARGE_BYTES


#: Types whose raw data numpy reads as it is (little-endian, one element per item): shared as arrays.
_PLAIN = frozenset(
    {
        ir.DataType.FLOAT,
        ir.DataType.DOUBLE,
        ir.DataType.FLOAT16,
        ir.DataType.INT8,
        ir.DataType.INT16,
        ir.DataType.INT32,
        ir.DataType.INT64,
        ir.DataType.UINT8,
        ir.DataType.UINT16,
        ir.DataType.UINT32,
        ir.DataType.UINT64,
        ir.DataType.BOOL,
    }
)


def _shared(tensor: onnx.TensorProto) -> ir.TensorProtocol:
    """The IR tensor of `tensor`: a numpy array over one copy of its raw data where it has plain raw data,
    else the proto's own (onnx_ir reads it on demand)."""
    read = ir.serde.deserialize_tensor(tensor)
    if (
        isinstance(read, ir.serde.TensorProtoTensor)
        and read.dtype in _PLAIN
        and tensor.HasField("raw_data")
        and tensor.data_location != onnx.TensorProto.EXTERNAL
    ):
        return ir.Tensor(
            read.numpy(),
            read.dtype,
            name=tensor.name,
            doc_string=tensor.doc_string or None,
            metadata_props={p.key: p.value for p in tensor.metadata_props} or None,
        )
    return read


#: What lowering holds aside: float weights, whose raw data `numpy_helper.from_array` writes as numpy holds it.
_HELD_DTYPES = frozenset({np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)})
_HELD_TYPES = frozenset(onnx.helper.np_dtype_to_tensor_dtype(d) for d in _HELD_DTYPES)


def _float_raw(tensor: onnx.TensorProto) -> bool:
    if not tensor.HasField("raw_data") or tensor.data_location == onnx.TensorProto.EXTERNAL:
        return False
    try:
        return bool(np.issubdtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type), np.floating))
    except (KeyError, ValueError, TypeError):  # a type numpy has no dtype for
        return False


def _same_array(array: np.ndarray | None, tensor: onnx.TensorProto) -> np.ndarray | None:
    """`array` (C-contiguous) when it holds exactly the tensor's type, dims and bytes, else None."""
    if array is None or not tensor.HasField("raw_data"):
        return None
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
    if array.dtype != dtype or array.shape != tuple(tensor.dims):
        return None
    array = np.ascontiguousarray(array)
    data = tensor.raw_data  # a copy, for this one tensor only
    if len(data) != array.nbytes:
        return None
    return array if np.array_equal(array.reshape(-1).view(np.uint8), np.frombuffer(data, np.uint8)) else None


def _numel(tensor: onnx.TensorProto) -> int:
    count = 1
    for d in tensor.dims:
        count *= d
    return count


def _nbytes(tensor: onnx.TensorProto) -> int:
    return _numel(tensor) * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize


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
