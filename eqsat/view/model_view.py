"""Models as plain records for pictures and listings (eqsat.view.display): a ModelProto, an onnx_ir Model, a
path or a Result becomes nodes with op, attributes, edges and eqsat's provenance metadata."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping

from eqsat.metadata import PROVENANCE_KEY, RULES_KEY


# ---------------------------------------------------------------------------------------------------
# models as plain records (ModelProto, onnx_ir Model, a path, or a Result)


@dataclasses.dataclass(frozen=True)
class ModelNode:
    index: int
    op: str
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any]
    meta: Mapping[str, str]

    @property
    def key(self) -> str:
        """The node's name as eqsat's provenance records it."""
        return self.name or f"{self.op}#{self.index}"


@dataclasses.dataclass(frozen=True)
class ModelGraph:
    nodes: tuple[ModelNode, ...]
    inputs: tuple[tuple[str, str], ...]  # (name, "FLOAT[1,3,224,224]")
    outputs: tuple[tuple[str, str], ...]
    initializers: frozenset[str]
    shapes: Mapping[str, str]  # value name -> "1x64x56x56"


def model_graph(model: Any) -> ModelGraph:
    if isinstance(model, ModelGraph):
        return model
    if hasattr(model, "report") and hasattr(model, "model"):  # a Result
        model = model.model
    if isinstance(model, (str, os.PathLike)):
        import onnx

        model = onnx.load(os.fspath(model), load_external_data=False)
    if hasattr(model, "SerializeToString"):
        return _graph_of_proto(model)
    return _graph_of_ir(model)


def short_attr(op: str, attrs: Mapping[str, Any]) -> str:
    """The one or two attributes worth showing in a node's box."""
    if op == "Transpose" and "perm" in attrs:
        return "perm " + ",".join(map(str, attrs["perm"]))
    if op == "Cast" and "to" in attrs:
        return f"to {_dtype_name(attrs['to'])}"
    if op in ("Conv", "ConvTranspose", "MaxPool", "AveragePool"):
        parts = []
        if attrs.get("kernel_shape"):
            parts.append("x".join(map(str, attrs["kernel_shape"])))
        if attrs.get("strides") and any(s != 1 for s in attrs["strides"]):
            parts.append("/" + ",".join(map(str, attrs["strides"])))
        if attrs.get("group", 1) not in (1, None):
            parts.append(f"g{attrs['group']}")
        return " ".join(parts)
    if op in ("Softmax", "Concat", "Gather", "Split", "Flatten", "LayerNormalization") and "axis" in attrs:
        return f"axis {attrs['axis']}"
    return ""


def _dtype_name(value: Any) -> str:
    try:
        import onnx

        return onnx.TensorProto.DataType.Name(int(value))
    except Exception:  # an ir.DataType or anything else: its own name
        return getattr(value, "name", str(value))


def _graph_of_proto(model: Any) -> ModelGraph:
    import onnx
    from onnx import helper

    graph = model.graph
    shapes: dict[str, str] = {}

    def typed(v: Any) -> str:
        t = v.type.tensor_type
        dims = ["?" if not d.HasField("dim_value") else str(d.dim_value) for d in t.shape.dim]
        if t.HasField("shape"):
            shapes[v.name] = "x".join(dims) if dims else "scalar"
        dtype = onnx.TensorProto.DataType.Name(t.elem_type) if t.elem_type else "?"
        return f"{dtype}[{','.join(dims)}]" if t.HasField("shape") else dtype

    inputs = tuple((v.name, typed(v)) for v in graph.input)
    outputs = tuple((v.name, typed(v)) for v in graph.output)
    for v in graph.value_info:
        typed(v)
    nodes = []
    for i, n in enumerate(graph.node):
        attrs = {}
        for a in n.attribute:
            if a.type in (
                onnx.AttributeProto.INT,
                onnx.AttributeProto.INTS,
                onnx.AttributeProto.FLOAT,
                onnx.AttributeProto.STRING,
            ):
                attrs[a.name] = helper.get_attribute_value(a)
        nodes.append(
            ModelNode(
                i,
                n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}",
                n.name,
                tuple(n.input),
                tuple(n.output),
                attrs,
                {p.key: p.value for p in n.metadata_props},
            )
        )
    return ModelGraph(tuple(nodes), inputs, outputs, frozenset(t.name for t in graph.initializer), shapes)


def _graph_of_ir(model: Any) -> ModelGraph:
    graph = model.graph
    shapes: dict[str, str] = {}

    def typed(v: Any) -> str:
        dims = None
        if v.shape is not None:
            dims = [str(d) if isinstance(d, int) else "?" for d in v.shape]
            shapes[v.name] = "x".join(dims) if dims else "scalar"
        dtype = v.dtype.name if v.dtype is not None else "?"
        return f"{dtype}[{','.join(dims)}]" if dims is not None else dtype

    inputs = tuple((v.name, typed(v)) for v in graph.inputs)
    outputs = tuple((v.name, typed(v)) for v in graph.outputs)
    nodes = []
    for i, n in enumerate(graph):
        for v in n.outputs:
            if v.shape is not None:
                typed(v)
        attrs = {}
        for name, a in n.attributes.items():
            value = getattr(a, "value", None)
            if isinstance(value, (int, float, str)) or (
                isinstance(value, (list, tuple)) and all(isinstance(x, (int, float)) for x in value)
            ):
                attrs[name] = value
        op = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"
        nodes.append(
            ModelNode(
                i,
                op,
                n.name or "",
                tuple(v.name if v is not None else "" for v in n.inputs),
                tuple(v.name for v in n.outputs),
                attrs,
                dict(n.metadata_props),
            )
        )
    return ModelGraph(tuple(nodes), inputs, outputs, frozenset(graph.initializers), shapes)


def changed_nodes(model: Any) -> list[bool]:
    """Per node of `model` (in graph order): did a rule produce it? True when its `eqsat.rules` metadata
    is non-empty or it has no `eqsat.from` metadata (a node eqsat built that stands for no input node)."""
    return [is_changed(n) for n in model_graph(model).nodes]


def is_changed(n: ModelNode) -> bool:
    return bool(n.meta.get(RULES_KEY)) or not n.meta.get(PROVENANCE_KEY)


def kept_nodes(before: ModelGraph, after: ModelGraph) -> list[bool]:
    """Per input node: is it in the output unchanged (named by the `eqsat.from` of an unchanged node)?"""
    carried = {
        name for n in after.nodes if not is_changed(n) for name in n.meta.get(PROVENANCE_KEY, "").split(",") if name
    }
    return [n.key in carried for n in before.nodes]
