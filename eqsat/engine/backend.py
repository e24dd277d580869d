"""The one place that talks to egglog: a bare `egglog.bindings.EGraph` driven by egglog program text.

Why text on the bindings (egglog-notes §6, §7b): building terms through the high-level Python API is
quadratic on DAGs, while text loaded as small rules of ~10 actions loads 20k ops in seconds; the
bindings are public API. Rules are egglog text too, so every program the optimizer runs is readable.
`tests/test_egglog_contract.py` fails loudly if an egglog upgrade changes any of this.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable

from egglog.bindings import EGraph as _EGraph, EggSmolError, RunScheduleOutput  # not via the package: eqsat.ui.cli

if TYPE_CHECKING:
    from egglog.bindings import RunReport

    from eqsat.engine.bulk import Rows
    from eqsat.engine.rule_gate import Gate

#: Actions per throwaway load rule, and commands per parse: both costs grow superlinearly with size
#: (egglog-notes §6; measured here: 8 and 8 load the keras mobilenet in 0.07 s, 10 and 64 in 0.2-0.3 s).
LOAD_CHUNK = 8
#: Commands per parse_program call: one huge call is quadratic (egglog-notes §6), and even small batches
#: cost more than single commands (measured: installing 377-486 rules took 20-40 ms less at 1 than at 4).
COMMAND_CHUNK = 1
#: Actions per throwaway ruleset: 80k actions load in 10 s as one ruleset, in 3 s as rulesets of 500
#: (parse time grows with the size of the ruleset being defined).
LOAD_RULESET = 500

EgglogError = EggSmolError


@dataclasses.dataclass(frozen=True)
class Table:
    """One egglog function table: argument sorts, result sort, and live rows (arguments, result)."""

    input_sorts: tuple[str, ...]
    output_sort: str
    rows: list[tuple[tuple[Any, ...], Any]]


class Backend:
    """An egglog e-graph plus the few operations eqsat needs."""

    def __init__(self) -> None:
        self._egraph = _EGraph()
        self._loads = 0
        self._load_tables: set[str] = set()  # load tables declared, with their rules (load_rows)
        self._declared: set[str] = set()  # sorts and tables declared (declare)
        self._saved: list[tuple[set[str], set[str], int]] = []  # both, and perm_rank, at each push
        self.broken = False
        self.spent = False  # a model was loaded without a push (eqsat.engine.prepared.single_run): no later run
        self.installed: tuple[str, ...] = ()  # the rule selection it serves (eqsat.engine.prepared)
        self.gate: Gate | None = None  # which of them are installed so far (None: all of them)
        self.install_seconds = 0.0  # spent installing rules (`install`), all told
        self.named: frozenset[str] = frozenset()  # the tables its rule selection names (eqsat.engine.prepared)
        self.perm_rank = 0  # inverse perms are loaded for every perm up to this rank (eqsat.engine.prepared)

    def declare(self, names: Iterable[str] | None = None) -> None:
        """Declare what egglog text naming `names` needs (eqsat.engine.terms.declared: the sorts and core tables
        always, and the constructors, functions and relations named; None: every one), those not declared yet;
        the first call also declares the bulk path's vector table (eqsat.engine.bulk). Declaring costs ~50 us a
        table, so a prepared backend declares what its rules name (eqsat.engine.prepared.fresh) and loading a
        graph declares what the graph builds (`load`, `load_rows`). What is declared after a `push` is gone at
        its `pop`, and declared again when needed."""
        from eqsat.engine import bulk, terms

        wanted = terms.declared(names)
        new = [line for name, line in wanted.items() if name not in self._declared]
        if not self._declared:
            new.append(bulk.declarations())
        if new:
            try:
                self.run("\n".join(new))
            except BaseException:  # some lines may be declared and not recorded: not a backend to reuse
                self.broken = True
                raise
            self._declared.update(wanted)

    def run(self, program: str) -> list[Any]:
        """Parse and run egglog commands; returns the bindings' outputs. Ops are written as rules write them: `(Relu
        x)` is run as `(Unary "Relu" x)` (eqsat.engine.rule.render)."""
        from eqsat.engine.rule import render

        return self._egraph.run_program(*self._egraph.parse_program(render(program)))

    def run_many(self, commands: Iterable[str]) -> None:
        batch: list[str] = []
        for cmd in commands:
            batch.append(cmd)
            if len(batch) >= COMMAND_CHUNK:
                self.run("\n".join(batch))
                batch.clear()
        if batch:
            self.run("\n".join(batch))

    def install(self, commands: Iterable[str]) -> None:
        """Install egglog rules (each parsed and compiled on its own: COMMAND_CHUNK). A backend where one fails is
        marked `broken`: which of them egglog holds is no longer what its `gate` says."""
        commands = list(commands)
        if commands:
            start = time.perf_counter()
            try:
                self.run_many(commands)
            except BaseException:
                self.broken = True
                raise
            self.install_seconds += time.perf_counter() - start

    def push(self) -> None:
        """Save the e-graph (egglog `push`): `pop` brings it back, with the tables declared then (`declare`,
        `load_rows`) and the rules installed then (`gate`): egglog forgets those declared and installed since."""
        self.run("(push)")
        self._saved.append((set(self._load_tables), set(self._declared), self.perm_rank))
        if self.gate is not None:
            self.gate.push()

    def pop(self) -> None:
        """Back to the last `push`; a backend whose pop fails (after an egglog panic) is marked `broken`."""
        try:
            self.run("(pop)")
        except BaseException:
            self.broken = True
            raise
        self._load_tables, self._declared, self.perm_rank = self._saved.pop()
        if self.gate is not None:
            self.gate.pop()

    def load(self, actions: list[str]) -> None:
        """Insert many actions fast: small rules in throwaway rulesets, each run once. The tables they name are
        declared first (`declare`)."""
        from eqsat.engine.terms import heads

        self.declare(heads(actions))
        for start in range(0, len(actions), LOAD_RULESET):
            self._load_ruleset(actions[start : start + LOAD_RULESET])

    def load_rows(self, rows: "Rows") -> None:
        """Insert an encoded graph: vectors by text, each table by egglog's `input` from a tab-separated
        file, then one generated rule per table builds the terms (eqsat.engine.bulk); the rows are deleted after.
        A table first used (at this push level) is declared, with its rule and what that rule builds."""
        from eqsat.engine.bulk import tables, tsv
        from eqsat.engine.terms import egg_str, heads

        schema = tables()
        self.load(rows.vector_actions())
        used = [schema[name] for name in rows.tables]
        new = [table for table in used if table.name not in self._load_tables]
        self.declare(heads(table.rule for table in new))
        if new:
            self.run("\n".join(table.declaration for table in new))
        self._load_tables.update(table.name for table in new)
        with tempfile.TemporaryDirectory(prefix="eqsat-load-") as folder:
            commands = []
            for table in used:
                path = os.path.join(folder, f"{table.name}.tsv")
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(tsv(rows.tables[table.name]))
                commands.append(f"(input {table.name} {egg_str(path)})")
            self.run_many(commands)
        self.run_many(table.rule for table in new)
        self.run("(run-schedule (run load-rows))")
        self.run_many(table.clear_rule() for table in new)
        self.run("(run-schedule (run load-clear))")
        self.load(rows.text)

    def _load_ruleset(self, actions: list[str]) -> None:
        self._loads += 1
        ruleset = f"load_{self._loads}"
        rules = (
            f"(rule () ({' '.join(actions[i : i + LOAD_CHUNK])}) :ruleset {ruleset})"
            for i in range(0, len(actions), LOAD_CHUNK)
        )
        self.run(f"(ruleset {ruleset})")
        self.run_many(rules)
        self.run(f"(run-schedule (run {ruleset}))")

    def run_schedule(self, schedule: str) -> "RunReport":
        """Run one schedule; return the egglog run report (matches per rule, updated flag)."""
        outputs = self.run(f"(run-schedule {schedule})")
        reports = [o.report for o in outputs if isinstance(o, RunScheduleOutput)]
        return reports[-1]

    def sizes(self) -> dict[str, int]:
        """Rows per function/constructor table."""
        (out,) = self.run("(print-size)")
        return dict(out.sizes)

    def snapshot(self, wanted: Callable[[str, str], bool] | None = None) -> dict[str, "Table"]:
        """Every function table (or those `wanted(name, output sort)` names), rows as Python values: e-classes of
        eq-sorts as ints (the same int for the same class across tables), primitives and i64 vectors decoded.
        Converting rows is most of a snapshot's time, and analysis tables hold half of them.

        egglog's `freeze()` copies the rebuilt tables out in milliseconds; JSON serialization of the
        same e-graph costs seconds (84k e-nodes: 1 s to serialize and 1.7 s to parse 47 MB).
        """
        egraph = self._egraph
        classes: dict[Any, int] = {}  # eq-sort values: one id space across sorts (as egglog's own freeze users)

        def vec(v: Any) -> tuple[int, ...]:
            return tuple(egraph.value_to_i64(x) for x in egraph.value_to_vec(v))

        converters: dict[str, Callable[[Any], Any]] = {
            "i64": egraph.value_to_i64,
            "f64": egraph.value_to_f64,
            "String": egraph.value_to_string,
            "bool": egraph.value_to_bool,
            "IVec": vec,
            "Unit": lambda v: None,
        }
        known: dict[str, dict[Any, Any]] = {sort: {} for sort in converters}  # per sort: raw ids repeat across sorts

        def column(values: list[Any], sort: str) -> list[Any]:
            """One column's values converted, each distinct value once (columns repeat values a lot)."""
            convert = converters.get(sort)
            if convert is None:  # an eq-sort: e-class ids, numbered as first met
                for v in values:
                    if v not in classes:
                        classes[v] = len(classes)
                return list(map(classes.__getitem__, values))
            cache = known[sort]
            for v in values:
                if v not in cache:
                    cache[v] = convert(v)
            return list(map(cache.__getitem__, values))

        result: dict[str, Table] = {}
        for name, fn in egraph.freeze().functions.items():  # declaration order: deterministic
            if wanted is not None and not wanted(name, fn.output_sort):
                continue
            live = [row for row in fn.rows if not row.subsumed]
            columns = [
                column(list(values), sort) for values, sort in zip(zip(*(r.inputs for r in live)), fn.input_sorts)
            ]
            outputs = column([row.output for row in live], fn.output_sort)
            args = zip(*columns) if columns else ((),) * len(live)
            result[name] = Table(tuple(fn.input_sorts), fn.output_sort, list(zip(args, outputs)))
        return result
