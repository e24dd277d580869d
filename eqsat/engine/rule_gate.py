"""Rules installed when they can first match: the rule gate.

egglog compiles every rule it is given (~11 us per s-expression, the largest fixed cost of a run), and a rule whose
query names a table with no row matches nothing. The static closure (eqsat.engine.rule_closure) keeps the rules
whose constructors and rule-only facts *some* rule could create; most of those creators then never fire on a given
model (their guards fail), and the rules waiting on them never could match. The gate installs a rule of the
selection only once everything its query names exists:

* at the start of a run, what the loaded graph holds (its constructors, generic ops by op);
* after each step of the schedule, what the rules that matched in it may have created (their actions' constructors
  and rule-only facts, as the closure reads them: `rule_closure.created`).

A rule installed later sees every row already there (egglog runs a new rule over the whole database), and the
schedule installs before each step what the previous one made possible, re-running an analysis saturation when it
enabled more analysis rules (eqsat.engine.saturate). Each step therefore matches exactly what it would with the whole
selection installed, and only rules that could never match are never compiled. The order egglog holds the rules in
follows when they became ready; within a step it decides only the order actions apply, so in rare ties (equally cheap
e-nodes of a constant class) another fold order may be taken: the same graph and cost, a folded constant at most a
rounding apart (tests/test_rule_gate.py: byte-identical on the shared models; on random graphs at most one in 1,000
differs). A run depends only on its model and the backend's earlier runs: a fresh backend's (the command on a file)
only on the model.

    gate = Gate(usable.commands)
    backend.install(gate.ready(loaded_ops))          # after loading a graph
    backend.install(gate.after(fired_rule_names))    # after each step

The gate's state follows egglog's push and pop (`push`, `pop`): rules installed above a push are gone at its pop.
Those are remembered (`wanted`) and installed below the push when the caller hands the backend back
(eqsat.engine.prepared.checkout), so a kept backend's later runs on similar models install nothing. A single run
(the command on one file) loads its model without a push and installs only as it goes.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Iterable, Sequence

from eqsat.engine.rule import _sexp_end, body_of
from eqsat.engine.rule_closure import constructors_in, created, present

_NAME = re.compile(r':name "([^"]+)"\)\s*$')
_RULESET = re.compile(r":ruleset (\w+)")


@dataclasses.dataclass(frozen=True)
class GatedRule:
    """One egglog rule of a selection, with what its query reads and what its actions may make."""

    name: str  # its egglog name: the key of its matches in run reports
    command: str
    ruleset: str
    reads: frozenset[str]  # constructors (generic ops by op), guarded families and rule-only facts its query names
    makes: frozenset[str]  # what its actions may create (constructors, ops, rule-only facts)


def parts(command: str) -> tuple[str, str]:
    """The query and the actions of an egglog `(rule (query) (actions) ...)` command."""
    start = command.index("(", 1)
    end = _sexp_end(command, start)
    actions_start = command.index("(", end)
    actions_end = _sexp_end(command, actions_start)
    return command[start + 1 : end - 1], command[actions_start + 1 : actions_end - 1]


@functools.lru_cache(maxsize=16)
def gated(commands: tuple[str, ...]) -> tuple[GatedRule, ...]:
    """The rules of a selection, read once per selection."""
    rules = []
    for command in commands:
        body = body_of(command)  # the text the closure read (cached there), else the command's own
        facts, actions = (body.facts, body.actions) if body is not None else parts(command)
        name, ruleset = _NAME.search(command), _RULESET.search(command)
        assert name is not None and ruleset is not None, command[:80]
        rules.append(GatedRule(name[1], command, ruleset[1], constructors_in(facts), created(facts, actions)))
    return tuple(rules)


class Gate:
    """Which rules of a selection are installed in one backend, and what its e-graph may hold."""

    def __init__(self, commands: Sequence[str]) -> None:
        self.rules = gated(tuple(commands))
        self._by_name = {rule.name: rule for rule in self.rules}
        self.installed: dict[str, None] = {}  # names, in the order they were installed
        self.available: set[str] = set()
        self.wanted: dict[str, None] = {}  # installed above a push and gone at its pop (in that order): `promote`
        self._saved: list[tuple[dict[str, None], set[str]]] = []

    def ready(self, available: Iterable[str] = ()) -> list[GatedRule]:
        """Take in what now exists; the rules not installed yet whose queries can match now, marked installed (the
        caller installs them), in the selection's order."""
        self.available.update(available)
        new = [
            rule
            for rule in self.rules
            if rule.name not in self.installed and all(present(name, self.available) for name in rule.reads)
        ]
        self.installed.update(dict.fromkeys(rule.name for rule in new))
        return new

    def after(self, fired: Iterable[str]) -> list[GatedRule]:
        """The rules to install after a step in which the rules named `fired` matched (`ready`)."""
        made: set[str] = set()
        for name in fired:
            rule = self._by_name.get(name)
            if rule is not None:
                made |= rule.makes
        return self.ready(made) if not made <= self.available else []

    def promote(self) -> list[GatedRule]:
        """The rules earlier runs installed above their push, the last run's first, each in the order it installed
        them (a second run of a top-level graph then meets its rules in the order the first met them, and gives
        the same bytes), marked installed."""
        new = [self._by_name[name] for name in self.wanted if name not in self.installed]
        self.installed.update(dict.fromkeys(rule.name for rule in new))
        self.wanted.clear()
        return new

    def push(self) -> None:
        self._saved.append((dict(self.installed), set(self.available)))

    def pop(self) -> None:
        installed, self.available = self._saved.pop()
        # this run's rules first, in its order: a top-level model's run pops after its If/Loop/Scan bodies' runs
        popped = dict.fromkeys(name for name in self.installed if name not in installed)
        self.wanted = {**popped, **self.wanted}
        self.installed = installed
