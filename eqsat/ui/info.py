"""`eqsat info`: a model at a glance (producer, opsets, inputs, outputs, op histogram, sizes)."""

from __future__ import annotations

import os

import onnx_ir as ir

from eqsat.frontend import io


def _type_text(value: ir.Value) -> str:
    dtype = value.dtype.name if value.dtype is not None else "?"
    shape = "?" if value.shape is None else "[" + ",".join(str(d) for d in value.shape) + "]"
    return f"{dtype}{shape}"


def describe(source: io.ModelSource) -> str:
    model = io.load(source)
    graph = model.graph
    weights = sum(t.const_value.nbytes for t in graph.initializers.values() if t.const_value is not None)
    lines = []
    if isinstance(source, (str, os.PathLike)):
        lines.append(f"file       {source} ({os.path.getsize(source):,} bytes)")
    lines.append(f"producer   {model.producer_name or '?'} {model.producer_version or ''}".rstrip())
    lines.append("opsets     " + ", ".join(f"{d or 'ai.onnx'}={v}" for d, v in sorted(model.opset_imports.items())))
    ops = io.op_histogram(model)  # the graph's nodes and its If/Loop/Scan bodies
    in_bodies = sum(ops.values()) - len(graph)
    nodes = f"{len(graph)}" + (
        f" in the graph, {in_bodies} more in If/Loop/Scan bodies ({sum(ops.values())} in all)" if in_bodies else ""
    )
    lines.append(f"nodes      {nodes}; initializers {len(graph.initializers)} ({weights:,} bytes)")
    lines += [f"input      {v.name}: {_type_text(v)}" for v in graph.inputs]
    lines += [f"output     {v.name}: {_type_text(v)}" for v in graph.outputs]
    lines.append("ops" + (" (bodies included)" if in_bodies else ""))
    lines += [f"  {op:<28} {count}" for op, count in ops.most_common()]
    return "\n".join(lines)
