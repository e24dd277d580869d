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
            lambda drawn: dataclasses.replace(drawn[0], symbolic=drawn[1] == 0))

    return strategy


#: rule name -> strategy of graphs where the rule fires (one per registered rule), from each family's
#: rewrites/properties/<family>.py: its PROPERTIES (one case in four also checked with symbolic dims) and
#: STATIC_PROPERTIES (static shapes only).
PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {}
for _family in FAMILIES:
    PROPERTIES.update({name: _drawing_symbolic(builder) for name, builder in _family.PROPERTIES.items()})
    PROPERTIES.update(getattr(_family, "STATIC_PROPERTIES", {}))


def check_rules(examples: int = 100, rules: Sequence[str] | None = None, *, shrink: bool = True,
                progress: Callable[[str], None] | None = None) -> list[str]:
    """Run each rule's property (`PROPERTIES`) on `examples` drawn graphs (derandomized: the same graphs
    every run); return the failures, one message per failing rule, with hypothesis's counterexample
    (shrunk unless `shrink` is False). A registered rule without a property is a failure too.
    `progress` is called with each rule name before it runs."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.reporting import with_reporter

    names = list(rules) if rules is not None else list(_rule_table())
    unknown = set(names) - set(_rule_table())
    if unknown:
        raise KeyError(f"unknown rule(s): {', '.join(sorted(unknown))}")
    failures: list[str] = []
    for name in names:
        if progress is not None:
            progress(name)
        strategy = PROPERTIES.get(name)
        if strategy is None:
            failures.append(f"{name}: no property in eqsat.testing.PROPERTIES")
            continue

        phases = [p for p in Phase if shrink or p not in (Phase.shrink, Phase.explain)]

        @settings(max_examples=examples, deadline=None, database=None, derandomize=True, print_blob=False,
                  suppress_health_check=list(HealthCheck), phases=phases)
        @given(strategy())
        def prop(case: RuleCase) -> None:
            case.check()

        report: list[str] = []
        try:
            with with_reporter(report.append):
                prop()
        except Exception as exc:  # a failed property: hypothesis re-raises the shrunk example's error
            detail = "\n".join(str(r) for r in report if r)
            failures.append(f"{name}: {type(exc).__name__}: {exc}" + (f"\n{detail}" if detail else ""))
    return failures
