"""Fresh value names: the one way eqsat names a value or constant it adds to a model (and unique node names).

ONNX values are named, and a name is one value in the whole model: a subgraph reads outer values by name,
and onnx_ir's initializer table holds one value per name (adding a second under a taken name silently
replaces the first, and every reader then reads the new one). So every name eqsat mints comes from
`fresh_name`, against the set of names already in use (`value_names`: every graph and subgraph), and every
constant the front end adds is made by `add_constant`.

Node names are not values, but onnxruntime refuses a graph in which two nodes share one (the checker accepts
it): `unique_node_names` renames all but one of each, in each graph eqsat writes.
"""

from __future__ import annotations

from typing import Container, Sequence

import numpy as np
import onnx
import onnx_ir as ir


def fresh_name(base: str, taken: set[str]) -> str:
    """`base`, else `base__1`, `base__2`, ...: the first name not in `taken`, which is added to `taken`."""
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}__{k}"
    taken.add(name)
    return name


def unique_node_names(nodes: Sequence[onnx.NodeProto], first: Container[int] = ()) -> None:
    """Rename nodes (in place) so that no two share a name: of nodes of one name, the first among those at the
    indices `first` (nodes kept as the input had them), else the first of all, keeps it; the others get
    `fresh_name`s no node has. Empty names (onnxruntime takes any number of them) stay."""
    taken = {n.name for n in nodes if n.name}
    owner: dict[str, int] = {}
    for k in sorted(range(len(nodes)), key=lambda k: k not in first):  # stable: `first` in order, then the rest
        name = nodes[k].name
        if name and owner.setdefault(name, k) != k:
            nodes[k].name = fresh_name(name, taken)


def value_names(graph: ir.Graph) -> set[str]:
    """Every value name used in `graph` and in its subgraphs at any depth: inputs, initializers, outputs, and
    every node's inputs and outputs (a subgraph's reads of outer values included). Iterative."""
    names: set[str] = set()
    stack = [graph]
    while stack:
        g = stack.pop()
        values: list[ir.Value | None] = [*g.inputs, *g.outputs, *g.initializers.values()]
        for node in g:
            values += node.inputs
            values += node.outputs
            for attr in node.attributes.values():
                if attr.type == ir.AttributeType.GRAPH:
                    stack.append(attr.value)
                elif attr.type == ir.AttributeType.GRAPHS:
                    stack.extend(attr.value)
        names.update(v.name for v in values if v is not None and v.name)
    return names


def add_constant(graph: ir.Graph, base: str, array: np.ndarray, taken: set[str] | None = None) -> ir.Value:
    """A new initializer of `graph` holding `array`, named `fresh_name(base, taken)`; `taken` defaults to
    `value_names(graph)` (pass one set to a series of calls: it is updated, and walking the model once is
    enough). `graph` should be the model's top-level graph, or `taken` must cover the whole model."""
    if taken is None:
        taken = value_names(graph)
    name = fresh_name(base, taken)
    array = np.asarray(array)
    const = ir.Value(
        name=name,
        type=ir.TensorType(ir.DataType.from_numpy(array.dtype)),
        shape=ir.Shape(array.shape),
        const_value=ir.tensor(array, name=name),
    )
    graph.register_initializer(const)
    return const
