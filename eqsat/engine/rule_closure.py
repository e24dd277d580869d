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

Constant classes (eqsat.engine.rule_terms): a class holding a constant, or a node over constant classes only, is
lowered as one folded constant whatever e-nodes it holds. The closure keeps, per op, whether rules create it only over
constants (then its nodes sit only in constant classes: bn-scale-sites' gamma / sqrt(var + eps) makes Div and Sqrt
so on a model without them), and per rule-only fact which arguments its rules set only to constant classes. A body
whose every union joins a constant class with a constant class or a node no live class can hold yet (of an op that
is nowhere else), and that sets no fact on a class it matched, cannot change the output: it is left out, and what it
would create is not assumed. Dropping a rule is always sound; `bench_install --why` marks the ops so held.

Unread facts: rule-only facts are read by rules alone (decoding, extraction and lowering read only the term tables,
shape, dtype and `rewritten`: eqsat.engine.egraph.DECODED_FACTS). A chosen body whose actions only set rule-only facts
(building no node) serves only the installed bodies that read one of them; when none does (stack-reshape-to-concat's
marking of a Concat's list on a model with no Unsqueeze), it is not installed (`Usable.unread` names it), nor are the
fact rules that only it reads from. Liveness starts at every other chosen body.

A body guarded on a newer opset than the model's (`(= o (model-opset)) (>= o 20)`: Gelu is an op from opset 20)
never matches: with the model's opset (`model_opset`) it is left out, and what it would create is not assumed
(on an opset-14 BERT, the Gelu and LayerNormalization fusions and the rules on their results: 290 -> 265 rules).

The result keeps the registry's order, so the same model always gets the same selection. Of it, each rule is
installed once it can match (eqsat.engine.rule_gate), so the order egglog holds them in follows when they became
ready, and on a kept backend what earlier runs installed comes first. Within one step, rule order decides only which
of two `shape` values set to one e-class in the same step is kept (`:merge old`); the two can only differ by symbols,
both are recorded in `shape-met`, and the unification rounds make them one (eqsat.engine.unify); and which of equally
cheap e-nodes a constant class is folded from. Outputs were byte-identical fresh, on kept backends and with every rule
installed on the shared models; on random graphs, at most one in 1,000 folds a constant another way
(tests/test_rule_gate.py).

    usable = usable_rules(rules, present_constructors(model_proto))
    usable.commands       # the egglog rules to install, in registry order
    usable.constructors   # every constructor they assume may exist: what the model loads must be among them
    usable.unread         # chosen bodies (`name#k`) left out: they only set facts no installed body reads
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import re
from typing import Iterable, Mapping, NamedTuple, Sequence

import onnx

from eqsat.frontend.io import all_graphs
from eqsat.engine.rule import Egglog, Rule
from eqsat.engine.rule_terms import ANY, CONST, BodyTerms, ClosureState, Reading, class_sorts, parse
from eqsat.engine.rule_terms import Sexp
from eqsat.engine.terms import GENERIC, GENERIC_OF, LIST_BASES, LIST_FUNCTIONS, OP_FACTS, OP_TABLES, OPS, SPECIAL
from eqsat.engine.terms import default_opset

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
            # constant leaves and Scalars' values (constant-terms): a class they name is constant (rule_terms)
            "const-leaf",
            "zero-point",
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
#: Heads that build an e-node when an action applies them: constructors, generic families and their ops.
_NODE_HEADS = CONSTRUCTORS | frozenset(GENERIC) | frozenset(GENERIC_OF)
#: Leaves and plumbing the encoder may create for any model (Scalar, Const, Opaque, lists, ...).
ALWAYS_PRESENT = frozenset({"Ref", "Input", "Const", "Scalar", "Absent", "TNil", "TCons", "Opaque", "Out"})

_HEAD = re.compile(r"\(\s*([A-Za-z][\w-]*)")
#: An s-expression's head, and its first argument when that is an atom: the quote opening it, the atom, and the `)`
#: when it closes the s-expression (`(arith op)`: an op fact guarding a variable). One pass reads all three.
_HEAD_ARG = re.compile(r'\(\s*([A-Za-z][\w-]*)(?:\s+("?)([\w-]+)(\s*\))?)?')
_FAMILIES = frozenset(GENERIC)
#: Between a family and the op facts guarding its op variable in a requirement: `Binary:arith`.
_GUARDED = ":"


@functools.lru_cache(maxsize=None)
def _heads(text: str) -> tuple[frozenset[str], tuple[tuple[str, str, str], ...]]:
    """`constructors_in(text)`, and each generic constructor applied in `text` as (family, quote, op): one scan."""
    heads = _HEAD.findall(text)
    if _FAMILIES.isdisjoint(heads):  # most texts: no generic constructor, so no op variable to read guards for
        return _TRACKED.intersection(heads), ()
    found: set[str] = set()
    guards: dict[str, set[str]] = {}
    uses = []
    for head, quoted, arg, closed in _HEAD_ARG.findall(text):
        if head in _FAMILIES:
            if arg:
                uses.append((head, quoted, arg))
        elif head in _TRACKED:
            found.add(head)
        if closed and not quoted and head in OP_FACTS:
            guards.setdefault(arg, set()).add(head)
    for family, quoted, op in uses:
        if quoted:
            found |= {op} & _TRACKED
        else:
            found.add(family + _GUARDED + "+".join(sorted(guards[op])) if op in guards else family)
    return frozenset(found), tuple(uses)


def constructors_in(text: str) -> frozenset[str]:
    """The constructors (and RULE_ONLY_FACTS) applied anywhere in egglog `text` (its s-expressions' heads); a
    generic constructor counts as its op when the op is a literal, as the family's name when it is a variable,
    and as `Family:fact+...` when op facts in `text` guard that variable (`(Binary op a b) (arith op)`: some
    arithmetic op must be present, not any binary one)."""
    return _heads(text)[0]


def present(name: str, available: set[str]) -> bool:
    """Whether `name` (a constructor, a rule-only fact, or a family for a query's op variable, with the op
    facts that guard it) may exist."""
    return any(op in available for op in _meant(name))


@functools.lru_cache(maxsize=None)
def _meant(name: str) -> tuple[str, ...]:
    """The names `name` stands for: the ops of a family its op facts admit, else itself."""
    family, guarded, facts = name.partition(_GUARDED)
    if family not in GENERIC:
        return (name,)
    ops = GENERIC[family]
    for fact in facts.split("+") if guarded else ():
        ops = tuple(op for op in ops if op in OP_FACTS[fact])
    return ops


def present_constructors(model: onnx.ModelProto) -> frozenset[str]:
    """The constructors encoding `model` can create: its ONNX ops (bodies of If/Loop/Scan included) that
    the term language models (Concat and Split are list constructors of the same name; a Reshape may become
    ReshapeDyn), plus the leaves and plumbing any graph may need."""
    ops = {node.op_type for graph in all_graphs(model.graph) for node in graph.node if node.domain in ("", "ai.onnx")}
    if "Reshape" in ops:
        ops.add("ReshapeDyn")  # a Reshape whose target is computed at run time
    return (frozenset(ops) & CONSTRUCTORS) | ALWAYS_PRESENT


def model_opset(model: onnx.ModelProto) -> int:
    """The model's default-domain opset, as encoding reads it (the `(model-opset)` fact)."""
    return default_opset({entry.domain: entry.version for entry in model.opset_import})


@functools.lru_cache(maxsize=None)
def least_opset(facts: str) -> int:
    """The least model opset under which a query can match: the largest N of a guard `(>= o N)` (or `(> o N)`,
    N + 1) on a variable bound as `(= o (model-opset))`, read from the query's s-expressions; 0 when it has none.
    A rule creating an op newer than the model's opset guards on it (LayerNormalization from 17, Gelu from 20)."""
    if "model-opset" not in facts:  # most queries: no parse
        return 0
    atoms = [atom for atom in parse(facts) if isinstance(atom, list) and len(atom) == 3]
    opset_vars = {
        var for head, a, b in atoms if head == "=" for var, other in ((a, b), (b, a)) if other == ["model-opset"]
    }
    least = 0
    for head, var, bound in atoms:
        if head in (">=", ">") and isinstance(var, str) and var in opset_vars and isinstance(bound, str):
            if bound.isdigit():
                least = max(least, int(bound) + (head == ">"))
    return least


#: A row of a standard fact table that names ops (OP_TABLES): `(additive-chain op1 op2 op)`.
_OP_TABLE_USE = re.compile(r"\(\s*(" + "|".join(map(re.escape, OP_TABLES)) + r")((?:\s+[\w\"-]+)+)\s*\)")


@functools.lru_cache(maxsize=None)
def created(facts: str, actions: str) -> frozenset[str]:
    """What a rule's `actions` may create: the constructors they name, and the ops an op variable read from a
    standard fact table's op column can hold (additive-chain's combining op: the Add of a Sub-Sub chain). An op
    variable bound otherwise names an op the model has: the matched node's, or one a site relation recorded."""
    found, uses = _heads(actions)
    made = {c for c in found if c.partition(_GUARDED)[0] not in GENERIC}
    from_tables: dict[str, frozenset[str]] = {}
    for table, args in _OP_TABLE_USE.findall(facts) if any(table in facts for table in OP_TABLES) else ():
        column, ops = OP_TABLES[table]
        words = args.split()
        if column < len(words):
            from_tables[words[column]] = from_tables.get(words[column], frozenset()) | ops
    for _, quoted, op in uses:
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
    #: The created ops whose nodes sit only in constant classes (rule_terms: built only over constants).
    constant_only: frozenset[str] = dataclasses.field(default=frozenset(), compare=False)
    #: The bodies (`name#k`) the closure chose but that are not installed: they only set rule-only facts that no
    #: installed body reads (`_live`).
    unread: tuple[str, ...] = dataclasses.field(default=(), compare=False)


#: Rule-only facts with an e-class argument: those whose arguments may be known constant (rule_terms).
CLASS_FACTS = frozenset(name for name in RULE_ONLY_FACTS if set(class_sorts(name)) & {"T", "TL", "N"})


class _Known(NamedTuple):
    """What the closure knows, as sets a profile tests at once (kept by `_Closure` beside its ClosureState)."""

    anywhere: set[str]  # ops with nodes outside constant classes (level ANY)
    constant: set[str]  # ops whose nodes sit only in constant classes (level CONST)
    constant_facts: set[str]  # class facts some argument of which is set to a constant class
    plain_facts: set[str]  # class facts (rows per op level apart) set so far, to no constant class


@dataclasses.dataclass(frozen=True)
class _Profile:
    """What a body names, read from its text without parsing it: enough to tell when its reading is plain."""

    query: frozenset[str]  # the ops the constructors its query names may be
    unions: bool
    made: frozenset[str]  # the constructors (and rule-only facts) its actions name
    made_ops: frozenset[str]  # the constructors among them
    families: frozenset[str]  # the ops of the families of its actions' op variables
    facts_read: frozenset[str]  # class facts its query reads
    facts_set: frozenset[str]  # class facts its actions set

    @functools.cached_property
    def names(self) -> frozenset[str]:
        """The ops and facts whose state its reading depends on."""
        return self.query | self.families | self.made | self.facts_read | self.facts_set

    @staticmethod
    @functools.lru_cache(maxsize=None)
    def of(facts: str, actions: str) -> "_Profile":
        query, acts = constructors_in(facts), constructors_in(actions)
        made = created(facts, actions)
        return _Profile(
            frozenset(op for n in query for op in _names(n)),
            "(union" in actions,
            made,
            made & CONSTRUCTORS,
            frozenset(op for n in acts if n.partition(_GUARDED)[0] in GENERIC for op in _names(n)),
            query & CLASS_FACTS,
            acts & CLASS_FACTS,
        )

    @functools.cached_property
    def reading(self) -> Reading:
        """The plain reading: not confined, creating what it names anywhere, setting no class fact to a constant."""
        return Reading(
            False,
            dict.fromkeys(sorted(self.made_ops), ANY),
            {name: (False,) * len(class_sorts(name)) for name in self.facts_set},
        )

    def plain(self, known: _Known) -> bool:
        """Whether the body's reading is taken as the plain one: its query names no op held only in constant classes
        and reads no class fact set to constants (a union it makes is then taken as not confined, even one whose
        root an is-const guard alone makes constant: kept, as before; on the 16 shared models such bodies add
        nothing), it creates only ops already anywhere, and sets only class facts already never constant."""
        if self.unions and not (
            self.query.isdisjoint(known.constant) and self.facts_read.isdisjoint(known.constant_facts)
        ):
            return False
        return (
            self.made_ops <= known.anywhere
            and self.families.isdisjoint(known.constant)
            and self.facts_set <= known.plain_facts
        )


_NOTHING = Reading(False, {}, {})


@functools.lru_cache(maxsize=None)
def _reads_as_nothing(facts: str, actions: str) -> bool:
    """Whether a body (not a need row) neither unions nor creates nor sets a class fact (a shape or dtype analysis):
    whatever the state, it reads as nothing."""
    return "(union" not in actions and not created(facts, actions) and not constructors_in(actions) & CLASS_FACTS


def _names(requirement: str) -> tuple[str, ...]:
    """The ops (or the fact) a requirement names: a family's ops for a query's op variable."""
    family = requirement.partition(_GUARDED)[0]
    return GENERIC.get(family, (family,))


class _Closure:
    """The work list of `usable_rules` and the state it grows: the available constructors (and rule-only facts), each
    op's level and each class fact's constant arguments, and the reading each chosen body was last applied with."""

    def __init__(self, rules: Sequence[Rule], present: Iterable[str], opset: int | None = None) -> None:
        self.candidates = [
            (rule, k, body)
            for rule in rules
            for k, body in enumerate(rule.egglog)
            if opset is None or least_opset(body.facts) <= opset  # a guard on a newer opset never holds
        ]
        self.available = set(present)
        self.levels: dict[str, str] = dict.fromkeys(self.available, ANY)
        self.facts: dict[str, tuple[bool, ...]] = {}
        self.known = _Known(set(self.available), set(), set(), set())  # the levels and facts, as sets
        self.state = ClosureState(self.levels, self.facts, CLASS_FACTS)  # read as the closure grows them
        self.created_by: dict[str, str] = {}
        self.siblings: dict[str, list[int]] = {}
        self.need_rows: dict[str, set[int]] = {rule.name: set() for rule in rules}
        for index, (rule, _, body) in enumerate(self.candidates):
            if body.need:
                self.need_rows[rule.name].add(index)
            else:
                self.siblings.setdefault(rule.name, []).append(index)
        self.readers: dict[str, set[int]] = {}  # a name -> the bodies to read again when it changes
        self.ready: set[int] = set()  # bodies whose every requirement is available
        self.registered: set[int] = set()  # bodies whose profile's names are among `readers`
        self.applied: dict[int, Reading] = {}  # the reading each chosen body was last applied with
        self.waiting = collections.deque(range(len(self.candidates)))
        self.queued = set(self.waiting)

    def run(self, install_unread: bool = False) -> Usable:
        """Read bodies until no reading changes; the chosen bodies' commands in registry order (those that only set
        facts no other reads left out, unless `install_unread`)."""
        while self.waiting:
            index = self.waiting.popleft()
            self.queued.discard(index)
            self._visit(index)
        chosen = [self.candidates[index] for index in sorted(self.applied)]
        live = [True] * len(chosen) if install_unread else _live([body for _, _, body in chosen])
        commands = tuple(
            body.command(rule.ruleset, f"{rule.name}#{k}") for (rule, k, body), keep in zip(chosen, live) if keep
        )
        unread = tuple(f"{rule.name}#{k}" for (rule, k, _), keep in zip(chosen, live) if not keep)
        constant_only = frozenset(op for op, level in self.levels.items() if level == CONST)
        return Usable(commands, frozenset(self.available), self.created_by, constant_only, unread)

    def _visit(self, index: int) -> None:
        """Read body `index` if it can match and serves something; apply its reading when that changed."""
        rule, _, body = self.candidates[index]
        if not self._is_ready(index):
            return
        if body.need and all(self._read(self.candidates[i][2]).confined for i in self.siblings.get(rule.name, ())):
            return  # a need row serves its rule's other bodies
        reading = self._read(body)
        if reading is not _NOTHING and index not in self.registered:
            self.registered.add(index)
            for name in _Profile.of(body.facts, body.actions).names:
                self.readers.setdefault(name, set()).update(self.need_rows[rule.name] | {index})
        if reading.confined or self.applied.get(index) is reading:
            return
        self.applied[index] = reading
        self._wake(self._apply(index, reading))

    def _is_ready(self, index: int) -> bool:
        """Whether every constructor (or fact) the body's query names may exist. Until then the body waits on one
        missing requirement. Once ready, a need row is read again when a requirement's op changes (another body
        is, through its profile's names)."""
        if index in self.ready:
            return True
        body = self.candidates[index][2]
        requires = constructors_in(body.facts)
        for name in requires:
            if name not in self.available and not present(name, self.available):
                for op in _meant(name):
                    self.readers.setdefault(op, set()).add(index)
                return False
        self.ready.add(index)
        for name in requires if body.need else ():
            for op in _names(name):
                self.readers.setdefault(op, set()).add(index)
        return True

    def _read(self, body: Egglog) -> Reading:
        """The body's reading in the current state (rule_terms), or the plain one (not confined, creating what it
        names anywhere, setting no class fact to a constant) when its profile shows it is that; a body that neither
        unions nor creates nor sets a class fact (a shape or dtype analysis) reads as nothing."""
        if not body.need and _reads_as_nothing(body.facts, body.actions):
            return _NOTHING
        profile = _Profile.of(body.facts, body.actions)
        if profile.plain(self.known):
            return profile.reading
        return BodyTerms.of(body.facts, body.actions).read(self.state)

    def _apply(self, index: int, reading: Reading) -> set[str]:
        """Take in what body `index` creates and sets under `reading`: the names whose state changed."""
        rule, k, body = self.candidates[index]
        changed = set(created(body.facts, body.actions) | set(reading.created)) - self.available
        if changed:
            self.created_by.update(dict.fromkeys(changed, f"{rule.name}#{k}"))
            self.available |= changed
        for op, level in reading.created.items():
            if self.levels.get(op) != ANY and self.levels.get(op) != level:
                self.levels[op] = level
                changed.add(op)
                if level == ANY:
                    self.known.constant.discard(op)
                    self.known.anywhere.add(op)
                else:
                    self.known.constant.add(op)
        for name, flags in reading.facts.items():
            base = name.partition("@")[0]
            if base in CLASS_FACTS:
                seen = self.facts.get(name)
                folded = flags if seen is None else tuple(a and b for a, b in zip(seen, flags))
                if folded != seen:
                    self.facts[name] = folded
                    changed.add(base)
                    (self.known.plain_facts.discard if any(folded) else self.known.plain_facts.add)(name)
                    self._note_constant(base)
        return changed

    def _note_constant(self, base: str) -> None:
        """Keep `known.constant_facts` for class fact `base` (its rows per op level are folded separately)."""
        if any(any(flags) for key, flags in self.facts.items() if key.partition("@")[0] == base):
            self.known.constant_facts.add(base)
        else:
            self.known.constant_facts.discard(base)

    def _wake(self, changed: Iterable[str]) -> None:
        """Queue every body that reads a changed name."""
        for name in changed:
            for reader in self.readers.get(name, ()):
                if reader not in self.queued:
                    self.queued.add(reader)
                    self.waiting.append(reader)


def _sexp_heads(term: Sexp) -> set[str]:
    """The heads of every s-expression in `term`."""
    heads: set[str] = set()
    stack = [term]
    while stack:
        t = stack.pop()
        if isinstance(t, list) and t:
            if isinstance(t[0], str):
                heads.add(t[0])
            stack.extend(t)
    return heads


@functools.lru_cache(maxsize=None)
def _fact_effects(facts: str, actions: str) -> tuple[frozenset[str], frozenset[str]] | None:
    """For a body whose actions only set or assert rule-only facts (no union, no node, no other fact: nothing
    decoding, extraction or lowering reads), (the rule-only facts it sets, those it reads); None for any other."""
    named = constructors_in(actions)
    if not named or not named <= RULE_ONLY_FACTS:
        return None  # it sets no rule-only fact, or builds a node
    sets: set[str] = set()
    reads = set(constructors_in(facts) & RULE_ONLY_FACTS)
    for action in parse(actions):
        if not isinstance(action, list) or not action:
            return None
        target, read = (
            (action[1], [*action[1][1:], action[2]])
            if action[0] == "set" and len(action) == 3
            else (action, action[1:])
        )
        if not isinstance(target, list) or not target or target[0] not in RULE_ONLY_FACTS:
            return None
        heads = _sexp_heads(read)
        if not heads.isdisjoint(_NODE_HEADS):
            return None  # it builds a node
        sets.add(target[0])
        reads |= heads & RULE_ONLY_FACTS
    return frozenset(sets), frozenset(reads)


def _live(bodies: Sequence[Egglog]) -> list[bool]:
    """Per body, whether it is installed: a body that only sets rule-only facts (`_fact_effects`) is, when an
    installed body reads one of them; every other body is. Liveness spreads from the other bodies through the facts
    they read (a chain of fact rules serving nothing is left out whole)."""
    effects = [_fact_effects(body.facts, body.actions) for body in bodies]
    live = [effect is None for effect in effects]
    setters: dict[str, list[int]] = {}  # a rule-only fact -> the fact-only bodies setting it
    reads: dict[int, frozenset[str]] = {}  # a fact-only body -> the rule-only facts it reads
    read: set[str] = set()
    for index, (body, effect) in enumerate(zip(bodies, effects)):
        if effect is None:
            read.update(constructors_in(body.facts))
            read.update(constructors_in(body.actions))
            continue
        reads[index] = effect[1]
        for name in effect[0]:
            setters.setdefault(name, []).append(index)
    waiting = list(read)
    while waiting:
        for index in setters.get(waiting.pop(), ()):
            if not live[index]:
                live[index] = True
                waiting.extend(reads[index] - read)
                read |= reads[index]
    return live


def usable_rules(
    rules: Sequence[Rule], present: Iterable[str], *, opset: int | None = None, install_unread: bool = False
) -> Usable:
    """The egglog commands of `rules` that can fire on an e-graph starting with the `present` constructors, closed
    under the constructors (and rule-only facts) their actions create, in registry order. A body whose unions can
    only join constant classes, and that sets no fact on a class it matched, is left out (it cannot change the
    output: `confined`), and so are a rule's need rows when every other body of it is. A body is read again only
    when an op or fact it names changed (a work list, `_Closure`). A chosen body that only sets rule-only facts no
    installed body reads is left out too (`Usable.unread`), unless `install_unread` (a test counting a fact rule's
    matches: eqsat.testing.runs). With the model's `opset` (`model_opset`), a body guarded on a newer one
    (`least_opset`) is left out: it never matches, and what it would create is not assumed."""
    return _Closure(rules, present, opset).run(install_unread)
