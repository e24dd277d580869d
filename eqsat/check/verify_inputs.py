"""Verification inputs: sizes for dynamic dims, and the user's own shapes and arrays.

Sizes. A dim the model states is used as it is. A dynamic dim (dim_param, unnamed, or negative) is never
sized 1 alone: size 1 hides every bug where a dim was taken as 1. Its name says which ladder it climbs:
batch-like names (containing "batch", or n, b, bs, N, B; an unnamed leading dim of an input of rank >= 2;
the leading dim of a rank >= 4 input whose name says nothing else) get 2, then 3 for the second
assignment; sequence-like names (seq, len, time, step, token, word, T, L, ...) climb 16, 32, 64, 256, 512;
other dims climb 16, 32, 64, 224, 512. The first assignment takes batch 2 and rung k of each ladder for
k = 0, 1, ... until the original runs (`first_sizes`; batch 1 only when no larger batch runs at all); the
second takes batch 3 and another rung (`second_sizes`), so that every dynamic dim is checked at two sizes.
A dim_param has one size everywhere it appears, and a size the user gave for it (by shape or by array)
binds it in every input. The values drawn at these sizes: eqsat.check.verify_values.
"""

from __future__ import annotations

import os
import re
from typing import Iterator, Mapping, NamedTuple, Sequence

import numpy as np
import onnx

from eqsat.errors import BadInputError, first_line
from eqsat.frontend.model_inputs import check_shape, dim_name, graph_inputs, input_dims, static_size

Shape = tuple[int, ...]
Shapes = Mapping[str, Sequence[int]]

ATTEMPTS = 5
LADDERS = {"batch": (2, 3), "sequence": (16, 32, 64, 256, 512), "other": (16, 32, 64, 224, 512)}
BATCH_NAMES = {"n", "b", "bs", "batch", "batch_size", "batchsize", "nbatch"}
SEQUENCE_NAMES = {"t", "l", "s", "seq", "n_ctx", "ctx"}
SEQUENCE_WORDS = re.compile(r"seq|len|time|step|token|word|frame|sample|char|ctx")
SAMPLE_RATE_NAMES = {"sr", "sample_rate", "sampling_rate", "samplerate"}
SAMPLE_RATE = 16000
DTYPE_FAMILY = {"f": "float", "i": "int", "u": "int", "b": "bool"}  # an array is cast within its family


def dim_kind(name: str, axis: int, rank: int) -> str:
    """ "batch", "sequence" or "other": which ladder a dynamic dim climbs (`name` is its dim_param, or "")."""
    lname = name.lower()
    if lname in BATCH_NAMES or "batch" in lname or (not name and axis == 0 and rank >= 2):
        return "batch"
    if lname in SEQUENCE_NAMES or SEQUENCE_WORDS.search(lname):
        return "sequence"
    if axis == 0 and rank >= 4:  # an image or video batch, whatever the exporter called it
        return "batch"
    return "other"


def check_given(
    model: onnx.ModelProto, shapes: Shapes, arrays: Mapping[str, np.ndarray], source: str
) -> tuple[dict[str, Shape], dict[str, np.ndarray]]:
    """The user's verification shapes and arrays, checked against the model's inputs (name, rank, stated
    dims, dtype family: float, int or bool), arrays cast to the input's dtype; a `BadInputError` names
    what does not fit."""
    by_name = {v.name: v for v in graph_inputs(model)}
    known = ", ".join(by_name) or "none"
    checked_shapes: dict[str, Shape] = {}
    checked_arrays: dict[str, np.ndarray] = {}
    for flag, given in (
        ("--input-shape", {k: tuple(v) for k, v in shapes.items()}),
        ("--inputs", {k: np.asarray(v) for k, v in arrays.items()}),
    ):
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


class Sizes(NamedTuple):
    """One choice of sizes for the dynamic dims: the batch-like dims' size and the rung of the other ladders."""

    batch: int
    rung: int


def first_sizes() -> Iterator[Sizes]:
    """The choices tried for the first assignment, smallest first: batch 2 on each rung, then, only as a last
    resort (a model that runs at batch 1 alone), batch 1."""
    for batch in (LADDERS["batch"][0], 1):
        for rung in range(ATTEMPTS):
            yield Sizes(batch, rung)


def second_sizes(first: Sizes) -> Iterator[Sizes]:
    """The choices tried for the second assignment, which differs from `first` in every dynamic dim it can:
    batch 3 (batch 1 stays 1), the other dims on the next rungs up, then on the rungs below."""
    batch = LADDERS["batch"][1] if first.batch == LADDERS["batch"][0] else first.batch
    for rung in (*range(first.rung + 1, ATTEMPTS), *reversed(range(first.rung))):
        yield Sizes(batch, rung)


def given_shapes(shapes: Mapping[str, Shape], arrays: Mapping[str, np.ndarray]) -> dict[str, Shape]:
    """The shapes the user fixed: given shapes and the shapes of given arrays."""
    return {**shapes, **{k: tuple(np.shape(a)) for k, a in arrays.items()}}


def assign(
    model: onnx.ModelProto, sizes: Sizes, shapes: Mapping[str, Shape] = {}, arrays: Mapping[str, np.ndarray] = {}
) -> dict[str, Shape]:
    """The shape of every tensor input for one choice of `sizes`: stated dims as stated, inputs the user
    sized as given, a dim_param the user sized (in any input) that size everywhere, other dynamic dims by
    their kind: batch-like `sizes.batch`, the others their ladder's rung `sizes.rung`."""
    inputs = [v for v in graph_inputs(model) if v.type.HasField("tensor_type")]
    given = given_shapes(shapes, arrays)
    bound = {
        dim_name(d): size
        for v in inputs
        if v.name in given
        for d, size in zip(input_dims(v), given[v.name])
        if dim_name(d)
    }
    candidate = {}
    for v in inputs:
        if v.name in given:
            candidate[v.name] = tuple(given[v.name])
            continue
        dims, out = input_dims(v), []
        for axis, d in enumerate(dims):
            kind = dim_kind(dim_name(d), axis, len(dims))
            size = static_size(d)
            if size is None:
                size = bound.get(dim_name(d), sizes.batch if kind == "batch" else LADDERS[kind][sizes.rung])
            out.append(size)
        candidate[v.name] = tuple(out)
    return candidate


def candidate_shapes(
    model: onnx.ModelProto, shapes: Mapping[str, Shape] = {}, arrays: Mapping[str, np.ndarray] = {}
) -> Iterator[dict[str, Shape]]:
    """Input shapes to try the model on first, smallest first (`first_sizes`), each different."""
    seen: list[dict[str, Shape]] = []
    for sizes in first_sizes():
        candidate = assign(model, sizes, shapes, arrays)
        if candidate not in seen:
            seen.append(candidate)
            yield candidate


def shapes_text(shapes: Mapping[str, Sequence[int]]) -> str:
    """`x:1x3x16x16, ids:1x16` (a scalar: `sr:scalar`)."""
    return ", ".join(f"{name}:{'x'.join(map(str, shape)) or 'scalar'}" for name, shape in shapes.items())
