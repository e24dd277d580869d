"""What a result is made of, as data the pipeline computes and the views render: estimated cost per op type
before and after (under the cost model that chose it), how many output nodes each rule produced, and the
headline (`Headline`: ops without Constant nodes, before and after, and the estimated cost change).

`Session.extract` computes the breakdown of every top-level extraction (`attach`); `eqsat.view.display`
only shows it (`breakdown_text`, `breakdown_html`).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Mapping

from eqsat.engine.terms import ONNX_NAMES, PLUMBING_OPS
from eqsat.metadata import RULES_KEY

#: Nodes that compute nothing: counting them would call lifting Constants into initializers an optimization.
NOT_COMPUTE = ("Constant",)


@dataclasses.dataclass(frozen=True)
class OpCost:
    op: str
    nodes_before: int
    cost_before: float
    nodes_after: int
    cost_after: float


@dataclasses.dataclass(frozen=True)
class Breakdown:
    """Estimated cost per op type before and after (under the cost model that chose the result), and how
    many output nodes each rule produced.

    `cost_before` is the DAG cost of the input graph as encoded (after constant folding; every e-class
    restricted to its original e-node), costed by the same model as the output; None when the Result
    carries no Session to rebuild it from."""

    target: str | None  # None for a custom cost function
    unit: str  # "s" for the roofline targets, "" for custom cost functions
    cost_before: float | None
    cost_after: float
    ops: tuple[OpCost, ...]  # most expensive after first
    rules_in_output: Mapping[str, int]  # rule -> output nodes whose eqsat.rules name it
    notes: tuple[str, ...] = ()

    @property
    def cost_change(self) -> float | None:
        """(after - before) / before, or None when the cost before is unknown or 0."""
        if not self.cost_before:
            return None
        return (self.cost_after - self.cost_before) / self.cost_before

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "unit": self.unit,
            "cost_before": self.cost_before,
            "cost_after": self.cost_after,
            "ops": [dataclasses.asdict(o) for o in self.ops],
            "rules_in_output": dict(self.rules_in_output),
            "notes": list(self.notes),
        }

    def to_text(self) -> str:
        from eqsat.view.display import breakdown_text

        return breakdown_text(self)

    def _repr_html_(self) -> str:
        from eqsat.view.display import breakdown_html

        return breakdown_html(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.to_text())


def compute_ops(ops: Mapping[str, int]) -> int:
    """Nodes that compute: every node but Constant nodes (eqsat lifts those into initializers)."""
    return sum(n for op, n in ops.items() if op not in NOT_COMPUTE)


def _op_label(node: Any) -> str:
    if node.op == "Opaque" and node.attrs:
        domain, _, rest = str(node.attrs[0]).partition("::")
        op = rest.split("#")[0]
        return op if domain in ("", "ai.onnx") else f"{domain}::{op}"
    return ONNX_NAMES.get(node.op, node.op)


def op_costs(extraction: Any, cost: Any) -> dict[str, tuple[int, float]]:
    """op -> (e-nodes that become ONNX nodes, their summed cost) over an extraction's chosen e-nodes.
    Leaves and constant-only classes (folded to initializers) are left out: they cost 0."""
    from eqsat.extract.cost import cost_lookup

    egraph = extraction.egraph
    price = cost_lookup(egraph, cost)
    out: dict[str, list] = {}
    for node in extraction.chosen_nodes():
        if node.op in PLUMBING_OPS or egraph.classes[node.eclass].constant:
            continue
        entry = out.setdefault(_op_label(node), [0, 0.0])
        entry[0] += 1
        entry[1] += price(node.id)
    return {op: (n, c) for op, (n, c) in out.items()}


def rules_in_output(model: Any) -> dict[str, int]:
    """rule -> how many nodes of `model` (a ModelProto, bodies included) name it in their `eqsat.rules`
    metadata (most first)."""
    from eqsat.frontend.io import all_graphs

    counts: collections.Counter[str] = collections.Counter()
    for graph in all_graphs(model.graph):
        for node in graph.node:
            for prop in node.metadata_props:
                if prop.key == RULES_KEY:
                    counts.update(r for r in prop.value.split(",") if r)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def breakdown(result: Any) -> Breakdown:
    """The Breakdown of a Result (from `eqsat.optimize` or `Session.extract`)."""
    from eqsat.extract.cost import Roofline, load_target, roofline

    cost = getattr(result, "cost_model", None)
    summary = result.report.extraction
    if cost is None:
        if summary is None or summary.target is None:
            raise ValueError("this Result carries no cost model to break its cost down with")
        cost = roofline(load_target(summary.target))
    target = cost.target.name if isinstance(cost, Roofline) else None
    unit = "s" if isinstance(cost, Roofline) else ""
    after = op_costs(result.extraction, cost)
    cost_after = result.extraction.dag_cost(cost)
    notes = []
    session = getattr(result, "session", None)
    before: dict[str, tuple[int, float]] = {}
    cost_before = None
    if session is not None:
        original = session.input_extraction()
        before = op_costs(original, cost)
        cost_before = original.dag_cost(cost)
        notes.append(
            "cost before: the input after constant folding, every e-class its original e-node, costed by the same model"
        )
    else:
        notes.append("cost before unknown: the Result carries no Session")
    ops = [
        OpCost(
            op,
            before.get(op, (0, 0.0))[0],
            before.get(op, (0, 0.0))[1],
            after.get(op, (0, 0.0))[0],
            after.get(op, (0, 0.0))[1],
        )
        for op in set(before) | set(after)
    ]
    ops.sort(key=lambda o: (-o.cost_after, -o.cost_before, o.op))
    return Breakdown(target, unit, cost_before, cost_after, tuple(ops), rules_in_output(result.built), tuple(notes))


def attach(result: Any) -> Any:
    """Compute the result's breakdown into `result.report.breakdown` (once); a cost function that fails here
    leaves a note instead. Returns the breakdown (or None)."""
    report = result.report
    if report.breakdown is None:
        try:
            report.breakdown = breakdown(result)
        except Exception as exc:  # noqa: BLE001 - a custom cost function that fails here should not hide the report
            note = f"no cost breakdown: {type(exc).__name__}: {exc}"
            if note not in report.notes:
                report.notes.append(note)
    return report.breakdown
