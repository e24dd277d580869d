"""All rules together on random small graphs (eqsat.testing.random_graphs): transposes and their inverses,
elementwise ops, constants (neutral ones too), pads, cast round trips, Identity and Relu chains, with
shared values. Rule interactions that no single-rule property exercises show up here; hypothesis prints
the failing graph."""

from __future__ import annotations

from hypothesis import given

from eqsat.testing import GraphCase, random_graphs
from tests.rule_graphs import property_settings


@property_settings()
@given(random_graphs(max_steps=10))
def test_default_rules_on_random_graphs(case: GraphCase) -> None:
    case.check()


@property_settings()
@given(random_graphs(max_steps=6, allow=("precision-changing",)))
def test_all_rules_on_random_graphs(case: GraphCase) -> None:
    case.check()
