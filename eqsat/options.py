"""What a run is asked to do: one record, built once from the CLI's flags or the API's keywords.

`eqsat.optimize` builds it and hands the same record to saturation (`eqsat.session.saturate`), extraction
and verification (`Session.extract`) and bisection (`eqsat.bisect.find_culprit`); none of them re-derives
an option from another.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

__all__ = ["Options"]


@dataclasses.dataclass(frozen=True)
class Options:
    """Every option of `eqsat optimize` (see `eqsat.pipeline.optimize` for what each does)."""

    target: str = "cpu"
    extractor: str = "auto"
    cost: Callable[..., float] | None = None  # a Python cost model instead of the target's
    time_limit: float | None = None  # saturation limits (None: the defaults)
    node_limit: int | None = None
    iter_limit: int | None = None
    allow: tuple[str, ...] = ()  # soundness classes admitted beyond the default
    disable: tuple[str, ...] = ()  # rules left out
    extra_rules: tuple[Any, ...] = ()  # eqsat.engine.rule.Rule records run alongside
    opset: int | None = None  # upgrade to this opset first
    verify: bool = True
    strict: bool = False  # refuse instead of dropping a rule or not verifying
    bisect: bool = False  # name the rule behind a failed verification
    input_shapes: Mapping[str, Sequence[int]] | None = None  # verification: sizes by input name
    inputs: Mapping[str, Any] | None = None  # verification: arrays by input name
    fix_input_shapes: Mapping[str, Sequence[int]] | None = None  # dims written into the model first

    def __post_init__(self) -> None:
        for name in ("allow", "disable", "extra_rules"):  # any sequence in, a tuple kept
            object.__setattr__(self, name, tuple(getattr(self, name)))

    def replace(self, **changes: Any) -> "Options":
        """A copy with `changes` (unknown names raise TypeError)."""
        return dataclasses.replace(self, **changes)
