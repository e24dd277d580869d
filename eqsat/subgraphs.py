"""If/Loop/Scan bodies optimized as graphs of their own, whose outer-scope reads are their inputs.

    bodies_of(normalized, depth)       # at saturation: each body of a top-level node as a model of its
                                       # own, which eqsat.session saturates in a child Session
    put_back(lowered, bodies, models)  # at each extraction: each child's model (extracted for the same
                                       # target) put back in place of the body it came from

A body becomes a standalone model (`standalone`): the body's own inputs, then the outer values it reads
(by name, with their types from the enclosing graph); outer initializers it reads are copied in as
initializers, so folding and constant rules see them (a Conv + BatchNormalization whose weights live
outside). The child is saturated once, by `eqsat.session.saturate`, so its own bodies are handled the same
way, one level down (at most MAX_DEPTH levels). Putting back keeps the body's input and output names and the
outer names it reads; names the child created that clash with any name elsewhere in the model are renamed;
initializers equal to the outer ones they were copied from are dropped again (read from the outer scope).
A body whose child fails (any error), or whose optimized graph has more nodes, stays as it was: never a
crash, never a dropped node. The whole model is verified afterwards by the normal path. Each child runs
under the model's limits (a time limit applies per body). All children and the model share one prepared
backend (eqsat.engine.prepared): the rules are installed once, each graph is loaded between a push and a pop.

An If whose condition folds to a constant is replaced by its taken branch by the folder (onnxscript's If
rule, in eqsat.frontend.normalize.normalize_proto); inlined nodes are named `<If name>_<node name>`, so their provenance
names the If. Inside bodies, the same holds: the conditions the folder sees include copied outer constants.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Mapping, Sequence

import onnx
from onnx import helper

from eqsat.frontend.io import all_graphs
from eqsat.frontend.names import fresh_name, unique_node_names

#: Nesting levels of bodies optimized; deeper bodies are kept as they are.
MAX_DEPTH = 4


@dataclasses.dataclass
class Body:
    """One body of a node: where it sits, the body as a model of its own (what a child Session optimizes),
    and what became of it: its optimized model, or why it is kept as it was."""

    key: tuple[str, str, int]  # (node's first output, attribute name, index among GRAPHS)
    node: str  # node name (reports)
    child: onnx.ModelProto | None = None
    problem: str | None = None  # why it is kept as it was

    def where(self, attr: str | None = None) -> str:
        return f"{self.node}.{attr or self.key[1]}"


@dataclasses.dataclass
class BodyStats:
    """What putting back did: counts for the report (nodes counted at any depth, Constant excluded)."""

    optimized: int = 0
    kept: int = 0
    nodes_before: int = 0
    nodes_after: int = 0
    problems: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def summary(self) -> str:
        text = (
            f"{self.optimized} of {self.optimized + self.kept} bodies optimized, "
            f"{self.nodes_before} -> {self.nodes_after} nodes in bodies"
        )
        return text + (f"; kept: {'; '.join(self.problems)}" if self.problems else "")


# ---- walking graphs ----
def subgraphs(node: onnx.NodeProto) -> Iterator[tuple[str, int, onnx.GraphProto]]:
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.name, 0, a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            for k, g in enumerate(a.graphs):
                yield a.name, k, g


def count_nodes(graph: onnx.GraphProto) -> int:
    """Nodes at any depth, Constant excluded (what reports compare)."""
    return sum(1 for g in all_graphs(graph) for n in g.node if n.op_type != "Constant")


def _defined(graph: onnx.GraphProto) -> set[str]:
    """Names a graph and its subgraphs define: inputs, initializers, node outputs, at any depth."""
    names: set[str] = set()
    for g in all_graphs(graph):
        names |= {v.name for v in g.input} | {t.name for t in g.initializer}
        names |= {o for n in g.node for o in n.output if o}
    return names


def _value_types(graph: onnx.GraphProto) -> dict[str, onnx.TypeProto]:
    types: dict[str, onnx.TypeProto] = {}
    for v in [*graph.input, *graph.output, *graph.value_info]:
        if v.type.WhichOneof("value") is not None:
            types.setdefault(v.name, v.type)
    return types


# ---- saturation ----
def bodies_of(model: onnx.ModelProto, depth: int) -> tuple[Body, ...]:
    """A Body for each body of each node of `model`'s top-level graph: the body as a model of its own
    (`child`, for a Session of its own at `depth` + 1), or the reason it is kept as it is."""
    bodies: list[Body] = []
    for node in model.graph.node:
        if not any(True for _ in subgraphs(node)) or not node.output:
            continue
        for attr, k, graph in subgraphs(node):
            body = Body((node.output[0], attr, k), node.name or node.output[0])
            bodies.append(body)
            if count_nodes(graph) <= 1:  # nothing to gain (a lone Identity, Squeeze, ...): not worth a session
                continue
            if depth >= MAX_DEPTH:
                body.problem = f"nested deeper than {MAX_DEPTH}"
                continue
            try:
                body.child = standalone(model, graph)
            except Exception as exc:  # noqa: BLE001 - any failure keeps the body as it was
                body.problem = problem_of(body.where(attr), exc)
    return tuple(bodies)


def problem_of(where: str, exc: Exception) -> str:
    """One line: which body, and the first line of what went wrong (errors of eqsat name the body already)."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if text.startswith(where) else f"{where}: {type(exc).__name__}: {text}"


def standalone(model: onnx.ModelProto, body: onnx.GraphProto) -> onnx.ModelProto:
    """`body` as a model of its own: its inputs, then the outer values it reads (outer initializers as
    initializers), its outputs; opsets, IR version and functions of `model`. Raises ValueError when a name
    or type it needs is missing."""
    from eqsat.frontend.io import outer_values

    reads = outer_values(helper.make_node("If", [], [], then_branch=body))  # at any depth
    local = {v.name for v in body.input}
    outputs = [o.name for o in body.output]
    if len(set(outputs)) != len(outputs) or any(o in local or o in reads or o not in _defined(body) for o in outputs):
        raise ValueError("a body output is one of its inputs or an outer value")
    initializers = {t.name: t for t in model.graph.initializer}
    types = _value_types(model.graph)
    inner_types = _value_types(body)
    inputs = list(body.input)
    inits = []
    for name in sorted(reads):
        if name in initializers:
            inits.append(initializers[name])
        elif name in types:
            inputs.append(helper.make_value_info(name, types[name]))
        else:
            raise ValueError(f"outer value {name!r} has no known type")
    for v in inputs:
        if v.type.WhichOneof("value") is None:
            raise ValueError(f"input {v.name!r} has no type")
    out_infos = []
    for o in body.output:
        if o.type.WhichOneof("value") is None:
            if o.name not in inner_types:
                raise ValueError(f"output {o.name!r} has no type")
            o = helper.make_value_info(o.name, inner_types[o.name])
        out_infos.append(o)
    graph = helper.make_graph(
        list(body.node),
        body.name or "body",
        inputs,
        out_infos,
        [*body.initializer, *inits],
        value_info=list(body.value_info),
    )
    graph.sparse_initializer.extend(body.sparse_initializer)
    child = helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    child.functions.extend(model.functions)
    return child


# ---- putting back ----
def put_back(
    model: onnx.ModelProto, bodies: Sequence[Body], optimized: Mapping[tuple[str, str, int], Any]
) -> BodyStats:
    """Put each body's optimized model (`optimized[body.key]`: a ModelProto, or the exception its child
    raised) into `model` (the lowered model, in place) where it came from; bodies without one, or whose
    child failed or grew, stay as they were. Every body node ends up with provenance metadata."""
    stats = BodyStats()
    by_key = {b.key: b for b in bodies}
    for node in model.graph.node:
        if not node.output:
            continue
        for attr_name, k, graph in list(subgraphs(node)):
            body = by_key.get((node.output[0], attr_name, k))
            before = count_nodes(graph)
            new, problem = None, body.problem if body is not None else None
            out = optimized.get(body.key) if body is not None else None
            if body is None:
                pass
            elif isinstance(out, Exception):
                problem = problem_of(f"{body.node}.{attr_name}", out)
            elif out is not None:
                try:
                    new = _optimized(model, graph, out)
                    if count_nodes(new) > before:
                        new, problem = None, f"{body.node}.{attr_name}: optimized body has more nodes"
                except Exception as exc:  # noqa: BLE001 - any failure keeps the body as it was
                    new, problem = None, problem_of(f"{body.node}.{attr_name}", exc)
            if new is not None:
                graph.CopyFrom(new)
                stats.optimized += 1
            else:
                stats.kept += 1
                if problem:
                    stats.problems.append(problem)
            _name_origins(graph, node.name or node.output[0])
            for g in all_graphs(graph):  # a body kept as it was may repeat a node name: onnxruntime refuses that
                unique_node_names(g.node)
            stats.nodes_before += before
            stats.nodes_after += count_nodes(graph)
    if stats.optimized:
        _drop_dead(model.graph)
    return stats


def _drop_dead(graph: onnx.GraphProto) -> None:
    """Remove the top-level nodes and initializers nothing reads any more: what only the original bodies
    read (BatchNormalization parameters folded into a body's weights, aliases of captured values)."""
    from eqsat.frontend.io import outer_values

    needed = {o.name for o in graph.output}
    keep = []
    for node in reversed(graph.node):  # nodes are in topological order: readers come after
        if any(o in needed for o in node.output):
            keep.append(node)
            needed.update(i for i in node.input if i)
            if any(True for _ in subgraphs(node)):
                needed |= outer_values(node)
    if len(keep) < len(graph.node):
        del graph.node[:]
        graph.node.extend(reversed(keep))
    live = [t for t in graph.initializer if t.name in needed]
    if len(live) < len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(live)


def _optimized(model: onnx.ModelProto, graph: onnx.GraphProto, child: onnx.ModelProto) -> onnx.GraphProto:
    """The child's optimized model as a body for `graph`'s place: its inputs and outputs as `graph`'s (names
    checked), outer initializers it kept unchanged dropped, names clashing with the rest of the model renamed."""
    out = child.graph
    n_own = len(graph.input)
    if [v.name for v in out.input[:n_own]] != [v.name for v in graph.input]:
        raise ValueError("the optimized body's inputs differ")
    if [v.name for v in out.output] != [v.name for v in graph.output]:
        raise ValueError("the optimized body's outputs differ")
    outer_inits = {t.name: t for t in model.graph.initializer}
    kept = [t for t in out.initializer if not (t.name in outer_inits and t == outer_inits[t.name])]
    new = helper.make_graph(
        list(out.node),
        graph.name,
        list(graph.input),
        list(graph.output),
        kept,
        doc_string=graph.doc_string or None,
        value_info=list(out.value_info),
    )
    # names defined anywhere outside this body (the outer names it reads among them) must not be redefined
    elsewhere = _defined(model.graph) - _defined(graph)
    protected = {v.name for v in graph.input} | {v.name for v in graph.output}
    clashes = sorted(n for n in _defined(new) if n in elsewhere and n not in protected)
    if clashes:
        taken = _defined(model.graph) | _defined(new)
        _rename(new, {name: fresh_name(f"{name}__b", taken) for name in clashes})
    return new


def _rename(graph: onnx.GraphProto, renames: dict[str, str]) -> None:
    """Rename values defined in `graph` (at any depth) and every reference to them."""
    for g in all_graphs(graph):
        for n in g.node:
            n.input[:] = [renames.get(i, i) for i in n.input]
            n.output[:] = [renames.get(o, o) for o in n.output]
        for seq in (g.input, g.value_info):
            for v in seq:
                v.name = renames.get(v.name, v.name)
        for t in g.initializer:
            t.name = renames.get(t.name, t.name)


def _name_origins(graph: onnx.GraphProto, owner: str) -> None:
    """Provenance on every node of a body, at any depth, that has none: its own name, else its owner's."""
    from eqsat.engine.lower import PROVENANCE_KEY

    for g in all_graphs(graph):
        for n in g.node:
            if not any(p.key == PROVENANCE_KEY and p.value for p in n.metadata_props):
                entry = n.metadata_props.add()
                entry.key, entry.value = PROVENANCE_KEY, n.name or owner
