"""A rule body's terms as the rule closure reads them: which constructors its query matches and its actions create,
and which of their e-classes are necessarily constant.

The argument. Lowering folds a constant class (one holding a `Const` or `Scalar`, or a node whose inputs are all
constant: eqsat.engine.egraph) into one initializer, whichever of its e-nodes it evaluates, and costs it nothing. So:
- an op the rules create only over constant inputs (CONST: bn-scale-sites' gamma / sqrt(var + eps) on a model with
  no Div or Sqrt of its own) has nodes only in constant classes, and a query node of such an op matches a constant
  class over constant inputs;
- a body whose every union joins a constant class with another constant class, or with a node no live class can
  hold yet (`fresh`: of an op with no node outside constant classes, or over such a node), and that sets no fact on
  a class it matched, adds only equal e-nodes under constant classes: it cannot change the output. Left out, what
  it would create is not assumed either (and it is not installed, so nothing is created).
Not constant: never-constant ops (Opaque, Split, Q/DQ), random ops, and unextractable plumbing (TAppend, Ref: lowering
never evaluates them, so the rule giving one its extractable form matters). Assumed: a view (Reshape, Transpose,
Cast, ...) in a constant class reads a constant class (it holds a run-time input only once some rule proved that input
constant, e.g. x * 0 = 0; what is built from it then hangs under the constant class). Constant classes over 2^20
elements are computed at run time, not folded; the closure does not tell them apart: a rule left out there could
only have changed how such a constant is computed. Leaving a rule out is always sound; the risk is a rewrite not made.

    terms = BodyTerms.of(body.facts, body.actions)
    reading = terms.read(ClosureState(levels={"Conv": ANY, "Div": CONST}, fact_constant={}))
    reading.confined     # it cannot change the output (above)
    reading.created      # op -> CONST or ANY: the ops the actions make, and where
    reading.facts        # rule-only fact -> per argument, set to a constant class
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
from typing import Iterable, Mapping, NamedTuple, Sequence, Union

from eqsat.engine.egraph import NEVER_CONSTANT, PLUMBING
from eqsat.ops import VIEW_OPS
from eqsat.engine.terms import GENERIC, GENERIC_OF, NONDETERMINISTIC, OP_FACTS, OP_TABLES, OPS, SPECIAL, declarations

Sexp = Union[str, list["Sexp"]]

#: Where an op's e-nodes may sit: only in constant classes (all their tensor inputs constant), or anywhere.
CONST, ANY = "const", "any"
#: Leaves whose class is constant.
CONSTANT_LEAVES = frozenset({"Const", "Scalar", "Absent", "TNil"})
#: Ops that move data without computing (one input, read whole): a constant class's view of x is taken to have a
#: constant x. (A class holds such a node over a run-time x only once a rule proved that x a constant, e.g. x * 0;
#: what a rule creates from it then hangs under the constant class alone, which lowering folds.)
VIEWS = VIEW_OPS | {"Transpose", "Cast"}
#: Nodes lowering never evaluates (list plumbing, handles): a class holding only such a node has no value to fold
#: until a rule adds an extractable form (tensor-list-append's TCons for a TAppend), so they make nothing constant.
UNEXTRACTABLE = PLUMBING | {"Ref"}
#: Sorts of e-classes (tensors, lists, multi-output nodes): the arguments a constant-ness is tracked for.
_CLASS_SORTS = frozenset({"T", "TL", "N"})
_ALL_OPS = frozenset(OPS)
_CONSTRUCTOR_HEADS = frozenset(GENERIC) | frozenset(OPS) | frozenset(SPECIAL)
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[()]|[^\s()]+')
_DECLARED = re.compile(r"\((?:relation|function|constructor) ([\w-]+) \(([^)]*)\)")


def parse(text: str) -> list[Sexp]:
    """The s-expressions of egglog `text`, as nested lists of atoms (strings keep their quotes)."""
    stack: list[list[Sexp]] = [[]]
    # without a string literal, the tokens are the parentheses and the runs between them and spaces
    tokens = _TOKEN.findall(text) if '"' in text else text.replace("(", " ( ").replace(")", " ) ").split()
    for token in tokens:
        if token == "(":
            stack.append([])
        elif token == ")":
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(token)
    return stack[0]


def _signatures() -> dict[str, tuple[str, ...]]:
    """Argument sorts of every constructor, relation and function (an op of a generic family written by name, `(Relu
    x)`, has its op's signature; the family, `(Unary op x)`, takes the op's name first)."""
    sorts = {name: tuple(args.split()) for name, args in _DECLARED.findall(declarations())}
    sorts.update({op: OPS[op].signature for op in GENERIC_OF})
    sorts.update({name: args for name, (args, _) in SPECIAL.items()})
    return sorts


_VARIABLE = re.compile(r"[A-Za-z_][\w-]*\Z")


_SIGNATURES = _signatures()
#: Per signature, which arguments are e-classes.
_CLASS_ARGS = {name: tuple(s in _CLASS_SORTS for s in sorts) for name, sorts in _SIGNATURES.items()}


@functools.lru_cache(maxsize=None)
def _is_var(atom: str) -> bool:
    return _VARIABLE.match(atom) is not None and atom not in ("inf", "NaN")


class Node(NamedTuple):
    """A constructor application: its op (the family's name when the op is a variable), the op variable, and the keys of
    its e-class arguments (a variable's name, or another node's key)."""

    key: str
    op: str
    op_var: str | None
    inputs: tuple[str, ...]


class Fact(NamedTuple):
    """A relation or function read (query) or set (actions) with the keys of its arguments (None: not a class)."""

    name: str
    args: tuple[str | None, ...]
    strings: tuple[str, ...] = ()  # the variables at its String arguments (an op a site relation records)

    def keys(self, group: Mapping[str, str], op_vars: frozenset[str]) -> list[str]:
        """Where its flags are kept: per level of each op variable among its arguments (both when unknown), so a
        site relation keeps apart the sites of ops that sit only in constant classes."""
        levels = [[group[v]] if v in group else [CONST, ANY] for v in self.strings if v in op_vars]
        return ["@".join((self.name, *combo)) for combo in itertools.product(*levels)]


@dataclasses.dataclass(frozen=True)
class ClosureState:
    """What the closure knows: each available op's level, and for each rule-only fact its rules have set so far,
    per argument whether every such rule set it to a constant class."""

    levels: Mapping[str, str]
    fact_constant: Mapping[str, tuple[bool, ...]]
    tracked: frozenset[str] = frozenset()  # the rule-only facts: one no rule has set yet holds no row


@dataclasses.dataclass(frozen=True)
class Reading:
    """One body read in one closure state."""

    confined: (
        bool  # it unions only constant classes and sets no fact on a class it matched: it cannot change the output
    )
    created: Mapping[str, str]  # op -> CONST when every node of it the actions create has constant inputs, else ANY
    facts: Mapping[str, tuple[bool, ...]]  # rule-only fact set -> per argument, set to a constant class


class _Terms:
    """Collects the nodes of a list of s-expressions, numbering them (`#k`) and resolving `let` names."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.nodes: list[Node] = []
        self.facts: list[Fact] = []
        self.equal: list[tuple[str, str]] = []
        self.names: dict[str, str] = {}

    def key(self, term: Sexp) -> str | None:
        """The key of `term` when it denotes an e-class (a variable or a constructor node), after recording every
        constructor node inside it."""
        if isinstance(term, str):
            return self.names.get(term, term) if _is_var(term) else None
        if not term or not isinstance(term[0], str):
            return None
        head, args = term[0], term[1:]
        sorts = _SIGNATURES.get(head)
        if sorts is None or head == "set":  # a primitive (vec-of, +, ...): only nested terms may hold nodes
            for a in args:
                if isinstance(a, list):
                    self.key(a)
            return None
        mask = _CLASS_ARGS[head]
        # a class argument's key (a nested term is recorded whatever its sort), None for any other argument
        keys = [self.key(a) if c or isinstance(a, list) else None for a, c in zip(args, mask)]
        classes = tuple([k if c else None for k, c in zip(keys, mask)])
        if head in _CONSTRUCTOR_HEADS:
            op, op_var = head, None
            if head in GENERIC and args and isinstance(args[0], str):  # the family's signature starts with the op
                if args[0].startswith('"'):
                    op = args[0].strip('"')
                else:
                    op_var = args[0]
            node = Node(f"{self.prefix}{len(self.nodes)}", op, op_var, tuple([k for k in classes if k is not None]))
            self.nodes.append(node)
            return node.key
        strings = tuple([a for a, s in zip(args, sorts) if s == "String" and isinstance(a, str) and _is_var(a)])
        self.facts.append(Fact(head, classes, strings))
        return None


@dataclasses.dataclass(frozen=True)
class BodyTerms:
    """The terms of one rule body (facts -> actions); keys the query equates are one key (its canonical one)."""

    query_nodes: tuple[Node, ...]
    query_facts: tuple[Fact, ...]
    guards: Mapping[str, frozenset[str]]  # op variable -> the ops its op facts and op tables admit
    tabled: Mapping[str, frozenset[str]]  # op variable read from a standard op table's op column -> that column's ops
    created: tuple[Node, ...]  # nodes the actions build (subsumed ones excluded), inner ones first
    set_facts: tuple[Fact, ...]  # relations asserted and functions set by the actions
    unions: tuple[tuple[str, str], ...]
    query_keys: frozenset[str]  # every key the query binds
    seen: dict[tuple, Reading] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @staticmethod
    @functools.lru_cache(maxsize=None)
    def of(facts: str, actions: str) -> "BodyTerms":
        query = _Terms("q")
        guards: dict[str, frozenset[str]] = {}
        tabled: dict[str, frozenset[str]] = {}
        for atom in parse(facts):
            if isinstance(atom, list) and atom and atom[0] == "=" and len(atom) == 3:
                a, b = query.key(atom[1]), query.key(atom[2])
                if a is not None and b is not None:
                    query.equal.append((a, b))
                continue
            if isinstance(atom, list) and len(atom) == 2 and atom[0] in OP_FACTS and isinstance(atom[1], str):
                guards[atom[1]] = guards.get(atom[1], frozenset(OPS)) & frozenset(OP_FACTS[atom[0]])
                continue
            if isinstance(atom, list) and len(atom) == 3 and atom[0] == "!=" and isinstance(atom[1], str):
                if isinstance(atom[2], str) and atom[2].startswith('"') and _is_var(atom[1]):
                    guards[atom[1]] = guards.get(atom[1], frozenset(OPS)) - {atom[2].strip('"')}
                    continue
            if isinstance(atom, list) and atom and atom[0] in OP_TABLES:
                column, ops = OP_TABLES[atom[0]]
                var = atom[column + 1] if column + 1 < len(atom) else None
                if isinstance(var, str):
                    guards[var] = guards.get(var, frozenset(OPS)) & ops
                    tabled[var] = tabled.get(var, frozenset()) | ops
            query.key(atom)
        made = _Terms("a")
        unions: list[tuple[str, str]] = []
        for action in parse(actions):
            if not isinstance(action, list) or not action:
                continue
            head = action[0]
            if head == "let" and len(action) == 3 and isinstance(action[1], str):
                bound = made.key(action[2])
                if bound is not None:
                    made.names[action[1]] = bound
            elif head == "union" and len(action) == 3:
                a, b = made.key(action[1]), made.key(action[2])
                if a is not None and b is not None:
                    unions.append((a, b))
            elif head == "set" and len(action) == 3:
                made.key(action[1])
                made.key(action[2])
            elif head != "subsume":
                made.key(action)
        canon = _canonical(query.equal).get  # canon(k, k): k's representative

        def node(n: Node) -> Node:
            return Node(canon(n.key, n.key), n.op, n.op_var, tuple([canon(k, k) for k in n.inputs]))

        def fact(f: Fact) -> Fact:
            return Fact(f.name, tuple([k and canon(k, k) for k in f.args]), f.strings)

        keys = {k for n in query.nodes for k in (n.key, *n.inputs)} | {k for f in query.facts for k in f.args if k}
        keys |= {k for pair in query.equal for k in pair}
        return BodyTerms(
            tuple(map(node, query.nodes)),
            tuple(map(fact, query.facts)),
            guards,
            tabled,
            tuple(map(node, made.nodes)),
            tuple(map(fact, made.facts)),
            tuple([(canon(a, a), canon(b, b)) for a, b in unions]),
            frozenset([canon(k, k) for k in keys]),
        )

    @functools.cached_property
    def op_vars(self) -> frozenset[str]:
        """The op variables: of generic nodes in the query or the actions, or guarded by an op fact."""
        return frozenset(n.op_var for n in (*self.query_nodes, *self.created) if n.op_var) | frozenset(self.guards)

    @functools.cached_property
    def variables(self) -> tuple[str, ...]:
        """The op variables a reading splits by level: of the query's nodes, or recorded by a fact it reads."""
        of_facts = {v for f in self.query_facts for v in f.strings} & self.op_vars
        return tuple(sorted({n.op_var for n in self.query_nodes if n.op_var} | of_facts))

    @functools.cached_property
    def depends_on(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The ops and facts whose state a reading depends on (its cache key)."""
        ops = {op for n in (*self.query_nodes, *self.created) for op in GENERIC.get(n.op, (n.op,))}
        facts = {key for f in self.query_facts for key in f.keys({}, self.op_vars)}
        return tuple(sorted(ops)), tuple(sorted(facts))

    def op_candidates(self, node: Node, levels: Mapping[str, str], group: Mapping[str, str]) -> tuple[str, ...]:
        """The available ops `node` may hold: its op, or those of its family its op variable's guards admit (of the
        level `group` assigns the variable, when it does)."""
        if node.op_var is None:
            return (node.op,) if node.op in levels else ()
        admitted = self.guards.get(node.op_var, _ALL_OPS)
        level = group.get(node.op_var)
        return tuple(
            op for op in GENERIC.get(node.op, ()) if op in admitted and op in levels and level in (None, levels[op])
        )

    def constant_keys(self, state: ClosureState, group: Mapping[str, str]) -> set[str] | None:
        """The query's keys that are constant classes in every match (op variables of the levels `group` assigns):
        is-const guards, arguments a rule-only fact is only ever set to constants at, the nodes (and inputs) of ops
        that sit only in constant classes, the inputs of constant views, leaves, and nodes over constants
        (never-constant ops excepted). None when no match can exist: a rule-only fact read has no row of the op
        levels `group` assigns, or a graph input would be constant."""
        constant: set[str] = set()
        for fact in self.query_facts:
            if fact.name == "is-const":
                constant.update(k for k in fact.args if k)
                continue
            stored = fact.keys(group, self.op_vars) if fact.strings else [fact.name]
            if fact.name in state.tracked and not any(key in state.fact_constant for key in stored):
                return None
            for key in stored:
                flags = state.fact_constant.get(key, ())
                constant.update(k for k, flag in zip(fact.args, flags) if k and flag)
        grew = True
        while grew:
            grew = False
            for node in self.query_nodes:
                if node.key in constant and (node.op not in VIEWS or set(node.inputs) <= constant):
                    continue
                ops = self.op_candidates(node, state.levels, group)
                keys = {node.key}
                if ops and all(state.levels[op] == CONST for op in ops) or node.op in VIEWS and node.key in constant:
                    keys.update(node.inputs)
                elif not _over_constants(node, node.inputs, constant):
                    continue
                if not keys <= constant:
                    constant |= keys
                    grew = True
        if any(n.op == "Input" and n.key in constant for n in self.query_nodes):
            return None
        return constant

    def read(self, state: ClosureState) -> Reading:
        """What the body does in `state`: each op variable of the query read once for the ops of each level it may
        hold (an op that sits only in constant classes makes the node it matches constant), the readings joined.
        Kept per state of the ops and facts it depends on."""
        ops, facts = self.depends_on
        key = (tuple(state.levels.get(op) for op in ops), tuple(state.fact_constant.get(f) for f in facts))
        if key not in self.seen:
            self.seen[key] = self._read_all(state)
        return self.seen[key]

    def _read_all(self, state: ClosureState) -> Reading:
        readings = []
        for levels in itertools.product((CONST, ANY), repeat=len(self.variables)):
            group = dict(zip(self.variables, levels))
            if all(self.op_candidates(n, state.levels, group) for n in self.query_nodes if n.op_var):
                reading = self._read(state, group)
                if reading is not None:
                    readings.append(reading)
        if len(readings) == 1:
            return readings[0]
        created: dict[str, str] = {}
        facts: dict[str, tuple[bool, ...]] = {}
        for reading in readings:
            created = merge_levels(created, reading.created.items())
            facts = fold_facts(facts, reading.facts)
        return Reading(bool(readings) and all(r.confined for r in readings), created, facts)

    def _read(self, state: ClosureState, group: Mapping[str, str]) -> Reading | None:
        constant = self.constant_keys(state, group)
        if constant is None:
            return None
        created: dict[str, str] = {}
        fresh: set[str] = set()  # created nodes no live class can hold already: of an op with no node outside
        for node in self.created:  # constant classes, or over such a node (inner nodes first, as recorded)
            if node.key not in constant and _over_constants(node, node.inputs, constant):
                constant.add(node.key)
            level = CONST if node.key in constant else ANY
            ops = _made_ops(self, node, state.levels, group)
            if all(state.levels.get(op) != ANY for op in ops) or any(k in fresh for k in node.inputs):
                fresh.add(node.key)
            for op in ops:
                created[op] = ANY if ANY in (level, created.get(op)) else CONST
        facts = {
            key: tuple(k is not None and k in constant for k in f.args)
            for f in self.set_facts
            if f.name != "is-const"
            for key in (f.keys(group, self.op_vars) if f.strings else [f.name])
        }
        sets_on_matched = any(k in self.query_keys for f in self.set_facts for k in f.args if k)
        confined = (
            bool(self.unions)
            and not sets_on_matched
            and all(
                a in constant and (b in constant or b in fresh) or b in constant and a in fresh for a, b in self.unions
            )
        )
        return Reading(confined, created, facts)


def _canonical(equal: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The representative of each key `equal` joins to another (a key it does not name is its own)."""
    parent: dict[str, str] = {}

    def find(k: str) -> str:
        while parent.get(k, k) != k:
            k = parent[k]
        return k

    for a, b in equal:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
    return {k: find(k) for k in parent}


def _over_constants(node: Node, inputs: Iterable[str], constant: set[str]) -> bool:
    """Whether `node` is constant given constant `inputs`: a constant leaf, or an op lowering folds over constant
    inputs (not a never-constant or random op)."""
    if node.op in CONSTANT_LEAVES:
        return True
    if node.op in NEVER_CONSTANT or node.op in NONDETERMINISTIC or node.op in UNEXTRACTABLE:
        return False
    return bool(node.inputs) and all(k in constant for k in inputs)


def _made_ops(terms: BodyTerms, node: Node, levels: Mapping[str, str], group: Mapping[str, str]) -> tuple[str, ...]:
    """The ops a created `node` may be: its op, or for an op variable the ops it can hold (a standard op table's
    column, else an op the model has: the matched node's or one a site relation recorded, among those its guards
    admit, of the level `group` assigns the variable when it does)."""
    if node.op_var is None:
        return (node.op,)
    if node.op_var in terms.tabled:
        return tuple(op for op in GENERIC[node.op] if op in terms.tabled[node.op_var])
    admitted = terms.guards.get(node.op_var, frozenset(GENERIC[node.op]))
    level = group.get(node.op_var)
    return tuple(op for op in GENERIC[node.op] if op in admitted and op in levels and level in (None, levels[op]))


def fold_facts(
    seen: Mapping[str, tuple[bool, ...]], new: Mapping[str, tuple[bool, ...]]
) -> dict[str, tuple[bool, ...]]:
    """Per rule-only fact, the arguments every setter so far set to a constant class."""
    out = dict(seen)
    for name, flags in new.items():
        out[name] = tuple(a and b for a, b in zip(out[name], flags)) if name in out else flags
    return out


def merge_levels(levels: Mapping[str, str], created: Iterable[tuple[str, str]]) -> dict[str, str]:
    """`levels` with each created op's level: ANY wins over CONST."""
    out = dict(levels)
    for op, level in created:
        out[op] = ANY if ANY in (level, out.get(op)) else CONST
    return out


def class_sorts(name: str) -> Sequence[str]:
    """The argument sorts of a constructor, relation or function."""
    return _SIGNATURES.get(name, ())
