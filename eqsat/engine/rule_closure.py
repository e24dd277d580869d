"""Which egglog rules a model can use: installing a rule costs ~1.2 µs per character of its text, whether or not it
can ever match.

An egglog query matches only e-nodes that exist, so a rule whose query names a constructor (an op, or a
leaf such as `Scalar`) that the e-graph never holds cannot fire. Starting from the constructors a model's
encoding can hold (`present_constructors`), a rule is usable when every constructor its query names is
present; its actions may create more (a rewrite to Mul makes the Mul rules usable), so the usable set is
a closure over constructor sets, computed to a fixed point. Facts that only rules set (RULE_ONLY_FACTS)
count like constructors: a query reading one needs a usable rule that sets it. Rules whose query names no constructor
(pure fact rules) are always usable.

Generic constructors (eqsat.engine.terms.GENERIC) count by op: a query naming `(Relu x)` (egglog's
`(Unary "Relu" x)`) needs Relu; one with an op variable, `(Unary op x)`, needs some op of the family; an action
`(Unary op y)` with the matched op creates no op that was not there, and one naming an op creates that op.

The result keeps the registry's order, so the same model always installs the same rules in the same order
(deterministic output, whatever the cache of prepared backends holds).

    usable = usable_rules(rules, present_constructors(model_proto))
    usable.commands       # the egglog rules to install, in registry order
    usable.constructors   # every constructor they assume may exist: what the model loads must be among them
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Iterable, Mapping, Sequence

import onnx

from eqsat.frontend.io import all_graphs
from eqsat.engine.rule import Rule
from eqsat.engine.terms import GENERIC, LIST_BASES, LIST_FUNCTIONS, OP_FACTS, OP_TABLES, OPS, SPECIAL

#: Every constructor of the term language (ops and leaves); egglog functions and relations are not.
CONSTRUCTORS = frozenset(OPS) | frozenset(SPECIAL)
#: Relations and functions that only rules set (never the encoder): a query reading one needs a usable rule
#: that sets it (conv-merge reads `conv-site`, which only a rule matching a Conv sets).
RULE_ONLY_FACTS = (
    frozenset(
        {
            "conv-site",
            "bn-foldable",
            "cdim-demand",
            "cdim",
            "const-list",
            "cat-eq",
            "split-walk",
            "split-fits",
            "cat-perm",
            "tsink-need",
            "untransposed",
            "stack-need",
            "stacked",
            "gelu-h",
            "gelu-half",
            "mm-site",
            "mm-bias-site",
            "mm-next",
            "mm-bias-next",
            "gemm-site",
            "gemm-bias-site",
            "gemm-next",
            "gemm-bias-next",
            "conv-next",
            "conv-bias-next",
            "merge-tip",
            "split-extends",
            "pool-pad",
            "pool-sum",
            "per-channel",
            "per-column",
            "conv-pad",
            "conv-group-views",
            "bn-unmarked",
            "ln-dims",
            "bias-fold-site",
            "quant-range",
            "quant-twin",
            "reshape-of",
            "view-of",
            "mul-of",
            "add-of",
            # tensor, layout and cleanup sites
            "onehot-gather",
            "gather-rows",
            "reshape-bias",
            "bcast-sink",
            "reduce-sink",
            "split-reshape",
            "space-depth",
            "reflect-pads",
            "view-merge",
            # conv and normalization guards computed once (rewrites/conv.py, conv_facts.py, normalization.py)
            "norm-moments",
            "ln-span",
            "in-site",
            "bn-scale",
            "bn-folds",
            "conv-of",
            "conv-input",
        }
    )
    | frozenset(LIST_FUNCTIONS)
    | frozenset(f"need-{name}" for name in LIST_FUNCTIONS)
) - frozenset(LIST_BASES)  # a standard fact sets their base value
_TRACKED = CONSTRUCTORS | RULE_ONLY_FACTS | frozenset(GENERIC)
#: Leaves and plumbing the encoder may create for any model (Scalar, Const, Opaque, lists, ...).
ALWAYS_PRESENT = frozenset({"Ref", "Input", "Const", "Scalar", "Absent", "TNil", "TCons", "Opaque", "Out"})

_HEAD = re.compile(r"\(\s*([A-Za-z][\w-]*)")
#: A generic constructor and its op: a literal (`"Relu"`) or a variable.
_GENERIC_USE = re.compile(r"\(\s*(" + "|".join(GENERIC) + r')\s+("?)([\w-]+)')


#: An op fact guarding a variable: `(arith op)`.
_OP_GUARD = re.compile(r"\(\s*(" + "|".join(map(re.escape, OP_FACTS)) + r")\s+([\w-]+)\s*\)")
#: Between a family and the op facts guarding its op variable in a requirement: `Binary:arith`.
_GUARDED = ":"


@functools.lru_cache(maxsize=None)
def constructors_in(text: str) -> frozenset[str]:
    """The constructors (and RULE_ONLY_FACTS) applied anywhere in egglog `text` (its s-expressions' heads); a
    generic constructor counts as its op when the op is a literal, as the family's name when it is a variable,
    and as `Family:fact+...` when op facts in `text` guard that variable (`(Binary op a b) (arith op)`: some
    arithmetic op must be present, not any binary one)."""
    found = set(_HEAD.findall(text)) & _TRACKED - set(GENERIC)
    guards: dict[str, set[str]] = {}
    for fact, variable in _OP_GUARD.findall(text):
        guards.setdefault(variable, set()).add(fact)
    for family, quoted, op in _GENERIC_USE.findall(text):
        if quoted:
            found |= {op} & _TRACKED
        else:
            found.add(family + _GUARDED + "+".join(sorted(guards[op])) if op in guards else family)
    return frozenset(found)


def _present(name: str, available: set[str]) -> bool:
    """Whether `name` (a constructor, a rule-only fact, or a family for a query's op variable, with the op
    facts that guard it) may exist."""
    family, guarded, facts = name.partition(_GUARDED)
    if family in GENERIC:
        ops = GENERIC[family]
        for fact in facts.split("+") if guarded else ():
            ops = tuple(op for op in ops if op in OP_FACTS[fact])
        return any(op in available for op in ops)
    return name in available


def present_constructors(model: onnx.ModelProto) -> frozenset[str]:
    """The constructors encoding `model` can create: its ONNX ops (bodies of If/Loop/Scan included) that
    the term language models (Concat and Split are list constructors of the same name; a Reshape may become
    ReshapeDyn), plus the leaves and plumbing any graph may need."""
    ops = {node.op_type for graph in all_graphs(model.graph) for node in graph.node if node.domain in ("", "ai.onnx")}
    if "Reshape" in ops:
        ops.add("ReshapeDyn")  # a Reshape whose target is computed at run time
    return (frozenset(ops) & CONSTRUCTORS) | ALWAYS_PRESENT


#: A row of a standard fact table that names ops (OP_TABLES): `(additive-chain op1 op2 op)`.
_OP_TABLE_USE = re.compile(r"\(\s*(" + "|".join(map(re.escape, OP_TABLES)) + r")((?:\s+[\w\"-]+)+)\s*\)")


@functools.lru_cache(maxsize=None)
def _created(facts: str, actions: str) -> frozenset[str]:
    """What a rule's `actions` may create: the constructors they name, and the ops an op variable read from a
    standard fact table's op column can hold (additive-chain's combining op: the Add of a Sub-Sub chain). An op
    variable bound otherwise names an op the model has: the matched node's, or one a site relation recorded."""
    made = {c for c in constructors_in(actions) if c.partition(_GUARDED)[0] not in GENERIC}
    from_tables: dict[str, frozenset[str]] = {}
    for table, args in _OP_TABLE_USE.findall(facts):
        column, ops = OP_TABLES[table]
        words = args.split()
        if column < len(words):
            from_tables[words[column]] = from_tables.get(words[column], frozenset()) | ops
    for _, quoted, op in _GENERIC_USE.findall(actions):
        if not quoted:
            made |= from_tables.get(op, frozenset())
    return frozenset(made)


@dataclasses.dataclass(frozen=True)
class Usable:
    """The egglog rules of a rule set that can fire, and the constructors that assumption rests on."""

    commands: tuple[str, ...]
    constructors: frozenset[str]
    #: Each constructor (or rule-only fact) not present at the start -> the egglog rule (`name#k`) whose actions
    #: first made it available: why a rule on an op the model lacks is installed (`bench_install --why`).
    created_by: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False)


def usable_rules(rules: Sequence[Rule], present: Iterable[str]) -> Usable:
    """The egglog commands of `rules` that can fire on an e-graph starting with the `present` constructors,
    closed under the constructors (and rule-only facts) their actions create, in registry order."""
    available = set(present)
    created_by: dict[str, str] = {}
    candidates = [(rule, k, body) for rule in rules for k, body in enumerate(rule.egglog)]
    chosen: set[int] = set()
    grew = True
    while grew:
        grew = False
        for index, (rule, k, body) in enumerate(candidates):
            if index not in chosen and all(_present(name, available) for name in constructors_in(body.facts)):
                chosen.add(index)
                created = _created(body.facts, body.actions) - available
                if created:
                    created_by.update(dict.fromkeys(created, f"{rule.name}#{k}"))
                    available |= created
                    grew = True
    commands = tuple(
        body.command(rule.ruleset, f"{rule.name}#{k}")
        for index, (rule, k, body) in enumerate(candidates)
        if index in chosen
    )
    return Usable(commands, frozenset(available), created_by)
