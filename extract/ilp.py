"""Exact DAG-cost extraction as a 0-1 integer program, solved with HiGHS (highspy).

Variables: x_n (node n chosen) and y_c (class c used). Constraints: sum of x over a class = y_c; y = 1
for the roots; x_n <= y_d for every child class d of n. Objective: sum of cost_n x_n (scaled to max 1).
Reductions: classes whose tree cost is 0 (constants, inputs, free epilogues) are fixed to the tree choice
and left out; nodes that are their own child, or have a child with no acyclic term, are dropped; a node
is dropped when another node of its class is no dearer and needs a subset of its children (commuted
duplicates). Strengthening: y_e >= y_c when every acyclic term of c contains e (see `_requirements`);
without these rows the LP bound of a chain of blocks with reconverging alternatives decays
geometrically (measured: root bound 0.5% of the optimum and a 5 s solve at 20k e-nodes; with them,
HiGHS presolve solves the same program in 0.08 s).

Cycles: the program above lets a cycle "support" a class without its inputs. They are excluded with
lazy cuts: for a set K of classes, at most |K| - 1 of them may choose a node with a child in K (an
acyclic choice has a sink in K). Cuts are added up front for every pair of classes pointing at each
other, then for each cycle (and its strongly connected component) found in a solution, and the program
is solved again. An acyclic optimum of the relaxed program is the exact DAG optimum.

If the cuts do not converge within half the time limit (or `max_rounds`), the remaining time goes to
one solve restricted by an *acyclic pre-filter* anchored on the incumbent: classes get heights (the
incumbent's classes from its own DAG, the others the least height of their terms) and only nodes whose
children are strictly lower are kept. No cycle survives and the incumbent stays feasible, so the result
is optimal within the filter and never worse than the incumbent; `notes` say so. The incumbent is the
greedy-dag result (itself never worse than tree), improved by repairing cyclic solutions, so the ILP is
never worse than either heuristic. On a time limit without a better solution it returns the incumbent.
Whenever optimality is not proven, `notes` give the returned cost, a lower bound and the gap.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from eqsat.engine.egraph import EGraph
from eqsat.extract import greedy_dag, tree
from eqsat.extract.cost import CostModel
from eqsat.extract.problem import Problem, bottom_up, reachable_order, restrict, strongly_connected
from eqsat.extract.result import ExtractionResult
from eqsat.extract.speculation import beside

NAME = "ilp"
DEFAULT_TIME_LIMIT = 10.0
DEFAULT_MAX_ROUNDS = 40
#: HiGHS relative MIP gap; costs are seconds, so 1e-7 is far below any meaningful difference.
MIP_REL_GAP = 1e-7
#: HiGHS's threads (`_run`). Its default, half the cores, is 2 on the 2-core machine measured, and the run then waits
#: on a core that other work (onnxruntime's reference thread, other processes) takes: keras's program 31-57 ms with
#: 2 threads, 17-35 with 1 (fresh processes, 6 each, the machine shared). Its MIP solver's parallelism (symmetry
#: detection, some queries) does not pay on these programs. The same choices and notes on the 16 shared models and
#: on 1,007 random e-graphs where HiGHS ran (tests/test_extract.py checks a sample against HiGHS's default).
HIGHS_THREADS = 1


@dataclasses.dataclass
class _Model:
    """The reduced 0-1 program: model nodes (x) and classes (y), with their rows."""

    nodes: list[int]  # global node ids of the x variables
    classes: list[int]  # global class ids of the y variables
    class_index: dict[int, int]
    class_nodes: list[list[int]]  # per model class: positions in `nodes`
    node_kids: list[list[int]]  # per model node: model classes of its (non-fixed) children
    roots: list[int]  # model classes that must be used
    fixed: dict[int, int]  # class -> node, for classes fixed to their zero-cost tree choice
    requires: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # (e, c): y_e >= y_c
    cuts: list[tuple[list[int], int]] = dataclasses.field(default_factory=list)  # (x positions, rhs)
    cut_keys: set[frozenset[int]] = dataclasses.field(default_factory=set)

    def add_cut(self, classes: Iterable[int]) -> bool:
        """Add the cut for the set K of model classes; False if it was already there."""
        k = frozenset(classes)
        if len(k) < 2 or k in self.cut_keys:
            return False
        self.cut_keys.add(k)
        xs = [i for c in sorted(k) for i in self.class_nodes[c] if any(d in k for d in self.node_kids[i])]
        self.cuts.append((xs, len(k) - 1))
        return True


def _build_model(problem: Problem, tsol: tree.TreeSolution) -> _Model:
    best = tsol.best
    fixed = {c: n for c, n in tsol.choice.items() if best[c] == 0.0}
    children = problem.node_children
    classes: list[int] = []
    viable: list[list[int]] = []  # per model class: its nodes whose children all have an acyclic term
    index: dict[int, int] = {}
    stack = [r for r in dict.fromkeys(problem.roots) if r not in fixed]
    for r in stack:
        index[r] = -1
    while stack:  # classes reachable from the roots through usable nodes, not entering fixed classes
        c = stack.pop()
        index[c] = len(classes)
        classes.append(c)
        viable.append([n for n in problem.class_nodes[c] if all(best[k] < math.inf for k in children[n])])
        for n in viable[-1]:
            for k in children[n]:
                if k not in fixed and k not in index:
                    index[k] = -1
                    stack.append(k)
    nodes: list[int] = []
    class_nodes: list[list[int]] = [[] for _ in classes]
    node_kids: list[list[int]] = []
    for j, ns in enumerate(viable):
        candidates = [(n, frozenset([index[k] for k in children[n] if k not in fixed])) for n in ns]
        for n, kids in _undominated(candidates, problem.cost_list):
            class_nodes[j].append(len(nodes))
            nodes.append(n)
            node_kids.append(sorted(kids))
    model = _Model(
        nodes,
        classes,
        index,
        class_nodes,
        node_kids,
        sorted({index[r] for r in problem.roots if r not in fixed}),
        fixed,
    )
    model.requires = _requirements(model, tsol.order)
    points_to = [{d for i in xs for d in node_kids[i]} for xs in class_nodes]  # per model class
    for j in range(len(classes)):  # pairs of classes pointing at each other
        for i in class_nodes[j]:
            for d in node_kids[i]:
                if d > j and j in points_to[d]:
                    model.add_cut((j, d))
    return model


def _requirements(
    model: _Model, tree_order: list[int], max_passes: int = 30, max_bytes: float = 2e8
) -> list[tuple[int, int]]:
    """Pairs (e, c) of model classes such that every acyclic term of c contains e (immediate ones only).

    Req(c) is the greatest fixpoint of Req(c) = AND over nodes of OR over children d of ({d} | Req(d)),
    as bitsets over the tree extractor's finalization rank (a linear extension of "requires"). It is
    sound even with cycles: by induction over any acyclic choice, Req(c) holds only classes below c.
    Restricting the bits to a subset U stays sound (intersection distributes); U = classes with two or
    more parent nodes, where alternatives can reconverge. Rows are only needed for classes with two or
    more nodes (a single node's rows x_n <= y_d imply the rest by induction). The rows y_e >= y_c stop
    the LP relaxation from paying half of each of two alternatives that reconverge (which halves what
    everything below must pay, block after block). Returns [] if the fixpoint is not reached in
    `max_passes` or the bitsets would exceed `max_bytes`.
    """
    n = len(model.classes)
    indegree = [0] * n
    for kids in model.node_kids:
        for d in kids:
            indegree[d] += 1
    pos = {c: i for i, c in enumerate(tree_order)}
    order = sorted(range(n), key=lambda j: pos[model.classes[j]])
    universe = [j for j in order if indegree[j] >= 2]
    if len(universe) * n / 8 > max_bytes:
        return []
    bit = [0] * n
    for r, j in enumerate(universe):
        bit[j] = 1 << r
    everything = (1 << len(universe)) - 1
    req = [everything] * n
    kids = [[(d, bit[d]) for d in k] for k in model.node_kids]
    for _ in range(max_passes):
        changed = False
        for j in order:
            acc = everything
            for i in model.class_nodes[j]:
                u = 0
                for d, b in kids[i]:
                    u |= req[d] | b
                acc &= u
                if not acc:
                    break
            if acc != req[j]:
                req[j] = acc
                changed = True
        if not changed:
            break
    else:
        return []
    pairs = []
    for j in range(n):
        if len(model.class_nodes[j]) < 2:
            continue
        remaining = req[j]
        while remaining:
            r = remaining.bit_length() - 1  # the highest rank left is not required by another one left
            e = universe[r]
            pairs.append((e, j))
            remaining &= ~(req[e] | (1 << r))
    return pairs


def _required_cost(model: _Model, problem: Problem, tree_order: list[int], passes: int = 3) -> float:
    """A lower bound on the DAG cost of every solution (HiGHS is not needed when the greedy choice meets it).

    R: the classes every solution uses (the roots, then the children of all of a used class's nodes, and
    `requires`). A class outside R is worth v(d) = min over its nodes of (node cost + the shares of its
    children outside R), a share being v(e) / s(e) with s(e) the number of classes with a node reading e.
    A used class then receives at most v(d) from its readers and passes on at most v(d) minus its own
    cost, so the shares the classes of R pay add up to at most what the classes outside R cost: the sum
    over R of the cheapest (node + shares) is below every solution's DAG cost. v is computed upwards from
    0 (every pass keeps it valid, cycles included), children first."""
    required_by: dict[int, list[int]] = {}
    for e, c in model.requires:
        required_by.setdefault(c, []).append(e)
    required = set(model.roots)
    stack = list(required)
    while stack:
        j = stack.pop()
        if not model.class_nodes[j]:
            continue
        common = set.intersection(*(set(model.node_kids[i]) for i in model.class_nodes[j]))
        for e in (*common, *required_by.get(j, ())):
            if e not in required:
                required.add(e)
                stack.append(e)
    cost = problem.cost_list
    readers = [0] * len(model.classes)
    for nodes in model.class_nodes:
        for d in {d for i in nodes for d in model.node_kids[i]}:
            readers[d] += 1
    value = [0.0] * len(model.classes)

    def cheapest(j: int) -> float:
        return min(
            (
                cost[model.nodes[i]] + sum(value[d] / readers[d] for d in model.node_kids[i] if d not in required)
                for i in model.class_nodes[j]
            ),
            default=0.0,
        )

    rank = {c: r for r, c in enumerate(tree_order)}
    order = sorted(
        (j for j in range(len(model.classes)) if j not in required), key=lambda j: rank.get(model.classes[j], len(rank))
    )
    for _ in range(passes):
        changed = False
        for j in order:
            v = cheapest(j)
            if v > value[j]:
                value[j], changed = v, True
        if not changed:
            break
    return sum(cheapest(j) for j in required)


def _undominated(candidates: list[tuple[int, frozenset[int]]], cost: list[float]) -> list[tuple[int, frozenset[int]]]:
    """Drop node m when another node n of the class is no dearer and needs a subset of m's children (any
    solution using m stays valid and acyclic with n instead). Ties keep the lowest node id."""
    if len(candidates) < 2:
        return candidates
    ranked = sorted(candidates, key=lambda nk: (cost[nk[0]], len(nk[1]), nk[0]))
    kept: list[tuple[int, frozenset[int]]] = []
    for n, kids in ranked:
        if not any(k <= kids for _, k in kept):
            kept.append((n, kids))
    return sorted(kept)


@dataclasses.dataclass
class _Solution:
    """What one HiGHS solve gave: the variables' values (None without a feasible solution), whether they are
    proven optimal, HiGHS's status in words, and its lower bound on the (scaled) objective."""

    x: np.ndarray | None
    optimal: bool
    message: str
    bound: float


def _highs() -> tuple[Any, Any]:
    """highspy and a HiGHS instance that prints nothing (see `_quiet_highs`)."""
    highspy, quiet = _quiet_highs()
    return highspy, quiet()


@functools.lru_cache(maxsize=1)
def _quiet_highs() -> tuple[Any, type]:
    """highspy (imported here: ~20 ms where scipy.optimize takes ~0.25 s) and a Highs class whose output is off
    from the start: highspy's constructor installs its callbacks with output on, which prints HiGHS's banner
    once per process, so output is switched off first."""
    import highspy

    class QuietHighs(highspy.Highs):
        def enableCallbacks(self) -> None:  # noqa: N802 - highspy's name
            self.setOptionValue("output_flag", False)
            super().enableCallbacks()

    return highspy, QuietHighs


def _solve(
    model: _Model,
    cost: np.ndarray,
    seconds: float,
    keep: np.ndarray | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> tuple[_Solution, float]:
    """Solve the program (only the x in `keep`, if given) with HiGHS, `meanwhile()` on this thread as it runs
    (`_run`); returns the solution and the cost scale (objective values times the scale are in cost units)."""
    nx, ny = len(model.nodes), len(model.classes)
    owner = np.fromiter((j for j, xs in enumerate(model.class_nodes) for _ in xs), dtype=np.int64, count=nx)
    xs_sorted = np.fromiter((i for xs in model.class_nodes for i in xs), dtype=np.int64, count=nx)
    edge_x = np.fromiter((i for i, kids in enumerate(model.node_kids) for _ in kids), dtype=np.int64)
    edge_d = np.fromiter((d for kids in model.node_kids for d in kids), dtype=np.int64, count=edge_x.size)
    req = np.asarray(model.requires, dtype=np.int64).reshape(-1, 2)
    ne, nr = edge_x.size, len(req)
    # rows: [classes: sum x - y = 0] [edges: x - y_d <= 0] [requirements: y_e - y_c >= 0] [cuts]
    rows = [
        owner,
        np.arange(ny),
        ny + np.arange(ne),
        ny + np.arange(ne),
        ny + ne + np.arange(nr),
        ny + ne + np.arange(nr),
    ]
    cols = [xs_sorted, nx + np.arange(ny), edge_x, nx + edge_d, nx + req[:, 0], nx + req[:, 1]]
    vals = [np.ones(nx), -np.ones(ny), np.ones(ne), -np.ones(ne), np.ones(nr), -np.ones(nr)]
    lo = [np.zeros(ny), np.full(ne, -np.inf), np.zeros(nr)]
    hi = [np.zeros(ny), np.zeros(ne), np.full(nr, np.inf)]
    base = ny + ne + nr
    if keep is None:
        for k, (xs, _rhs) in enumerate(model.cuts):
            rows.append(np.full(len(xs), base + k))
            cols.append(np.asarray(xs, dtype=np.int64))
            vals.append(np.ones(len(xs)))
        lo.append(np.full(len(model.cuts), -np.inf))
        hi.append(np.asarray([float(rhs) for _, rhs in model.cuts]))
    lo_all, hi_all = np.concatenate(lo), np.concatenate(hi)
    starts, index, value = _row_wise(
        np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), lo_all.size, nx + ny
    )
    lb = np.zeros(nx + ny)
    ub = np.ones(nx + ny)
    lb[[nx + j for j in model.roots]] = 1.0
    if keep is not None:
        ub[:nx] = keep
    xcost = cost[model.nodes]
    top = float(xcost.max()) if nx else 0.0
    c = np.concatenate([xcost / top if top > 0 else xcost, np.zeros(ny)])  # scaled: HiGHS dislikes tiny costs
    highspy, h = _highs()
    h.setOptionValue("time_limit", max(seconds, 0.01))
    h.setOptionValue("mip_rel_gap", MIP_REL_GAP)
    h.setOptionValue("presolve", "on")
    n = nx + ny
    every = np.arange(n, dtype=np.int32)
    h.addVars(n, lb, ub)
    h.changeColsCost(n, every, c)
    h.changeColsIntegrality(n, every, np.full(n, highspy.HighsVarType.kInteger))
    h.addRows(
        lo_all.size,
        np.where(np.isinf(lo_all), -highspy.kHighsInf, lo_all),
        np.where(np.isinf(hi_all), highspy.kHighsInf, hi_all),
        index.size,
        starts,
        index,
        value,
    )
    _run(h, meanwhile)
    status, info = h.getModelStatus(), h.getInfo()
    feasible = info.primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
    x = np.asarray(h.getSolution().col_value) if feasible else None
    solution = _Solution(
        x,
        status == highspy.HighsModelStatus.kOptimal and feasible,
        h.modelStatusToString(status),
        float(info.mip_dual_bound),
    )
    return solution, (top if top > 0 else 1.0)


def _run(h: Any, meanwhile: Callable[[], object] | None = None) -> None:
    """`h.run()` with HIGHS_THREADS, in a thread of its own (`run` releases the GIL), while `meanwhile()` runs on
    this one: a thread's HiGHS scheduler keeps the thread count of its first run (another count is an error after),
    so a fresh thread never meets one that the caller's own HiGHS use set. What `run` raises is raised here."""
    h.setOptionValue("threads", HIGHS_THREADS)
    beside(h.run, meanwhile or _nothing)


def _nothing() -> None:
    pass


def _row_wise(
    rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, num_rows: int, num_cols: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Coordinate entries as compressed rows (starts, column indices, values), duplicates summed."""
    keys, where = np.unique(rows * num_cols + cols, return_inverse=True)
    summed = np.bincount(where.ravel(), weights=vals, minlength=keys.size)
    starts = np.searchsorted(keys // num_cols, np.arange(num_rows), side="left")
    return starts.astype(np.int32), (keys % num_cols).astype(np.int32), summed


def _decode(model: _Model, problem: Problem, x: np.ndarray) -> dict[int, int]:
    """The choice a solution makes: per used class its chosen node (ties: cheapest, then lowest id)."""
    choice = dict(model.fixed)
    for j, xs in enumerate(model.class_nodes):
        picked = [i for i in xs if x[i] > 0.5]
        if picked:
            i = min(picked, key=lambda i: (problem.cost_list[model.nodes[i]], model.nodes[i]))
            choice[model.classes[j]] = model.nodes[i]
    return choice


def _cycles(model: _Model, problem: Problem, choice: dict[int, int]) -> list[list[int]]:
    """Strongly connected components (as model classes, size >= 2) of the chosen graph reachable from the
    roots."""
    kids = problem.node_children
    comps = strongly_connected(
        (r for r in problem.roots if r in choice), lambda c: (w for w in kids[choice[c]] if w in choice)
    )
    return [[model.class_index[c] for c in comp] for comp in comps]


def _one_cycle(model: _Model, comp: list[int], choice_x: dict[int, int]) -> list[int]:
    """A simple cycle inside a strongly connected component (model classes), following chosen nodes."""
    members = set(comp)
    seen: dict[int, int] = {}
    path: list[int] = []
    c = comp[0]
    while c not in seen:
        seen[c] = len(path)
        path.append(c)
        c = next(d for d in model.node_kids[choice_x[c]] if d in members)
    return path[seen[c] :]


def _repair(problem: Problem, choice: dict[int, int]) -> dict[int, int]:
    """An acyclic choice close to a (cyclic) solution: tree extraction with its nodes made nearly free."""
    costs = list(problem.cost_list)
    for n in choice.values():
        costs[n] *= 1e-3
    repaired = tree.solve(problem, costs).choice
    return greedy_dag.refine(problem, repaired)[0]


def _heights(problem: Problem, model: _Model, anchor: dict[int, int]) -> list[float]:
    """Heights of the model classes: the anchor's classes from the anchor's DAG, the others the least height
    of their terms (Knuth order); every kept edge must go strictly down."""
    h = [math.inf] * len(model.classes)
    index = model.class_index
    for c in reachable_order(problem, anchor) or []:
        if c in index and c not in model.fixed:  # (its node may have been dropped as dominated)
            kids = [index[k] for k in problem.node_children[anchor[c]] if k in index and k not in model.fixed]
            h[index[c]] = 1 + max((h[d] for d in kids), default=-1)
    pending = [len(set(k)) for k in model.node_kids]
    parents: list[list[int]] = [[] for _ in model.classes]
    for i, kids in enumerate(model.node_kids):
        for d in set(kids):
            parents[d].append(i)
    owner = [0] * len(model.nodes)
    for j, xs in enumerate(model.class_nodes):
        for i in xs:
            owner[i] = j
    done = [h[j] < math.inf for j in range(len(model.classes))]

    def finalize(j: int, i: int, value: float) -> None:
        h[j] = value

    bottom_up(
        ((0.0, i) for i, kids in enumerate(model.node_kids) if not kids and not done[owner[i]]),
        owner,
        parents,
        pending,
        done,
        lambda p: 1 + max(h[d] for d in model.node_kids[p]),
        finalize,
        ready=[j for j in range(len(model.classes)) if done[j]],
    )
    return h


def _filtered_keep(model: _Model, h: list[float]) -> np.ndarray:
    keep = np.zeros(len(model.nodes))
    for j, xs in enumerate(model.class_nodes):
        for i in xs:
            if all(h[d] < h[j] for d in model.node_kids[i]):
                keep[i] = 1.0
    return keep


@dataclasses.dataclass
class _Best:
    """The best acyclic choice so far and where it came from."""

    choice: dict[int, int]
    cost: float
    source: str
    lower: float = 0.0  # a proven lower bound on the optimum

    def offer(self, choice: dict[int, int], cost: float, source: str) -> None:
        if cost < self.cost:  # on a tie the earlier one stays (the greedy's ties are broken by node id)
            self.choice, self.cost, self.source = choice, cost, source


def extract(
    egraph: EGraph,
    roots: Sequence[int],
    cost: CostModel,
    *,
    time_limit: float = DEFAULT_TIME_LIMIT,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    speculate: Callable[[dict[int, int]], object] | None = None,
) -> ExtractionResult:
    """Exact DAG-cost extraction for `roots` within `time_limit` seconds (see the module docstring).

    With `speculate`, when HiGHS has to run, `speculate` is called on this thread with the greedy-dag choice
    (restricted to the classes the roots reach: the choice returned unless HiGHS finds a cheaper one) while HiGHS's
    first run goes on in its thread (`_run`). The result is the same: HiGHS solves the same program, and its time
    limit is the same deadline (wall-clock from the start of the extraction: HiGHS shares the CPU with `speculate`
    meanwhile), which decides the result only for a program HiGHS cannot finish within it (or cut rounds still
    running at half of it; the first round also waits for `speculate`, ~4-21 ms of lowering on the shared models,
    and that wait counts toward the half): its runs take at most ~40 ms there, against 10 s. An exception HiGHS
    raises is raised here once `speculate` has returned; one from `speculate` at once."""
    problem = Problem.build(egraph, roots, cost, time.perf_counter())
    deadline = problem.started + time_limit
    tsol = tree.solve(problem)
    greedy, greedy_cost, _ = greedy_dag.solve(problem, tsol)
    best = _Best(greedy, greedy_cost, "the greedy-dag incumbent")
    model = _build_model(problem, tsol)
    if not model.roots:
        return problem.finish(tsol.choice, NAME, ["every root has a zero-cost term"] if problem.roots else [])
    lower = _required_cost(model, problem, tsol.order)
    if best.cost <= lower * (1 + 1e-9):
        return problem.finish(
            best.choice,
            NAME,
            [f"the greedy-dag choice is optimal: its DAG cost {best.cost:.6g} equals a lower bound (HiGHS not run)"],
        )
    # beside the first HiGHS run: `speculate` on the greedy choice, as `finish` would keep it
    meanwhile = [] if speculate is None else [functools.partial(speculate, restrict(problem, best.choice))]
    notes: list[str] = []
    rounds, proven = 0, False
    while rounds < max_rounds and time.perf_counter() < problem.started + time_limit / 2:
        rounds += 1
        res, scale = _solve(model, problem.cost, deadline - time.perf_counter(), meanwhile=_first(meanwhile))
        if res.x is None:
            notes.append(f"round {rounds}: HiGHS found no solution ({res.message})")
            break
        if math.isfinite(res.bound):  # a lower bound: the program relaxes acyclicity
            best.lower = max(best.lower, res.bound * scale)
        choice = _decode(model, problem, res.x)
        order = reachable_order(problem, choice)
        if order is not None:  # acyclic: optimal if HiGHS proved it
            best.offer(choice, problem.dag_cost(choice, order), "the ILP solution")
            proven = res.optimal
            if not proven:
                notes.append(f"time limit in round {rounds}: {res.message}")
            break
        repaired = _repair(problem, choice)
        best.offer(repaired, problem.dag_cost(repaired), "a repaired ILP solution")
        comps = _cycles(model, problem, choice)
        xchoice = _x_choice(model, choice)
        added = sum(model.add_cut(comp) + model.add_cut(_one_cycle(model, comp, xchoice)) for comp in comps)
        if not res.optimal or not added:
            notes.append(f"round {rounds}: the solution has cycles and no new cut or no time is left")
            break
    if not proven:
        _filtered(problem, model, best, deadline, rounds, notes, _first(meanwhile))
        gap = (best.cost - best.lower) / best.cost if best.cost > 0 else 0.0
        notes.append(f"returned {best.source}: DAG cost {best.cost:.6g}, lower bound {best.lower:.6g} (gap {gap:.2%})")
    if rounds > 1:
        notes.append(f"{rounds} rounds of cycle cuts ({len(model.cuts)} cuts)")
    return problem.finish(best.choice, NAME, notes)


def _first(pending: list[Callable[[], object]]) -> Callable[[], object] | None:
    """The first of `pending`, taken out (None when it is empty)."""
    return pending.pop(0) if pending else None


def _x_choice(model: _Model, choice: dict[int, int]) -> dict[int, int]:
    xpos = {n: i for i, n in enumerate(model.nodes)}
    return {j: xpos[choice[c]] for j, c in enumerate(model.classes) if c in choice}


def _filtered(
    problem: Problem,
    model: _Model,
    best: _Best,
    deadline: float,
    rounds: int,
    notes: list[str],
    meanwhile: Callable[[], object] | None = None,
) -> None:
    """Solve within the acyclic pre-filter anchored on the best choice (so never worse than it); `meanwhile` as
    in `_solve`."""
    remaining = deadline - time.perf_counter()
    if remaining <= 0.01:
        notes.append("time limit reached before the acyclic pre-filter solve")
        return
    keep = _filtered_keep(model, _heights(problem, model, best.choice))
    res, _ = _solve(model, problem.cost, remaining, keep, meanwhile)
    dropped = int(len(model.nodes) - keep.sum())
    why = f"cycle cuts did not converge in {rounds} round(s)" if rounds else "cycle cuts skipped"
    if res.x is None:
        notes.append(f"{why}; the acyclic pre-filter solve found no solution ({res.message})")
        return
    choice = _decode(model, problem, res.x)
    exact = "optimal" if res.optimal else "best found (time limit)"
    notes.append(
        f"{why}: {exact} within an acyclic pre-filter anchored on the incumbent "
        f"({dropped} of {len(model.nodes)} nodes excluded)"
    )
    best.offer(choice, problem.dag_cost(choice), "the pre-filtered ILP solution")
