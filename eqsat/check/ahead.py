"""The original's outputs computed ahead, in a thread, while the e-graph work runs.

Verification runs the original (`eqsat.check.verify.expected_outputs`) and then the optimized model. The
original's run needs only the original and the weights encoding read, so `eqsat optimize` starts it as soon
as the model is encoded and joins it when verification begins: onnxruntime releases the GIL while it creates
a session and runs it, and the thread's Python work is small, so its time overlaps saturation, extraction and
lowering instead of adding to them (rn200: about 0.2 s of a 2 s run). The outputs are those of the
sequential call, byte for byte (seeded draws, the same candidates in the same order); an exception it raised
(a `BadInputError` under `strict`) is raised where verification would have raised it.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping, Sequence

import numpy as np
import onnx

from eqsat.check.verify import Reference, expected_outputs

__all__ = ["ReferenceAhead"]


class ReferenceAhead:
    """`expected_outputs(original, ...)` in a thread started by `start`; `result()` waits for it."""

    def __init__(
        self,
        *,
        seed: int = 0,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        inputs: Mapping[str, np.ndarray] | None = None,
        strict: bool = False,
    ) -> None:
        self._kwargs: dict[str, Any] = {
            "seed": seed,
            "input_shapes": input_shapes,
            "inputs": inputs,
            "strict": strict,
        }
        self._thread: threading.Thread | None = None
        self._value: Reference | None = None
        self._error: BaseException | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(
        self, original: onnx.ModelProto, weights: Mapping[str, np.ndarray] | None = None, source: str = "<model>"
    ) -> None:
        """Compute the original's outputs in a thread (once: later calls do nothing). `weights`: arrays by
        initializer name already in memory, as `expected_outputs` takes them; `source` names the model in errors."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._run, args=(original, weights, source), name="eqsat-reference", daemon=True
        )
        self._thread.start()

    def _run(self, original: onnx.ModelProto, weights: Mapping[str, np.ndarray] | None, source: str) -> None:
        try:
            self._value = expected_outputs(original, weights=weights, source=source, **self._kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller of result()
            self._error = exc

    def result(self) -> Reference | None:
        """The original's outputs (None when never started); re-raises what the thread raised."""
        if self._thread is None:
            return None
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value

    def wait(self) -> None:
        """Wait for the thread, whatever it returns or raises (on the way out of a failed run)."""
        if self._thread is not None:
            self._thread.join()
