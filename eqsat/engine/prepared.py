"""Backends with the term declarations and a set of rules installed, kept for the life of the process.

Installing rules is the largest fixed cost of a run (~0.5 ms per egglog rule, more for long guards), and
the same rules serve every model that can use them. A graph is loaded into a prepared backend between a
push and a pop, so the backend comes back as it was, ready for the next model: a notebook's second
`optimize` or `saturate` installs nothing, and a model's If/Loop/Scan bodies share their parent's backend.

    with checkout(usable) as backend:       # `usable`: eqsat.engine.rule_closure.usable_rules(...)
        backend.push(); ...load, run, snapshot...; backend.pop()

A backend is lent to one caller at a time (a second, concurrent caller gets a fresh one) and dropped when
broken (an egglog panic) or spent. At most MAX_KEPT rule sets are kept, the least recently used dropped first.

A process that optimizes one model (the `eqsat optimize` command on a file) runs it within `single_run()`: the
first top-level model is loaded without a push and its backend is spent, then dropped (egglog's push copies the e-graph
and its pop restores it: ~5-8 ms each, on every command, for a backend no later model would use). A model's
If/Loop/Scan bodies still push and pop; a run that needs the backend again (another round after symbols were
unified) gets a fresh one with the same rules.
Loading with the rules present costs no more than loading before installing them (measured at 1k-20k ops).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import re
import threading
from typing import AbstractSet, Iterator, Sequence

from eqsat.engine.backend import Backend
from eqsat.engine.rule_closure import Usable
from eqsat.engine.rule_gate import Gate
from eqsat.engine.saturate import declare_rulesets
from eqsat.engine.terms import MAX_PERM_RANK, STANDARD_PERM_RANK, heads, perm_facts, standard_facts

#: Rule sets whose backends are kept (each holds only declarations and rules: a few MB).
MAX_KEPT = 4

_single_run = False
_kept: collections.OrderedDict[tuple[str, ...], Backend] = collections.OrderedDict()
_lent: set[int] = set()
_lock = threading.Lock()


def fresh(commands: Sequence[str]) -> Backend:
    """A new backend with the declarations `commands` (egglog rules) need, `commands` and the standard facts they
    read installed. Declared are the sorts, the core tables and what the commands name (eqsat.engine.terms.declared:
    a CNN's rules name no list function nor MatMul), not all ~180 tables (~50 us each); a graph's load declares
    what it builds besides (Backend.load_rows), between the push and the pop of its run."""
    named = heads(commands)
    backend = Backend()
    backend.declare(named)
    declare_rulesets(backend)
    backend.gate = Gate(commands)
    backend.install(rule.command for rule in backend.gate.ready())  # those whose queries name no op nor site
    backend.load(facts_read_by(named))
    backend.installed, backend.named, backend.perm_rank = tuple(commands), frozenset(named), STANDARD_PERM_RANK
    return backend


def reach_perm_rank(backend: Backend, rank: int) -> None:
    """Load the inverse perms of the ranks above the backend's up to `rank` (at most MAX_PERM_RANK: 120 facts at
    rank 5) when its rules read `inv-perm`: once, where the caller stands (below a run's push: eqsat.session), so a
    kept backend pays for them once. A model's perms above MAX_PERM_RANK come with its own facts
    (eqsat.engine.terms.model_facts)."""
    high = min(rank, MAX_PERM_RANK)
    if "inv-perm" in backend.named and high > backend.perm_rank:
        backend.load(perm_facts(backend.perm_rank + 1, high))
        backend.perm_rank = high


def facts_read_by(named: AbstractSet[str]) -> list[str]:
    """The standard facts (eqsat.engine.terms.standard_facts) of the tables the installed rules name (`named`: the
    heads of their s-expressions, eqsat.engine.terms.heads). A table no installed rule names cannot change a match,
    and decoding reads none of them (eqsat.engine.egraph.DECODED_FACTS): a CNN's rules read no `inv-perm` (153
    facts) and no cast tables (81), and loading them was ~6 ms of 9."""
    return [fact for table, fact in _standard_by_table() if table in named]


#: A standard fact's table: the head of its s-expression, or of the term it sets (`(set (inv-perm p) q)`).
_FACT_TABLE = re.compile(r"\((?:set \()?([\w-]+)")


@functools.lru_cache(maxsize=1)
def _standard_by_table() -> tuple[tuple[str, str], ...]:
    """Each standard fact with its table, in standard_facts' order."""
    pairs = []
    for fact in standard_facts():
        found = _FACT_TABLE.match(fact)
        assert found is not None, fact
        pairs.append((found[1], fact))
    return tuple(pairs)


def like(backend: Backend) -> Backend:
    """A new backend with `backend`'s rules: for a run that cannot use `backend` itself (an egglog panic broke
    it, or a fallback run wants an empty one)."""
    return fresh(backend.installed)


@contextlib.contextmanager
def checkout(usable: Usable) -> Iterator[Backend]:
    """A prepared backend for a rule selection (its commands): the kept one if it is free, else a new one (kept
    if none is). Kept backends are shared by every model whose selection has the same commands; what a run
    assumes of its own model (the constructors the selection was made for) travels with the run, never on
    the backend."""
    key = tuple(usable.commands)
    with _lock:
        backend = _kept.get(key)
        if backend is not None and (backend.broken or backend.spent):
            del _kept[key]
            backend = None
        keep = backend is None
        if backend is not None and id(backend) in _lent:  # another caller has it: use one of our own
            backend = None
        if backend is not None:
            _kept.move_to_end(key)
            _lent.add(id(backend))
    if backend is None:
        backend = fresh(key)
        if keep:
            with _lock:
                _kept[key] = backend
                _lent.add(id(backend))
                while len(_kept) > MAX_KEPT:
                    _kept.popitem(last=False)
    try:
        yield backend
    finally:
        try:
            if _kept.get(key) is backend:  # a backend of our own is dropped: nothing to keep for later runs
                _promote(backend)
        finally:
            with _lock:
                _lent.discard(id(backend))
                if (backend.broken or backend.spent) and _kept.get(key) is backend:
                    del _kept[key]


def _promote(backend: Backend) -> None:
    """Install below any push what the runs just made installed above theirs (eqsat.engine.rule_gate: gone at their
    pop), so the backend's next run of a like model installs nothing; a spent or broken backend is dropped instead.
    The caller that ran pays it, once, after its result is made."""
    if backend.gate is None or backend.broken or backend.spent:
        return
    try:
        backend.install(rule.command for rule in backend.gate.promote())
    except BaseException as exc:  # an egglog panic: Backend.install marked it broken, so it is dropped (the result
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):  # is made already)
            raise


@contextlib.contextmanager
def single_run() -> Iterator[None]:
    """Within: the first top-level model saturated is loaded into its backend without a push, and the backend is
    spent (the command on one file; see the module docstring). Later saturations inside (verification's bisection
    probes) push and pop as usual, so a probe reuses its rules' backend."""
    global _single_run
    before, _single_run = _single_run, True
    try:
        yield
    finally:
        _single_run = before


def take_single_load() -> bool:
    """Whether this top-level model is the one `single_run` loads without a push: True once inside it."""
    global _single_run
    with _lock:
        taken, _single_run = _single_run, False
    return taken


def clear() -> None:
    """Forget every kept backend (tests; a caller that wants the memory back)."""
    with _lock:
        _kept.clear()
