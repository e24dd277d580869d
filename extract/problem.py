"""The extraction problem as flat tables shared by the extractors: node costs (computed once), usable nodes
per class, parents per class, and the finishing step that turns a choice into an `ExtractionResult`.

A node is *usable* if its cost is finite and it is not its own child (a self-loop can never be part of
an acyclic term). Class and node ids are indices into `EGraph.classes` / `EGraph.nodes`.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from typing import Callable, Hashable, Iterable, Mapping, Sequence, TypeVar

import numpy as np

from eqsat.engine.egraph import EGraph
from eqsat.extract.cost import CostModel, node_costs
from eqsat.extract.result import ExtractionError, ExtractionResult


@dataclasses.dataclass
class Problem:
    """An e-graph, its roots and its node costs, as lists indexed by node and class id."""

    egraph: EGraph
    roots: tuple[int, ...]
    cost: np.ndarray  # per node
    cost_list: list[float]  # the same, as Python floats (faster to index in loops)
    node_class: list[int]
    node_children: list[tuple[int, ...]]  # distinct child classes, in first-use order
    class_nodes: list[list[int]]  # usable nodes per class, by node id
    parents: list[list[int]]  # usable nodes having the class as a child
    started: float  # perf_counter() when the extraction started

    @classmethod
    def build(cls, egraph: EGraph, roots: Sequence[int], cost: CostModel, started: float | None = None) -> "Problem":
        started = time.perf_counter() if started is None else started
        roots = tuple(int(r) for r in roots)
        for r in roots:
            if not 0 <= r < len(egraph.classes):
                raise ExtractionError(f"extraction: root class {r} does not exist")
        costs = node_costs(egraph, cost)
        cost_list = costs.tolist()
        node_class = [n.eclass for n in egraph.nodes]
        node_children = [tuple(dict.fromkeys(n.children)) for n in egraph.nodes]
        class_nodes: list[list[int]] = [[] for _ in egraph.classes]
        parents: list[list[int]] = [[] for _ in egraph.classes]
        for nid, (c, kids) in enumerate(zip(node_class, node_children)):
            if c in kids or math.isinf(cost_list[nid]):
                continue
            class_nodes[c].append(nid)
            for k in kids:
                parents[k].append(nid)
        return cls(egraph, roots, costs, cost_list, node_class, node_children, class_nodes, parents, started)

    def dag_cost(self, choice: Mapping[int, int], order: list[int] | None = None) -> float:
        """DAG cost of a choice restricted to what the roots reach (inf if it is not a closed acyclic DAG);
        `order`: its `reachable_order`, if known."""
        order = reachable_order(self, choice) if order is None else order
        return math.inf if order is None else math.fsum(self.cost_list[choice[c]] for c in order)

    def finish(self, choice: Mapping[int, int], name: str, notes: Sequence[str] = ()) -> ExtractionResult:
        """The result: `choice` restricted to the classes the roots reach, timed from `started`."""
        kept = restrict(self, choice)
        return ExtractionResult(self.egraph, kept, self.roots, name, time.perf_counter() - self.started, tuple(notes))

    def unextractable_roots(self, choice: Mapping[int, int]) -> ExtractionError | None:
        missing = [r for r in self.roots if r not in choice]
        if not missing:
            return None
        return ExtractionError(
            f"extraction: root class {missing[0]} has no acyclic term of finite cost ({len(missing)} such root(s))"
        )


def bottom_up(
    leaves: Iterable[tuple[float, int]],
    node_class: Sequence[int],
    parents: Sequence[Iterable[int]],
    pending: list[int],
    done: list[bool],
    value: Callable[[int], float],
    finalize: Callable[[int, int, float], None],
    ready: Iterable[int] = (),
) -> None:
    """Knuth's generalization of Dijkstra, the loop the extractors share: candidate nodes in a heap by
    value, starting from `leaves` ((value, node) pairs); the first candidate popped for a class finalizes
    it (`finalize(class, node, value)`, `done[class]` set); a parent node whose `pending` count of
    unfinalized child classes drops to 0 becomes a candidate at `value(parent)`. `ready` classes are
    already final (done) and only release their parents. `parents[class]` lists each parent node once
    per child class counted in `pending`."""
    heap = list(leaves)
    heapq.heapify(heap)
    ready = list(ready)
    while heap or ready:
        if ready:
            c = ready.pop()
        else:
            v, n = heapq.heappop(heap)
            c = node_class[n]
            if done[c]:
                continue
            done[c] = True
            finalize(c, n, v)
        for p in parents[c]:
            pending[p] -= 1
            if pending[p] == 0 and not done[node_class[p]]:
                heapq.heappush(heap, (value(p), p))


Vertex = TypeVar("Vertex", bound=Hashable)


def strongly_connected(roots: Iterable[Vertex], successors: Callable[[Vertex], Iterable[Vertex]]) -> list[list[Vertex]]:
    """Strongly connected components with two or more members among the vertices reachable from `roots`,
    in completion order (iterative Tarjan: real graphs are deep). ilp cuts the cycles of a chosen graph with
    it; tests/test_structure.py finds import cycles with it."""
    index: dict[Vertex, int] = {}
    low: dict[Vertex, int] = {}
    on_stack: set[Vertex] = set()
    stack: list[Vertex] = []
    comps: list[list[Vertex]] = []
    for root in roots:
        if root in index:
            continue
        work = [(root, iter(successors(root)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(successors(w))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        comps.append(comp)
    return comps


def restrict(problem: Problem, choice: Mapping[int, int]) -> dict[int, int]:
    """The entries of `choice` for the classes reachable from the roots (tolerates cycles and gaps)."""
    kept: dict[int, int] = {}
    stack = [r for r in problem.roots if r in choice]
    while stack:
        c = stack.pop()
        if c in kept:
            continue
        kept[c] = choice[c]
        stack.extend(k for k in problem.node_children[choice[c]] if k in choice and k not in kept)
    return kept


def reachable_order(problem: Problem, choice: Mapping[int, int]) -> list[int] | None:
    """Classes reachable from the roots, children first; None if a class is unchosen or there is a cycle.

    Collects the reachable classes, then Kahn's algorithm from the roots (parents first), reversed.
    """
    children = problem.node_children
    kids_of: dict[int, tuple[int, ...]] = {}
    stack = list(dict.fromkeys(problem.roots))
    seen = set(stack)
    while stack:
        c = stack.pop()
        n = choice.get(c)
        if n is None:
            return None
        kids = kids_of[c] = children[n]
        for k in kids:
            if k not in seen:
                seen.add(k)
                stack.append(k)
    indegree = dict.fromkeys(kids_of, 0)
    for kids in kids_of.values():
        for k in kids:
            indegree[k] += 1
    ready = [c for c, d in indegree.items() if d == 0]
    order: list[int] = []
    while ready:
        c = ready.pop()
        order.append(c)
        for k in kids_of[c]:
            indegree[k] -= 1
            if indegree[k] == 0:
                ready.append(k)
    if len(order) != len(kids_of):
        return None
    order.reverse()
    return order
