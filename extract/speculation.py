"""Work beside a solve: an extractor that solves in a worker thread (ilp: HiGHS's run, which releases the GIL) may
hand its provisional choice to a hook on the calling thread meanwhile; the caller keeps what the hook made of it
when the final choice is that one (the session lowers the greedy choice while HiGHS runs: eqsat.session).

- `Speculation`: the provisional choice, the hook's value or the exception it raised, the seconds it took
- `Recorder`: a hook that records its one call as a Speculation and never raises an `Exception`
- `beside(work, meanwhile)`: `work()` in a worker thread while `meanwhile()` runs on this one; `work`'s value,
  or the exception it raised, re-raised here
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import TYPE_CHECKING, Callable, Generic, Mapping, TypeVar

if TYPE_CHECKING:
    from eqsat.engine.egraph import EGraph
    from eqsat.extract.result import ExtractionResult

T = TypeVar("T")
R = TypeVar("R")


@dataclasses.dataclass(frozen=True)
class Speculation(Generic[T]):
    """What a hook made of an extractor's provisional choice of classes in `egraph`: its value, or the
    exception it raised (`error`), and the seconds it took on the calling thread."""

    egraph: "EGraph"
    choice: dict[int, int]
    value: T | None
    error: Exception | None
    seconds: float

    def matches(self, result: "ExtractionResult") -> bool:
        """Whether `result` is the provisional choice, in the same e-graph, and the hook succeeded: its value
        is then what the hook would make of `result`."""
        return self.error is None and result.egraph is self.egraph and dict(result.choice) == self.choice


class Recorder(Generic[T]):
    """A hook for an extractor: calls `hook` with the provisional choice and records the call as `speculation`.
    An `Exception` the hook raises is recorded, not raised (the caller redoes the work on the final choice, where
    the same exception is raised as it would have been without speculation)."""

    def __init__(self, egraph: "EGraph", hook: Callable[[dict[int, int]], T]) -> None:
        self.egraph, self.hook = egraph, hook
        self.speculation: Speculation[T] | None = None

    def __call__(self, choice: Mapping[int, int]) -> None:
        kept = dict(choice)
        start = time.perf_counter()
        value: T | None = None
        error: Exception | None = None
        try:
            value = self.hook(kept)
        except Exception as exc:  # noqa: BLE001 - recorded; the caller falls back to the work without speculation
            error = exc
        self.speculation = Speculation(self.egraph, kept, value, error, time.perf_counter() - start)


def beside(work: Callable[[], R], meanwhile: Callable[[], object]) -> R:
    """`work()` in a worker thread while `meanwhile()` runs on the calling thread; then `work`'s value, or the
    exception `work` raised, raised again here. Should `meanwhile` raise, that exception goes up at once and the
    worker (a daemon thread) finishes alone, its value dropped."""
    values: list[R] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            values.append(work())
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread below
            errors.append(exc)

    worker = threading.Thread(target=run, name="eqsat-extract", daemon=True)
    worker.start()
    meanwhile()
    worker.join()
    if errors:
        raise errors[0]
    return values[0]
