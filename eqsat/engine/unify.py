"""Symbols that meet: shape facts of one e-class are facts about one value, so where they differ they are equal.

An e-class holds values that are equal wherever the model runs; each shape fact it gets (`shape-met`: the
loaded one, and one per rule that derives it) describes the same tensor. Where two facts differ at a dim,
a symbol meets another symbol or a size: that is a proof they are equal. Two different sizes or ranks are a
real conflict (an unsound rule): the analysis panics on those (`shape-facts-agree`), never here.

    met(tables)                      the groups of different facts that met, one group per e-class
    unified(groups, before, prefer)  the symbols' representatives after the groups' dims are unified

The session re-encodes with the representatives (`encode(work, unified=...)`) and saturates again, so that
every fact that depended on either symbol agrees.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

Fact = tuple[int, ...]


#: The table of every shape fact an e-class met (what `met` reads of a snapshot).
MET_TABLE = "shape-met"


def met(tables: Mapping[str, Any]) -> list[tuple[Fact, ...]]:
    """Per e-class with more than one shape fact, its facts (sorted), from a backend snapshot."""
    table = tables.get(MET_TABLE)
    facts: dict[int, set[Fact]] = {}
    for (eclass, vec), _ in table.rows if table is not None else ():
        facts.setdefault(eclass, set()).add(tuple(vec))
    return sorted(tuple(sorted(f)) for f in facts.values() if len(f) > 1)


def unified(
    groups: Sequence[Sequence[Fact]], before: Mapping[int, int], prefer: Callable[[int], int]
) -> dict[int, int] | None:
    """`before` (symbol -> its representative) with the dims of each group unified position by position: a
    size represents its symbols, else the symbol `prefer` ranks highest. None if two sizes (or ranks) meet."""
    parent: dict[int, int] = dict(before)

    def find(d: int) -> int:
        while d < 0 and d in parent:
            d = parent[d]
        return d

    for group in groups:
        if len({len(f) for f in group}) != 1:
            return None
        for dims in zip(*group):
            roots = {find(d) for d in dims}
            sizes = {d for d in roots if d >= 0}
            if len(sizes) > 1:
                return None
            top = sizes.pop() if sizes else max(roots, key=lambda s: (prefer(s), s))
            for d in roots - {top}:
                parent[d] = top
    return {s: find(s) for s in parent}
