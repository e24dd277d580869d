"""The saturated e-graph, decoded once from egglog's serialized JSON into immutable typed tables.

Every extractor, cost model and the lowering read this structure, never egglog itself, so that
re-extraction under a new cost model costs milliseconds and needs no egglog state.

- `ENode`: one e-node: `op` (constructor name, e.g. "Conv"), its class, child classes (term arguments,
  in order) and `attrs` (primitive arguments, in order: ints, floats, strings, tuples of ints).
- `EClass`: one e-class: its sort ("T" tensors, "TL" tensor lists, "N" multi-output nodes), its e-nodes,
  and the facts known for it (static shape, dtype, constant-only).
- `EGraph`: the tables, the root classes (graph outputs, in order) and the handle map (value id -> class).

Handle nodes (`Ref`) and subsumed nodes are dropped; fact tables (`shape`, `dtype`) become class facts.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Iterable, Mapping

TERM_SORTS = ("T", "TL", "N")
#: Leaves whose value is known at compile time; a class holding one is constant-only.
CONSTANT_LEAVES = frozenset({"Const", "Scalar", "Absent"})
#: Nodes that are never constant even with constant children: opaque computations, and the Q/DQ pairs
#: that quantized formats keep on purpose (runtimes fuse them into integer kernels).
NEVER_CONSTANT = frozenset({"Opaque", "Out", "Input", "QuantizeLinear", "DequantizeLinear"})
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
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    constant: bool = False
    rules: tuple[str, ...] = ()   # rules that added e-nodes to this class (provenance)


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
            nodes[f"n{n.id}"] = {"op": n.op, "children": [first[c] for c in n.children],
                                 "eclass": f"c{n.eclass}", "cost": float(cost[n.id]) if cost is not None else 1.0,
                                 "attrs": [list(a) if isinstance(a, tuple) else a for a in n.attrs]}
        class_data = {f"c{c.id}": {"type": c.sort, "shape": list(c.shape) if c.shape is not None else None,
                                   "dtype": c.dtype} for c in self.classes}
        return {"nodes": nodes, "root_eclasses": [f"c{r}" for r in self.roots], "class_data": class_data}

    @classmethod
    def from_serialized(cls, data: Mapping[str, Any]) -> "EGraph":
        """Inverse of `to_serialized` (attributes and facts round-trip; costs are not kept)."""
        class_ids = {name: i for i, name in enumerate(data["class_data"])}
        node_ids = {name: i for i, name in enumerate(data["nodes"])}
        nodes, members = [], {i: [] for i in range(len(class_ids))}
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
            classes.append(EClass(cid, meta.get("type", "T"), tuple(members[cid]),
                                  tuple(shape) if shape is not None else None, meta.get("dtype")))
        graph = cls(tuple(nodes), tuple(classes), tuple(class_ids[r] for r in data.get("root_eclasses", [])))
        return _mark_constants(graph)


def decode(serialized_json: str, ref_ids: Iterable[int] = ()) -> EGraph:
    """Decode egglog's `serialize(...).to_json()` output; `ref_ids` are the handles to resolve."""
    raw = json.loads(serialized_json)
    nodes: Mapping[str, Mapping[str, Any]] = raw["nodes"]
    sorts = {name: meta["type"] for name, meta in raw["class_data"].items()}
    prim_by_class: dict[str, str] = {}
    for nid, n in nodes.items():
        if nid.startswith("primitive-"):
            prim_by_class.setdefault(n["eclass"], nid)

    values: dict[str, Attr] = {}

    def value(nid: str) -> Attr:
        cached = values.get(nid)
        if cached is not None:
            return cached
        n = nodes[nid]
        op = n["op"]
        sort = sorts[n["eclass"]]
        if op in ("vec-of", "vec-empty") or sort == "IVec":
            result: Attr = tuple(value(c) for c in n["children"])
        elif sort == "i64":
            result = int(op)
        elif sort == "f64":
            result = float(op)
        elif sort == "String":
            result = op[1:-1] if "\\" not in op else json.loads(op)
        elif sort == "bool":
            result = op == "true"
        else:
            result = op
        values[nid] = result
        return result

    class_index: dict[str, int] = {}
    for name, sort in sorts.items():
        if sort in TERM_SORTS:
            class_index[name] = len(class_index)
    members: list[list[int]] = [[] for _ in class_index]
    shape: dict[int, tuple[int, ...]] = {}
    dtype: dict[int, str] = {}
    refs: dict[int, int] = {}
    rules: dict[int, set[str]] = {}
    out_nodes: list[ENode] = []
    for nid, n in nodes.items():
        op = n["op"]
        if nid.startswith("primitive-") or n.get("subsumed"):
            continue
        if op in ("shape", "dtype"):
            child_class = class_index.get(nodes[n["children"][0]]["eclass"])
            prim = prim_by_class.get(n["eclass"])
            if child_class is not None and prim is not None:
                (shape if op == "shape" else dtype)[child_class] = value(prim)  # type: ignore[assignment]
            continue
        if op == "rewritten":
            child_class = class_index.get(nodes[n["children"][0]]["eclass"])
            if child_class is not None:
                rules.setdefault(child_class, set()).add(value(n["children"][1]))
            continue
        cname = n["eclass"]
        if cname not in class_index:
            continue  # other analysis tables (relations, helper functions)
        cid = class_index[cname]
        if op == "Ref":
            refs[value(n["children"][0])] = cid
            continue
        children, attrs = [], []
        for ch in n["children"]:
            ch_class = nodes[ch]["eclass"]
            if ch_class in class_index:
                children.append(class_index[ch_class])
            else:
                attrs.append(value(prim_by_class.get(ch_class, ch)))
        out_nodes.append(ENode(len(out_nodes), op, cid, tuple(children), tuple(attrs)))
        members[cid].append(out_nodes[-1].id)
    classes = tuple(EClass(cid, sorts[name], tuple(members[cid]), shape.get(cid), dtype.get(cid),
                           rules=tuple(sorted(rules.get(cid, ()))))
                    for name, cid in class_index.items())
    wanted = set(ref_ids)
    kept_refs = {r: c for r, c in refs.items() if not wanted or r in wanted}
    return _mark_constants(EGraph(tuple(out_nodes), classes, (), kept_refs))


def _foldable_size(eclass: EClass) -> bool:
    if eclass.shape is None:
        return True
    size = 1
    for d in eclass.shape:
        size *= d
    return size <= MAX_FOLDED_ELEMENTS


def _mark_constants(graph: EGraph) -> EGraph:
    """A class is constant-only if some node in it is a constant leaf or has only constant children."""
    const = [False] * len(graph.classes)
    parents: dict[int, list[ENode]] = {}
    work: list[int] = []
    for n in graph.nodes:
        for c in n.children:
            parents.setdefault(c, []).append(n)
        if n.op in CONSTANT_LEAVES and not const[n.eclass]:
            const[n.eclass] = True
            work.append(n.eclass)
    while work:
        cid = work.pop()
        for n in parents.get(cid, ()):
            if const[n.eclass] or n.op in NEVER_CONSTANT:
                continue
            if n.children and all(const[c] for c in n.children) and _foldable_size(graph.classes[n.eclass]):
                const[n.eclass] = True
                work.append(n.eclass)
    classes = tuple(dataclasses.replace(c, constant=True) if const[c.id] else c for c in graph.classes)
    return dataclasses.replace(graph, classes=classes)
