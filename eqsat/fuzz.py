"""Differential fuzzing: random graphs (`eqsat.testing.onnx_graphs`) optimized and checked numerically.

    from eqsat.fuzz import fuzz
    report = fuzz(examples=1000, seed=7)          # python -m benchmarks.fuzz --examples 1000 --seed 7
    print(report.to_text())

The property (`check_case`) is stronger than `eqsat optimize`'s verification: every e-node of the
saturated e-graph (up to EGRAPH_CHECK_MAX_ENODES e-nodes) is evaluated on the drawn inputs and must agree
with its class (so an unsound rewrite is caught even when the extractor does not choose it); then each
extractor's result is validated, costed (the exact ILP, when it proves optimality, is never worse than
the others), lowered to a model that passes the full ONNX checker with no initializer left unread, and
run against the original within the tolerance of the least exact rule that fired, at every size the case
gives its dynamic dims (two, neither 1: `GraphCase.more_feeds`; the e-nodes are evaluated at the first).

Examples run in chunks, each a hypothesis run with its own seed (`seed`, `seed + 1`, ...): a failure is
shrunk, printed with its seed and graph, saved, and the next chunk goes on, so one long run counts every
unsound result rather than stopping at the first. Chunks whose seed is 3 mod 4 also admit
precision-changing rules. A chunk replays alone with `fuzz(examples=chunk, seed=<its seed>)`.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import onnx

#: Graph steps per drawn graph (eqsat.testing.onnx_graphs max_nodes).
MAX_NODES = 10
#: Examples per hypothesis run (one seed each).
CHUNK = 250
#: Largest e-graph (e-nodes) whose every e-node is evaluated; beyond, only the extracted models are run
#: (one onnxruntime session per e-node: a rule set that explodes would take minutes per example).
EGRAPH_CHECK_MAX_ENODES = 3000


@dataclasses.dataclass(frozen=True)
class Checked:
    """What `check_case` saw on a sound example."""

    fired: dict[str, int]  # rule -> matches
    stop_reason: str  # saturated, iteration-limit, node-limit, ...
    enodes: int
    egraph_checked: bool  # every e-node evaluated (the e-graph was small enough)


@dataclasses.dataclass
class Failure:
    """One unsound (or crashing) example, after shrinking."""

    seed: int  # the chunk's seed: fuzz(examples=chunk, seed=seed) replays it
    allow: tuple[str, ...]
    error: str  # what the property said
    case: str  # the failing graph (onnx text) and its inputs
    saved: str | None = None  # the failing model (.onnx) and its inputs (.npz), when saved

    def to_text(self) -> str:
        lines = [f"FAILURE (seed {self.seed}, allow {list(self.allow)}): {self.error}", self.case]
        if self.saved:
            lines.append(f"saved: {self.saved}(.onnx, .npz)")
        return "\n".join(lines)


@dataclasses.dataclass
class FuzzReport:
    examples: int = 0
    seeds: list[int] = dataclasses.field(default_factory=list)
    failures: list[Failure] = dataclasses.field(default_factory=list)
    rules_fired: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # examples per rule
    ops: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # nodes per op type
    stops: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # examples per stop reason
    largest: tuple[int, int, int] = (0, 0, 0)  # (e-nodes, seed, example index) of the largest e-graph
    unchecked_egraphs: int = 0  # e-graphs too large to evaluate e-node by e-node
    seconds: float = 0.0

    def merge(self, other: "FuzzReport") -> None:
        self.examples += other.examples
        self.seeds += other.seeds
        self.failures += other.failures
        self.rules_fired.update(other.rules_fired)
        self.ops.update(other.ops)
        self.stops.update(other.stops)
        self.largest = max(self.largest, other.largest)
        self.unchecked_egraphs += other.unchecked_egraphs
        self.seconds += other.seconds

    def to_text(self) -> str:
        seeds = f"{min(self.seeds)}..{max(self.seeds)}" if self.seeds else "none"
        lines = [
            f"fuzz: {self.examples} examples, seeds {seeds} ({len(self.seeds)} chunks), "
            f"{len(self.failures)} failures, {self.seconds:.0f} s of checking"
        ]
        if self.stops:
            lines.append(
                "saturation stopped: "
                + ", ".join(f"{k} {v}" for k, v in self.stops.most_common())
                + f"; largest e-graph {self.largest[0]} e-nodes (seed {self.largest[1]}, example "
                f"{self.largest[2]}); {self.unchecked_egraphs} e-graphs above {EGRAPH_CHECK_MAX_ENODES} "
                "e-nodes checked through their extractions only"
            )
        if self.rules_fired:
            lines.append(
                f"rules fired ({len(self.rules_fired)}), examples each: "
                + ", ".join(f"{k} {v}" for k, v in self.rules_fired.most_common())
            )
        if self.ops:
            lines.append("ops drawn, nodes each: " + ", ".join(f"{k} {v}" for k, v in self.ops.most_common()))
        for f in self.failures:
            lines.append(f.to_text())
        return "\n".join(lines)


def check_case(
    case: Any,
    *,
    extractors: Sequence[str] = ("ilp", "greedy-dag", "tree"),
    target: str = "cpu",
    egraph_check_max_enodes: int = EGRAPH_CHECK_MAX_ENODES,
) -> Checked:
    """The fuzz property on a `GraphCase`; returns what it saw (rules fired, how saturation stopped).

    Raises AssertionError naming the problem: saturation failed inside egglog, an e-class whose e-nodes
    disagree (checked when the e-graph has at most `egraph_check_max_enodes` e-nodes), an invalid
    extraction or lowered model (checker, outputs, initializers nothing reads), an output that differs,
    or an ILP result costlier than another extractor's although proven optimal.
    """
    from eqsat.session import saturate
    from eqsat.testing import assert_egraph_sound, run
    from eqsat.check.verify import compare

    proto = case.model
    session = saturate(proto, allow=case.allow)
    fired = session.saturation.rules_fired
    if session.saturation.error:
        raise AssertionError(f"egglog failed during saturation: {session.saturation.error}; rules fired: {fired}")
    enodes = len(session.egraph.nodes)
    if enodes <= egraph_check_max_enodes:
        assert_egraph_sound(session, case.feeds)
    sizes = [dict(f) for f in case.all_feeds()]
    expected = []
    for feeds in sizes:
        try:
            expected.append(run(proto, feeds))
        except Exception as exc:  # noqa: BLE001 - the drawn graph, not eqsat
            raise AssertionError(
                f"the original does not run at {_shapes(feeds)} (a bug of the strategy): {exc}"
            ) from exc
    names = [o.name for o in proto.graph.output]
    costs: dict[str, tuple[float, tuple[str, ...]]] = {}
    for name in extractors:
        result = session.extract(target, extractor=name, breakdown=False)  # it validates itself (check())
        optimized = result.proto  # what `save` writes
        try:
            onnx.checker.check_model(optimized, full_check=True)
        except Exception as exc:
            raise AssertionError(
                f"{name}: the optimized model fails the ONNX checker: {exc}; rules fired: {fired}"
            ) from exc
        dead = _dead_initializers(optimized)
        if dead:
            raise AssertionError(f"{name}: initializers nothing reads in the output: {dead[:5]}; rules fired: {fired}")
        if [o.name for o in optimized.graph.output] != names:
            raise AssertionError(f"{name}: outputs {[o.name for o in optimized.graph.output]} != {names}")
        for feeds, want in zip(sizes, expected):  # every size of the dynamic dims
            try:
                actual = run(optimized, feeds)
            except Exception as exc:  # noqa: BLE001 - the original ran on these inputs
                raise AssertionError(
                    f"{name}: the optimized model fails at {_shapes(feeds)} where the original "
                    f"runs: {exc}; rules fired: {fired}\noptimized:\n"
                    f"{onnx.printer.to_text(optimized.graph)}"
                ) from exc
            for check in compare(names, want, actual, session.soundness):
                if not check.ok:
                    raise AssertionError(
                        f"{name}: output {check.name!r} differs at {_shapes(feeds)}: {check.problem} "
                        f"max |diff| {check.max_abs_diff:.3g} > allowed {check.allowed:.3g} "
                        f"{check.where}; rules fired: {fired}\noptimized:\n"
                        f"{onnx.printer.to_text(optimized.graph)}"
                    )
        summary = result.report.extraction
        costs[name] = (summary.dag_cost, tuple(summary.notes))
    if "ilp" in costs and not costs["ilp"][1]:
        best = min(c for c, _ in costs.values())
        if costs["ilp"][0] > best * (1 + 1e-6) + 1e-15:
            raise AssertionError(
                f"ilp (proven optimal) DAG cost {costs['ilp'][0]:.6g} is above another "
                f"extractor's: { {k: v[0] for k, v in costs.items()} }"
            )
    return Checked(fired, session.saturation.stop_reason, enodes, enodes <= egraph_check_max_enodes)


def _shapes(feeds: dict[str, np.ndarray]) -> str:
    return ", ".join(f"{k}{list(v.shape)}" for k, v in feeds.items())


def _dead_initializers(model: onnx.ModelProto) -> list[str]:
    from eqsat.frontend.io import outer_values

    used = {o.name for o in model.graph.output}
    for n in model.graph.node:
        used.update(n.input)
        used |= outer_values(n)
    return [t.name for t in model.graph.initializer if t.name not in used]


def _chunk(
    seed: int, examples: int, max_nodes: int, families: Sequence[str] | None, shrink: bool, save_dir: str | None
) -> FuzzReport:
    """One hypothesis run of `examples` graphs with `seed` (runs in a worker process with --jobs)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis.reporting import with_reporter

    from eqsat.testing import GRAPH_FAMILIES, onnx_graphs

    allow = ("precision-changing",) if seed % 4 == 3 else ()
    report = FuzzReport(seeds=[seed])
    state: dict[str, Any] = {"failed": False, "last": None}
    phases = [p for p in Phase if shrink or p not in (Phase.shrink, Phase.explain)]

    @hypothesis_seed(seed)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=phases,
        print_blob=False,
        report_multiple_bugs=False,
    )
    @given(onnx_graphs(max_nodes, families=families or GRAPH_FAMILIES, allow=allow))
    def prop(case: Any) -> None:
        counting = not state["failed"]
        if counting:
            report.examples += 1
            report.ops.update(n.op_type for n in case.model.graph.node)
        try:
            checked = check_case(case)
        except BaseException:
            state["failed"], state["last"] = True, case
            raise
        if counting:
            report.rules_fired.update(checked.fired.keys())
            report.stops[checked.stop_reason] += 1
            report.largest = max(report.largest, (checked.enodes, seed, report.examples))
            report.unchecked_egraphs += not checked.egraph_checked

    start = time.perf_counter()
    lines: list[str] = []
    try:
        with with_reporter(lambda text: lines.append(str(text))):
            prop()
    except Exception as exc:
        case = state["last"]
        error = f"{type(exc).__name__}: {exc}".strip()
        saved = _save(case, Path(save_dir), seed) if case is not None and save_dir else None
        report.failures.append(Failure(seed, allow, error, repr(case) if case is not None else "\n".join(lines), saved))
    report.seconds = time.perf_counter() - start
    return report


def _save(case: Any, folder: Path, seed: int) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"fuzz-seed{seed}"
    onnx.save(case.model, str(stem) + ".onnx")
    arrays: dict[str, Any] = {k: np.asarray(v) for k, v in case.feeds.items()}
    np.savez(str(stem) + ".npz", **arrays)
    return str(stem)


def fuzz(
    examples: int,
    seed: int = 0,
    *,
    chunk: int = CHUNK,
    max_nodes: int = MAX_NODES,
    families: Sequence[str] | None = None,
    jobs: int = 1,
    shrink: bool = True,
    save_dir: str | None = None,
    progress: Callable[[FuzzReport, FuzzReport], None] | None = None,
) -> FuzzReport:
    """Check `examples` random graphs in chunks of `chunk` (seeds `seed`, `seed + 1`, ...), on `jobs`
    processes; failures are shrunk (unless not `shrink`) and saved to `save_dir`. `progress(total,
    chunk_report)` is called after each chunk."""
    sizes = [min(chunk, examples - k) for k in range(0, examples, chunk)]
    total = FuzzReport()
    args = [
        (seed + i, n, max_nodes, tuple(families) if families else None, shrink, save_dir) for i, n in enumerate(sizes)
    ]
    if jobs <= 1:
        for a in args:
            part = _chunk(*a)
            total.merge(part)
            if progress is not None:
                progress(total, part)
        return total
    from concurrent.futures import ProcessPoolExecutor

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for part in pool.map(_chunk, *zip(*args)):
            total.merge(part)
            if progress is not None:
                progress(total, part)
    total.seeds.sort()
    return total
