"""Saturate or optimize with a chosen set of rules only (plus the fact rules)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import onnx

from eqsat.testing.models import to_proto

if TYPE_CHECKING:  # heavy imports only where they are used
    import onnx_ir as ir

    from eqsat.result import Result
    from eqsat.engine.saturate import Limits
    from eqsat.session import Session


#: Only the named rules run, plus the rules of these families and every rule in the `analysis` ruleset:
#: facts (shapes, dtypes, constants, positivity) that rewrites rely on, never rewrites themselves.
ALWAYS_ON_FAMILIES = ("analysis",)


# --------------------------------------------------------------------------------------------------
# running a chosen set of rules


def _rule_table() -> dict[str, Any]:
    from eqsat.rewrites.registry import all_rules

    return {r.name: r for r in all_rules()}


def _disabled(rules: Iterable[str], without: Iterable[str] = ()) -> list[str]:
    """Names to disable so that only `rules` and the fact rules run (minus `without`)."""
    table = _rule_table()
    wanted, removed = set(rules), set(without)
    unknown = (wanted | removed) - set(table)
    if unknown:
        raise KeyError(f"unknown rule(s): {', '.join(sorted(unknown))} (see `eqsat rules`)")
    return [
        name
        for name, r in table.items()
        if name in removed or (name not in wanted and r.family not in ALWAYS_ON_FAMILIES and r.ruleset != "analysis")
    ]


def saturate_with_rules(
    model: onnx.ModelProto | "ir.Model",
    rules: Sequence[str],
    *,
    allow: Sequence[str] = (),
    without: Sequence[str] = (),
    limits: "Limits | None" = None,
) -> "Session":
    """Saturate `model` with only the named rules (plus the fact rules: the analysis family and the
    analysis ruleset), minus the rules named in `without`. Every rule the model can use is installed, a fact rule
    whose facts no installed rule reads included (eqsat.engine.rule_closure leaves it out of a full run): the
    tests count its matches."""
    from eqsat.engine.saturate import Limits
    from eqsat.session import saturate

    model = to_proto(model)
    return saturate(
        model, limits=limits or Limits(), allow=allow, disable=_disabled(rules, without), install_unread=True
    )


def optimize_with_rules(
    model: onnx.ModelProto | "ir.Model",
    rules: Sequence[str],
    *,
    allow: Sequence[str] = (),
    without: Sequence[str] = (),
    target: str = "cpu",
    extractor: str = "ilp",
) -> tuple["Result", dict[str, int]]:
    """Saturate with only the named rules (and the fact rules, see `saturate_with_rules`), extract for
    `target` without verification; return the result and `rules_fired` (rule name -> matches)."""
    session = saturate_with_rules(model, rules, allow=allow, without=without)
    result = session.extract(target, extractor=extractor, verify=False, breakdown=False)
    return result, session.saturation.rules_fired


# --------------------------------------------------------------------------------------------------
# planting shape facts


def plant_shape_facts(monkeypatch: Any, change: Callable[[Any], None]) -> None:
    """Every symbolic shape fact computation of a load passes through `change(facts)` (a pytest monkeypatch):
    normalization's, whose facts the first encoding reads, and encoding's own (later encodings)."""
    from eqsat.engine import encode
    from eqsat.frontend import normalize, symbols

    real = symbols.symbolic_shapes

    def planted(graph: Any, table: Any = None) -> Any:
        facts = real(graph, table)
        change(facts)
        return facts

    monkeypatch.setattr(encode, "symbolic_shapes", planted)
    monkeypatch.setattr(normalize, "symbolic_shapes", planted)
