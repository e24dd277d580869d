"""`eqsat explain OUT.onnx NODE`: where an optimized node came from (original nodes, rules)."""

from __future__ import annotations

import os

from eqsat.frontend import io
from eqsat.errors import BadInputError
from eqsat.engine.lower import PROVENANCE_KEY, RULES_KEY


def explain(path: str | os.PathLike, node_name: str) -> str:
    """The history of the node named `node_name` (or producing the value of that name) in `path`."""
    proto, label = io.load_proto(path)
    node = next((n for n in proto.graph.node if n.name == node_name), None)
    node = node or next((n for n in proto.graph.node if node_name in n.output), None)
    if node is None:
        raise BadInputError(label, f"has no node or value named {node_name!r}")
    meta = {p.key: p.value for p in node.metadata_props}
    lines = [
        f"node     {node.name or '(unnamed)'}: {node.op_type}" + (f" (domain {node.domain})" if node.domain else ""),
        f"inputs   {', '.join(i or '(absent)' for i in node.input)}",
        f"outputs  {', '.join(node.output)}",
    ]
    origins = [o for o in meta.get(PROVENANCE_KEY, "").split(",") if o]
    lines.append("from     " + (", ".join(origins) if origins else "(no record: not produced by eqsat, or a new node)"))
    rules = [r for r in meta.get(RULES_KEY, "").split(",") if r]
    if rules:
        from eqsat.rewrites.registry import all_rules

        docs = {r.name: r.doc for r in all_rules()}
        lines.append("rules")
        lines += [f"  {r}: {docs.get(r, '(rule not in this version)')}" for r in rules]
    else:
        lines.append("rules    none: the node is as it was in the input")
    return "\n".join(lines)
