"""What an optimization did, as data: sizes, op counts, time per phase, verification, saturation."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

from eqsat.breakdown import compute_ops

#: Op types whose counts every report and benchmark shows.
WATCHED_OPS = ("Transpose", "Cast", "QuantizeLinear", "DequantizeLinear", "BatchNormalization")


@dataclasses.dataclass
class Report:
    source: str
    ops_before: collections.Counter[str]
    ops_after: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    phases: dict[str, float] = dataclasses.field(default_factory=dict)
    saturation: Any = None  # eqsat.engine.saturate.RunReport, when the engine ran
    extraction: Any = None  # extract.ExtractionSummary, when the engine ran
    verification: Any = None  # eqsat.check.verify.VerifyReport, when verification ran
    notes: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)  # e.g. a rule dropped as unsound on this model
    breakdown: Any = None  # eqsat.breakdown.Breakdown (cost before/after per op), computed by the pipeline
    subgraphs: Any = None  # eqsat.subgraphs.BodyStats, when the model has If/Loop/Scan bodies
    ops_folded: collections.Counter[str] | None = None  # the input after constant folding (what was encoded)

    @property
    def nodes_before(self) -> int:
        return sum(self.ops_before.values())

    @property
    def nodes_after(self) -> int:
        return sum(self.ops_after.values())

    @property
    def ops_before_count(self) -> int:
        """Nodes that compute in the input (Constant nodes not counted: lifting them is not an optimization)."""
        return compute_ops(self.ops_before)

    @property
    def ops_after_count(self) -> int:
        return compute_ops(self.ops_after)

    def headline(self) -> dict[str, Any]:
        """What the run achieved: ops (Constant nodes not counted) and Constant nodes before and after, and
        the estimated cost before (the folded input) and after, with its change (None when unknown)."""
        b = self.breakdown
        return {
            "ops_before": self.ops_before_count,
            "ops_after": self.ops_after_count,
            "constants_before": self.ops_before["Constant"],
            "constants_after": self.ops_after["Constant"],
            "target": b.target if b is not None else getattr(self.extraction, "target", None),
            "cost_before": b.cost_before if b is not None else None,
            "cost_after": b.cost_after if b is not None else getattr(self.extraction, "dag_cost", None),
            "cost_change": b.cost_change if b is not None else None,
            "unit": b.unit if b is not None else ("s" if getattr(self.extraction, "target", None) else ""),
        }

    @property
    def seconds(self) -> float:
        return sum(self.phases.values())

    def watched(self, ops: collections.Counter[str]) -> dict[str, int]:
        return {
            "Transpose": ops["Transpose"],
            "Cast": ops["Cast"],
            "QDQ": ops["QuantizeLinear"] + ops["DequantizeLinear"],
            "BatchNormalization": ops["BatchNormalization"],
        }

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after,
            "headline": self.headline(),
            "ops_before": dict(sorted(self.ops_before.items())),
            "ops_after": dict(sorted(self.ops_after.items())),
            **({"ops_folded": dict(sorted(self.ops_folded.items()))} if self.ops_folded is not None else {}),
            "phases": {k: round(v, 6) for k, v in self.phases.items()},
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }
        if self.saturation is not None:
            out["saturation"] = self.saturation.to_dict()
        if self.extraction is not None:
            out["extraction"] = self.extraction.to_dict()
        if self.subgraphs is not None:
            out["subgraphs"] = self.subgraphs.to_dict()
        if self.breakdown is not None:
            out["breakdown"] = self.breakdown.to_dict()
        if self.verification is not None:
            out["verification"] = self.verification.to_dict()
        return out

    def to_text(self) -> str:
        """Tables: sizes and estimated cost before/after, run, rules fired, time per phase (eqsat.view.display)."""
        from eqsat.view.display import report_text

        return report_text(self)

    def _repr_html_(self) -> str:
        from eqsat.view.display import report_html

        return report_html(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython's text form
        p.text(self.to_text())
