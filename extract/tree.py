"""Tree extraction: per class the node of least *tree* cost (children counted once per use). Optimal for
tree cost; blind to sharing, so it over-counts shared sub-terms (a residual trunk is paid per path).

Algorithm: Knuth's generalization of Dijkstra to superior functions. A node becomes a candidate once
all its child classes are final, with value cost + sum of the children's values; the cheapest candidate
(ties: lowest node id) finalizes its class. Each class is finalized once, after its chosen node's
children, so the choice is acyclic by construction and cycles in the e-graph need no special care.
O(E log N).

Tree costs double-count shared sub-terms, so on deep residual graphs they grow exponentially with depth
(about 10**2.2 per transformer layer) and would pass float64's range: a class's tree cost is capped at
`TREE_COST_CAP`, so it stays finite whenever the class has a term of finite node costs. `inf` keeps one
meaning: no acyclic term without an excluded (infinite-cost) node, which the ILP relies on.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Sequence

from eqsat.engine.egraph import EGraph
from eqsat.extract.cost import CostModel
from eqsat.extract.problem import Problem, bottom_up
from eqsat.extract.result import ExtractionResult

NAME = "tree"
#: Largest tree cost a class is given (far below float64's 1.8e308; sums of a node's capped children stay
#: finite up to ~1e8 children). Above it tree costs carry no ordering: they only say a term exists.
TREE_COST_CAP = 1e300


@dataclasses.dataclass
class TreeSolution:
    choice: dict[int, int]  # class -> node, for every class with an acyclic finite-cost term
    best: list[float]  # per class: least tree cost (inf if none)
    order: list[int]  # classes in finalization order (children before parents)


def solve(problem: Problem, costs: Sequence[float] | None = None) -> TreeSolution:
    """Least tree cost per class under `costs` (default: the problem's node costs)."""
    cost = problem.cost_list if costs is None else costs
    children, node_class = problem.node_children, problem.node_class
    nclasses = len(problem.class_nodes)
    best = [math.inf] * nclasses
    done = [False] * nclasses
    pending = [len(k) for k in children]
    choice: dict[int, int] = {}
    order: list[int] = []
    full_children = [n.children for n in problem.egraph.nodes]

    def finalize(c: int, n: int, value: float) -> None:
        best[c] = value
        choice[c] = n
        order.append(c)

    def value(p: int) -> float:  # inf for an excluded node or child; a sum that overflows is capped
        kids = [best[k] for k in full_children[p]]
        if cost[p] == math.inf or math.inf in kids:
            return math.inf
        return min(cost[p] + sum(kids), TREE_COST_CAP)

    bottom_up(
        ((cost[n], n) for nodes in problem.class_nodes for n in nodes if not children[n]),
        node_class,
        problem.parents,
        pending,
        done,
        value,
        finalize,
    )
    return TreeSolution(choice, best, order)


def extract(egraph: EGraph, roots: Sequence[int], cost: CostModel) -> ExtractionResult:
    """Least-tree-cost extraction for `roots`."""
    problem = Problem.build(egraph, roots, cost, time.perf_counter())
    solution = solve(problem)
    error = problem.unextractable_roots(solution.choice)
    if error is not None:
        raise error
    return problem.finish(solution.choice, NAME)
