"""Extraction: cost models, hardware targets (targets/*.toml) and extractors, one per module.

Table of contents:
- `extract(egraph, roots, cost, extractor="ilp") -> ExtractionResult`: run a registered extractor
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
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence, runtime_checkable

from eqsat.errors import BadInputError

if TYPE_CHECKING:
    from eqsat.engine.egraph import EGraph
    from eqsat.extract.cost import CostModel, Roofline, Target, TargetError, load_target, roofline, targets
    from eqsat.extract.result import ExtractionError, ExtractionResult, ExtractionSummary

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
    Options are keyword-only (ilp's `time_limit`)."""

    def extract(self, egraph: "EGraph", roots: Sequence[int], cost: "CostModel", /) -> "ExtractionResult": ...


@dataclasses.dataclass(frozen=True)
class ExtractorInfo:
    """A registered extractor: its CLI name, module and what it is optimal for."""

    name: str
    module: str
    optimal_for: str
    summary: str

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
    **options: Any,
) -> "ExtractionResult":
    """Extract one term DAG for `roots` (default: `egraph.roots`) under `cost` (a cost model, a Target or
    a target name) with the named extractor; `options` go to the extractor (e.g. `time_limit` for ilp).

    `auto` is the ILP for e-graphs up to AUTO_ILP_MAX_ENODES e-nodes and greedy-dag above (noted)."""
    if extractor == "auto":
        if egraph.num_nodes <= AUTO_ILP_MAX_ENODES:
            extractor = "ilp"
        else:
            result = extract(egraph, roots, cost, "greedy-dag", **options)
            note = f"auto: greedy-dag, as the e-graph has {egraph.num_nodes} > {AUTO_ILP_MAX_ENODES} e-nodes"
            return dataclasses.replace(result, notes=(*result.notes, note))
    info = EXTRACTORS.get(extractor.replace("_", "-"))
    if info is None:
        raise BadInputError(f"extractor {extractor!r}", f"unknown extractor; available: {', '.join(EXTRACTORS)}")
    from eqsat.extract.cost import Target, roofline

    model: CostModel = roofline(cost) if isinstance(cost, (Target, str)) else cost
    return info.load().extract(egraph, egraph.roots if roots is None else roots, model, **options)
