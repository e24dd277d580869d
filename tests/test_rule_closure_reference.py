"""The rule closure (eqsat.engine.rule_closure) against a straightforward reference: every body read again, in
registry order, until nothing changes (no work list, no profiles, no shared scan), then the bodies that only set
rule-only facts no installed body reads left out. And that leaving those out changes no output."""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import eqsat
from eqsat.session import load
from eqsat.engine import rule_closure
from eqsat.engine.rule import Rule
from eqsat.engine.rule_closure import (
    CLASS_FACTS,
    CONSTRUCTORS,
    RULE_ONLY_FACTS,
    present_constructors,
    usable_rules,
)
from eqsat.engine.rule_terms import ANY, CONST, BodyTerms, ClosureState, Reading, parse
from eqsat.engine.terms import GENERIC, GENERIC_OF, OP_FACTS, OP_TABLES
from eqsat.rewrites.registry import select
from tests.conftest import build_model

F = onnx.TensorProto.FLOAT
_TRACKED = CONSTRUCTORS | RULE_ONLY_FACTS | frozenset(GENERIC)
_HEAD = re.compile(r"\(\s*([A-Za-z][\w-]*)")
_USE = re.compile(r"\(\s*(" + "|".join(GENERIC) + r')\s+("?)([\w-]+)')
_GUARD = re.compile(r"\(\s*(" + "|".join(map(re.escape, OP_FACTS)) + r")\s+([\w-]+)\s*\)")
_TABLE = re.compile(r"\(\s*(" + "|".join(map(re.escape, OP_TABLES)) + r")((?:\s+[\w\"-]+)+)\s*\)")


def _named(text: str) -> set[str]:
    """Constructors and rule-only facts `text` applies; a family with an op variable as `Family:guards`."""
    found = set(_HEAD.findall(text)) & _TRACKED - set(GENERIC)
    guards: dict[str, set[str]] = {}
    for fact, var in _GUARD.findall(text):
        guards.setdefault(var, set()).add(fact)
    for family, quoted, op in _USE.findall(text):
        if quoted:
            found |= {op} & _TRACKED
        else:
            found.add(family + ":" + "+".join(sorted(guards[op])) if op in guards else family)
    return found


def _ops(name: str) -> list[str]:
    family, _, facts = name.partition(":")
    ops = list(GENERIC.get(family, (family,)))
    for fact in facts.split("+") if facts else ():
        ops = [op for op in ops if op in OP_FACTS[fact]]
    return ops


def _made(facts: str, actions: str) -> set[str]:
    made = {n for n in _named(actions) if n.partition(":")[0] not in GENERIC}
    tables: dict[str, set[str]] = {}
    for table, args in _TABLE.findall(facts):
        column, ops = OP_TABLES[table]
        words = args.split()
        if column < len(words):
            tables.setdefault(words[column], set()).update(ops)
    for _, quoted, op in _USE.findall(actions):
        if not quoted:
            made |= tables.get(op, set())
    return made


def _reading(facts: str, actions: str, need: bool, state: ClosureState) -> Reading:
    """As the closure reads a body: nothing for an analysis, the plain reading when nothing it names is constant
    (rule_closure._Profile.plain, restated), else its terms' reading."""
    made, named = _made(facts, actions), _named(actions)
    if "(union" not in actions and not made and not need and not named & CLASS_FACTS:
        return Reading(False, {}, {})
    query = [op for n in _named(facts) for op in GENERIC.get(n.partition(":")[0], (n,))]
    families = [op for n in named if n.partition(":")[0] in GENERIC for op in GENERIC[n.partition(":")[0]]]
    sets, reads = named & CLASS_FACTS, _named(facts) & CLASS_FACTS
    levels, flags = state.levels, state.fact_constant
    plain = not (
        "(union" in actions
        and (
            any(levels.get(op) == CONST for op in query)
            or any(any(v) for key, v in flags.items() if key.partition("@")[0] in reads)
        )
    )
    plain = plain and all(levels.get(op) == ANY for op in made if op in CONSTRUCTORS)
    plain = plain and not any(levels.get(op) == CONST for op in families)
    plain = plain and all(name in flags and not any(flags[name]) for name in sets)
    if plain:
        return Reading(False, {op: ANY for op in made if op in CONSTRUCTORS}, {n: (False,) * 9 for n in sets})
    return BodyTerms.of(facts, actions).read(state)


def _heads(term: object) -> set[str]:
    if not isinstance(term, list) or not term:
        return set()
    return ({term[0]} if isinstance(term[0], str) else set()).union(*map(_heads, term))


def _fact_rows(facts: str, actions: str) -> tuple[set[str], set[str]] | None:
    """(rule-only facts set, rule-only facts read) when every action only sets one and builds no node, else None."""
    sets, reads = set(), _named(facts) & RULE_ONLY_FACTS
    for action in parse(actions):
        target = action[1] if isinstance(action, list) and action[:1] == ["set"] else action
        if not isinstance(target, list) or not target or target[0] not in RULE_ONLY_FACTS:
            return None
        heads = _heads(action[1:] if target is action else [target[1:], action[2]])
        if heads & (CONSTRUCTORS | set(GENERIC) | set(GENERIC_OF)):
            return None
        sets.add(target[0])
        reads |= heads & RULE_ONLY_FACTS
    return sets, reads


def reference(rules: list[Rule], present: frozenset[str]) -> tuple[tuple[str, ...], frozenset[str]]:
    """(commands, constructors) by reading every body again until a whole pass changes nothing."""
    bodies = [(rule, k, body) for rule in rules for k, body in enumerate(rule.egglog)]
    available, levels, facts = set(present), dict.fromkeys(present, ANY), {}
    state = ClosureState(levels, facts, CLASS_FACTS)
    applied: dict[int, Reading] = {}
    changed = True
    while changed:
        changed = False
        for index, (rule, _, body) in enumerate(bodies):
            if not all(any(op in available for op in _ops(n)) for n in _named(body.facts)):
                continue
            siblings = [b for r, _, b in bodies if r.name == rule.name and not b.need]
            if body.need and all(_reading(b.facts, b.actions, b.need, state).confined for b in siblings):
                continue
            reading = _reading(body.facts, body.actions, body.need, state)
            if reading.confined or index in applied and applied[index] == reading:
                continue
            applied[index], changed = reading, True
            available |= _made(body.facts, body.actions) | set(reading.created)
            for op, level in reading.created.items():
                if levels.get(op) != ANY:
                    levels[op] = level
            for name, flags in reading.facts.items():
                if name.partition("@")[0] in CLASS_FACTS:
                    seen = facts.get(name, flags)
                    facts[name] = tuple(a and b for a, b in zip(seen, flags))
    chosen = [bodies[i] for i in sorted(applied)]
    rows = [_fact_rows(body.facts, body.actions) for _, _, body in chosen]
    live = [row is None for row in rows]
    grew = True
    while grew:
        read = set()
        for (_, _, body), row, keep in zip(chosen, rows, live):
            if keep:
                read |= _named(body.facts) | _named(body.actions) if row is None else row[1]
        grew = False
        for i, row in enumerate(rows):
            if not live[i] and row is not None and row[0] & read:
                live[i] = grew = True
    commands = tuple(b.command(r.ruleset, f"{r.name}#{k}") for (r, k, b), keep in zip(chosen, live) if keep)
    return commands, frozenset(available)


def _layer_norm() -> onnx.ModelProto:
    """A transformer block's pieces: MatMul, Add, LayerNorm written out, Softmax, Gelu's Erf, Transpose."""
    nodes = [
        oh.make_node("MatMul", ["x", "w"], ["m"]),
        oh.make_node("Add", ["m", "b"], ["a"]),
        oh.make_node("ReduceMean", ["a"], ["mu"], axes=[-1]),
        oh.make_node("Sub", ["a", "mu"], ["d"]),
        oh.make_node("Mul", ["d", "d"], ["d2"]),
        oh.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
        oh.make_node("Add", ["var", "eps"], ["ve"]),
        oh.make_node("Sqrt", ["ve"], ["sd"]),
        oh.make_node("Div", ["d", "sd"], ["n"]),
        oh.make_node("Erf", ["n"], ["e"]),
        oh.make_node("Softmax", ["e"], ["s"], axis=-1),
        oh.make_node("Transpose", ["s"], ["y"], perm=[1, 0]),
    ]
    inits = {
        "w": np.ones((4, 4), np.float32),
        "b": np.ones(4, np.float32),
        "eps": np.array(1e-5, np.float32),
    }
    return build_model(nodes, [("x", F, [3, 4])], [("y", F, [4, 3])], inits)


def _conv_bn() -> onnx.ModelProto:
    """A CNN's pieces: Conv, BatchNormalization, Relu, MaxPool, Flatten, Gemm."""
    nodes = [
        oh.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        oh.make_node("BatchNormalization", ["c", "g", "bb", "mean", "var"], ["n"]),
        oh.make_node("Relu", ["n"], ["r"]),
        oh.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        oh.make_node("Flatten", ["p"], ["f"]),
        oh.make_node("Gemm", ["f", "gw"], ["y"], transB=1),
    ]
    inits = {
        "w": np.ones((2, 1, 3, 3), np.float32),
        "g": np.ones(2, np.float32),
        "bb": np.zeros(2, np.float32),
        "mean": np.zeros(2, np.float32),
        "var": np.ones(2, np.float32),
        "gw": np.ones((3, 8), np.float32),
    }
    return build_model(nodes, [("x", F, [1, 1, 4, 4])], [("y", F, [1, 3])], inits)


def _concat_reshape(unsqueezed: bool) -> onnx.ModelProto:
    """Two inputs joined by Concat and flattened by Reshape; `unsqueezed`: each first given a leading axis (a stack)."""
    nodes, names = [], ["a", "b"]
    if unsqueezed:
        nodes += [oh.make_node("Unsqueeze", [n, "ax"], [f"u{n}"]) for n in names]
        names = [f"u{n}" for n in names]
    nodes += [
        oh.make_node("Concat", names, ["c"], axis=0),
        oh.make_node("Reshape", ["c", "s"], ["y"]),
    ]
    inits = {"s": np.array([-1], np.int64), "ax": np.array([0], np.int64)}
    return build_model(nodes, [("a", F, [2, 3]), ("b", F, [2, 3])], [("y", F, [12])], inits)


@pytest.mark.parametrize("make", [_layer_norm, _conv_bn, lambda: _concat_reshape(False), lambda: _concat_reshape(True)])
def test_the_closure_matches_a_fixed_point_of_every_body(make) -> None:
    """The work list, its profiles and the unread-fact pruning give the reference's commands, in its order."""
    rules = list(select())
    present = present_constructors(load(make()).normalized)
    usable = usable_rules(rules, present)
    commands, constructors = reference(rules, present)
    assert usable.commands == commands
    assert usable.constructors == constructors


def test_a_body_setting_only_unread_facts_is_left_out() -> None:
    """stack-reshape-to-concat marks a Concat's list (`stack-need`) for the bodies that read a stack of Unsqueezes:
    without an Unsqueeze those never run, so the marking bodies are left out; with one, they are installed."""
    plain = usable_rules(select(), present_constructors(load(_concat_reshape(False)).normalized))
    assert {"stack-reshape-to-concat#0", "stack-reshape-to-concat#1"} <= set(plain.unread)
    assert not any("stack-reshape-to-concat#" in command for command in plain.commands)
    everything = usable_rules(
        select(), present_constructors(load(_concat_reshape(False)).normalized), install_unread=True
    )
    assert everything.unread == () and any("stack-reshape-to-concat#0" in command for command in everything.commands)
    stacked = usable_rules(select(), present_constructors(load(_concat_reshape(True)).normalized))
    assert "stack-reshape-to-concat#0" not in stacked.unread
    assert any('stack-reshape-to-concat#0"' in command for command in stacked.commands)


@pytest.mark.parametrize("make", [_conv_bn, lambda: _concat_reshape(False)])
def test_leaving_out_unread_fact_bodies_changes_no_output(make, monkeypatch: pytest.MonkeyPatch) -> None:
    """The optimized model is byte for byte the one every chosen body gives."""
    assert usable_rules(select(), present_constructors(load(make()).normalized)).unread  # some body is left out
    pruned = eqsat.optimize(make(), verify=False).proto.SerializeToString()
    monkeypatch.setattr(rule_closure, "_live", lambda bodies: [True] * len(bodies))
    assert usable_rules(select(), present_constructors(load(make()).normalized)).unread == ()
    whole = eqsat.optimize(make(), verify=False).proto.SerializeToString()
    assert pruned == whole
