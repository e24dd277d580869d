"""The one place that talks to egglog: a bare `egglog.bindings.EGraph` driven by egglog program text.

Why text on the bindings (egglog-notes §6, §7b): building terms through the high-level Python API is
quadratic on DAGs, while text loaded as small rules of ~10 actions loads 20k ops in seconds; the
bindings are public API. Rules are egglog text too, so every program the optimizer runs is readable.
`tests/test_egglog_contract.py` fails loudly if an egglog upgrade changes any of this.
"""

from __future__ import annotations

from typing import Any, Iterable

import egglog.bindings as bindings

#: Actions per throwaway load rule, and commands per parse: both costs grow superlinearly with size
#: (egglog-notes §6; measured here: 8 and 8 load the keras mobilenet in 0.07 s, 10 and 64 in 0.2-0.3 s).
LOAD_CHUNK = 8
#: Commands per parse_program call: one huge call is quadratic (egglog-notes §6).
COMMAND_CHUNK = 4
#: Actions per throwaway ruleset: 80k actions load in 10 s as one ruleset, in 3 s as rulesets of 500
#: (parse time grows with the size of the ruleset being defined).
LOAD_RULESET = 500

EgglogError = bindings.EggSmolError


class Backend:
    """An egglog e-graph plus the few operations eqsat needs."""

    def __init__(self) -> None:
        self._egraph = bindings.EGraph()
        self._loads = 0

    def run(self, program: str) -> list[Any]:
        """Parse and run egglog commands; returns the bindings' outputs."""
        return self._egraph.run_program(*self._egraph.parse_program(program))

    def run_many(self, commands: Iterable[str]) -> None:
        batch: list[str] = []
        for cmd in commands:
            batch.append(cmd)
            if len(batch) >= COMMAND_CHUNK:
                self.run("\n".join(batch))
                batch.clear()
        if batch:
            self.run("\n".join(batch))

    def load(self, actions: list[str]) -> None:
        """Insert many actions fast: small rules in throwaway rulesets, each run once."""
        for start in range(0, len(actions), LOAD_RULESET):
            self._load_ruleset(actions[start:start + LOAD_RULESET])

    def _load_ruleset(self, actions: list[str]) -> None:
        self._loads += 1
        ruleset = f"load_{self._loads}"
        rules = (f"(rule () ({' '.join(actions[i:i + LOAD_CHUNK])}) :ruleset {ruleset})"
                 for i in range(0, len(actions), LOAD_CHUNK))
        self.run(f"(ruleset {ruleset})")
        self.run_many(rules)
        self.run(f"(run-schedule (run {ruleset}))")

    def run_schedule(self, schedule: str) -> "bindings.RunReport":
        """Run one schedule; return the egglog run report (matches per rule, updated flag)."""
        outputs = self.run(f"(run-schedule {schedule})")
        reports = [o.report for o in outputs if isinstance(o, bindings.RunScheduleOutput)]
        return reports[-1]

    def sizes(self) -> dict[str, int]:
        """Rows per function/constructor table."""
        (out,) = self.run("(print-size)")
        return dict(out.sizes)

    def serialize(self) -> str:
        """egraph-serialize JSON of the whole e-graph."""
        return self._egraph.serialize([]).to_json()
