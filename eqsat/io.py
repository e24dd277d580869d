"""Load, check, normalize and save ONNX models.

`load` turns a path or a proto into the IR (onnx_ir) after checking it well enough that every later stage
can trust it: parseable, every node input defined, acyclic, accepted by the ONNX checker. Problems raise
`BadInputError` naming the file, the node and what is wrong.

`normalize` makes the graph canonical before encoding: shape inference with data propagation, constant
and static-shape folding (onnxscript's folder, with a size cap so Expand/Tile/ConstantOfShape cannot blow
the file up), Constant nodes lifted to initializers, dead nodes removed.

`save` writes atomically (temporary file, then rename) and only a model that passes the full checker.
"""

from __future__ import annotations

import collections
import os
import tempfile
from pathlib import Path
from typing import Union

import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError

from eqsat.errors import BadInputError, InternalError

ModelSource = Union[str, os.PathLike, onnx.ModelProto, ir.Model]

#: Largest tensor (in elements) that folding may materialize; bigger results stay as computations.
FOLD_OUTPUT_LIMIT = 1 << 20
#: Largest constant input (in elements) that folding will read.
FOLD_INPUT_LIMIT = 1 << 20


def load(source: ModelSource, *, name: str | None = None) -> ir.Model:
    """Read and validate a model from a path, a ModelProto or an ir.Model."""
    if isinstance(source, ir.Model):
        return source
    if isinstance(source, onnx.ModelProto):
        label = name or "<model>"
        proto = source
        base_dir = None
    else:
        path = Path(source)
        label = name or str(path)
        proto = _read_proto(path)
        base_dir = path.parent
    _check_structure(proto, label, base_dir)
    try:
        return ir.serde.deserialize_model(proto)
    except Exception as exc:  # onnx_ir rejects what the checker let through
        raise BadInputError(label, f"cannot be read into the IR: {exc}") from None


def _read_proto(path: Path) -> onnx.ModelProto:
    label = str(path)
    if not path.exists():
        raise BadInputError(label, "no such file")
    if path.is_dir():
        raise BadInputError(label, "is a directory, not an ONNX file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInputError(label, f"cannot be read: {exc.strerror or exc}") from None
    if not data:
        raise BadInputError(label, "is empty (0 bytes), not an ONNX model")
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise BadInputError(label, f"is not an ONNX protobuf or is truncated ({exc})") from None
    if not proto.HasField("graph"):
        raise BadInputError(label, "is not an ONNX model (no graph in the protobuf)")
    return proto


def _check_structure(proto: onnx.ModelProto, label: str, base_dir: Path | None) -> None:
    """Reject what the later stages cannot handle, with the node named; sort the graph in place."""
    graph = proto.graph
    if base_dir is not None and _uses_external_data(graph):
        try:
            onnx.external_data_helper.load_external_data_for_model(proto, str(base_dir))
        except (OSError, ValueError) as exc:
            raise BadInputError(label, f"external weights cannot be loaded: {exc}") from None
    _sort_or_report_cycle(graph, label)
    try:
        onnx.checker.check_model(proto)
    except onnx.checker.ValidationError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadInputError(label, f"fails the ONNX checker: {first}") from None


def _uses_external_data(graph: onnx.GraphProto) -> bool:
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in graph.initializer)


def _sort_or_report_cycle(graph: onnx.GraphProto, label: str) -> None:
    """Topologically sort the top-level nodes (Kahn); report undefined inputs and cycles by node."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    defined |= {t.values.name for t in graph.sparse_initializer}
    producer: dict[str, int] = {}
    for idx, node in enumerate(graph.node):
        for out in node.output:
            if out:
                if out in producer or out in defined:
                    raise BadInputError(label, f"value {out!r} is produced twice", _node_name(node, idx), node.op_type)
                producer[out] = idx
    waiting = [0] * len(graph.node)
    consumers: dict[int, list[int]] = collections.defaultdict(list)
    for idx, node in enumerate(graph.node):
        for inp in node.input:
            if inp in defined:
                continue
            if inp not in producer:
                raise BadInputError(label, f"input {inp!r} is not defined by any node, input or initializer",
                                    _node_name(node, idx), node.op_type)
            waiting[idx] += 1
            consumers[producer[inp]].append(idx)
    ready = collections.deque(i for i, w in enumerate(waiting) if w == 0)
    order: list[int] = []
    while ready:
        idx = ready.popleft()
        order.append(idx)
        for c in consumers[idx]:
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    if len(order) != len(graph.node):
        stuck = min(i for i, w in enumerate(waiting) if w > 0)
        node = graph.node[stuck]
        raise BadInputError(label, "the graph has a cycle through this node", _node_name(node, stuck), node.op_type)
    if order != sorted(order):
        nodes = [graph.node[i] for i in order]
        del graph.node[:]
        graph.node.extend(nodes)


def _node_name(node: onnx.NodeProto, idx: int) -> str:
    return node.name or f"#{idx}"


def normalize(model: ir.Model) -> ir.Model:
    """Shape inference, constant/static-shape folding, Constant lifting, dead-node removal (in place)."""
    from onnx_ir.passes import common as passes
    from onnxscript.optimizer import fold_constants

    _infer_shapes(model)
    fold_constants(model, onnx_shape_inference=True,
                   input_size_limit=FOLD_INPUT_LIMIT, output_size_limit=FOLD_OUTPUT_LIMIT)
    passes.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0)(model)
    passes.RemoveUnusedNodesPass()(model)
    _infer_shapes(model)
    return model


def _infer_shapes(model: ir.Model) -> None:
    from onnx_ir.passes import common as passes

    try:
        passes.ShapeInferencePass(strict_mode=False, data_prop=True)(model)
    except Exception:  # shape inference is best effort: unknown ops simply get no shapes
        pass


def to_proto(model: ir.Model) -> onnx.ModelProto:
    return ir.serde.serialize_model(model)


def save(model: ir.Model | onnx.ModelProto, path: str | os.PathLike) -> None:
    """Check the model fully, then write it atomically: a failure never leaves a partial file."""
    proto = model if isinstance(model, onnx.ModelProto) else to_proto(model)
    try:
        onnx.checker.check_model(proto, full_check=True)
    except onnx.checker.ValidationError as exc:
        raise InternalError(f"eqsat produced an invalid model, not written: {str(exc).splitlines()[0]}") from None
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(proto.SerializeToString())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def op_histogram(model: ir.Model) -> collections.Counter[str]:
    """Op types of the top-level graph (custom domains shown as domain::Op)."""
    return collections.Counter(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"
                               for n in model.graph)
