"""The one result type every extractor returns: a choice of one e-node per e-class, validated and costed.

`ExtractionResult.check()` is the contract every extractor must pass (roots chosen, each choice in its
class, children closed, acyclic from the roots); `dag_cost()` and `tree_cost()` cost any result the
same way whatever produced it, so extractors can be compared on equal terms. Every walk is iterative:
chosen graphs are thousands of classes deep.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping, Sequence, Union

import numpy as np

from eqsat.engine.egraph import EClass, EGraph, ENode
from eqsat.errors import InternalError
from eqsat.extract.units import format_cost

#: A cost model (callable on one node) or precomputed costs indexed by node id.
Costs = Union[Callable[[EGraph, ENode], float], Sequence[float], np.ndarray, Mapping[int, float]]


class ExtractionError(InternalError):
    """An extractor produced (or was asked for) something invalid: a broken choice or an unextractable root."""


@dataclasses.dataclass(frozen=True)
class ExtractionResult:
    """One chosen e-node per e-class (`choice`: class id -> node id) for the classes reachable from `roots`."""

    egraph: EGraph
    choice: Mapping[int, int]
    roots: tuple[int, ...]
    extractor: str
    seconds: float
    notes: tuple[str, ...] = ()

    # ---- validation ----
    def check(self) -> None:
        """Raise `ExtractionError` unless the choice is a valid, closed, acyclic term DAG for the roots."""
        nodes, classes = self.egraph.nodes, self.egraph.classes
        for cid, nid in self.choice.items():
            if not 0 <= cid < len(classes):
                raise self._error(f"choice names class {cid}, which does not exist")
            if not 0 <= nid < len(nodes):
                raise self._error(f"class {cid}: chosen node {nid} does not exist")
            if nodes[nid].eclass != cid:
                raise self._error(
                    f"class {cid}: chosen node {nid} ({nodes[nid].op}) belongs to class {nodes[nid].eclass}"
                )
        for r in self.roots:
            if r not in self.choice:
                raise self._error(f"root class {r} has no chosen node")
        self.reachable()  # closure and acyclicity

    def reachable(self) -> list[int]:
        """Classes reachable from the roots through chosen nodes, children before parents (each once).

        Raises `ExtractionError` if a reachable class has no choice or the chosen graph has a cycle. Walked once
        per result (a result is immutable); each call returns a list of its own.
        """
        cached = self.__dict__.get("_reachable")
        if cached is None:
            cached = self.__dict__["_reachable"] = tuple(self._walk())
        return list(cached)

    def _walk(self) -> list[int]:
        choice, nodes = self.choice, self.egraph.nodes
        state: dict[int, int] = {}  # 1 = on the DFS stack, 2 = done
        order: list[int] = []
        for root in self.roots:
            if root in state:
                continue
            if root not in choice:
                raise self._error(f"root class {root} has no chosen node")
            state[root] = 1
            stack: list[tuple[int, int]] = [(root, 0)]
            while stack:
                cid, i = stack[-1]
                children = nodes[choice[cid]].children
                if i == len(children):
                    stack.pop()
                    state[cid] = 2
                    order.append(cid)
                    continue
                stack[-1] = (cid, i + 1)
                child = children[i]
                seen = state.get(child)
                if seen == 2:
                    continue
                if seen == 1:
                    path = [c for c, _ in stack[next(k for k, (c, _) in enumerate(stack) if c == child) :]]
                    raise self._error(
                        "chosen graph has a cycle through classes " + " -> ".join(map(str, path + [child]))
                    )
                if child not in choice:
                    n = nodes[choice[cid]]
                    raise self._error(
                        f"class {cid}: chosen node {n.id} ({n.op}) has child class {child} with no chosen node"
                    )
                state[child] = 1
                stack.append((child, 0))
        return order

    def chosen_nodes(self) -> list[ENode]:
        """The chosen e-nodes of the reachable classes, children before parents."""
        return [self.egraph.nodes[self.choice[c]] for c in self.reachable()]

    def standalone(self) -> "ExtractionResult":
        """The chosen graph alone: an e-graph of the reachable classes, each holding only its chosen node.
        A cost model's per-class facts (a fused producer somewhere in a class, say) then see no alternatives:
        its cost is what the chosen graph costs as a graph of its own."""
        order = self.reachable()
        index = {c: k for k, c in enumerate(order)}
        old = self.egraph
        chosen = [old.nodes[self.choice[c]] for c in order]  # made directly: dataclasses.replace is 4x slower
        nodes = tuple(ENode(k, n.op, k, tuple([index[x] for x in n.children]), n.attrs) for k, n in enumerate(chosen))
        classes = tuple(
            EClass(k, e.sort, (k,), e.shape, e.dtype, e.constant, e.rules, e.sizes)
            for k, e in enumerate(old.classes[c] for c in order)
        )
        roots = tuple(index[r] for r in self.roots)
        return dataclasses.replace(
            self, egraph=EGraph(nodes, classes, roots), choice={k: k for k in range(len(order))}, roots=roots
        )

    # ---- costs (the same for every extractor) ----
    def dag_cost(self, cost: Costs) -> float:
        """Sum of the chosen node costs over the reachable classes, each class counted once."""
        price, choice = self._pricer(cost), self.choice
        return math.fsum(price(choice[c]) for c in self.reachable())

    def tree_cost(self, cost: Costs) -> float:
        """Cost of the chosen term unfolded as a tree: shared sub-terms counted once per use."""
        total: dict[int, float] = {}
        nodes, price = self.egraph.nodes, self._pricer(cost)
        for c in self.reachable():
            n = nodes[self.choice[c]]
            total[c] = price(n.id) + sum(total[k] for k in n.children)
        return sum(total[r] for r in self.roots)

    def _pricer(self, cost: Costs) -> Callable[[int], float]:
        """Node id -> cost (a float), for a cost model or precomputed costs."""
        if callable(cost):
            from eqsat.extract.cost import cost_lookup

            return cost_lookup(self.egraph, cost)
        return lambda nid: float(cost[nid])

    def _error(self, problem: str) -> ExtractionError:
        return ExtractionError(f"extraction ({self.extractor}): {problem}")

    # ---- reporting ----
    def summary(self, cost: Costs, target: str | None = None) -> "ExtractionSummary":
        """A small record for reports: extractor, time, DAG and tree cost, sizes, notes."""
        ops: dict[str, int] = {}
        for n in self.chosen_nodes():
            ops[n.op] = ops.get(n.op, 0) + 1
        return ExtractionSummary(
            self.extractor,
            target,
            self.seconds,
            self.dag_cost(cost),
            self.tree_cost(cost),
            len(self.egraph.classes),
            len(self.egraph.nodes),
            sum(ops.values()),
            self.notes,
        )


@dataclasses.dataclass(frozen=True)
class ExtractionSummary:
    """What the report shows about extraction."""

    extractor: str
    target: str | None
    seconds: float
    dag_cost: float
    tree_cost: float
    eclasses: int
    enodes: int
    chosen: int
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "extractor": self.extractor,
            "target": self.target,
            "seconds": round(self.seconds, 6),
            "dag_cost": self.dag_cost,
            "tree_cost": self.tree_cost if math.isfinite(self.tree_cost) else None,  # JSON has no infinity
            "eclasses": self.eclasses,
            "enodes": self.enodes,
            "chosen": self.chosen,
            "notes": list(self.notes),
        }

    def to_text(self) -> str:
        target = f" for {self.target}" if self.target else ""
        unit = "s" if self.target else ""  # a target's roofline costs seconds; a custom cost has no unit
        lines = [
            f"extraction {self.extractor}{target}: {self.chosen} of {self.enodes} e-nodes "
            f"({self.eclasses} e-classes), DAG cost {format_cost(self.dag_cost, unit)}, tree cost "
            f"{format_cost(self.tree_cost, unit) if math.isfinite(self.tree_cost) else 'beyond float64'} "
            "(shared sub-graphs counted once per use), "
            f"{self.seconds * 1000:.0f} ms"
        ]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)
