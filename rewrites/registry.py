"""The one place rules are registered: every family module's RULES, in a stable order."""

from __future__ import annotations

from typing import Iterable

from eqsat.errors import BadInputError
from eqsat.engine.rule import DEFAULT_SOUNDNESS, Rule
from eqsat.rewrites import analysis, cast, cleanup, layout
from eqsat.rewrites import conv, linear, reduce
from eqsat.rewrites import activation, elementwise, normalization, pool, quant, tensor

FAMILIES = (
    analysis,
    layout,
    cast,
    cleanup,
    conv,
    linear,
    reduce,
    normalization,
    activation,
    quant,
    elementwise,
    tensor,
    pool,
)


def all_rules() -> tuple[Rule, ...]:
    rules = tuple(r for family in FAMILIES for r in family.RULES)
    names = [r.name for r in rules]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ValueError(f"rule names registered twice: {sorted(duplicates)}")
    return rules


def select(allow: Iterable[str] = (), disable: Iterable[str] = (), extra: Iterable[Rule] = ()) -> tuple[Rule, ...]:
    """Rules admitted by soundness (exact and fp-reassoc, plus `allow`), minus `disable` (names), then the
    `extra` rules (experiments, tests: run alongside the registered ones)."""
    admitted = DEFAULT_SOUNDNESS | set(allow)
    disabled = set(disable)
    known = {r.name for r in all_rules()}
    unknown = disabled - known
    if unknown:
        raise BadInputError("--disable", f"unknown rule(s): {', '.join(sorted(unknown))}; `eqsat rules` lists them")
    return (*(r for r in all_rules() if r.soundness in admitted and r.name not in disabled), *extra)
