"""Saturate once, extract many times: the e-graph engine behind `eqsat.optimize` and notebooks.

    s = eqsat.saturate("model.onnx")          # load, fold, encode, saturate, decode
    s.extract(target="npu")                    # re-extract in milliseconds: a new Result each time
    s.extract(cost=my_cost_fn, extractor="greedy-dag")
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Sequence

import onnx
import onnx_ir as ir

from eqsat import io
from eqsat.backend import Backend
from eqsat.egraph import EGraph, decode
from eqsat.encode import Encoding, encode
from eqsat.report import Report
from eqsat.rule import SOUNDNESS, Rule
from eqsat.saturate import Limits, RunReport, install_rules, run
from eqsat import terms


@dataclasses.dataclass
class Session:
    """A saturated e-graph and everything needed to lower any extraction of it."""

    source: str
    original: onnx.ModelProto          # the input as loaded
    normalized: onnx.ModelProto        # after folding: what was encoded
    encoding: Encoding
    egraph: EGraph
    saturation: RunReport
    rules: tuple[Rule, ...]
    phases: dict[str, float]

    @property
    def roots(self) -> tuple[int, ...]:
        return tuple(self.egraph.refs[r] for r in self.encoding.outputs)

    @property
    def soundness(self) -> str:
        """The least exact soundness class among the rules that fired."""
        fired = self.saturation.rules_fired
        classes = {r.soundness for r in self.rules if r.name in fired}
        return max(classes, key=SOUNDNESS.index, default="exact")

    def extract(self, target: str = "cpu", *, cost: Callable | None = None, extractor: str = "auto",
                verify: bool = False) -> "Result":
        """Extract and lower the best graph for `target` (or for a custom `cost(egraph, node)`)."""
        from eqsat.lower import lower
        from eqsat.pipeline import Result, timed
        from extract import extract as run_extractor
        from extract.cost import load_target, roofline

        report = Report(self.source, io.proto_op_histogram(self.original))
        report.phases.update(self.phases)
        report.saturation = self.saturation
        with timed(report, "extract"):
            cost_model = cost if cost is not None else roofline(load_target(target))
            result = run_extractor(self.egraph, self.roots, cost_model, extractor=extractor)
            result.check()
        report.extraction = result.summary(cost_model, target if cost is None else None)
        with timed(report, "lower"):
            model = lower(self.egraph, result.choice, self.encoding, self.normalized)
        report.ops_after = io.op_histogram(model)
        if verify:
            from eqsat.verify import verify as run_verify

            with timed(report, "verify"):
                report.verification = run_verify(self.original, model, soundness=self.soundness, source=self.source)
        return Result(model, report, result)


def saturate(model: io.ModelSource, *, limits: Limits = Limits(), allow: Sequence[str] = (),
             disable: Sequence[str] = (), rules: Sequence[Rule] | None = None, opset: int | None = None,
             source: str | None = None) -> Session:
    """Load, normalize, encode and saturate `model`; the returned Session extracts on demand.

    `rules` replaces the registered rules (for experiments); otherwise `allow`/`disable` select them.
    `opset` upgrades the model first (onnx.version_converter) so that newer fused ops become available.
    """
    from rewrites.registry import select

    phases: dict[str, float] = {}
    label = source or (str(model) if isinstance(model, (str,)) or hasattr(model, "__fspath__") else "<model>")
    start = time.perf_counter()
    original, _ = io.load_proto(model, name=label)
    upgraded = io.upgrade_opset(original, opset, label) if opset is not None else original
    phases["load"] = time.perf_counter() - start
    start = time.perf_counter()
    work, normalized = io.normalize_proto(upgraded, label)
    phases["fold"] = time.perf_counter() - start
    rules = tuple(rules) if rules is not None else select(allow, disable)
    start = time.perf_counter()
    encoding = encode(work)
    backend = Backend()
    backend.run(terms.declarations())
    backend.load(terms.static_facts(encoding.perms, encoding.opset))
    backend.load(encoding.actions)
    install_rules(backend, rules)  # after the data: loading with rules present is ~5x slower
    phases["encode"] = time.perf_counter() - start
    start = time.perf_counter()
    report = run(backend, limits)
    phases["saturate"] = time.perf_counter() - start
    start = time.perf_counter()
    try:
        egraph = decode(backend.serialize())
    except BaseException as exc:  # the e-graph is unusable after a panic: extract the input as it was
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        backend = Backend()
        backend.run(terms.declarations())
        backend.load(encoding.actions)
        egraph = decode(backend.serialize())
        report.error = f"{report.error or type(exc).__name__}; fell back to the input graph"
    report.eclasses = sum(1 for c in egraph.classes if c.sort == "T")
    phases["decode"] = time.perf_counter() - start
    return Session(label, original, normalized, encoding, egraph, report, rules, phases)
