"""Extraction: cost models, hardware targets (targets/*.toml) and extractors, one per module.

Table of contents:
- `extract(egraph, roots, cost, extractor="ilp") -> ExtractionResult`: run a registered extractor
- `extract_speculating(egraph, roots, cost, hook, ...) -> (ExtractionResult, Speculation | None)`: the same, with
  `hook` called on the provisional choice of an extractor that solves in a worker thread (speculation.py)
- `EXTRACTORS`: the registry (CLI name -> module, what it is optimal for); `Extractor`: the protocol each
  module satisfies
- `ExtractionResult` / `ExtractionError` / `ExtractionSummary` (result.py): the one validated result type
- `CostModel`, `Target`, `roofline(target)`, `targets()`, `load_target(name)` (cost.py); the tie-break every
  target has: fewer nodes, then fewer bytes read among graphs of equal cost (ties.py)
- extractors: `tree` (tree.py), `greedy-dag` (greedy_dag.py), `ilp` (ilp.py)
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence, TypeVar, runtime_checkable

from eqsat.errors import BadInputError

if TYPE_CHECKING:
    from eqsat.engine.egraph import EGraph
    from eqsat.extract.cost import CostModel, Roofline, Target, TargetError, load_target, roofline, targets
    from eqsat.extract.result import ExtractionError, ExtractionResult, ExtractionSummary
    from eqsat.extract.speculation import Speculation

__all__ = [
    "EXTRACTORS",
    "CostModel",
    "ExtractionError",
    "ExtractionResult",
    "ExtractionSummary",
    "Extractor",
    "ExtractorInfo",
    "Roofline",
    "Target",
    "TargetError",
    "extract",
    "extract_speculating",
    "load_target",
    "roofline",
    "targets",
]

#: Names re-exported from cost.py and result.py, loaded on first use: the registry below is all the CLI
#: needs to build its parser (cost.py and result.py import onnx_ir through eqsat.engine.egraph).
_LAZY = {
    **dict.fromkeys(
        ("CostModel", "Roofline", "Target", "TargetError", "load_target", "roofline", "targets"), "eqsat.extract.cost"
    ),
    **dict.fromkeys(("ExtractionError", "ExtractionResult", "ExtractionSummary"), "eqsat.extract.result"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'eqsat.extract' has no attribute {name!r}")


@runtime_checkable
class Extractor(Protocol):
    """What an extractor module provides: `extract(egraph, roots, cost, **options) -> ExtractionResult`,
    one term DAG for `roots` whose every choice is an e-node of its class (`ExtractionResult.check()`).
    Options are keyword-only (ilp's `time_limit`); one registered with `speculates` also takes `speculate`, a hook
    it calls at most once, on the calling thread, with its provisional choice (restricted to the classes the roots
    reach) while it solves in a worker thread (speculation.py)."""

    def extract(self, egraph: "EGraph", roots: Sequence[int], cost: "CostModel", /) -> "ExtractionResult": ...


@dataclasses.dataclass(frozen=True)
class ExtractorInfo:
    """A registered extractor: its CLI name, module and what it is optimal for."""

    name: str
    module: str
    optimal_for: str
    summary: str
    speculates: bool = False  # takes `speculate` (see Extractor)

    def load(self) -> Extractor:
        module = importlib.import_module(self.module)
        if not isinstance(module, Extractor):
            raise TypeError(f"extractor {self.name!r}: {self.module} has no extract(egraph, roots, cost)")
        return module


EXTRACTORS: Mapping[str, ExtractorInfo] = {
    info.name: info
    for info in (
        ExtractorInfo(
            "tree",
            "eqsat.extract.tree",
            "tree cost",
            "bottom-up least tree cost (Knuth/Dijkstra); over-counts shared sub-terms",
        ),
        ExtractorInfo(
            "greedy-dag",
            "eqsat.extract.greedy_dag",
            "none",
            "union-cost greedy + refinement; DAG cost never above tree's",
        ),
        ExtractorInfo(
            "ilp",
            "eqsat.extract.ilp",
            "DAG cost (exact with cycle cuts; within an acyclic pre-filter if they do not converge, as notes say)",
            "0-1 program with HiGHS, lazy cycle cuts, time limit (default 10 s)",
            speculates=True,
        ),
    )
}


#: `auto` runs the exact ILP up to this many e-nodes and greedy-dag above (HiGHS took 3.6 s at 67k).
AUTO_ILP_MAX_ENODES = 30_000


def extract(
    egraph: "EGraph",
    roots: Sequence[int] | None,
    cost: "CostModel | Target | str",
    extractor: str = "auto",
    *,
    speculate: Callable[[dict[int, int]], object] | None = None,
    **options: Any,
) -> "ExtractionResult":
    """Extract one term DAG for `roots` (default: `egraph.roots`) under `cost` (a cost model, a Target or
    a target name) with the named extractor; `options` go to the extractor (e.g. `time_limit` for ilp), and
    `speculate` to one that `speculates` (the others never call it).

    `auto` is the ILP for e-graphs up to AUTO_ILP_MAX_ENODES e-nodes and greedy-dag above (noted)."""
    if extractor == "auto":
        if egraph.num_nodes <= AUTO_ILP_MAX_ENODES:
            extractor = "ilp"
        else:
            result = extract(egraph, roots, cost, "greedy-dag", **options)  # greedy-dag never speculates
            note = f"auto: greedy-dag, as the e-graph has {egraph.num_nodes} > {AUTO_ILP_MAX_ENODES} e-nodes"
            return dataclasses.replace(result, notes=(*result.notes, note))
    info = EXTRACTORS.get(extractor.replace("_", "-"))
    if info is None:
        raise BadInputError(f"extractor {extractor!r}", f"unknown extractor; available: {', '.join(EXTRACTORS)}")
    from eqsat.extract.cost import Target, roofline

    model: CostModel = roofline(cost) if isinstance(cost, (Target, str)) else cost
    if speculate is not None and info.speculates:
        options["speculate"] = speculate
    return info.load().extract(egraph, egraph.roots if roots is None else roots, model, **options)


T = TypeVar("T")


def extract_speculating(
    egraph: "EGraph",
    roots: Sequence[int] | None,
    cost: "CostModel | Target | str",
    hook: Callable[[dict[int, int]], T],
    extractor: str = "auto",
    **options: Any,
) -> tuple["ExtractionResult", "Speculation[T] | None"]:
    """`extract`, with `hook` called on this thread with the extractor's provisional choice while it solves (ilp:
    the greedy-dag choice while HiGHS runs); the result is the one `extract` returns. Also what `hook` made of
    that choice (`Speculation.matches(result)`: whether it is the result's choice), or None if it was not called
    (an extractor that does not speculate, or had nothing to solve). An `Exception` from `hook` is recorded in
    the Speculation, never raised. The result's `seconds` leave out the hook's: the time the caller waited for the
    extractor beyond it."""
    from eqsat.extract.speculation import Recorder

    record = Recorder(egraph, hook)
    result = extract(egraph, roots, cost, extractor, speculate=record, **options)
    if record.speculation is None:
        return result, None
    return dataclasses.replace(
        result, seconds=max(0.0, result.seconds - record.speculation.seconds)
    ), record.speculation
