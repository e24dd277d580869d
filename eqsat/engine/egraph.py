"""The saturated e-graph, decoded once from egglog's function tables into immutable typed tables.

Every extractor, cost model and the lowering read this structure, never egglog itself, so that
re-extraction under a new cost model costs milliseconds and needs no egglog state.

- `ENode`: one e-node: `op` (constructor name, e.g. "Conv"), its class, child classes (term arguments,
  in order) and `attrs` (primitive arguments, in order: ints, floats, strings, tuples of ints).
- `EClass`: one e-class: its sort ("T" tensors, "TL" tensor lists, "N" multi-output nodes), its e-nodes,
  and the facts known for it (shape with symbolic dims, dtype, constant-only).
- `EGraph`: the tables, the root classes (graph outputs, in order) and the handle map (value id -> class).

Handle nodes (`Ref`) and subsumed nodes are dropped; fact tables (`shape`, `dtype`) become class facts. A row of
a generic constructor (`(Unary "Relu" x)`, eqsat.engine.terms.GENERIC) becomes an e-node of its op ("Relu"), with
the same children and attributes as an op of its own constructor, and in the same place.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Iterable, Mapping, Sequence

from eqsat.engine.terms import GENERIC, OPS, SPECIAL
from eqsat.frontend.symbols import SYMBOL_SIZE
from eqsat.ops import NEVER_CONSTANT_OPS

TERM_SORTS = ("T", "TL", "N")
#: Leaves whose value is known at compile time; a class holding one is constant-only.
CONSTANT_LEAVES = frozenset({"Const", "Scalar", "Absent", "TNil"})
#: Nodes that are never constant even with constant children: opaque computations, and the Q/DQ pairs
#: that quantized formats keep on purpose (runtimes fuse them into integer kernels: the op table's never_constant).
NEVER_CONSTANT = frozenset({"Opaque", "Out", "Split", "Input"}) | NEVER_CONSTANT_OPS
#: Constructors that are rule plumbing only (unioned with an extractable form): not decoded.
PLUMBING = frozenset({"TAppend"})
#: The order e-nodes are numbered in: constructors as declared, each generic family's ops in their places among the
#: ops (extractors break cost ties by node id).
NODE_ORDER = {name: k for k, name in enumerate([*SPECIAL, *OPS])}
#: Constant-only classes larger than this (elements) are computed at run time, never materialized.
MAX_FOLDED_ELEMENTS = 1 << 20

Attr = Any  # int | float | str | tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class ENode:
    id: int
    op: str
    eclass: int
    children: tuple[int, ...]
    attrs: tuple[Attr, ...]


@dataclasses.dataclass(frozen=True)
class EClass:
    id: int
    sort: str
    nodes: tuple[int, ...]
    shape: tuple[int, ...] | None = None  # sizes >= 0, symbols < 0 (eqsat.frontend.symbols)
    dtype: str | None = None
    constant: bool = False
    rules: tuple[str, ...] = ()  # rules that added e-nodes to this class (provenance)
    sizes: tuple[int, ...] | None = None  # the shape with each symbol at the size the cost model assumes

    def __post_init__(self) -> None:
        if self.sizes is None and self.shape is not None:  # no symbol sizes given: the default price
            object.__setattr__(self, "sizes", priced(self.shape))


def priced(shape: tuple[int, ...] | None, symbol_sizes: Mapping[int, int] = {}) -> tuple[int, ...] | None:
    """`shape` with every symbol replaced by its representative size."""
    if shape is None:
        return None
    return tuple(d if d >= 0 else symbol_sizes.get(d, SYMBOL_SIZE) for d in shape)


@dataclasses.dataclass(frozen=True)
class EGraph:
    nodes: tuple[ENode, ...]
    classes: tuple[EClass, ...]
    roots: tuple[int, ...] = ()
    refs: Mapping[int, int] = dataclasses.field(default_factory=dict)

    def node(self, nid: int) -> ENode:
        return self.nodes[nid]

    def eclass(self, cid: int) -> EClass:
        return self.classes[cid]

    def class_nodes(self, cid: int) -> Iterable[ENode]:
        return (self.nodes[n] for n in self.classes[cid].nodes)

    @functools.cached_property
    def parents(self) -> Mapping[int, tuple[ENode, ...]]:
        """Per class, the e-nodes that read it (each once), in node order; built on first use."""
        return _readers(self.nodes)

    @functools.cached_property
    def absent_classes(self) -> frozenset[int]:
        """The classes holding an `Absent` node (an optional input left out); built on first use."""
        return frozenset(n.eclass for n in self.nodes if n.op == "Absent")

    @functools.cached_property
    def input_kinds(self) -> tuple[str, ...]:
        """Per class, how a node reading it takes it: "T" a tensor, "TL" a list of tensors, "" neither (an
        absent optional input, a multi-output node); built on first use."""
        absent = self.absent_classes
        return tuple("" if c.id in absent else c.sort if c.sort in ("T", "TL") else "" for c in self.classes)

    def class_of_ref(self, ref: int) -> int:
        return self.refs[ref]

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    def with_roots(self, roots: Iterable[int]) -> "EGraph":
        return dataclasses.replace(self, roots=tuple(roots))

    # ---- egraph-serialize JSON (the format extraction-gym reads) ----
    def to_serialized(self, cost: "Mapping[int, float] | None" = None) -> dict[str, Any]:
        """Export as egraph-serialize JSON; each child class is named by its first node, as egglog does."""
        first = {c.id: f"n{c.nodes[0]}" for c in self.classes if c.nodes}
        nodes = {}
        for n in self.nodes:
            nodes[f"n{n.id}"] = {
                "op": n.op,
                "children": [first[c] for c in n.children],
                "eclass": f"c{n.eclass}",
                "cost": float(cost[n.id]) if cost is not None else 1.0,
                "attrs": [list(a) if isinstance(a, tuple) else a for a in n.attrs],
            }
        class_data = {
            f"c{c.id}": {"type": c.sort, "shape": list(c.shape) if c.shape is not None else None, "dtype": c.dtype}
            for c in self.classes
        }
        return {"nodes": nodes, "root_eclasses": [f"c{r}" for r in self.roots], "class_data": class_data}

    @classmethod
    def from_serialized(cls, data: Mapping[str, Any]) -> "EGraph":
        """Inverse of `to_serialized` (attributes and facts round-trip; costs are not kept)."""
        class_ids = {name: i for i, name in enumerate(data["class_data"])}
        node_ids = {name: i for i, name in enumerate(data["nodes"])}
        nodes: list[ENode] = []
        members: dict[int, list[int]] = {i: [] for i in range(len(class_ids))}
        for name, raw in data["nodes"].items():
            nid = node_ids[name]
            cid = class_ids[raw["eclass"]]
            children = tuple(class_ids[data["nodes"][ch]["eclass"]] for ch in raw["children"])
            attrs = tuple(tuple(a) if isinstance(a, list) else a for a in raw.get("attrs", []))
            nodes.append(ENode(nid, raw["op"], cid, children, attrs))
            members[cid].append(nid)
        classes = []
        for name, cid in class_ids.items():
            meta = data["class_data"][name]
            shape = meta.get("shape")
            shape = tuple(shape) if shape is not None else None
            classes.append(
                EClass(cid, meta.get("type", "T"), tuple(members[cid]), shape, meta.get("dtype"), sizes=priced(shape))
            )
        graph = cls(tuple(nodes), tuple(classes), tuple(class_ids[r] for r in data.get("root_eclasses", [])))
        return _mark_constants(graph)


#: The tables `decode` reads besides the term constructors' (handles, class facts, provenance).
DECODED_FACTS = frozenset({"Ref", "shape", "dtype", "rewritten"})


def decoded(name: str, output_sort: str) -> bool:
    """Whether `decode` reads the table `name` (whose rows are of `output_sort`): a snapshot's `wanted`."""
    return output_sort in TERM_SORTS or name in DECODED_FACTS


def decode(
    tables: Mapping[str, Any],
    ref_ids: Iterable[int] = (),
    originals: Iterable[tuple[str, int, tuple[int, ...]]] = (),
    symbol_sizes: Mapping[int, int] = {},
) -> EGraph:
    """Decode egglog's function tables (`eqsat.engine.backend.Backend.snapshot`); `ref_ids` are the handles to
    keep (all when empty). Term constructors become e-nodes, `shape`/`dtype` class facts, `rewritten`
    provenance; handle (`Ref`) rows become the handle map; other tables are analysis-only.

    `originals` are the input graph's ops as (op, output handle, input handles): their e-nodes get the
    lowest ids, so that extractors, which break cost ties by node id, keep the input's op on a tie.
    `symbol_sizes` price the shape facts' symbols (`EClass.sizes`).
    """
    class_index: dict[int, int] = {}
    sorts: list[str] = []

    def cid(raw: int, sort: str) -> int:
        found = class_index.get(raw)
        if found is None:
            found = class_index[raw] = len(sorts)
            sorts.append(sort)
        return found

    shape: dict[int, tuple[int, ...]] = {}
    dtype: dict[int, str] = {}
    refs: dict[int, int] = {}
    rules: dict[int, set[str]] = {}
    raw_nodes: list[tuple[str, int, tuple[int, ...], tuple[Attr, ...]]] = []
    for name, table, rows in _node_rows(tables):
        if name == "Ref":
            for (rid,), out in rows:
                refs[rid] = cid(out, table.output_sort)
            continue
        generic = int(name in GENERIC_OPS)  # argument 0 of a generic constructor is the op's name
        term_args = [i for i, sort in enumerate(table.input_sorts) if sort in TERM_SORTS]
        attr_args = [i for i, sort in enumerate(table.input_sorts) if sort not in TERM_SORTS][generic:]
        term = [(i, table.input_sorts[i]) for i in term_args]
        for args, out in rows:
            kids: list[int] = []
            for i, sort in term:  # cid() inlined: the hottest loop of decoding
                found = class_index.get(args[i])
                if found is None:
                    found = class_index[args[i]] = len(sorts)
                    sorts.append(sort)
                kids.append(found)
            raw_nodes.append((name, cid(out, table.output_sort), tuple(kids), tuple([args[i] for i in attr_args])))
    original = {
        (op, refs[out], tuple(refs[i] for i in ins))
        for op, out, ins in originals
        if out in refs and all(i in refs for i in ins)
    }
    if original:
        raw_nodes.sort(key=lambda n: n[:3] not in original)  # stable: otherwise egglog's order
    nodes: list[ENode] = []
    members: list[list[int]] = [[] for _ in sorts]
    for op, owner, children, attrs in raw_nodes:
        members[owner].append(len(nodes))
        nodes.append(ENode(len(nodes), op, owner, children, attrs))
    for name, facts in (("shape", shape), ("dtype", dtype)):
        for (raw,), value in tables[name].rows if name in tables else ():
            if raw in class_index:
                facts[class_index[raw]] = value
    for (raw, rule), _ in tables["rewritten"].rows if "rewritten" in tables else ():
        if raw in class_index:
            rules.setdefault(class_index[raw], set()).add(rule)
    parents = _readers(nodes)
    constant = _constant_flags(nodes, [shape.get(c) for c in range(len(sorts))], parents)
    sizes: dict[tuple[int, ...], tuple[int, ...] | None] = {}  # each distinct shape priced once

    def sized(c: int) -> tuple[int, ...] | None:
        if c not in shape:
            return None
        found = sizes.get(shape[c])
        if found is None:
            found = sizes[shape[c]] = priced(shape[c], symbol_sizes)
        return found

    classes = tuple(
        EClass(
            c,
            sort,
            tuple(members[c]),
            shape.get(c),
            dtype.get(c),
            constant[c],
            tuple(sorted(rules[c])) if c in rules else (),
            sized(c),
        )
        for c, sort in enumerate(sorts)
    )
    wanted = set(ref_ids)
    kept_refs = {r: c for r, c in sorted(refs.items()) if not wanted or r in wanted}
    graph = EGraph(tuple(nodes), classes, (), kept_refs)
    graph.__dict__["parents"] = parents  # found once here (EGraph.parents is built the same way)
    return graph


#: Ops of generic constructors.
GENERIC_OPS = frozenset(op for ops in GENERIC.values() for op in ops)


def _node_rows(tables: Mapping[str, Any]) -> list[tuple[str, Any, list[tuple[tuple[Any, ...], Any]]]]:
    """(constructor or op, table, rows) for the tables of term sorts (plumbing left out), a generic table's rows
    split by op, in NODE_ORDER (tables it does not know after, in their order)."""
    found: dict[str, tuple[Any, list[tuple[tuple[Any, ...], Any]]]] = {}
    for name, table in tables.items():
        if table.output_sort not in TERM_SORTS or name in PLUMBING:
            continue
        if name in GENERIC:
            for args, out in table.rows:
                found.setdefault(args[0], (table, []))[1].append((args, out))
        else:
            found[name] = (table, table.rows)
    order = sorted(found, key=lambda name: NODE_ORDER.get(name, len(NODE_ORDER)))
    return [(name, *found[name]) for name in order]


def _foldable_size(shape: tuple[int, ...] | None) -> bool:
    if shape is None:
        return True
    if any(d < 0 for d in shape):  # a symbolic size is known at run time only
        return False
    size = 1
    for d in shape:
        size *= d
    return size <= MAX_FOLDED_ELEMENTS


def _readers(nodes: Iterable[ENode]) -> dict[int, tuple[ENode, ...]]:
    """Per class, the e-nodes that read it (each once), in node order (EGraph.parents)."""
    found: dict[int, list[ENode]] = {}
    for n in nodes:
        for c in dict.fromkeys(n.children):
            found.setdefault(c, []).append(n)
    return {c: tuple(ns) for c, ns in found.items()}


def _constant_flags(
    nodes: Sequence[ENode], shapes: Sequence[tuple[int, ...] | None], parents: Mapping[int, tuple[ENode, ...]]
) -> list[bool]:
    """Per class: constant-only, i.e. some node in it is a constant leaf or has only constant children (and its
    size is foldable)."""
    const = [False] * len(shapes)
    work: list[int] = []
    for n in nodes:
        if n.op in CONSTANT_LEAVES and not const[n.eclass]:
            const[n.eclass] = True
            work.append(n.eclass)
    while work:
        cid = work.pop()
        for n in parents.get(cid, ()):
            if const[n.eclass] or n.op in NEVER_CONSTANT:
                continue
            if n.children and all(const[c] for c in n.children) and _foldable_size(shapes[n.eclass]):
                const[n.eclass] = True
                work.append(n.eclass)
    return const


def _mark_constants(graph: EGraph) -> EGraph:
    """The graph with its constant-only classes marked (_constant_flags)."""
    const = _constant_flags(graph.nodes, [c.shape for c in graph.classes], graph.parents)
    classes = tuple(
        EClass(c.id, c.sort, c.nodes, c.shape, c.dtype, True, c.rules, c.sizes) if const[c.id] else c
        for c in graph.classes
    )  # made directly: dataclasses.replace is 4x slower
    marked = dataclasses.replace(graph, classes=classes)
    marked.__dict__["parents"] = graph.parents  # the same nodes: their readers, already found, carry over
    return marked
