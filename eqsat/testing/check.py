"""`PROPERTIES` (rule name -> strategy of graphs where the rule fires), assembled from the families'
builders, and `check_rules`, which runs them."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, Sequence


from eqsat.rewrites.properties import FAMILIES
from eqsat.testing.cases import RuleCase
from eqsat.testing.runs import _rule_table
from eqsat.testing.strategies import hypothesis_strategies

if TYPE_CHECKING:  # heavy imports only where they are used
    from hypothesis.strategies import SearchStrategy


def _drawing_symbolic(builder: Callable[[], "SearchStrategy[RuleCase]"]) -> Callable[[], "SearchStrategy[RuleCase]"]:
    """`builder`'s cases, one in six also checked with symbolic dims (`RuleCase.symbolic`)."""

    def strategy() -> "SearchStrategy[RuleCase]":
        st = hypothesis_strategies()
        return st.tuples(builder(), st.integers(0, 5)).map(
            lambda drawn: dataclasses.replace(drawn[0], symbolic=drawn[1] == 0)
        )

    return strategy


#: rule name -> strategy of graphs where the rule fires (one per registered rule), from each family's
#: rewrites/properties/<family>.py: its PROPERTIES (one case in four also checked with symbolic dims) and
#: STATIC_PROPERTIES (static shapes only).
PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {}
for _family in FAMILIES:
    PROPERTIES.update({name: _drawing_symbolic(builder) for name, builder in _family.PROPERTIES.items()})
    PROPERTIES.update(getattr(_family, "STATIC_PROPERTIES", {}))


#: Examples per rule of `eqsat check-rules --quick` (the default is 100).
QUICK_EXAMPLES = 10


def rules_of_family(family: str) -> list[str]:
    """The registered rules of `family` (rewrites/<family>.py), in registry order; KeyError if none."""
    from eqsat.rewrites.registry import all_rules

    names = [r.name for r in all_rules() if r.family == family]
    if not names:
        known = sorted({r.family for r in all_rules()})
        raise KeyError(f"unknown family {family!r} (families: {', '.join(known)})")
    return names


def describe_case(case: RuleCase) -> str:
    """A drawn input for people: the graph, each input's dtype and shape, and its values (a few when large)."""
    import numpy as np

    from eqsat.testing.soundness import _graph_text

    lines = [
        f"rule {case.rule}"
        + (f" (with {', '.join(case.also)})" if case.also else "")
        + (" with symbolic dims too" if case.symbolic else ""),
        "graph:",
        _graph_text(case.model),
        "inputs:",
    ]
    for name, value in case.feeds.items():
        shown = np.array2string(value if value.size <= 64 else value.reshape(-1)[:64], precision=5, threshold=64)
        more = f" (first 64 of {value.size})" if value.size > 64 else ""
        lines.append(f"  {name}: {value.dtype.name}{list(value.shape)} = {shown}{more}")
    return "\n".join(lines)


def check_rules(
    examples: int = 100,
    rules: Sequence[str] | None = None,
    *,
    shrink: bool = True,
    progress: Callable[..., None] | None = None,
) -> list[str]:
    """Run each rule's property (`PROPERTIES`) on `examples` drawn graphs (derandomized: the same graphs
    every run); return the failures, one message per failing rule: the error and the input that broke it
    (hypothesis's counterexample, shrunk unless `shrink` is False: its graph, its inputs' dtypes, shapes and
    values; the error names the values that differ). A registered rule without a property is a failure too.
    `progress(name, drawn, total)` is called before each rule (drawn 0) and after each example it draws."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.reporting import with_reporter

    names = list(rules) if rules is not None else list(_rule_table())
    unknown = set(names) - set(_rule_table())
    if unknown:
        raise KeyError(f"unknown rule(s): {', '.join(sorted(unknown))}")
    failures: list[str] = []
    for name in names:
        if progress is not None:
            progress(name, 0, examples)
        strategy = PROPERTIES.get(name)
        if strategy is None:
            failures.append(f"{name}: no property in eqsat.testing.PROPERTIES")
            continue

        phases = [p for p in Phase if shrink or p not in (Phase.shrink, Phase.explain)]
        drawn: list[int] = [0]
        failing: list[RuleCase] = []

        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            derandomize=True,
            print_blob=False,
            suppress_health_check=list(HealthCheck),
            phases=phases,
        )
        # prop runs within this iteration (called below): the loop variables it reads are this rule's
        @given(strategy())
        def prop(case: RuleCase) -> None:
            drawn[0] += 1  # noqa: B023 - see above
            if progress is not None and drawn[0] <= examples:  # noqa: B023 - see above
                progress(name, drawn[0], examples)  # noqa: B023 - see above
            try:
                case.check()
            except BaseException:
                failing.append(case)  # noqa: B023 - the last one hypothesis replays is the shrunk one
                raise

        report: list[str] = []

        def tell(text: object, into: list[str] = report) -> None:  # hypothesis's lines for this rule
            into.append(str(text))

        try:
            with with_reporter(tell):
                prop()
        except Exception as exc:  # a failed property: hypothesis re-raises the shrunk example's error
            detail = "\n".join(str(r) for r in report if r)
            shrunk = (
                "\n" + ("shrunk input" if shrink else "failing input") + ":\n" + describe_case(failing[-1])
                if failing
                else ""
            )
            failures.append(f"{name}: {type(exc).__name__}: {exc}" + shrunk + (f"\n{detail}" if detail else ""))
    return failures
