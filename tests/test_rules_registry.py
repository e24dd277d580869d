"""The rule registry (rewrites/registry.py): complete, well-formed, safe by default, and every rule tested."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import eqsat.rewrites
from eqsat.engine.rule import DEFAULT_SOUNDNESS, SOUNDNESS
from eqsat.testing import PROPERTIES
from eqsat.rewrites import registry

TESTS = Path(__file__).parent
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
RULES = registry.all_rules()


def _family_modules() -> list[str]:
    names = [m.name for m in pkgutil.iter_modules(eqsat.rewrites.__path__) if m.name not in ("registry", "__init__")]
    return [n for n in names if hasattr(importlib.import_module(f"eqsat.rewrites.{n}"), "RULES")]


def test_every_module_with_rules_is_registered() -> None:
    registered = {m.__name__ for m in registry.FAMILIES}
    missing = [n for n in _family_modules() if f"eqsat.rewrites.{n}" not in registered]
    assert not missing, f"rewrites modules defining RULES but absent from registry.FAMILIES: {missing}"


def test_registered_families_are_modules_of_rewrites() -> None:
    assert len({m.__name__ for m in registry.FAMILIES}) == len(registry.FAMILIES)
    assert all(m.__name__.startswith("eqsat.rewrites.") for m in registry.FAMILIES)


def test_rule_names_are_kebab_case_and_unique() -> None:
    names = [r.name for r in RULES]
    assert [n for n in names if not KEBAB.match(n)] == []
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_rule_record_is_complete(rule) -> None:
    assert rule.soundness in SOUNDNESS
    assert rule.origin.strip(), f"{rule.name}: empty origin"
    assert rule.doc.strip() and "\n" not in rule.doc, f"{rule.name}: doc must be one non-empty line"
    assert rule.egglog, f"{rule.name}: no egglog rewrite"
    module = next(m for m in registry.FAMILIES if rule in m.RULES)
    assert module.__name__ == f"eqsat.rewrites.{rule.family}", (
        f"{rule.name}: family {rule.family!r} but lives in {module.__name__}"
    )


def test_default_selection_is_not_precision_changing() -> None:
    selected = registry.select()
    assert selected and all(r.soundness in DEFAULT_SOUNDNESS for r in selected)
    assert not [r.name for r in selected if r.soundness == "precision-changing"]
    precision = {r.name for r in RULES if r.soundness == "precision-changing"}
    assert precision <= {r.name for r in registry.select(allow=["precision-changing"])}


def test_every_rule_is_named_in_a_rule_test_file() -> None:
    """Adding a rule without tests fails here: each name must appear in some tests/test_rules_*.py."""
    text = "\n".join(
        p.read_text(encoding="utf-8") for p in sorted(TESTS.glob("test_rules_*.py")) if p.name != Path(__file__).name
    )
    untested = [r.name for r in RULES if f'"{r.name}"' not in text]
    assert not untested, f"rules not named in any tests/test_rules_*.py: {untested}"


def test_every_rule_has_a_property() -> None:
    """`eqsat check-rules` and the property tests draw graphs from eqsat.testing.PROPERTIES."""
    missing = sorted({r.name for r in RULES} - set(PROPERTIES))
    assert not missing, f"rules without a property (graph builder) in eqsat.testing.PROPERTIES: {missing}"
    stale = sorted(set(PROPERTIES) - {r.name for r in RULES})
    assert not stale, f"eqsat.testing.PROPERTIES names rules that are not registered: {stale}"


#: The longest egglog command a rule may install (issue 23): installing a rule costs time in proportion to its
#: s-expressions, and a rule on the page should be readable as one.
LONGEST_COMMAND = 600


def test_no_rule_installs_a_command_over_600_characters() -> None:
    """Every rule of the catalogue, default or not (main had merges of 1,000 to 3,000 characters built once per count
    of merged products, pool rows built once per rank, and layernorm matchers of 1,208 spelling the moments inline)."""
    long = sorted(
        (len(command), rule.name) for rule in RULES for command in rule.commands() if len(command) > LONGEST_COMMAND
    )
    assert not long, f"egglog commands over 600 characters: {long}"


#: The most egglog rules the default catalogue may install in all (issue 23's target is 250; main had 486 before the
#: param-unary families, the shared site demands and the view-of, conv-of, const-leaf and zero-point facts).
MOST_EGGLOG_RULES = 434


def test_the_default_catalogue_stays_within_its_egglog_rules() -> None:
    """A ratchet: a rule that adds rows should find a fact or a family to join instead (DESIGN.md, "Add a rule")."""
    total = sum(len(rule.egglog) for rule in registry.select())
    assert total <= MOST_EGGLOG_RULES, f"{total} egglog rules in the default catalogue"


def test_one_row_per_unary_family_and_view() -> None:
    """Rules over every elementwise unary op are one row per family (Unary, UnaryF, UnaryFF, UnaryS), not one per
    op with parameters; the constant facts pass through views (view-of) in one row each."""
    rows = {rule.name: len(rule.egglog) for rule in RULES}
    assert rows["transpose-sink-unary"] == 4 and rows["reshape-sink-unary"] == 8 and rows["conv-merge-epilogue"] == 3
    assert rows["matmul-unflatten"] == 1 and rows["rescale-merge"] == 1 and rows["reshape-view-merge"] == 1
