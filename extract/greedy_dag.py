"""Greedy DAG extraction (extraction-gym's faster-greedy-dag idea), with a guarantee.

1. Union-cost greedy: per class, the node whose *sub-DAG* (the union of its children's selected sub-DAGs
   plus itself) is cheapest, each shared class counted once. Classes are finalized in Knuth/Dijkstra order
   of that value (ties: lowest node id), so a node is only considered once its children are final: the
   choice is acyclic by construction, in one pass. Sub-DAG sets are bitsets (Python ints over the
   finalization rank of positive-cost classes); the union's cost adds only the bits a child brings that
   are not yet in the union, so reconverging paths (residuals) cost little to evaluate.
2. Refinement: parents first over a topological order of the chosen DAG, a class switches to another node
   whose children are all already in the DAG and earlier in that order (so it stays acyclic) when that
   lowers the DAG cost, counting the classes only the old node kept alive (reference counts). A pass is
   kept only if the recomputed DAG cost went down.
3. Portfolio: the same refinement is applied to the tree extractor's choice, and the cheaper DAG wins
   (ties: the union-cost greedy).

Guarantee: the DAG cost is <= the tree extractor's DAG cost (step 3). The union-cost greedy alone does
not guarantee it: it can pick a node whose sub-DAG is cheap by internal sharing while the tree choice
happens to reuse a class its siblings need anyway. Optimal for nothing.
"""

from __future__ import annotations

import math
import time
from typing import Mapping, Sequence

import numpy as np

from eqsat.engine.egraph import EGraph
from eqsat.extract import tree
from eqsat.extract.cost import CostModel
from eqsat.extract.problem import Problem, bottom_up, reachable_order
from eqsat.extract.result import ExtractionResult

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

    def finalize(c: int, n: int, value: float) -> None:
        nonlocal nbits
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

    bottom_up(
        ((cost[n], n) for nodes in problem.class_nodes for n in nodes if not children[n]),
        node_class,
        problem.parents,
        pending,
        done,
        lambda p: cost[p] + union_cost(children[p]),
        finalize,
    )
    return choice


def refine(
    problem: Problem, choice: Mapping[int, int], passes: int = 3, walk_limit: int = 256
) -> tuple[dict[int, int], float]:
    """Step 2: switch classes to nodes whose children the DAG already pays for, when that lowers the DAG
    cost: gain = cost(old) - cost(new) + cost of the classes only the old node kept alive (reference
    counts; the cascade is walked at most `walk_limit` steps, which only underestimates the gain). A new
    node's children must come earlier in a topological order of the DAG, so it stays acyclic. Returns
    (choice, DAG cost), never worse than the input."""
    cost = problem.cost_list
    current = dict(choice)
    order = reachable_order(problem, current)
    if order is None:
        return current, math.inf
    best_cost = math.fsum(cost[current[c]] for c in order)
    for _ in range(passes):
        trial = {c: current[c] for c in order}
        if not _refine_pass(problem, trial, order, walk_limit):
            break
        trial_order = reachable_order(problem, trial)
        trial_cost = math.inf if trial_order is None else math.fsum(cost[trial[c]] for c in trial_order)
        if not trial_cost < best_cost:
            break
        current, order, best_cost = trial, trial_order, trial_cost  # type: ignore[assignment]
    return current, best_cost


def _refine_pass(problem: Problem, choice: dict[int, int], order: list[int], walk_limit: int) -> bool:
    """One parents-first pass of `refine` over `order`, editing `choice`; True if anything switched."""
    cost, children = problem.cost_list, problem.node_children
    pos = {c: i for i, c in enumerate(order)}
    refs = dict.fromkeys(order, 0)
    for r in problem.roots:
        refs[r] += 1
    for c in order:
        for k in children[choice[c]]:
            refs[k] += 1

    def freed(old_kids: tuple[int, ...], new_kids: tuple[int, ...]) -> float:
        delta = dict.fromkeys(new_kids, 1)
        total, stack, steps = 0.0, list(old_kids), 0
        while stack and steps < walk_limit:
            k = stack.pop()
            steps += 1
            delta[k] = delta.get(k, 0) - 1
            if refs[k] + delta[k] == 0:
                total += cost[choice[k]]
                stack.extend(children[choice[k]])
        return total

    switched = False
    for c in reversed(order):
        i, old = pos[c], choice[c]
        if refs[c] == 0:
            continue  # freed by an earlier switch in this pass
        candidates = [
            n
            for n in problem.class_nodes[c]
            if n != old and all(refs.get(k, 0) > 0 and pos[k] < i for k in children[n])
        ]
        if not candidates:
            continue
        pick, pick_gain = old, 0.0
        for n in candidates:  # by node id: the first of equal gains wins
            gain = cost[old] - cost[n] + freed(children[old], children[n])
            if gain > pick_gain:
                pick, pick_gain = n, gain
        if pick == old:
            continue
        for k in children[pick]:
            refs[k] += 1
        stack = list(children[old])
        while stack:
            k = stack.pop()
            refs[k] -= 1
            if refs[k] == 0:
                stack.extend(children[choice[k]])
        choice[c] = pick
        switched = True
    return switched


def solve(problem: Problem, tree_solution: tree.TreeSolution | None = None) -> tuple[dict[int, int], float, list[str]]:
    """Steps 1-3: the greedy choice, its DAG cost and notes. Raises if a root has no acyclic finite-cost term."""
    tree_solution = tree.solve(problem) if tree_solution is None else tree_solution
    error = problem.unextractable_roots(tree_solution.choice)
    if error is not None:
        raise error
    greedy, greedy_cost = refine(problem, union_greedy(problem))
    from_tree, tree_cost = refine(problem, tree_solution.choice)
    if tree_cost < greedy_cost:
        notes = [f"the refined tree choice beat the union-cost greedy ({tree_cost:.6g} < {greedy_cost:.6g})"]
        return from_tree, tree_cost, notes
    return greedy, greedy_cost, []


def extract(egraph: EGraph, roots: Sequence[int], cost: CostModel) -> ExtractionResult:
    """Greedy DAG extraction for `roots` (DAG cost <= the tree extractor's)."""
    problem = Problem.build(egraph, roots, cost, time.perf_counter())
    choice, _, notes = solve(problem)
    return problem.finish(choice, NAME, notes)
