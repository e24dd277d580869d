"""Greedy DAG extraction (extraction-gym's faster-greedy-dag idea), with a guarantee.

1. Union-cost greedy: per class, the node whose *sub-DAG* (the union of its children's selected sub-DAGs
   plus itself) is cheapest, each shared class counted once. Classes are finalized in Knuth/Dijkstra order
   of that value (ties: lowest node id), so a node is only considered once its children are final: the
   choice is acyclic by construction, in one pass. Sub-DAG sets are bitsets (Python ints over the
   finalization rank of positive-cost classes); the union's cost adds only the bits a child brings that
   are not yet in the union, so reconverging paths (residuals) cost little to evaluate.
2. Refinement: in a topological order of the chosen DAG, a class switches to a cheaper node whose children
   are all already in the DAG and earlier in that order (acyclicity kept; a pass is kept only if it
   lowers the DAG cost).
3. Portfolio: the same refinement is applied to the tree extractor's choice, and the cheaper DAG wins
   (ties: the union-cost greedy).

Guarantee: the DAG cost is <= the tree extractor's DAG cost (step 3). The union-cost greedy alone does
not guarantee it: it can pick a node whose sub-DAG is cheap by internal sharing while the tree choice
happens to reuse a class its siblings need anyway. Optimal for nothing.
"""

from __future__ import annotations

import heapq
import time
from typing import Mapping, Sequence

import numpy as np

from eqsat.egraph import EGraph
from extract import tree
from extract.cost import CostModel
from extract.problem import Problem, reachable_order
from extract.result import ExtractionResult

NAME = "greedy-dag"
_BIT_LOOP_MAX = 24  # below this many new bits, sum them one by one; above, unpack with numpy


def union_greedy(problem: Problem) -> dict[int, int]:
    """Step 1: per class the node of least union sub-DAG cost, in one Knuth-ordered pass."""
    cost, children, node_class = problem.cost_list, problem.node_children, problem.node_class
    nclasses = len(problem.class_nodes)
    done = [False] * nclasses
    setcost = [0.0] * nclasses
    mask = [0] * nclasses
    bitcost = np.zeros(max(nclasses, 1))
    nbits = 0
    pending = [len(k) for k in children]
    choice: dict[int, int] = {}
    heap = [(cost[n], n) for nodes in problem.class_nodes for n in nodes if not children[n]]
    heapq.heapify(heap)

    def weight(bits: int) -> float:
        if bits.bit_count() <= _BIT_LOOP_MAX:
            total = 0.0
            while bits:
                low = bits & -bits
                total += bitcost[low.bit_length() - 1]
                bits ^= low
            return total
        raw = np.frombuffer(bits.to_bytes((bits.bit_length() + 7) // 8, "little"), dtype=np.uint8)
        unpacked = np.unpackbits(raw, bitorder="little")
        return float(unpacked @ bitcost[: unpacked.size])

    def union_cost(kids: tuple[int, ...]) -> float:
        sets = [k for k in kids if mask[k]]
        if len(sets) <= 1:
            return setcost[sets[0]] if sets else 0.0
        sets.sort(key=lambda k: (-setcost[k], k))
        union, total = mask[sets[0]], setcost[sets[0]]
        for k in sets[1:]:
            new = mask[k] & ~union
            if new:
                total += weight(new)
                union |= new
        return total

    while heap:
        value, n = heapq.heappop(heap)
        c = node_class[n]
        if done[c]:
            continue
        done[c] = True
        choice[c] = n
        setcost[c] = value
        m = 0
        for k in children[n]:
            m |= mask[k]
        if cost[n] > 0:
            m |= 1 << nbits
            bitcost[nbits] = cost[n]
            nbits += 1
        mask[c] = m
        for p in problem.parents[c]:
            pending[p] -= 1
            if pending[p] == 0 and not done[node_class[p]]:
                heapq.heappush(heap, (cost[p] + union_cost(children[p]), p))
    return choice


def refine(problem: Problem, choice: Mapping[int, int], passes: int = 3) -> tuple[dict[int, int], float]:
    """Step 2: re-pick cheaper nodes whose children the DAG already pays for; returns (choice, DAG cost)."""
    current = dict(choice)
    best_cost = problem.dag_cost(current)
    cost, children = problem.cost_list, problem.node_children
    for _ in range(passes):
        order = reachable_order(problem, current)
        if order is None:
            break
        pos = {c: i for i, c in enumerate(order)}
        trial = dict(current)
        changed = False
        for i, c in enumerate(order):
            old = trial[c]
            pick = old
            for n in problem.class_nodes[c]:  # by node id: the first of equal costs wins
                if cost[n] < cost[pick] and all(pos.get(k, i) < i for k in children[n]):
                    pick = n
            if pick != old:
                trial[c] = pick
                changed = True
        if not changed:
            break
        trial_cost = problem.dag_cost(trial)
        if not trial_cost < best_cost:
            break
        current, best_cost = trial, trial_cost
    return current, best_cost


def solve(problem: Problem, tree_solution: tree.TreeSolution | None = None) -> tuple[dict[int, int], list[str]]:
    """Steps 1-3: the greedy choice and notes. Raises if a root has no acyclic finite-cost term."""
    tree_solution = tree.solve(problem) if tree_solution is None else tree_solution
    error = problem.unextractable_roots(tree_solution.choice)
    if error is not None:
        raise error
    greedy, greedy_cost = refine(problem, union_greedy(problem))
    from_tree, tree_cost = refine(problem, tree_solution.choice)
    if tree_cost < greedy_cost:
        return from_tree, [f"the refined tree choice beat the union-cost greedy ({tree_cost:.6g} < {greedy_cost:.6g})"]
    return greedy, []


def extract(egraph: EGraph, roots: Sequence[int], cost: CostModel) -> ExtractionResult:
    """Greedy DAG extraction for `roots` (DAG cost <= the tree extractor's)."""
    problem = Problem.build(egraph, roots, cost, time.perf_counter())
    choice, notes = solve(problem)
    return problem.finish(choice, NAME, notes)
