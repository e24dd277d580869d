"""Extraction: result validation, differential fuzzing of the extractors on random e-graphs (seeds printed
in the test ids), brute-force optimality of the ILP on small e-graphs, and cost-model invariants."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import random
from typing import Callable, Sequence

import pytest

from eqsat.engine.egraph import EClass, EGraph, ENode
from eqsat.extract import (
    EXTRACTORS,
    ExtractionError,
    ExtractionResult,
    extract,
    greedy_dag,
    load_target,
    roofline,
    targets,
    tree,
)
from eqsat.extract.cost import FUSED_EPSILON, TargetError, node_costs
from eqsat.extract.problem import Problem
from eqsat.extract.result import ExtractionSummary

OPS = ("Conv", "Relu", "Transpose", "Add", "Mul", "MatMul", "Cast", "Reshape")
NAMES = tuple(EXTRACTORS)


# ---------------------------------------------------------------------------------------------------
# Random e-graphs


@dataclasses.dataclass
class Case:
    graph: EGraph
    costs: list[float]

    def cost(self, egraph: EGraph, node: ENode) -> float:
        return self.costs[node.id]


def build(spec: Sequence[tuple[int, str, Sequence[int]]], roots: Sequence[int], nclasses: int) -> EGraph:
    """An e-graph from (class, op, child classes) rows; node id = row index."""
    nodes = tuple(ENode(i, op, c, tuple(kids), ()) for i, (c, op, kids) in enumerate(spec))
    members: list[list[int]] = [[] for _ in range(nclasses)]
    for n in nodes:
        members[n.eclass].append(n.id)
    return EGraph(nodes, tuple(EClass(i, "T", tuple(m)) for i, m in enumerate(members)), tuple(roots))


def random_case(
    rng: random.Random, nclasses: int, extra: int, integer_costs: bool = True, backbone: float = 1.0
) -> Case:
    """Classes 0..n-1. A backbone node per class (children in lower classes; kept with probability
    `backbone`) guarantees cycle-free alternatives; `extra` nodes take children anywhere, including the
    class itself and higher classes (cycles: x = f(x), x = f(g(x)), ...). Children may repeat (Add(x, x))."""
    spec: list[tuple[int, str, list[int]]] = []
    for c in range(nclasses):
        if c == 0 or rng.random() < backbone:
            arity = rng.choice((0, 1, 1, 2, 2, 3)) if c else 0
            spec.append((c, rng.choice(OPS), [rng.randrange(c) for _ in range(arity)] if c else []))
    for _ in range(extra):
        c = rng.randrange(nclasses)
        r = rng.random()
        if r < 0.15:
            kids = [c]  # x = f(x)
        elif r < 0.25:
            kids = [c, rng.randrange(nclasses)]  # a child is the class itself
        else:
            kids = [rng.randrange(nclasses) for _ in range(rng.choice((0, 1, 1, 2, 2, 3)))]
        spec.append((c, rng.choice(OPS), kids))
    rng.shuffle(spec)  # node ids unrelated to structure
    nroots = rng.choice((1, 1, 1, 2))
    roots = sorted({rng.randrange(max(0, nclasses - 3), nclasses) for _ in range(nroots)})
    if integer_costs:
        costs = [float(rng.randint(0, 10)) for _ in spec]  # many ties
    else:
        costs = [rng.choice((0.0, rng.uniform(0.0, 5.0), rng.expovariate(0.1))) for _ in spec]
    return Case(build(spec, roots, nclasses), costs)


def brute_force(case: Case) -> float:
    """The least DAG cost over all acyclic choices (inf if none)."""
    g = case.graph
    options = [list(c.nodes) or [None] for c in g.classes]
    best = math.inf
    for pick in itertools.product(*options):
        choice = {c: n for c, n in enumerate(pick) if n is not None}
        result = ExtractionResult(g, choice, g.roots, "brute", 0.0)
        try:
            best = min(best, result.dag_cost(case.costs))
        except ExtractionError:
            continue
    return best


def run_all(case: Case) -> dict[str, ExtractionResult] | None:
    """Every extractor on the case; None if all agree that a root cannot be extracted."""
    results, failures = {}, 0
    for name in NAMES:
        try:
            results[name] = extract(case.graph, case.graph.roots, case.cost, name)
        except ExtractionError:
            failures += 1
    assert failures in (0, len(NAMES)), "extractors disagree on whether the roots are extractable"
    return results or None


def assert_ordered(case: Case, results: dict[str, ExtractionResult]) -> dict[str, float]:
    costs = {}
    for name, r in results.items():
        r.check()
        assert r.extractor == name
        costs[name] = r.dag_cost(case.costs)
    tol = 1e-9 * (1 + costs["tree"])
    assert costs["ilp"] <= costs["greedy-dag"] + tol, costs
    assert costs["greedy-dag"] <= costs["tree"] + tol, costs
    assert results["tree"].tree_cost(case.costs) <= results["ilp"].tree_cost(case.costs) + tol
    return costs


SMALL_SEEDS = range(20)
SMALL_PER_SEED = 40  # 800 small e-graphs, each checked against brute force
MEDIUM_SEEDS = range(10)
MEDIUM_PER_SEED = 25  # 250 medium e-graphs


@pytest.mark.parametrize("seed", SMALL_SEEDS)
def test_small_random_egraphs_match_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    for k in range(SMALL_PER_SEED):
        nclasses = rng.randint(2, 6)
        extra = rng.randint(0, 12 - nclasses)
        case = random_case(rng, nclasses, extra, integer_costs=k % 3 != 0, backbone=rng.choice((1.0, 0.8)))
        assert case.graph.num_nodes <= 12
        results = run_all(case)
        optimum = brute_force(case)
        if results is None:
            assert optimum == math.inf, f"seed {seed} case {k}: extractors failed but a solution exists"
            continue
        costs = assert_ordered(case, results)
        assert costs["ilp"] == pytest.approx(optimum, rel=1e-6, abs=1e-9), f"seed {seed} case {k}"


@pytest.mark.parametrize("seed", MEDIUM_SEEDS)
def test_medium_random_egraphs(seed: int) -> None:
    rng = random.Random(1000 + seed)
    for k in range(MEDIUM_PER_SEED):
        nclasses = rng.randint(8, 30)
        case = random_case(rng, nclasses, rng.randint(nclasses, 3 * nclasses), integer_costs=k % 2 == 0)
        results = run_all(case)
        if results is None:
            continue
        costs = assert_ordered(case, results)
        prefiltered = extract(case.graph, None, case.cost, "ilp", max_rounds=0)  # skip the cycle cuts
        prefiltered.check()
        assert costs["ilp"] <= prefiltered.dag_cost(case.costs) <= costs["greedy-dag"] + 1e-9


def test_deterministic() -> None:
    rng = random.Random(7)
    for _ in range(20):
        case = random_case(rng, 12, 25)
        for name in NAMES:
            try:
                a = extract(case.graph, case.graph.roots, case.cost, name)
                b = extract(case.graph, case.graph.roots, case.cost, name)
            except ExtractionError:
                continue
            assert dict(a.choice) == dict(b.choice)


# ---------------------------------------------------------------------------------------------------
# Hand-made cases


def test_cycle_x_equals_f_x() -> None:
    # class 1 = {g(0) [10], h(2) [1]}, class 2 = {t(1) [1], u(0) [5]}: h(t(h(...))) is a cycle
    g = build([(0, "Input", []), (1, "g", [0]), (1, "h", [2]), (2, "t", [1]), (2, "u", [0])], [1], 3)
    costs = [0.0, 10.0, 1.0, 1.0, 5.0]
    for name in NAMES:
        r = extract(g, None, lambda eg, n: costs[n.id], name)
        r.check()
        assert dict(r.choice) == {1: 2, 2: 4, 0: 0}
        assert r.dag_cost(costs) == 6.0


def test_sharing_trap_ilp_beats_tree() -> None:
    # root = add(Q, S); S = expensive(x) (needed anyway); Q = {cheap(S), medium(x)}
    spec = [(0, "Input", []), (1, "Conv", [0]), (2, "Relu", [1]), (2, "Mul", [0]), (3, "Add", [2, 1])]
    g = build(spec, [3], 4)
    costs = [0.0, 10.0, 1.0, 3.0, 1.0]
    cost = lambda eg, n: costs[n.id]  # noqa: E731
    tree_r = extract(g, None, cost, "tree")
    ilp_r = extract(g, None, cost, "ilp")
    assert tree_r.choice[2] == 3 and tree_r.dag_cost(costs) == 14.0
    assert ilp_r.choice[2] == 2 and ilp_r.dag_cost(costs) == 12.0
    assert tree_r.tree_cost(costs) < ilp_r.tree_cost(costs)  # tree cost over-counts the shared Conv


def test_union_greedy_alone_can_lose_to_tree() -> None:
    # X = {p(U) [tree 11], q(V, V) [sub-DAG 10, tree 19]}; root = h(X, r(U)): U is paid anyway, so p is right
    spec = [
        (0, "Input", []),
        (1, "U", [0]),
        (2, "V", [0]),
        (3, "p", [1]),
        (3, "q", [2, 2]),
        (4, "r", [1]),
        (5, "h", [3, 4]),
    ]
    g = build(spec, [5], 6)
    costs = [0.0, 10.0, 9.0, 1.0, 1.0, 1.0, 1.0]
    cost = lambda eg, n: costs[n.id]  # noqa: E731
    problem = Problem.build(g, g.roots, cost)
    assert problem.dag_cost(greedy_dag.union_greedy(problem)) == 22.0  # picks q: V is paid on top of U
    assert problem.dag_cost(tree.solve(problem).choice) == 13.0
    for name in NAMES:  # the refinement (and the portfolio with tree) restore the guarantee
        assert extract(g, None, cost, name).dag_cost(costs) == 13.0


def test_unextractable_root_raises() -> None:
    g = build([(0, "Input", []), (1, "f", [2]), (2, "g", [1])], [1], 3)  # 1 and 2 only through each other
    for name in NAMES:
        with pytest.raises(ExtractionError, match="root class 1"):
            extract(g, None, lambda eg, n: 1.0, name)
    with pytest.raises(ExtractionError, match="does not exist"):
        extract(g, [7], lambda eg, n: 1.0, "tree")


def test_infinite_cost_excludes_a_node() -> None:
    g = build([(0, "Input", []), (1, "Gelu", [0]), (1, "Mul", [0])], [1], 2)
    costs = [0.0, math.inf, 50.0]
    for name in NAMES:
        assert extract(g, None, lambda eg, n: costs[n.id], name).choice[1] == 2


def test_empty_class_and_unknown_extractor() -> None:
    g = build([(0, "Input", []), (1, "f", [2]), (1, "g", [0])], [1], 3)  # class 2 has no node
    for name in NAMES:
        assert extract(g, None, lambda eg, n: 1.0, name).choice == {1: 2, 0: 0}
    with pytest.raises(Exception, match="unknown extractor"):
        extract(g, None, lambda eg, n: 1.0, "simulated-annealing")
    assert extract(g, None, lambda eg, n: 1.0, "greedy_dag").extractor == "greedy-dag"


def test_negative_cost_is_rejected() -> None:
    g = build([(0, "Input", []), (1, "f", [0])], [1], 2)
    with pytest.raises(ValueError, match="node 1 \\(f\\)"):
        extract(g, None, lambda eg, n: -1.0 if n.id == 1 else 0.0, "tree")


def test_ilp_time_limit_falls_back_with_a_note() -> None:
    rng = random.Random(3)
    case = random_case(rng, 30, 80)
    while run_all(case) is None:
        case = random_case(rng, 30, 80)
    r = extract(case.graph, None, case.cost, "ilp", time_limit=0.0)
    r.check()
    assert any("time limit" in n for n in r.notes) or r.notes == ("every root has a zero-cost term",)
    assert r.dag_cost(case.costs) <= extract(case.graph, None, case.cost, "greedy-dag").dag_cost(case.costs)


def test_ilp_cycle_cuts_and_prefilter_fallback() -> None:
    # x = T(T(x)) two-cycles and a longer 3-cycle that is cheaper than the real support
    spec = [(0, "Input", []), (1, "Conv", [0]), (1, "T", [2]), (2, "T", [3]), (3, "T", [1]), (3, "Relu", [0])]
    g = build(spec, [1], 4)
    costs = [0.0, 100.0, 1.0, 1.0, 1.0, 50.0]
    cost = lambda eg, n: costs[n.id]  # noqa: E731
    exact = extract(g, None, cost, "ilp")
    assert exact.dag_cost(costs) == 52.0  # T(T(Relu(x))) beats Conv(x)
    capped = extract(g, None, cost, "ilp", max_rounds=0)
    capped.check()
    assert any("pre-filter" in n for n in capped.notes)
    assert capped.dag_cost(costs) <= extract(g, None, cost, "greedy-dag").dag_cost(costs)


# ---------------------------------------------------------------------------------------------------
# check() rejects broken results


def _valid() -> ExtractionResult:
    g = build([(0, "Input", []), (1, "Relu", [0]), (1, "Mul", [1, 0]), (2, "Add", [1, 0])], [2], 3)
    r = ExtractionResult(g, {0: 0, 1: 1, 2: 3}, (2,), "manual", 0.0)
    r.check()
    return r


@pytest.mark.parametrize(
    "choice, match",
    [
        ({0: 0, 1: 1}, "root class 2 has no chosen node"),
        ({0: 0, 1: 3, 2: 3}, "belongs to class 2"),
        ({0: 0, 2: 3}, "child class 1 with no chosen node"),
        ({0: 0, 1: 2, 2: 3}, "cycle"),
        ({0: 0, 1: 1, 2: 3, 9: 0}, "does not exist"),
        ({0: 0, 1: 17, 2: 3}, "does not exist"),
    ],
)
def test_check_rejects_broken_results(choice: dict[int, int], match: str) -> None:
    r = dataclasses.replace(_valid(), choice=choice)
    with pytest.raises(ExtractionError, match=match):
        r.check()


@pytest.mark.slow  # a 50k-deep graph
def test_check_is_iterative_on_deep_graphs() -> None:
    depth = 50_000
    spec = [(0, "Input", [])] + [(c, "Relu", [c - 1]) for c in range(1, depth)]
    g = build(spec, [depth - 1], depth)
    costs = [0.0] + [1.0] * (depth - 1)
    for name in NAMES:
        r = extract(g, None, lambda eg, n: costs[n.id], name)
        r.check()
        assert r.dag_cost(costs) == depth - 1
        assert r.tree_cost(costs) == depth - 1
    assert r.reachable()[0] == 0 and r.reachable()[-1] == depth - 1


def test_costs_count_sharing_once_for_dag_and_per_use_for_tree() -> None:
    r = _valid()  # Add(Relu(x), x)
    costs = [0.0, 2.0, 5.0, 1.0]
    assert r.dag_cost(costs) == 3.0
    assert r.tree_cost(costs) == 3.0
    g = build([(0, "Input", []), (1, "Relu", [0]), (2, "Add", [1, 1])], [2], 3)  # Add(r, r)
    r2 = ExtractionResult(g, {0: 0, 1: 1, 2: 2}, (2,), "manual", 0.0)
    assert r2.dag_cost([0.0, 2.0, 1.0]) == 3.0 and r2.tree_cost([0.0, 2.0, 1.0]) == 5.0
    summary = r2.summary([0.0, 2.0, 1.0], target="cpu")
    assert isinstance(summary, ExtractionSummary) and summary.to_dict()["dag_cost"] == 3.0
    assert "DAG cost 3" in summary.to_text()


def test_standalone_keeps_only_the_chosen_graph() -> None:
    g = build([(0, "Input", []), (1, "Relu", [0]), (1, "Mul", [1, 0]), (2, "Add", [1, 0]), (3, "Neg", [0])], [2], 4)
    r = ExtractionResult(g, {0: 0, 1: 1, 2: 3, 3: 4}, (2,), "manual", 0.0)  # class 3 is not reachable
    alone = r.standalone()
    alone.check()
    assert [n.op for n in alone.egraph.nodes] == ["Input", "Relu", "Add"]
    assert all(c.nodes == (c.id,) for c in alone.egraph.classes)
    assert alone.egraph.nodes[alone.choice[alone.roots[0]]].children == (1, 0)
    by_op = {"Input": 0.0, "Relu": 2.0, "Add": 1.0}
    assert alone.dag_cost(lambda eg, n: by_op[n.op]) == r.dag_cost(lambda eg, n: by_op.get(n.op, 9.0)) == 3.0


# ---------------------------------------------------------------------------------------------------
# Cost models


NCHW = (1, 16, 32, 32)


def onnx_like_graph(dtype: str = "FLOAT") -> EGraph:
    """Input -> Conv(W) -> Relu -> Transpose -> LayerNormalization -> Gelu; an Opaque over a list; a
    constant-only Transpose of a weight; a class without a shape."""
    spec: list[tuple[int, str, tuple, tuple]] = []
    classes: list[tuple[tuple[int, ...] | None, str | None, bool]] = []

    def cls(shape, dt=dtype, const=False) -> int:
        classes.append((shape, dt, const))
        return len(classes) - 1

    def node(cid, op, kids=(), attrs=()) -> int:
        spec.append((cid, op, tuple(kids), attrs))
        return cid

    x = node(cls(NCHW), "Input", attrs=("x",))
    w = node(cls((16, 16, 3, 3), const=True), "Const", attrs=("w",))
    absent = node(cls(None, None, True), "Absent")
    conv = node(cls(NCHW), "Conv", (x, w, absent))
    relu = node(cls(NCHW), "Relu", (conv,))
    t = node(cls((1, 32, 32, 16)), "Transpose", (relu,), ((0, 2, 3, 1),))
    g1 = node(cls((16,), const=True), "Const", attrs=("g",))
    ln = node(cls((1, 32, 32, 16)), "LayerNormalization", (t, g1, absent))
    gelu = node(cls(None, None), "Gelu", (ln,))
    wt = node(cls((3, 3, 16, 16), const=True), "Transpose", (w,), ((2, 3, 0, 1),))
    nil = node(cls(None, None), "TNil")
    lst = node(cls(None, None), "TCons", (gelu, nil))
    op = node(cls(None, None), "Opaque", (lst,), ("com.example::Mystery#0",))
    out = node(cls((1, 32, 32, 16)), "Out", (op,), (0,))
    add = node(cls((1, 32, 32, 16)), "Add", (out, wt))
    nodes = tuple(ENode(i, op_, c, kids, attrs) for i, (c, op_, kids, attrs) in enumerate(spec))
    sorts = {lst: "TL", nil: "TL", op: "N"}
    eclasses = tuple(
        EClass(i, sorts.get(i, "T"), tuple(n.id for n in nodes if n.eclass == i), *facts)
        for i, facts in enumerate(classes)
    )
    return EGraph(nodes, eclasses, (add,))


def test_targets_are_listed_and_loadable() -> None:
    assert {"cpu", "gpu", "npu"} <= set(targets())
    for name in targets():
        t = load_target(name)
        assert t.name == name and t.launch > 0 and t.bandwidth > 0
    with pytest.raises(TargetError, match="unknown target; available: .*cpu"):
        load_target("tpu-v9")


@pytest.mark.parametrize("target", ["cpu", "gpu", "npu"])
def test_cost_invariants(target: str) -> None:
    for dtype in ("FLOAT", "FLOAT16", "INT8"):
        g = onnx_like_graph(dtype)
        model = roofline(target)
        costs = [model(g, n) for n in g.nodes]
        for n, c in zip(g.nodes, costs):
            assert c >= 0 and math.isfinite(c), (n, c)
            if g.classes[n.eclass].constant or n.op in ("Input", "Const", "Absent", "TCons", "TNil", "Out"):
                assert c == 0.0, n
        transpose = next(n for n in g.nodes if n.op == "Transpose" and not g.classes[n.eclass].constant)
        assert model(g, transpose) > 0
        assert list(model.node_costs(g)) == costs


@pytest.mark.parametrize("target", ["cpu", "gpu", "npu"])
def test_a_graph_costs_the_same_whichever_way_it_is_asked(target: str) -> None:
    """The roofline's whole-graph table (computed once per graph, shared by extraction, dag_cost and the
    breakdown) holds what the model gives each node asked alone, on a model that has costed nothing yet."""
    from eqsat.extract.cost import cost_lookup

    for dtype in ("FLOAT", "FLOAT16", "INT8"):
        g = onnx_like_graph(dtype)
        one_by_one = [roofline(target)(g, n) for n in g.nodes]
        table = roofline(target).cost_table(g)
        assert table == one_by_one
        model = roofline(target)
        assert list(model.node_costs(g)) == one_by_one and model.node_costs(g) is not model.node_costs(g)
        price = cost_lookup(g, roofline(target))
        assert [price(n.id) for n in g.nodes] == one_by_one


def test_transpose_is_never_free_even_without_shapes() -> None:
    g = build([(0, "Input", []), (1, "Transpose", [0])], [1], 2)
    for name in targets():
        assert roofline(name)(g, g.nodes[1]) > 0


def test_unsupported_ops_cost_more_on_npu() -> None:
    g = onnx_like_graph("FLOAT16")
    cpu, npu = roofline("cpu"), roofline("npu")
    for op in ("LayerNormalization", "Gelu", "Opaque"):
        n = next(n for n in g.nodes if n.op == op)
        assert npu(g, n) > cpu(g, n) + load_target("npu").unsupported_penalty * 0.99, op
    g32, g16 = onnx_like_graph("FLOAT"), onnx_like_graph("FLOAT16")
    conv32 = next(n for n in g32.nodes if n.op == "Conv")
    conv16 = next(n for n in g16.nodes if n.op == "Conv")
    # fp32 is compiled to fp16 (npu.toml): it stays on the NPU, paying only its wider bytes
    assert npu(g16, conv16) < npu(g32, conv32) < load_target("npu").unsupported_penalty
    g64 = onnx_like_graph("DOUBLE")
    conv64 = next(n for n in g64.nodes if n.op == "Conv")
    assert npu(g64, conv64) > load_target("npu").unsupported_penalty  # fp64 falls back to the host


def test_roofline_formulas() -> None:
    g = onnx_like_graph("FLOAT")
    cpu = dataclasses.replace(load_target("cpu"), tie_break=0.0)  # the formulas without the tie-breaker
    model = roofline(cpu)
    conv = next(n for n in g.nodes if n.op == "Conv")
    flops = 2 * math.prod(NCHW) * 16 * 3 * 3
    moved = (2 * math.prod(NCHW) + 16 * 16 * 9) * 4
    assert model(g, conv) == pytest.approx(max(flops / cpu.peak["FLOAT"], moved / cpu.bandwidth) + cpu.launch)
    relu = next(n for n in g.nodes if n.op == "Relu")
    assert model(g, relu) == pytest.approx(math.prod(NCHW) / cpu.peak["FLOAT"])  # cpu fuses conv+relu
    t = next(n for n in g.nodes if n.op == "Transpose" and not g.classes[n.eclass].constant)
    assert model(g, t) == pytest.approx(2 * math.prod(NCHW) * 4 / cpu.bandwidth + cpu.launch)
    gelu = next(n for n in g.nodes if n.op == "Gelu")  # no shape: estimated from its input
    assert model(g, gelu) == pytest.approx(
        max(10 * math.prod(NCHW) / cpu.peak["FLOAT"], 2 * math.prod(NCHW) * 4 / cpu.bandwidth) + cpu.launch
    )
    opaque = next(n for n in g.nodes if n.op == "Opaque")  # reads the Gelu output (estimated size)
    assert model(g, opaque) == pytest.approx(cpu.launch + math.prod(NCHW) * 4 / cpu.bandwidth)
    gpu = roofline(dataclasses.replace(load_target("gpu"), tie_break=0.0))  # without gpu.toml's tie_break
    assert gpu(g, relu) == FUSED_EPSILON  # a free epilogue costs only FUSED_EPSILON


def test_reshape_is_nearly_free_and_gpu_launches_dominate() -> None:
    g = build([(0, "Input", []), (1, "Reshape", [0]), (2, "Relu", [0])], [1], 3)
    for name in targets():
        t = load_target(name)
        assert 0 < roofline(t)(g, g.nodes[1]) < t.launch
    assert roofline("gpu")(g, g.nodes[2]) > roofline("cpu")(g, g.nodes[2])  # tiny op: launch-bound


def test_target_choice_changes_extraction() -> None:
    # LayerNormalization vs its decomposition: the npu cannot run the fused op
    spec = [
        (0, "Input", []),
        (1, "LayerNormalization", [0]),
        (2, "ReduceMean", [0]),
        (3, "Sub", [0, 2]),
        (1, "Mul", [3, 3]),
    ]
    g = build(spec, [1], 4)
    classes = tuple(dataclasses.replace(c, shape=(1, 128, 64), dtype="FLOAT16") for c in g.classes)
    g = dataclasses.replace(g, classes=classes)
    assert extract(g, None, "cpu", "ilp").choice[1] == 1
    assert extract(g, None, "npu", "ilp").choice[1] == 4


def test_serialized_round_trip_keeps_costs() -> None:
    g0 = onnx_like_graph("FLOAT")
    g = EGraph.from_serialized(g0.to_serialized())  # normalizes the constant flags
    back = EGraph.from_serialized(json.loads(json.dumps(g.to_serialized())))
    exported = g.to_serialized(node_costs(g, roofline("gpu")))  # extraction-gym reads these costs
    assert [n["cost"] for n in exported["nodes"].values()] == list(node_costs(g, roofline("gpu")))
    for target in targets():
        for name in NAMES:
            a = extract(g, None, target, name)
            b = extract(back, None, target, name)
            assert dict(a.choice) == dict(b.choice)
            assert a.dag_cost(roofline(target)) == b.dag_cost(roofline(target))
            assert a.tree_cost(roofline(target)) == b.tree_cost(roofline(target))


def test_ilp_lower_bound_never_exceeds_the_optimum() -> None:
    """The bound that lets the ILP skip HiGHS when the greedy choice meets it (ilp._required_cost) is below
    the brute-force optimum on every small random e-graph, and meets the greedy choice on some."""
    from eqsat.extract import ilp

    rng = random.Random(4242)
    proven = checked = 0
    for k in range(300):
        nclasses = rng.randint(2, 6)
        case = random_case(rng, nclasses, rng.randint(0, 12 - nclasses), integer_costs=k % 2 == 0)
        optimum = brute_force(case)
        if optimum == math.inf:
            continue
        problem = Problem.build(case.graph, case.graph.roots, case.cost, 0.0)
        tsol = tree.solve(problem)
        model = ilp._build_model(problem, tsol)
        if not model.roots:
            continue
        checked += 1
        assert ilp._required_cost(model, problem, tsol.order) <= optimum * (1 + 1e-9) + 1e-12, f"case {k}"
        result = extract(case.graph, None, case.cost, "ilp")
        proven += any("HiGHS not run" in note for note in result.notes)
        assert result.dag_cost(case.costs) == pytest.approx(optimum, rel=1e-6, abs=1e-9)
    assert checked > 100 and 0 < proven < checked


@pytest.mark.parametrize("name", sorted(__import__("eqsat.extract", fromlist=["EXTRACTORS"]).EXTRACTORS))
def test_every_registered_extractor_satisfies_the_protocol(name: str) -> None:
    """Each module has `extract(egraph, roots, cost, *, options...)`: three positional parameters, any
    further ones keyword-only with defaults, and the protocol's runtime check passes."""
    import inspect

    from eqsat.extract import EXTRACTORS, Extractor

    module = EXTRACTORS[name].load()
    assert isinstance(module, Extractor)
    params = list(inspect.signature(module.extract).parameters.values())
    assert [p.name for p in params[:3]] == ["egraph", "roots", "cost"]
    assert all(p.kind is p.KEYWORD_ONLY and p.default is not p.empty for p in params[3:]), params


def _ladder(depth: int) -> tuple[EGraph, list[float]]:
    """c0 = Input; c(i) = Add(c(i-1), c(i-1)), and an alternative Mul(c(i-1), c(i-1)) one unit dearer: the tree
    cost of the top doubles per level (2**depth: past float64's range at depth 1100), the DAG cost is
    linear."""
    spec = [(0, "Input", [])]
    costs = [0.0]
    for i in range(1, depth + 1):
        spec += [(i, "Add", [i - 1, i - 1]), (i, "Mul", [i - 1, i - 1])]
        costs += [1.0, 2.0]
    return build(spec, [depth], depth + 1), costs


@pytest.mark.parametrize("name", ["ilp", "greedy-dag", "tree"])
def test_tree_costs_past_float64_range_do_not_break_extraction(name: str) -> None:
    """A deep shared ladder whose tree cost overflows float64: every extractor still returns a valid
    result; the ILP is exact (the DAG cost: one Add per level) with no infeasibility and no fallback."""
    depth = 1100
    graph, costs = _ladder(depth)
    result = extract(graph, None, lambda eg, n: costs[n.id], name)
    result.check()
    assert math.isfinite(result.dag_cost(costs))
    if name == "ilp":
        assert result.dag_cost(costs) == depth
        problems = ("Infeasible", "infeasible", "incumbent", "fall", "gap")  # the old failure: all of these
        assert not any(word in n for n in result.notes for word in problems), result.notes


def test_a_tree_cost_beyond_float64_reads_as_such_and_stays_valid_json() -> None:
    """A DAG with deep sharing has a tree cost past float64 (a 30k-node ResNet-like stack does): the report says
    so, and its JSON stays strict (no Infinity)."""
    summary = ExtractionSummary("ilp", "cpu", 0.5, 1e-3, math.inf, 10, 12, 8)
    assert json.loads(json.dumps(summary.to_dict(), allow_nan=False))["tree_cost"] is None
    assert "tree cost beyond float64" in summary.to_text()
    finite = ExtractionSummary("ilp", "cpu", 0.5, 1e-3, 2e-3, 10, 12, 8)
    assert finite.to_dict()["tree_cost"] == 2e-3


# ---------------------------------------------------------------------------------------------------
# HiGHS's thread


def test_highs_runs_in_a_thread_of_its_own_with_one_highs_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every HiGHS run of the ILP goes on in a fresh thread (HiGHS releases the GIL there) with one HiGHS thread;
    what it raises comes up on the caller's thread."""
    import threading

    from eqsat.extract import ilp

    case = _highs_case()
    runs: list[tuple[threading.Thread, object]] = []
    real = ilp._highs

    def watched() -> tuple[object, object]:
        highspy, h = real()
        run = h.run

        def recorded() -> object:
            runs.append((threading.current_thread(), h.getOptionValue("threads")[1]))
            return run()

        h.run = recorded
        return highspy, h

    monkeypatch.setattr(ilp, "_highs", watched)
    assert extract(case.graph, None, case.cost, "ilp").notes == ()  # HiGHS ran and proved its optimum
    assert runs and all(t is not threading.main_thread() and n == 1 for t, n in runs), runs

    def broken() -> tuple[object, object]:
        highspy, h = real()

        def run() -> None:
            raise RuntimeError("HiGHS broke")

        h.run = run
        return highspy, h

    monkeypatch.setattr(ilp, "_highs", broken)
    with pytest.raises(RuntimeError, match="HiGHS broke"):
        extract(case.graph, None, case.cost, "ilp")


def test_one_highs_thread_chooses_as_highs_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """ilp.HIGHS_THREADS (1) gives the same choices and notes as HiGHS's default thread count (half the cores) on
    random e-graphs where HiGHS runs, cycles and cut rounds included."""
    from eqsat.extract import ilp

    rng = random.Random(11)
    ran = 0
    for nclasses, extra, count in ((6, 6, 150), (12, 25, 60), (30, 80, 20)):
        for _ in range(count):
            case = random_case(rng, nclasses, extra)
            try:
                one = extract(case.graph, None, case.cost, "ilp")
            except ExtractionError:
                continue
            if any("HiGHS not run" in note for note in one.notes):
                continue
            with monkeypatch.context() as patch:
                patch.setattr(ilp, "HIGHS_THREADS", 0)  # HiGHS's default
                default = extract(case.graph, None, case.cost, "ilp")
            assert one.dag_cost(case.cost) == pytest.approx(default.dag_cost(case.cost), rel=1e-9)
            if (os.cpu_count() or 1) <= 2:  # HiGHS's default there is 2 threads, as measured: the very same result
                assert (dict(one.choice), one.notes) == (dict(default.choice), default.notes)
            ran += 1
    assert ran > 50


def test_a_callers_own_highs_thread_count_does_not_matter() -> None:
    """HiGHS keeps a thread's first thread count (a run with another is an error): the caller's own HiGHS use with
    3 threads on this thread does not keep the ILP from running HiGHS with one."""
    import numpy as np

    from eqsat.extract import ilp

    _, h = ilp._highs()
    h.setOptionValue("threads", 3)
    h.addVars(2, np.zeros(2), np.ones(2))
    h.changeColsCost(2, np.arange(2, dtype=np.int32), np.ones(2))
    h.run()  # this thread's scheduler now has 3 threads (or the count an earlier run here gave it)
    case = _highs_case()
    assert extract(case.graph, None, case.cost, "ilp").notes == ()  # HiGHS ran and proved its optimum


def highs_case(seed: int, wanted: Callable[[tuple[str, ...]], bool]) -> Case:
    """The first random e-graph (seeded) whose ILP extraction gives notes that `wanted` accepts."""
    rng = random.Random(seed)
    while True:
        case = random_case(rng, 6, 6)
        try:
            notes = extract(case.graph, None, case.cost, "ilp").notes
        except ExtractionError:
            continue
        if wanted(notes):
            return case


def _highs_case() -> Case:
    """A small random e-graph on which the ILP runs HiGHS and proves its optimum in one round (no notes)."""
    return highs_case(5, lambda notes: not notes)
