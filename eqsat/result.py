"""What an optimization returns (`Result`), and `timed`, which adds a phase's time to a report.

Built by `eqsat.session.Session.extract`; returned by `eqsat.optimize` (eqsat.pipeline) and by each probe
of `eqsat.bisect`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np
import onnx
import onnx_ir as ir

from eqsat import run_warnings
from eqsat.errors import VerificationError
from eqsat.frontend import interface, io, weights
from eqsat.report import Report


@dataclasses.dataclass
class Result:
    """The optimized model, the report of how it was obtained, and the extraction behind it.

    The model is built as a protobuf (`built`, what is verified and saved), its large float weights held aside
    as arrays (`held`) behind placeholders until the whole proto is asked for (`proto`): verifying and saving
    read the arrays, so the command never holds a protobuf copy of the output's weights. `model`, its onnx_ir
    form, is made on first use (20k nodes: 0.6 s that the CLI never pays).
    """

    built: onnx.ModelProto
    report: Report
    extraction: Any = None  # eqsat.extract.result.ExtractionResult
    session: Any = dataclasses.field(default=None, repr=False)  # eqsat.session.Session it came from
    cost_model: Any = dataclasses.field(default=None, repr=False)  # the cost model the extraction used
    bisection: Any = dataclasses.field(default=None, repr=False)  # eqsat.bisect.Bisection, when a rule was dropped
    pending_verification: bool = False  # a re-extraction not checked yet: verify() or save() checks it
    held: dict[str, np.ndarray] = dataclasses.field(default_factory=dict, repr=False)  # by placeholder name

    @property
    def proto(self) -> onnx.ModelProto:
        """The optimized model, every weight in it (the held ones written in on first use)."""
        if self.held:
            weights.fill(self.built, self.held)
            self.held = {}
        return self.built

    @property
    def verified(self) -> bool:
        """Whether verification ran and compared outputs (False when it was off or no input ran the original)."""
        return self.report.verification is not None and self.report.verification.verified

    @property
    def warnings(self) -> list[str]:
        """The report's warnings: a rule dropped as unsound on this model, a model that was not verified."""
        return self.report.warnings

    @functools.cached_property
    def model(self) -> ir.Model:
        return io.from_proto(self.proto)

    def verify(self, *, input_shapes: Any = None, inputs: Any = None, strict: bool | None = None) -> Any:
        """Check the model against the session's original (eqsat.check.verify, under the session's options
        unless given) and record it in the report (`report.verification`, the warnings); return the
        VerifyReport. A result whose outputs differ is not raised here: `save()` refuses it."""
        from eqsat.check.verify import verify as run_verify

        if self.session is None:
            raise ValueError("this Result carries no Session: nothing to verify it against")
        options = self.session.options
        with timed(self.report, "verify"):
            self.report.verification = run_verify(
                self.session.original,
                self.built,
                soundness=self.session.soundness,
                source=self.session.source,
                input_shapes=options.input_shapes if input_shapes is None else input_shapes,
                inputs=options.inputs if inputs is None else inputs,
                strict=options.strict if strict is None else strict,
                weights=self.held,
            )
        run_warnings.replace_verification(self.report.warnings, self.report.verification)
        self.pending_verification = False
        return self.report.verification

    def save(self, path: str | os.PathLike) -> None:
        """Write the model atomically, once it passes the full checker and keeps the input's interface.
        A re-extraction not verified yet (`pending_verification`) is verified first; a result whose verification
        failed (then, or in an earlier `verify()`) raises VerificationError (nothing written)."""
        if self.pending_verification and self.session is not None:
            self.verify()
        checked = self.report.verification
        if checked is not None and not checked.ok:
            source = self.session.source if self.session is not None else "<model>"
            raise VerificationError(f"{source}: {checked.summary()}; output not written")
        original = self.session.original if self.session is not None else None
        if original is not None:
            interface.check(self.built, original, self.session.source)
        io.save(self.built, path, original, self.held)

    def _repr_html_(self) -> str:
        from eqsat.view.display import result_html

        return result_html(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython's text form: the report, not the model
        from eqsat.view.display import result_text

        p.text(result_text(self))


@contextmanager
def timed(report: Report, name: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        report.phases[name] = report.phases.get(name, 0.0) + time.perf_counter() - start
