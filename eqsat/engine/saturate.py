"""Bounded equality saturation: the schedule, the limits, and the report of why it stopped.

One iteration is `analysis` to saturation, one pass of `simplify`, `analysis` again, one pass of
`explore`. egglog 13.2 has no node or time limit of its own, so limits are checked between iterations:
a limit can be overshot by at most one iteration, and the report says by how much. The time limit also
looks ahead: an iteration is not started when the last one, grown by the last growth ratio, would end
past the limit (iterations of an exploding rule set grow geometrically). Hitting a limit is
never an error: the e-graph is kept as it is and the best graph found so far is extracted from it.
If egglog itself fails (an unsound rule makes facts conflict, a panic), the report names the failure and
the caller falls back to the last state it can extract from.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from eqsat.engine import terms
from eqsat.engine.backend import Backend
from eqsat.engine.rule import RULESETS, rule_name_of
from eqsat.options import Options

if TYPE_CHECKING:
    from egglog.bindings import RunReport as EgglogReport

SCHEDULE = ("(saturate (run analysis))", "(run simplify)", "(saturate (run analysis))", "(run explore)")
#: Tables whose rows are e-nodes: the term constructors (handles and fact tables are not).
ENODE_TABLES = (frozenset(terms.OPS) | frozenset(terms.SPECIAL) | frozenset(terms.GENERIC)) - {"Ref"}


@dataclasses.dataclass(frozen=True)
class Limits:
    iterations: int = 30
    nodes: int = 200_000
    seconds: float | None = None  # wall-clock: results may then differ run to run

    def __post_init__(self) -> None:
        if self.iterations < 0 or self.nodes < 0 or (self.seconds is not None and self.seconds < 0):
            raise ValueError("limits must be non-negative")

    @classmethod
    def from_options(cls, options: Options) -> "Limits":
        """The limits a run's options name (None: the default)."""
        defaults = cls()
        return cls(
            iterations=defaults.iterations if options.iter_limit is None else options.iter_limit,
            nodes=defaults.nodes if options.node_limit is None else options.node_limit,
            seconds=options.time_limit,
        )


@dataclasses.dataclass
class RunReport:
    stop_reason: str  # saturated | iteration-limit | node-limit | time-limit | error
    iterations: int
    enodes: int
    seconds: float
    matches_per_rule: dict[str, int]
    enodes_loaded: int = 0
    eclasses: int | None = None  # filled in when the e-graph is decoded
    limits: Limits = dataclasses.field(default_factory=Limits)
    error: str | None = None
    note: str = ""  # how the run was obtained, when not plainly (a fallback)
    rules_installed: int = 0  # egglog rules installed by the end of the run: those that could match (rule_gate)
    rules_total: int = 0  # egglog rules of the rule set
    install_seconds: float = 0.0  # installing rules during the run (those the gate opened: eqsat.engine.rule_gate)
    installed_rules: tuple[str, ...] = ()  # egglog names (`name#k`) installed at the end (a kept backend's earlier
    # runs' included; an If/Loop/Scan body's, above its push, not: eqsat.engine.rule_gate), in the selection's order
    matched_rules: tuple[str, ...] = ()  # egglog names (`name#k`) that matched at least once in this run, sorted: no
    # gate can install fewer rules without changing what the run matches (benchmarks.bench_install)

    @property
    def deterministic(self) -> bool:
        return self.stop_reason != "time-limit"

    @property
    def overshoot(self) -> int:
        return max(0, self.enodes - self.limits.nodes) if self.stop_reason == "node-limit" else 0

    @property
    def time_overshoot(self) -> float:
        """Seconds past the time limit (an egglog iteration cannot be interrupted), else 0."""
        return max(0.0, self.seconds - self.limits.seconds) if self.limits.seconds is not None else 0.0

    @property
    def rules_fired(self) -> dict[str, int]:
        return {k: v for k, v in sorted(self.matches_per_rule.items()) if v}

    def to_dict(self) -> dict[str, Any]:
        return {
            "stop_reason": self.stop_reason,
            "iterations": self.iterations,
            "enodes": self.enodes,
            "enodes_loaded": self.enodes_loaded,
            "eclasses": self.eclasses,
            "seconds": round(self.seconds, 6),
            "overshoot": self.overshoot,
            "time_overshoot": round(self.time_overshoot, 6),
            "deterministic": self.deterministic,
            "error": self.error,
            "note": self.note,
            "rules_installed": self.rules_installed,
            "rules_total": self.rules_total,
            "install_seconds": round(self.install_seconds, 6),
            "rules_fired": self.rules_fired,
            "limits": dataclasses.asdict(self.limits),
        }

    def to_text(self) -> str:
        lines = [
            f"saturation {self.stop_reason} after {self.iterations} iterations in {self.seconds * 1000:.0f} ms: "
            f"{self.enodes_loaded} -> {self.enodes} e-nodes"
            + (f", {self.eclasses} e-classes" if self.eclasses is not None else "")
        ]
        if self.rules_total:
            lines.append(
                f"{self.rules_installed} of {self.rules_total} egglog rules installed (the others read ops or "
                "facts this e-graph never held)"
            )
        if self.overshoot:
            lines.append(
                f"node limit {self.limits.nodes} overshot by {self.overshoot} (limits are checked between iterations)"
            )
        if self.time_overshoot:
            lines.append(
                f"time limit {self.limits.seconds:g} s overshot by {self.time_overshoot:.2f} s "
                "(an egglog iteration cannot be interrupted)"
            )
        if self.error:
            lines.append(f"egglog failed: {self.error}")
        fired = self.rules_fired
        lines.append("rules fired: " + (", ".join(f"{k} x{v}" for k, v in fired.items()) if fired else "none"))
        return "\n".join(lines)


def count_enodes(backend: Backend) -> int:
    return sum(v for k, v in backend.sizes().items() if k in ENODE_TABLES)


def declare_rulesets(backend: Backend) -> None:
    """Declare the schedule's rulesets (before any rule is installed)."""
    backend.run("\n".join(f"(ruleset {name})" for name in RULESETS))


def install_rules(backend: Backend, commands: Sequence[str]) -> None:
    """Declare the rulesets and install every one of `commands` (egglog rules: `Rule.commands()`): tests and
    experiments. A prepared backend installs its rules as they can match (eqsat.engine.rule_gate)."""
    declare_rulesets(backend)
    backend.install(commands)


def _open_rules(backend: Backend, report: "EgglogReport") -> bool:
    """Install the rules that the rules matched in a step's `report` made able to match (eqsat.engine.rule_gate);
    whether one of them is an analysis rule (the analysis saturation then runs again)."""
    if backend.gate is None:
        return False
    new = backend.gate.after(name for name, count in report.num_matches_per_rule.items() if count)
    backend.install(rule.command for rule in new)
    return any(rule.ruleset == "analysis" for rule in new)


def next_iteration(durations: Sequence[float]) -> float:
    """Estimated seconds of the next iteration: the last one times its growth over the one before."""
    if not durations:
        return 0.0
    if len(durations) == 1:
        return durations[-1]
    return durations[-1] * max(1.0, durations[-1] / max(durations[-2], 1e-6))


def run(backend: Backend, limits: Limits = Limits(), present: Iterable[str] = ()) -> RunReport:
    """Run the schedule until saturation or a limit; never raises for a limit or an egglog failure. A backend with a
    rule gate (eqsat.engine.rule_gate) first installs the rules that can match what the loaded graph holds
    (`present`: its constructors, generic ops by op), then, after each step, those the step made able to match."""
    start = time.perf_counter()
    installing = backend.install_seconds
    if backend.gate is not None:
        backend.install(rule.command for rule in backend.gate.ready(present))
    matches: collections.Counter[str] = collections.Counter()
    matched: set[str] = set()
    loaded = enodes = count_enodes(backend)
    iterations, stop, error = 0, "saturated", None
    durations: list[float] = []
    while True:
        if iterations >= limits.iterations:
            stop = "iteration-limit"
            break
        if enodes > limits.nodes:
            stop = "node-limit"
            break
        if limits.seconds is not None and time.perf_counter() - start + next_iteration(durations) > limits.seconds:
            stop = "time-limit"
            break
        began = time.perf_counter()
        updated = False
        for ruleset_step in SCHEDULE:
            again = True
            while again:  # an analysis saturation that enabled more analysis rules runs again with them
                try:
                    report = backend.run_schedule(ruleset_step)
                    updated |= bool(report.updated)
                    for name, count in report.num_matches_per_rule.items():
                        matches[rule_name_of(name)] += count
                        if count:
                            matched.add(name)
                    again = _open_rules(backend, report) and ruleset_step.startswith("(saturate")
                except BaseException as exc:  # egglog panics are BaseException (pyo3 PanicException)
                    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                        raise
                    last = str(exc).strip().splitlines()[-1] if str(exc).strip() else ""
                    error = f"{ruleset_step}: {type(exc).__name__}: {last}"
                    break
            if error is not None:
                break
        iterations += 1
        durations.append(time.perf_counter() - began)
        if error is not None:
            stop = "error"
            break
        enodes = count_enodes(backend)
        if not updated:
            break
    try:
        enodes = count_enodes(backend)
    except BaseException as exc:  # pragma: no cover - the e-graph is unusable after a panic
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
    result = RunReport(
        stop, iterations, enodes, time.perf_counter() - start, dict(matches), loaded, limits=limits, error=error
    )
    result.matched_rules = tuple(sorted(matched))
    if backend.gate is not None:
        result.installed_rules = tuple(rule.name for rule in backend.gate.rules if rule.name in backend.gate.installed)
    result.rules_installed = len(result.installed_rules) if backend.gate is not None else len(backend.installed)
    result.install_seconds = backend.install_seconds - installing
    return result
