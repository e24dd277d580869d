"""Verification inputs: sizes for dynamic dims, and seeded arrays that respect what each input means.

Sizes. A dim the model states is used as it is. A dynamic dim (dim_param, unnamed, or negative) is sized
by what its name suggests: batch-like names (containing "batch", or n, b, bs, N, B; an unnamed leading dim
of an input of rank >= 2) get 1; sequence-like names (seq, len, time, step, token, word, T, L, ...) climb
16, 32, 64, 256, 512; other dims climb 16, 32, 64, 224, 512. Attempt k takes the k-th size of each ladder,
so `candidate_shapes` yields at most `ATTEMPTS` assignments, smallest first. A dim_param has one size
everywhere it appears, and a size the user gave for it (by shape or by array) binds it in every input.

Arrays. Float inputs are standard normal; integer inputs named *mask* are ones, *token_type* zeros,
*position* an arange, a scalar sample rate (sr, sample_rate) 16000; other integer inputs are ids below
the smallest table they index (found by following the input to the Gather that consumes it), or below 100.
"""

from __future__ import annotations

import os
import re
from typing import Iterator, Mapping, Sequence

import numpy as np
import onnx

from eqsat.errors import BadInputError, first_line

Shape = tuple[int, ...]
Shapes = Mapping[str, Sequence[int]]

ATTEMPTS = 5
LADDERS = {"batch": (1,), "sequence": (16, 32, 64, 256, 512), "other": (16, 32, 64, 224, 512)}
BATCH_NAMES = {"n", "b", "bs", "batch", "batch_size", "batchsize", "nbatch"}
SEQUENCE_NAMES = {"t", "l", "s", "seq", "n_ctx", "ctx"}
SEQUENCE_WORDS = re.compile(r"seq|len|time|step|token|word|frame|sample|char|ctx")
SAMPLE_RATE_NAMES = {"sr", "sample_rate", "sampling_rate", "samplerate"}
SAMPLE_RATE = 16000
DTYPE_FAMILY = {"f": "float", "i": "int", "u": "int", "b": "bool"}  # an array is cast within its family
SHAPE_PRESERVING = {"Reshape", "Cast", "Unsqueeze", "Squeeze", "Flatten", "Identity"}


def dim_kind(name: str, axis: int, rank: int) -> str:
    """"batch", "sequence" or "other": which ladder a dynamic dim climbs (`name` is its dim_param, or "")."""
    lname = name.lower()
    if lname in BATCH_NAMES or "batch" in lname or (not name and axis == 0 and rank >= 2):
        return "batch"
    if lname in SEQUENCE_NAMES or SEQUENCE_WORDS.search(lname):
        return "sequence"
    return "other"


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The graph inputs that are not initializers: what a caller feeds."""
    initializers = {t.name for t in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in initializers]


def _dims(value: onnx.ValueInfoProto) -> list[onnx.TensorShapeProto.Dimension]:
    return list(value.type.tensor_type.shape.dim)


def dim_name(dim: onnx.TensorShapeProto.Dimension) -> str:
    """The dim_param of a dynamic dim, "" when it has none or one that names nothing ("?", as paddle2onnx
    writes for every unknown dim)."""
    return dim.dim_param if any(c.isalnum() for c in dim.dim_param) else ""


def _static(dim: onnx.TensorShapeProto.Dimension) -> int | None:
    return dim.dim_value if dim.HasField("dim_value") and dim.dim_value >= 0 else None


def check_given(model: onnx.ModelProto, shapes: Shapes, arrays: Mapping[str, np.ndarray],
                source: str) -> tuple[dict[str, Shape], dict[str, np.ndarray]]:
    """The user's verification shapes and arrays, checked against the model's inputs (name, rank, stated
    dims, dtype family: float, int or bool), arrays cast to the input's dtype; a `BadInputError` names
    what does not fit."""
    by_name = {v.name: v for v in graph_inputs(model)}
    known = ", ".join(by_name) or "none"
    checked_shapes: dict[str, Shape] = {}
    checked_arrays: dict[str, np.ndarray] = {}
    for flag, given in (("--input-shape", {k: tuple(v) for k, v in shapes.items()}),
                        ("--inputs", {k: np.asarray(v) for k, v in arrays.items()})):
        for name, item in given.items():
            if name not in by_name:
                raise BadInputError(source, f"{flag}: the model has no input named {name!r} (its inputs: {known})")
            shape = item.shape if isinstance(item, np.ndarray) else item
            check_shape(by_name[name], shape, flag, source)
            if isinstance(item, np.ndarray):
                checked_arrays[name] = _cast(item, by_name[name], source)
            else:
                checked_shapes[name] = shape
    return checked_shapes, checked_arrays


def check_shape(value: onnx.ValueInfoProto, shape: Sequence[int], flag: str, source: str) -> None:
    """Raise `BadInputError` unless `shape` has the input's rank and agrees with its stated dims."""
    dims = _dims(value)
    shown = "x".join(map(str, shape)) or "scalar"
    if len(shape) != len(dims):
        raise BadInputError(source, f"{flag}: input {value.name!r} has rank {len(dims)}, got shape {shown}")
    for axis, (dim, size) in enumerate(zip(dims, shape)):
        if _static(dim) is not None and dim.dim_value != size:
            raise BadInputError(source, f"{flag}: input {value.name!r} has size {dim.dim_value} on axis {axis}, "
                                        f"got shape {shown}")


def _cast(array: np.ndarray, value: onnx.ValueInfoProto, source: str) -> np.ndarray:
    want = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type))
    if array.dtype == want:
        return array
    if DTYPE_FAMILY.get(array.dtype.kind, array.dtype.kind) != DTYPE_FAMILY.get(want.kind, want.kind):
        raise BadInputError(source, f"--inputs: input {value.name!r} is {want}, the array is {array.dtype}")
    return array.astype(want)


def load_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The arrays of an .npz file by name; a `BadInputError` naming the file if it cannot be read."""
    import zipfile

    label = str(path)
    if os.path.isdir(path):
        raise BadInputError(label, "--inputs: is a directory, not an .npz file")
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise BadInputError(label, "--inputs: holds a single array, not an .npz archive of named arrays")
        with data:
            return {name: data[name] for name in data.files}
    except FileNotFoundError:
        raise BadInputError(label, "--inputs: no such file") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise BadInputError(label, f"--inputs: not a readable .npz file ({first_line(exc)})") from None


def candidate_shapes(model: onnx.ModelProto, shapes: Mapping[str, Shape] = {},
                     arrays: Mapping[str, np.ndarray] = {}) -> Iterator[dict[str, Shape]]:
    """Input shapes to try the model on, smallest first: at most `ATTEMPTS`, each different."""
    inputs = graph_inputs(model)
    given = {**shapes, **{k: tuple(a.shape) for k, a in arrays.items()}}
    bound = {dim_name(d): size for v in inputs if v.name in given
             for d, size in zip(_dims(v), given[v.name]) if dim_name(d)}
    seen: list[dict[str, Shape]] = []
    for attempt in range(ATTEMPTS):
        candidate = {}
        for v in inputs:
            if v.name in given:
                candidate[v.name] = tuple(given[v.name])
                continue
            dims, sizes = _dims(v), []
            for axis, d in enumerate(dims):
                ladder = LADDERS[dim_kind(dim_name(d), axis, len(dims))]
                size = _static(d)
                sizes.append(size if size is not None else bound.get(dim_name(d), ladder[min(attempt, len(ladder) - 1)]))
            candidate[v.name] = tuple(sizes)
        if candidate not in seen:
            seen.append(candidate)
            yield candidate


def make_inputs(model: onnx.ModelProto, seed: int = 0, shapes: Mapping[str, Shape] | None = None,
                arrays: Mapping[str, np.ndarray] = {}) -> dict[str, np.ndarray]:
    """Seeded inputs for every graph input that is not an initializer: `arrays` as given, the others
    random with `shapes` (by default the first of `candidate_shapes`)."""
    rng = np.random.default_rng(seed)
    shapes = shapes if shapes is not None else next(candidate_shapes(model, {}, arrays))
    feeds: dict[str, np.ndarray] = {}
    for value in graph_inputs(model):
        if value.name in arrays:
            feeds[value.name] = np.asarray(arrays[value.name])
            continue
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type))
        shape = list(shapes[value.name])
        feeds[value.name] = np.asarray(_random_tensor(value.name, shape, dtype, rng, model.graph))  # 0-d too
    return feeds


def _random_tensor(name: str, shape: list[int], dtype: np.dtype, rng: np.random.Generator,
                   graph: onnx.GraphProto) -> np.ndarray:
    lname = name.lower()
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        if "mask" in lname:
            return np.ones(shape, dtype)
        if "token_type" in lname or "segment" in lname:
            return np.zeros(shape, dtype)
        if "position" in lname and shape:
            return np.broadcast_to(np.arange(shape[-1], dtype=dtype), shape).copy()
        if lname in SAMPLE_RATE_NAMES and int(np.prod(shape)) == 1:
            return np.full(shape, SAMPLE_RATE, dtype)
        high = _index_bound(name, graph) or 100
        return rng.integers(0, high, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _index_bound(name: str, graph: onnx.GraphProto) -> int | None:
    """Smallest first-axis size of the tables this input indexes (through shape-preserving ops)."""
    sizes = {t.name: list(t.dims) for t in graph.initializer}
    frontier, seen, bounds = [name], {name}, []
    while frontier:
        value = frontier.pop()
        for node in graph.node:
            if value not in node.input:
                continue
            if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == value:
                axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                dims = sizes.get(node.input[0])
                if dims and -len(dims) <= axis < len(dims):
                    bounds.append(dims[axis])
            elif node.op_type in SHAPE_PRESERVING:
                for out in node.output:
                    if out not in seen:
                        seen.add(out)
                        frontier.append(out)
    return min(bounds) if bounds else None


def shapes_text(shapes: Mapping[str, Sequence[int]]) -> str:
    """`x:1x3x16x16, ids:1x16` (a scalar: `sr:scalar`)."""
    return ", ".join(f"{name}:{'x'.join(map(str, shape)) or 'scalar'}" for name, shape in shapes.items())
