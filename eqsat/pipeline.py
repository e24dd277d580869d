"""The whole pipeline behind `eqsat optimize`: load, fold, saturate, extract, lower, verify, save."""

from __future__ import annotations

import dataclasses
import os
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import onnx_ir as ir

from eqsat import io
from eqsat.errors import VerificationError
from eqsat.report import Report


@dataclasses.dataclass
class Result:
    """The optimized model, the report of how it was obtained, and the extraction behind it."""

    model: ir.Model
    report: Report
    extraction: Any = None  # extract.result.ExtractionResult

    def save(self, path: str | os.PathLike) -> None:
        io.save(self.model, path)


@contextmanager
def timed(report: Report, name: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        report.phases[name] = report.phases.get(name, 0.0) + time.perf_counter() - start


def optimize(model: io.ModelSource, *, target: str = "cpu", extractor: str = "auto",
             cost: Callable | None = None, time_limit: float | None = None, node_limit: int | None = None,
             iter_limit: int | None = None, allow: Sequence[str] = (), disable: Sequence[str] = (),
             opset: int | None = None, verify: bool = True, output: str | os.PathLike | None = None) -> Result:
    """Optimize `model` (a path, ModelProto or ir.Model) for `target` and return the result.

    With `verify` (the default) both models run on seeded inputs and a difference beyond tolerance raises
    `VerificationError` before anything is written. With `output`, the result is saved atomically.
    """
    from eqsat.saturate import Limits
    from eqsat.session import saturate

    defaults = Limits()
    limits = Limits(iterations=defaults.iterations if iter_limit is None else iter_limit,
                    nodes=defaults.nodes if node_limit is None else node_limit, seconds=time_limit)
    source = str(model) if isinstance(model, (str, os.PathLike)) else "<model>"
    session = saturate(model, limits=limits, allow=allow, disable=disable, opset=opset, source=source)
    result = session.extract(target, cost=cost, extractor=extractor, verify=verify)
    report = result.report
    if verify and not report.verification.ok:
        err = VerificationError(f"{source}: {report.verification.summary()}; output not written")
        err.report = report  # type: ignore[attr-defined]
        raise err
    if output is not None:
        with timed(report, "save"):
            result.save(output)
    return result
