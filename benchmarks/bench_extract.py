"""Extraction benchmark: synthetic saturated-looking e-graphs of ~1k / 5k / 20k e-nodes, every extractor,
time and DAG cost under the cpu roofline model, printed as a markdown table.

    python -m benchmarks.bench_extract [--sizes 1000 5000 20000] [--target cpu] [--repeat 3]

The e-graph is built directly as an `EGraph` (no egglog): a chain of blocks
`x -> Transpose(NHWC) -> Relu -> Transpose(NCHW) -> Mul(s) -> Add(b) -> Conv` with the alternatives and
cycles equality saturation produces (transpose pairs cancelled: x = T(T(x)); relu sunk through the
transposes; commuted Mul/Add; the scale folded into the conv weights; x = Mul(x, 1) self-loops) and a
residual Add every 4 blocks whose skip path is either a 3x3 Conv or a cheap Mul of a class the main path
already computes (a sharing trap for tree-cost extraction). Budgets (DESIGN.md): 5k e-nodes greedy <= 100
ms, ILP <= 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Sequence

from eqsat.engine.egraph import EClass, EGraph, ENode
from eqsat.extract import EXTRACTORS, extract, roofline

NCHW = (1, 16, 32, 32)
NHWC = (1, 32, 32, 16)


class Builder:
    """Accumulates e-nodes into e-classes; class facts are given when a class is created."""

    def __init__(self) -> None:
        self.nodes: list[ENode] = []
        self.members: list[list[int]] = []
        self.facts: list[tuple[tuple[int, ...] | None, str | None, bool]] = []

    def new_class(
        self, shape: tuple[int, ...] | None = NCHW, dtype: str | None = "FLOAT", constant: bool = False
    ) -> int:
        self.members.append([])
        self.facts.append((shape, dtype, constant))
        return len(self.members) - 1

    def add(self, cid: int, op: str, children: Sequence[int] = (), attrs: tuple = ()) -> int:
        self.nodes.append(ENode(len(self.nodes), op, cid, tuple(children), attrs))
        self.members[cid].append(self.nodes[-1].id)
        return cid

    def node(self, op: str, children: Sequence[int] = (), attrs: tuple = (), **facts) -> int:
        return self.add(self.new_class(**facts), op, children, attrs)

    def build(self, roots: Sequence[int]) -> EGraph:
        classes = tuple(EClass(i, "T", tuple(m), *self.facts[i]) for i, m in enumerate(self.members))
        return EGraph(tuple(self.nodes), classes, tuple(roots))


def synthetic(blocks: int, residual_every: int = 4) -> EGraph:
    """The benchmark e-graph with `blocks` blocks (about 24 e-nodes per block)."""
    b = Builder()
    x = b.node("Input", attrs=("x",))
    one = b.node("Scalar", attrs=(1.0, "FLOAT", ()), shape=(), constant=True)
    outputs: list[int] = []
    relus: list[int] = []
    for k in range(blocks):

        def c(key: str, shape: tuple[int, ...], k: int = k) -> int:
            return b.node("Const", attrs=(f"{key}{k}",), shape=shape, constant=True)

        s, bias, w, cb = c("s", ()), c("b", ()), c("w", (16, 16, 3, 3)), c("cb", (16,))
        b.add(x, "Mul", (x, one))  # x = x * 1 (self-loop)
        t1 = b.node("Transpose", (x,), ((0, 2, 3, 1),), shape=NHWC)
        b.add(x, "Transpose", (t1,), ((0, 3, 1, 2),))  # x = T(T(x)) (2-cycle)
        r = b.node("Relu", (t1,), shape=NHWC)
        t2 = b.node("Transpose", (r,), ((0, 3, 1, 2),))
        b.add(t2, "Relu", (x,))  # relu sunk: T(relu(T(x))) = relu(x)
        b.add(r, "Transpose", (t2,), ((0, 2, 3, 1),))  # relu(T(x)) = T(relu(x)) (2-cycle)
        m = b.node("Mul", (t2, s))
        b.add(m, "Mul", (s, t2))
        a = b.node("Add", (m, bias))
        b.add(a, "Add", (bias, m))
        ws = b.node("Mul", (w, s), shape=(16, 16, 3, 3), constant=True)
        bs = b.node("Div", (bias, s), shape=(), constant=True)
        a2 = b.node("Add", (t2, bs))
        b.add(a2, "Add", (bs, t2))
        y = b.node("Conv", (a, w, cb), ((1, 1), (1, 1, 1, 1), 1))
        b.add(y, "Conv", (a2, ws, cb), ((1, 1), (1, 1, 1, 1), 1))  # scale folded into the weights
        relus.append(t2)
        outputs.append(y)
        if k >= residual_every and k % residual_every == 0:
            skip, via = outputs[k - residual_every], relus[k - residual_every + 1]
            wj = b.node("Const", attrs=(f"wj{k}",), shape=(16, 16, 3, 3), constant=True)
            absent = b.node("Absent", shape=None, dtype=None, constant=True)
            j = b.node("Conv", (skip, wj, absent), ((1, 1), (1, 1, 1, 1), 1))
            b.add(j, "Mul", (via, s))  # the trap: cheap if `via` is paid
            z = b.node("Add", (y, j))
            b.add(z, "Add", (j, y))
            y = z
        x = y
    return b.build([x])


def blocks_for(enodes: int) -> int:
    per_block = synthetic(40).num_nodes / 40
    return max(1, round(enodes / per_block))


def run(sizes: Sequence[int], target: str, repeat: int, time_limit: float) -> str:
    cost = roofline(target)
    rows = [
        "| e-nodes | e-classes | extractor | time (ms, median) | DAG cost (us) | tree cost (us) | chosen | notes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size in sizes:
        graph = synthetic(blocks_for(size))
        for name in EXTRACTORS:
            options = {"time_limit": time_limit} if name == "ilp" else {}
            times, result = [], None
            for _ in range(repeat):
                cost = roofline(target)  # a fresh model: per-graph facts are recomputed every run
                start = time.perf_counter()
                result = extract(graph, graph.roots, cost, name, **options)
                times.append(time.perf_counter() - start)
            assert result is not None
            result.check()
            notes = "; ".join(result.notes)
            rows.append(
                f"| {graph.num_nodes} | {len(graph.classes)} | {name} | "
                f"{statistics.median(times) * 1000:.1f} | {result.dag_cost(cost) * 1e6:.1f} | "
                f"{result.tree_cost(cost) * 1e6:.4g} | {len(result.choice)} | {notes} |"
            )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=10.0)
    args = parser.parse_args(argv)
    print(run(args.sizes, args.target, args.repeat, args.time_limit))


if __name__ == "__main__":
    main()
