"""What a property draws: a `RuleCase` (a graph where a rule must fire, its feeds, how to check it),
`DrawnGraph`, which accumulates a drawn graph's nodes, inputs, initializers and feeds, and `rule_case`, which
makes a property from a function that draws one case."""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypeVar

import numpy as np
import onnx
import onnx.helper as oh

from eqsat.testing.models import ValueSpec, make_model
from eqsat.testing.soundness import _graph_text, assert_rule_sound, symbolized
from eqsat.testing.strategies import hypothesis_strategies

if TYPE_CHECKING:  # heavy imports only where they are used
    from hypothesis.strategies import SearchStrategy
    from eqsat.result import Result


# --------------------------------------------------------------------------------------------------
# one property (graph builder) per rule


@dataclasses.dataclass(frozen=True)
class RuleCase:
    """A drawn graph where `rule` must fire, its inputs, and how to run it."""

    rule: str
    model: onnx.ModelProto
    feeds: Mapping[str, np.ndarray]
    also: tuple[str, ...] = ()  # rules run alongside (cancel what `rule` exposes)
    allow: tuple[str, ...] = ()  # soundness classes to admit (precision-changing)
    symbolic: bool = False  # also check the graph with symbolic dims (`symbolized`)

    def check(self) -> "Result":
        """`assert_rule_sound` on this case; when `symbolic`, also on the graph with its input and output
        dims made symbolic, where the rule need not fire but the e-graph and the result must stay sound."""
        result = assert_rule_sound(self.model, self.rule, self.feeds, also=self.also, allow=self.allow)
        if self.symbolic:
            assert_rule_sound(
                symbolized(self.model), self.rule, self.feeds, also=self.also, allow=self.allow, must_fire=False
            )
        return result

    def __repr__(self) -> str:
        feeds = ", ".join(
            f"{k}: {v.dtype.name}{list(v.shape)} = {np.array2string(v.reshape(-1)[:8], precision=4)}"
            for k, v in self.feeds.items()
        )
        return (
            f"RuleCase(rule={self.rule!r}, also={self.also}, allow={self.allow}, symbolic={self.symbolic}, opset="
            f"{self.model.opset_import[0].version},\n{_graph_text(self.model)}\nfeeds: {feeds})"
        )


@dataclasses.dataclass
class DrawnGraph:
    """Accumulates nodes, inputs, initializers and feeds for a drawn case."""

    nodes: list[onnx.NodeProto] = dataclasses.field(default_factory=list)
    inputs: list[ValueSpec] = dataclasses.field(default_factory=list)
    inits: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    feeds: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def input(self, name: str, value: np.ndarray) -> str:
        self.inputs.append((name, value.dtype, value.shape))
        self.feeds[name] = value
        return name

    def node(self, op: str, inputs: Sequence[str], output: str, **attrs: Any) -> str:
        self.nodes.append(oh.make_node(op, list(inputs), [output], **attrs))
        return output

    def case(
        self, rule: str, outputs: Sequence[str], *, also: Sequence[str] = (), allow: Sequence[str] = (), opset: int = 17
    ) -> RuleCase:
        model = make_model(self.nodes, self.inputs, list(outputs), self.inits, opset)
        return RuleCase(rule, model, self.feeds, tuple(also), tuple(allow))


Drawn = TypeVar("Drawn")


def rule_case(build: Callable[..., Drawn]) -> Callable[..., "SearchStrategy[Drawn]"]:
    """A property from `build(draw, st, *args)`, which draws one case with hypothesis's `draw` and its
    strategies module `st` (imported on first use): `build(*args)` is then the strategy of such cases.

        @rule_case
        def relu_merge(draw, st) -> RuleCase: ...     # PROPERTIES["relu-merge"] = relu_merge
    """

    @functools.wraps(build)
    def strategy(*args: Any, **kwargs: Any) -> "SearchStrategy[Drawn]":
        st = hypothesis_strategies()
        return st.composite(lambda draw: build(draw, st, *args, **kwargs))()

    return strategy


def feeding(strategy: Callable[[], "SearchStrategy[RuleCase]"], rule: str) -> Callable[[], "SearchStrategy[RuleCase]"]:
    """The cases of `strategy`, checked for the analysis `rule` that computes a relation the rule they were drawn
    for joins (that rule runs alongside): a site or guard relation fires wherever its consumer does."""

    def relabelled() -> "SearchStrategy[RuleCase]":
        return strategy().map(lambda case: dataclasses.replace(case, rule=rule, also=(case.rule, *case.also)))

    return relabelled
