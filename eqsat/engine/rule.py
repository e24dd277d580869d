"""A rewrite rule as a declarative record: name, family, soundness class, origin, doc, egglog text.

Rules are egglog text, one readable line each, built with two helpers:

    rw("(Relu (Relu x))", "(Relu x)")                                   # lhs -> rhs
    rw("(Cast x t)", "x", "(= (dtype x) t)")                             # ... when guards hold
    fact("(= y (Transpose x p)) (= s (shape x))", "(set (shape y) ...)") # general rule (analysis)
    need("(= y (Squeeze (Squeeze x a) b))", "(need-elements a)")           # ask the list functions

A rewrite that computes over a whole vector (sorting axes, a product of dims, removing positions) reads
egglog functions of lists (`elements`, `merged`, `drop-at`, ... in rewrites/analysis.py), computed on
demand by recursion: its `need` rows ask for the values it reads. Need rows run in the analysis ruleset
(the values are ready when the rewrite next matches) and count as matches of the `list-functions` rule,
not of the rewrite that owns them.

Ops of a generic constructor (eqsat.engine.terms.GENERIC) are written by name, `(Relu (Relu x))`; the command egglog
gets names the family, `(Unary "Relu" (Unary "Relu" x))` (`render`). A row for every op of a family writes the
family with an op variable, guarded by an op fact: `rw("(Unary op (Unary op x))", "(Unary op x)", "(idempotent op)")`.

The registry (`eqsat.rewrites.registry`) adds `:ruleset` and `:name` so each egglog rule is attributable in
run reports (`<rule name>#<k>`).
"""

from __future__ import annotations

import dataclasses
import functools
import re

from eqsat.engine.terms import GENERIC_OF, OPS

SOUNDNESS = ("exact", "fp-reassoc", "precision-changing")
RULESETS = ("analysis", "simplify", "explore")
#: Soundness classes admitted by default (precision-changing needs `--allow precision-changing`).
DEFAULT_SOUNDNESS = frozenset({"exact", "fp-reassoc"})

#: The analysis rule that computes the list functions: need rows count as its matches.
NEED_RULE = "list-functions"
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_UNION_TARGET = re.compile(r"\(union (\w+) ")
_SET_SHAPE = re.compile(r"\(set \(shape ")
#: An op of a generic constructor at the head of an s-expression: `(Relu ` (text without one is left as it is).
_OP_HEAD = re.compile(r"\((?:" + "|".join(sorted(GENERIC_OF, key=len, reverse=True)) + r")(?=[\s)])")
#: A string literal (left as it is), or a capitalized head of an s-expression: `(Relu ` (an op of a generic
#: constructor when GENERIC_OF has it).
_HEAD_OR_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|\(([A-Z]\w*)(?=[\s)])')


def _rendered(match: re.Match[str]) -> str:
    family = GENERIC_OF.get(match[1]) if match[1] else None
    return f'({family} "{match[1]}"' if family else match[0]


def render(text: str) -> str:
    """egglog text with each op of a generic constructor written as that constructor: `(Relu x)` ->
    `(Unary "Relu" x)` (text already rendered, and string literals such as value names, are unchanged)."""
    return _HEAD_OR_STRING.sub(_rendered, text) if _OP_HEAD.search(text) else text


@dataclasses.dataclass(frozen=True)
class Egglog:
    """One egglog rule body: facts (the query, guards included) and actions."""

    facts: str
    actions: str
    need: bool = False  # a demand row: asks the list functions for values (runs in analysis)

    def command(self, ruleset: str, name: str) -> str:
        """The egglog rule; every class it unions into also records the rule (`rewritten`: provenance)."""
        return _command(self, ruleset, name)


@functools.lru_cache(maxsize=4096)  # the closure renders each chosen body again for every model (~2.5 ms)
def _command(body: Egglog, ruleset: str, name: str) -> str:
    if body.need:
        ruleset, name = "analysis", f"{NEED_RULE}#{name}"
    rule = rule_name_of(name)
    provenance = "".join(f' (rewritten {var} "{rule}")' for var in dict.fromkeys(_UNION_TARGET.findall(body.actions)))
    actions = recorded_shapes(body.actions)
    command = render(f'(rule ({body.facts}) ({actions}{provenance}) :ruleset {ruleset} :name "{name}")')
    _BODIES[command] = body
    return command


#: The body each command rendered so far came from (eqsat.engine.rule_gate reads a command's query and actions there,
#: as the closure already read them, instead of parsing the rendered text again).
_BODIES: dict[str, Egglog] = {}


def body_of(command: str) -> Egglog | None:
    """The body `command` was rendered from in this process (`Egglog.command`), if it was."""
    return _BODIES.get(command)


def recorded_shapes(actions: str) -> str:
    """`actions` with each `(set (shape term) vector)` also recorded as `(shape-met term vector)`. A vector
    computed in more than one step is bound once (`(let __shape0 vector)`) and both read the binding: the rule
    computes it once and its text holds it once."""
    edits: list[tuple[int, int, str]] = []
    recorded = []
    for k, (start, end, term, vector) in enumerate(_shape_set_spans(actions)):
        if vector.count("(") > 1:
            bound = f"__shape{k}"
            edits.append((start, end, f"(let {bound} {vector}) (set (shape {term}) {bound})"))
            vector = bound
        recorded.append(f" (shape-met {term} {vector})")
    for start, end, text in reversed(edits):
        actions = actions[:start] + text + actions[end:]
    return actions + "".join(recorded)


def shape_sets(actions: str) -> list[tuple[str, str]]:
    """The (term, vector) of every `(set (shape term) vector)` in `actions`: each also records its fact in
    `shape-met`, where facts that meet in one e-class stay side by side (eqsat.engine.unify)."""
    return [(term, vector) for _, _, term, vector in _shape_set_spans(actions)]


def _shape_set_spans(actions: str) -> list[tuple[int, int, str, str]]:
    """(start, end, term, vector) of every `(set (shape term) vector)` in `actions`; end is past its `)`."""
    found = []
    for match in _SET_SHAPE.finditer(actions):
        term_end = _sexp_end(actions, match.end())
        value_start = term_end + 1  # past the `)` closing `(shape term)`
        while actions[value_start] == " ":
            value_start += 1
        value_end = _sexp_end(actions, value_start)
        term, vector = actions[match.end() : term_end], actions[value_start:value_end]
        found.append((match.start(), actions.index(")", value_end) + 1, term, vector))
    return found


def _sexp_end(text: str, start: int) -> int:
    """The index just past the s-expression (or atom) starting at `start`."""
    depth, k = 0, start
    while k < len(text):
        c = text[k]
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                return k
            depth -= 1
            if depth == 0:
                return k + 1
        elif c == " " and depth == 0:
            return k
        k += 1
    return k


def op_pattern(op: str, *args: str) -> str:
    """`(Op args... a0 a1 ...)`: the op applied to `args` with its static parameters as variables a0, a1, ..."""
    params = [f"a{i}" for i in range(len(OPS[op].params))]
    return f"({' '.join([op, *args, *params])})"


def ones(shape: str) -> str:
    """The all-ones vector as long as `shape` (every dim, symbols included, mapped to 1): broadcast guards
    such as "c varies only along axis a" read `(= (shape c) (vec-set (ones s) a n))`."""
    return f'(unstable-vec-map (unstable-fn "max" 1) (unstable-vec-map (unstable-fn "min" 1) {shape}))'


def rw(lhs: str, rhs: str, *guards: str) -> Egglog:
    """lhs -> rhs when every guard holds: the matched class is unioned with rhs."""
    return Egglog(f"(= __root {lhs}) {' '.join(guards)}".strip(), f"(union __root {rhs})")


def fact(facts: str, actions: str) -> Egglog:
    """A general egglog rule (analyses, and rewrites that also set facts on the nodes they create)."""
    return Egglog(facts, actions)


def need(facts: str, actions: str) -> Egglog:
    """A demand row: when `facts` match, ask the list functions (`need-...` relations) for what a rewrite
    of the same rule reads; it runs in the analysis ruleset."""
    return Egglog(facts, actions, need=True)


@dataclasses.dataclass(frozen=True)
class Rule:
    name: str  # kebab-case, unique
    family: str  # the rewrites/ module it lives in
    soundness: str  # exact | fp-reassoc | precision-changing
    origin: str  # the peer pass it subsumes, e.g. "glow:sink-transpose"
    doc: str  # one line: A(B(x)) -> C(x) when ...
    egglog: tuple[Egglog, ...]
    ruleset: str = "explore"  # analysis | simplify | explore

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"rule name {self.name!r} is not kebab-case")
        if self.soundness not in SOUNDNESS:
            raise ValueError(f"rule {self.name}: soundness {self.soundness!r} not in {SOUNDNESS}")
        if self.ruleset not in RULESETS:
            raise ValueError(f"rule {self.name}: ruleset {self.ruleset!r} not in {RULESETS}")
        if not self.egglog:
            raise ValueError(f"rule {self.name} has no egglog rewrite")

    def commands(self) -> list[str]:
        return [e.command(self.ruleset, f"{self.name}#{k}") for k, e in enumerate(self.egglog)]


def rule_name_of(egglog_name: str) -> str:
    """The rule record name behind an egglog rule name (`transpose-merge#0` -> `transpose-merge`)."""
    return egglog_name.split("#", 1)[0]
