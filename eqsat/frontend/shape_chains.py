"""Shape computations under symbolic dims: Reshape and Expand targets computed at run time made static.

Exporters compute reshape targets from the input's own shape (`Shape -> Gather -> Unsqueeze -> Concat ->
Reshape` around attention heads and flattening). With a dynamic batch or sequence dim the folder cannot
evaluate them, and the Reshape stays opaque to every rule. Here each target is evaluated symbolically,
element by element, over the shape facts of eqsat.frontend.symbols (a size, or a symbol), and written back as a
constant when ONNX can say it statically:

    Reshape(x, target): a size stays; a symbol equal to x's dim at the same index becomes 0 (copy; only
                        when no size in the target is 0, and allowzero is then set to 0); one remaining
                        symbol becomes -1 (inferred: the target's product is x's element count)
    Expand(x, target):  a size stays; a symbol equal to x's dim at the aligned index becomes 1 (keep)

The targets are evaluated by eqsat.frontend.symbols (`ShapeFacts.values`); a target it cannot evaluate stays as it is.
The chain itself becomes dead and is removed by the caller.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import onnx_ir as ir

from eqsat.frontend.names import add_constant, value_names
from eqsat.frontend.symbols import ShapeFacts, symbolic_shapes

Item = int | str  # an integer, or a symbol by name


def make_targets_static(model: ir.Model, facts: ShapeFacts | None = None) -> bool:
    """Rewrite the run-time targets of Reshape and Expand nodes as constants where possible; True if any.
    `facts`: the graph's symbolic shape facts, when the caller computed them already."""
    graph = model.graph
    facts = facts if facts is not None else symbolic_shapes(graph)
    changed = False
    taken: set[str] | None = None  # the model's value names, walked once at the first constant
    for node in graph:
        if (
            node.domain not in ("", "ai.onnx")
            or node.op_type not in ("Reshape", "Expand")
            or len(node.inputs) != 2
            or node.inputs[0] is None
            or node.inputs[1] is None
            or node.inputs[1].const_value is not None
        ):
            continue
        x, target_value = node.inputs[0], node.inputs[1]
        if x.name is None or target_value.name is None:
            continue
        target = facts.values.get(target_value.name)
        dims = facts.shapes.get(x.name) if x is not None else None
        if target is None or dims is None:
            continue
        x_items = facts.named(dims)
        if node.op_type == "Reshape":
            out_dims = facts.shapes.get(node.outputs[0].name) if node.outputs[0].name else None
            out_items = facts.named(out_dims) if out_dims is not None else ()
            allowzero = node.attributes.get("allowzero")
            literal_zeros = allowzero is not None and allowzero.as_int() == 1
            static = _reshape_target(target, x_items, out_items, literal_zeros)
        else:
            static = _expand_target(target, x_items)
        if static is None:
            continue
        if node.op_type == "Reshape" and "allowzero" in node.attributes:
            node.attributes["allowzero"] = ir.AttrInt64("allowzero", 0)  # the target has no literal 0
        if taken is None:
            taken = value_names(graph)
        # one constant per consumer: a target feeding a Reshape and an Expand gets two different ones
        node.replace_input_with(
            1, add_constant(graph, f"{target_value.name}_static", np.asarray(static, dtype=np.int64), taken)
        )
        changed = True
    return changed


def _reshape_target(
    target: Sequence[Item], x_items: Sequence[Item], out_items: Sequence[Item] = (), literal_zeros: bool = False
) -> list[int] | None:
    """`target` with symbols as 0 (copy x's dim) or one -1, or None when that cannot say it. A target without
    literal 0s means the same under allowzero 0 and 1, and a copied dim is the symbol's size even when it
    is 0 at run time: the rewritten node has allowzero 0. A -1 whose output dim the facts know (`out_items`) is
    written as that size. Otherwise not a copy beside a -1 that was a symbol, or that sat beside run-time values
    read literally (`literal_zeros`: allowzero 1): where a copied symbol is 0 at run time, the -1 cannot be
    inferred under allowzero 0 (ONNX Runtime refuses [0, -1] for an empty tensor), while the run-time target said
    every dim, or onnxruntime infers it under allowzero 1. (Under allowzero 0 a -1 the target already held beside
    a batch of 0 fails alike.)"""
    if all(isinstance(t, int) for t in target) or any(t == 0 for t in target):
        return None  # nothing symbolic to say, or a literal 0 (it already means "copy": mixing would misread)
    out: list[int] = []
    inferred = introduced = False  # a -1 in the target, and one written here for a symbol
    for k, t in enumerate(target):
        if isinstance(t, int):
            if t < -1 or (t == -1 and inferred):
                return None  # one -1 at most: a symbol before it may already be the one
            inferred = inferred or t == -1
            out.append(t)
        elif k < len(x_items) and x_items[k] == t:
            out.append(0)
        elif not inferred:
            inferred = introduced = True
            out.append(-1)
        else:
            return None
    if -1 in out:
        k = out.index(-1)
        size = out_items[k] if k < len(out_items) else None
        if isinstance(size, int) and size > 0:
            out[k] = size  # the facts know it: nothing left to infer
    return None if -1 in out and 0 in out and (introduced or literal_zeros) else out


def _expand_target(target: Sequence[Item], x_items: Sequence[Item]) -> list[int] | None:
    """`target` with symbols equal to x's aligned dim as 1 (broadcast keeps x's dim), or None."""
    offset = len(target) - len(x_items)
    out: list[int] = []
    for k, t in enumerate(target):
        if isinstance(t, int):
            out.append(t)
        elif 0 <= k - offset < len(x_items) and x_items[k - offset] == t:
            out.append(1)
        else:
            return None
    return out
