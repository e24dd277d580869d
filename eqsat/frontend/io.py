"""Load, check, normalize and save ONNX models.

`load` turns a path or a proto into the IR (onnx_ir) after checking it well enough that every later stage
can trust it: parseable, every node input defined, acyclic, accepted by the ONNX checker. Problems raise
`BadInputError` naming the file, the node and what is wrong.

Normalizing (shape inference, folding) lives in `eqsat.frontend.normalize` and `eqsat.frontend.fold`.

`save` writes atomically (temporary file, then rename) and only a model that passes the full checker.
"""

from __future__ import annotations

import collections
import heapq
import logging
import os
import re
import secrets
from pathlib import Path
from typing import Iterable, Mapping, Union

import numpy as np
import onnx
import onnx.version_converter
import onnx_ir as ir
from google.protobuf.message import DecodeError

from eqsat.errors import BadInputError, InternalError, first_line
from eqsat.frontend import weights

ModelSource = Union[str, os.PathLike, onnx.ModelProto, ir.Model]


def load(source: ModelSource, *, name: str | None = None) -> ir.Model:
    """Read and validate a model from a path, a ModelProto or an ir.Model."""
    if isinstance(source, ir.Model):
        return source
    proto, label = load_proto(source, name=name)
    return from_proto(proto, label)


def label_of(source: ModelSource, name: str | None = None) -> str:
    """What errors and reports call a model: `name`, else its path, else "<model>"."""
    return name or (str(source) if isinstance(source, (str, os.PathLike)) else "<model>")


def load_proto(source: ModelSource, *, name: str | None = None) -> tuple[onnx.ModelProto, str]:
    """The validated (and topologically sorted) proto of a model, with the label errors name it by."""
    label = label_of(source, name)
    if isinstance(source, ir.Model):
        return to_proto(source), label
    if isinstance(source, onnx.ModelProto):
        return _check_structure(source, label, None, owned=False), label
    path = Path(source)
    return _check_structure(_read_proto(path), label, path.parent, owned=True), label


def upgrade_opset(proto: onnx.ModelProto, opset: int, label: str = "<model>") -> onnx.ModelProto:
    """The model converted to default-domain `opset`; asking for an older opset than the model's is an error
    (eqsat never downgrades: a model's ops may have no older form)."""
    current = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    if current is not None and opset < current:
        raise BadInputError(label, f"opset {opset} is older than the model's opset {current}: eqsat only upgrades")
    if current is None or opset <= current:
        return proto
    try:
        converted = onnx.version_converter.convert_version(proto, opset)
    except Exception as exc:  # the converter lacks an adapter for some op
        raise BadInputError(label, f"cannot be converted to opset {opset}: {first_line(exc)}") from None
    return _check_structure(converted, label, None, owned=True)


def from_proto(proto: onnx.ModelProto, label: str = "<model>") -> ir.Model:
    """The IR of a validated proto."""
    try:
        return ir.serde.deserialize_model(proto)
    except Exception as exc:  # onnx_ir rejects what the checker let through
        where = _unreadable_part(proto.graph)
        raise BadInputError(label, f"cannot be read into the IR{where}: {_root_cause(exc)}") from None


def _root_cause(exc: BaseException) -> str:
    """The innermost cause's first sentence ("Map types are not supported yet"), not onnx_ir's wrapper."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return first_line(exc).split(". Please contribute")[0]


def _unreadable_part(graph: onnx.GraphProto) -> str:
    """Where in `graph` (top level) onnx_ir fails: " (node 'n' (domain::Op))" or " (graph output 'y')", else ""."""
    reader = logging.getLogger("onnx_ir")
    level = reader.level
    reader.setLevel(logging.ERROR)  # a node read alone misses its inputs' producers: onnx_ir warns, rightly here
    try:
        return _first_unreadable(graph)
    finally:
        reader.setLevel(level)


def _first_unreadable(graph: onnx.GraphProto) -> str:
    for node in graph.node:
        try:
            ir.serde.deserialize_node(node)
        except Exception:
            return f" (node {node.name or node.output[0]!r} ({node.domain or 'ai.onnx'}::{node.op_type}))"
    for kind, values in (("graph input", graph.input), ("graph output", graph.output), ("value", graph.value_info)):
        for value in values:
            try:
                ir.serde.deserialize_value_info_proto(value, None)
            except Exception:
                return f" ({kind} {value.name!r})"
    return ""


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


def _check_structure(proto: onnx.ModelProto, label: str, base_dir: Path | None, *, owned: bool) -> onnx.ModelProto:
    """Reject what the later stages cannot handle, with the node named; return the proto sorted.

    An unsorted proto is sorted in place when `owned`, else in a copy (a caller's proto is never changed).
    The full check (strict shape and type inference) is the one `save` applies, so a model accepted here
    that yields an invalid output is eqsat's bug, not the user's.
    """
    if base_dir is not None and _uses_external_data(proto.graph):
        try:
            onnx.external_data_helper.load_external_data_for_model(proto, str(base_dir))
        except (OSError, ValueError, onnx.checker.ValidationError) as exc:  # missing file, path outside the folder
            raise BadInputError(label, f"external weights cannot be loaded: {first_line(exc)}") from None
    order = _topological_order(proto.graph, label)
    if order != sorted(order):
        if not owned:
            proto = copy_proto(proto)
        nodes = [proto.graph.node[i] for i in order]
        proto.graph.ClearField("node")
        proto.graph.node.extend(nodes)
    proto = without_negative_dims(proto)  # a dim declared -1 (paddle2onnx) is dynamic, not a conflict
    try:
        weights.check_model(proto)
    except CHECKER_ERRORS as exc:
        if not _valid_despite_strict_inference(proto):
            raise _checker_failure(label, exc, proto.graph) from None
    return proto


def _valid_despite_strict_inference(proto: onnx.ModelProto) -> bool:
    """True when the model passes the checker without strict shape inference and onnxruntime loads it: a
    valid model whose strict inference trips on onnx's own function bodies (MeanVarianceNormalization at
    opset 13 expands to a Constant that inference rejects). Its output is held to the same standard (`save`)."""
    if not _passes_check(proto, full=False):
        return False
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    try:
        ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception:  # onnxruntime refuses it too
        return False
    return True


#: What `onnx.checker.check_model(full_check=True)` raises for an invalid model.
CHECKER_ERRORS = (onnx.checker.ValidationError, onnx.shape_inference.InferenceError)
#: How the checker ("...\n==> Context: Bad node spec for node. Name: n OpType: Add") and shape inference
#: ("[ShapeInferenceError] (op_type:Add, node name: n): [TypeInferenceError] problem") name a node.
_CHECKER_NODE = re.compile(r"Bad node spec for node\. Name: (?P<name>.*?) OpType: (?P<op>\S+)")
_INFERENCE_NODE = re.compile(r"\(op_type:(?P<op>[^,]*), node name: (?P<name>[^)]*)\):\s*")
_ERROR_TAGS = re.compile(r"^(\[\w+\]\s*|Inference error\(s\):\s*)+")


def _checker_failure(label: str, exc: Exception, graph: onnx.GraphProto | None = None) -> BadInputError:
    """The checker's complaint as one line that names the node where the message does (or the graph
    input or output it is about, for a type without a shape)."""
    first = first_line(exc)
    if graph is not None and "Field 'shape' of 'type' is required" in first:
        for kind, values in (("input", graph.input), ("output", graph.output)):
            for v in values:
                if v.type.HasField("tensor_type") and not v.type.tensor_type.HasField("shape"):
                    return BadInputError(
                        label,
                        f"fails the ONNX checker: graph {kind} {v.name!r} has no shape "
                        "(unknown rank); declare its dims (symbolic names are fine)",
                    )
    if found := _INFERENCE_NODE.search(first):
        problem, name, op = first[found.end() :], found["name"], found["op"]
    else:
        found = _CHECKER_NODE.search(str(exc))
        problem, name, op = first, found["name"] if found else "", found["op"] if found else None
    return BadInputError(label, f"fails the ONNX checker: {_ERROR_TAGS.sub('', problem).strip()}", name or None, op)


def copy_proto(proto: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    return copy


def _uses_external_data(graph: onnx.GraphProto) -> bool:
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in graph.initializer)


def _topological_order(graph: onnx.GraphProto, label: str) -> list[int]:
    """Node indices of the top-level graph in a topological order, as close to the file's as possible
    (Kahn with the smallest ready index first: a sorted graph keeps its order). Values that subgraphs
    (If/Loop/Scan bodies) read from the outer scope count as inputs of their node. Undefined inputs and
    cycles are reported by node."""
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
        for inp in [*node.input, *sorted(outer_values(node))]:
            if inp in defined:
                continue
            if inp not in producer:
                raise BadInputError(
                    label,
                    f"input {inp!r} is not defined by any node, input or initializer",
                    _node_name(node, idx),
                    node.op_type,
                )
            waiting[idx] += 1
            consumers[producer[inp]].append(idx)
    ready = [i for i, w in enumerate(waiting) if w == 0]
    order: list[int] = []
    while ready:
        idx = heapq.heappop(ready)
        order.append(idx)
        for c in consumers[idx]:
            waiting[c] -= 1
            if waiting[c] == 0:
                heapq.heappush(ready, c)
    if len(order) != len(graph.node):
        stuck = min(i for i, w in enumerate(waiting) if w > 0)
        node = graph.node[stuck]
        raise BadInputError(label, "the graph has a cycle through this node", _node_name(node, stuck), node.op_type)
    return order


def _subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    return [g for a in node.attribute for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs)]


def outer_values(node: onnx.NodeProto) -> set[str]:
    """Names the node's subgraphs, at any depth, read without defining them: values of the outer scope."""
    free: set[str] = set()
    stack = [(g, frozenset[str]()) for g in _subgraphs(node)]  # (subgraph, names defined by enclosing subgraphs)
    while stack:
        graph, enclosing = stack.pop()
        local = enclosing | {i.name for i in graph.input} | {t.name for t in graph.initializer}
        local |= {t.values.name for t in graph.sparse_initializer} | {o for n in graph.node for o in n.output}
        free |= {name for n in graph.node for name in n.input if name and name not in local}
        free |= {o.name for o in graph.output if o.name not in local}
        stack += [(g, local) for n in graph.node for g in _subgraphs(n)]
    return free


def _node_name(node: onnx.NodeProto, idx: int) -> str:
    return node.name or f"#{idx}"


def without_negative_dims(proto: onnx.ModelProto) -> onnx.ModelProto:
    """The model with every negative dim_value (paddle2onnx's way to write a dynamic dim) made an unknown dim,
    in a copy when there is one: shape inference and folding would take -1 for a size (Shape -> [-1, ...])."""

    def declared(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
        return [*graph.input, *graph.output, *graph.value_info]

    def negative(graph: onnx.GraphProto) -> list[onnx.TensorShapeProto.Dimension]:
        return [
            d
            for v in declared(graph)
            if v.type.HasField("tensor_type")
            for d in v.type.tensor_type.shape.dim
            if d.HasField("dim_value") and d.dim_value < 0
        ]

    if not any(negative(g) for g in all_graphs(proto.graph)):
        return proto
    proto = copy_proto(proto)
    for graph in all_graphs(proto.graph):
        for dim in negative(graph):
            dim.Clear()
    return proto


def all_graphs(root: onnx.GraphProto) -> list[onnx.GraphProto]:
    """`root` and every subgraph of its nodes at any depth (iteratively)."""
    found, stack = [], [root]
    while stack:
        graph = stack.pop()
        found.append(graph)
        stack += [g for n in graph.node for g in _subgraphs(n)]
    return found


def to_proto(model: ir.Model) -> onnx.ModelProto:
    return ir.serde.serialize_model(model)


def save(
    model: ir.Model | onnx.ModelProto,
    path: str | os.PathLike,
    original: onnx.ModelProto | None = None,
    held: Mapping[str, np.ndarray] | None = None,
) -> None:
    """Check the model fully, then write it atomically: a failure never leaves a partial file. A model whose
    `original` passed only the checker without strict shape inference (onnx's own function bodies can trip
    it) is held to that standard. `held`: the arrays of the model's placeholders (eqsat.frontend.weights)."""
    proto = model if isinstance(model, onnx.ModelProto) else to_proto(model)
    try:
        weights.check_model(proto, held=held)
    except CHECKER_ERRORS as exc:
        if original is None or _passes_check(original, full=True) or not _passes_check(proto, full=False, held=held):
            raise InternalError(f"eqsat produced an invalid model, not written: {first_line(exc)}") from None
    target = Path(path)
    try:
        _write_atomically(target, weights.serialized(proto, held))
    except OSError as exc:
        raise BadInputError(str(target), f"cannot be written: {exc.strerror or exc}") from None


def _passes_check(proto: onnx.ModelProto, *, full: bool, held: Mapping[str, np.ndarray] | None = None) -> bool:
    """Whether the ONNX checker accepts `proto` (`full`: with strict shape and type inference)."""
    try:
        weights.check_model(proto, full=full, held=held)
    except CHECKER_ERRORS:
        return False
    return True


def _write_atomically(target: Path, data: Iterable[bytes | memoryview]) -> None:
    """Write a fresh temporary file beside `target`, then rename it over `target`.

    Not tempfile.mkstemp: its files are private (0600); opening with "xb" honours the umask like any save.
    """
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    fh = open(tmp, "xb")  # if this fails, nothing was created
    try:
        with fh:
            for piece in data:
                fh.write(piece)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _op_key(domain: str, op_type: str) -> str:
    return op_type if domain in ("", "ai.onnx") else f"{domain}::{op_type}"


def proto_op_histogram(model: onnx.ModelProto) -> collections.Counter[str]:
    """`op_histogram` of a proto, without building the IR, counting the nodes of If/Loop/Scan bodies too."""
    return collections.Counter(_op_key(n.domain, n.op_type) for g in all_graphs(model.graph) for n in g.node)


def op_histogram(model: ir.Model) -> collections.Counter[str]:
    """Op types of the graph and its If/Loop/Scan bodies (custom domains shown as domain::Op)."""
    return collections.Counter(_op_key(n.domain, n.op_type) for g in [model.graph, *model.graph.subgraphs()] for n in g)
