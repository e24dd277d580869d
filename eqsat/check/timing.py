"""Timing ONNX models under onnxruntime: sessions with a given provider, thread count and optimization level,
warmed up, then timed in interleaved rounds (each round runs every model in turn, so load from other
processes slows all of them alike); a model's figure is the median over the rounds of its per-call time.

Shared by `eqsat calibrate` (eqsat.calibration), benchmarks/measure_ops.py and benchmarks/bench_latency.py.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

#: onnxruntime's graph optimization levels by the names people use.
LEVELS = ("DISABLE_ALL", "ENABLE_BASIC", "ENABLE_EXTENDED", "ENABLE_ALL")


def available_providers() -> list[str]:
    import onnxruntime as ort

    return list(ort.get_available_providers())


def session(model: Any, *, provider: str = "CPUExecutionProvider", threads: int = 1, level: str = "ENABLE_ALL") -> Any:
    """An onnxruntime session of `model` (a ModelProto, bytes or a path): `threads` intra-op threads, one
    inter-op thread, sequential execution, graph optimizations at `level` (one of LEVELS)."""
    import onnxruntime as ort

    if level not in LEVELS:
        raise ValueError(f"unknown optimization level {level!r}: one of {', '.join(LEVELS)}")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, f"ORT_{level}")
    options.log_severity_level = 3
    source = model.SerializeToString() if hasattr(model, "SerializeToString") else model
    return ort.InferenceSession(source if isinstance(source, bytes) else str(source), options, providers=[provider])


@dataclasses.dataclass
class Timed:
    """One session and its feeds: `calls` runs per round, the per-call seconds of each round."""

    label: str
    session: Any
    feeds: Mapping[str, np.ndarray]
    calls: int = 1
    times: list[float] = dataclasses.field(default_factory=list)

    def warm_up(self, runs: int, per_round: float = 0.0) -> float:
        """Run `runs` times; with `per_round` seconds, set `calls` so that a round takes about that long.
        Returns the per-call seconds of the warm-up."""
        start = time.perf_counter()
        for _ in range(max(runs, 1)):
            self.session.run(None, self.feeds)
        seconds = (time.perf_counter() - start) / max(runs, 1)
        if per_round:
            self.calls = max(1, min(100, math.ceil(per_round / max(seconds, 1e-7))))
        return seconds

    def run(self, clock: Callable[[], float] = time.perf_counter) -> None:
        start = clock()
        for _ in range(self.calls):
            self.session.run(None, self.feeds)
        self.times.append((clock() - start) / self.calls)

    @property
    def median(self) -> float:
        return statistics.median(self.times) if self.times else math.nan


def time_interleaved(
    timed: Sequence[Timed],
    *,
    rounds: int,
    until: float | None = None,
    min_rounds: int = 3,
    clock: Callable[[], float] = time.perf_counter,
    on_round: Callable[[int], None] | None = None,
    shuffle: random.Random | None = None,
) -> int:
    """Up to `rounds` rounds of every `timed` in turn; with `until` (a `clock()` reading), no round starts that
    would end after it, as long as the last round took (at least `min_rounds` are run). With `shuffle`, each round
    runs them in an order drawn from it, so no version always follows the same one (whose run leaves the caches
    to the next). Returns the rounds run."""
    done, last = 0, 0.0
    order = list(timed)
    while done < rounds:
        began = clock()
        if until is not None and done >= min_rounds and began + last > until:
            break
        if shuffle is not None:
            shuffle.shuffle(order)
        for t in order:
            t.run(clock)
        done += 1
        last = clock() - began
        if on_round is not None:
            on_round(done)
    return done
