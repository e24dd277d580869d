"""The original's outputs computed ahead, in a thread, while the e-graph work runs.

Verification runs the original (`eqsat.check.verify.expected_outputs`) and then the optimized model. The
original's runs need only the original and the weights loading read, so `eqsat optimize` starts them as soon as
the model is loaded (before the rules are installed) and joins them when verification begins.

`start` first plans the runs where it is called: the search for assignments, its draws and shape inferences
(onnx holds the GIL while it infers), onnxruntime's import and the model serialized for it, with every run
assumed to succeed (`_Promised`). Only onnxruntime's work is left to the thread: making the session and running
the planned feeds, which releases the GIL. So the thread's time overlaps installation, encoding and saturation
instead of being taken from whichever phase it lands in (transformer, 288 layers: two shape inferences of 0.4 s
each had landed in decoding), and the planning is a phase of its own ("reference inputs").

The outputs are those of the sequential call, byte for byte: the plan makes the sequential call's decisions
(seeded draws, the same candidates in the same order) as long as onnxruntime runs every planned feed; where it
does not (it refuses the model or an assignment), the thread makes the sequential call itself. An exception the
call raises (a `BadInputError` under `strict`) is raised where verification would have raised it.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Mapping, Sequence

import numpy as np
import onnx

from eqsat.check.verify import CannotRun, Reference, Run, Runner, expected_outputs

__all__ = ["ReferenceAhead"]


class _Promised(Runner):
    """A runner that promises onnxruntime runs every feed (no outputs): what the plan assumes."""

    @property
    def loaded(self) -> bool:
        return True

    def run(self, feeds: Mapping[str, Any], fallback: bool = True) -> tuple[list[Any], str]:
        return [], "onnxruntime"


class ReferenceAhead:
    """`expected_outputs(original, ...)` planned by `start` and run in a thread; `result()` waits for it."""

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
        """Plan the original's runs here and run them in a thread (once: later calls do nothing). `weights`: arrays
        by initializer name already in memory, as `expected_outputs` takes them; `source` names the model in errors."""
        if self._thread is not None:
            return
        plan: Reference | None = None
        runner = Runner(original, weights)
        try:
            plan = expected_outputs(
                original, weights=weights, source=source, runner=_Promised(original), **self._kwargs
            )
            if plan.runs:
                runner.prepare()
        except Exception:  # noqa: BLE001 - the sequential call in the thread raises it where it belongs
            plan = None
        self._thread = threading.Thread(
            target=self._run, args=(original, weights, source, plan, runner), name="eqsat-reference", daemon=True
        )
        self._thread.start()

    def _run(
        self,
        original: onnx.ModelProto,
        weights: Mapping[str, np.ndarray] | None,
        source: str,
        plan: Reference | None,
        runner: Runner,
    ) -> None:
        try:
            self._value = _planned_outputs(plan, runner) if plan is not None else None
            if self._value is None:  # the sequential call, with the runner already prepared
                self._value = expected_outputs(original, weights=weights, source=source, runner=runner, **self._kwargs)
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


def _planned_outputs(plan: Reference, runner: Runner) -> Reference | None:
    """The plan with onnxruntime's outputs on its feeds, or None when onnxruntime does not run one of them (the
    sequential call then decides otherwise). A plan without runs (no assignment within the budget) is final."""
    runs = []
    for planned in plan.runs:
        try:
            outputs, runtime = runner.run(planned.feeds, fallback=False)
        except CannotRun:
            return None
        if runtime != "onnxruntime":
            return None
        runs.append(Run(planned.feeds, outputs))
    return dataclasses.replace(plan, runs=tuple(runs))
