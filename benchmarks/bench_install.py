"""What installing the rules costs each model: the egglog rules installed by the end of a run as `eqsat optimize`
runs it, their characters and s-expressions, and the install time, best of `--repeat` in this process: a fresh
backend (`start`: declarations, the rules ready before any graph, standard facts) plus the rules installed during
the run (`run`: those the loaded graph and the rules that matched made able to match, eqsat.engine.rule_gate); and
the time the closure took to choose the selection (eqsat.engine.rule_closure; the first model's includes reading the
rules' terms).

    python -m benchmarks.bench_install                          # ../shared/models and ../shared/models/real
    python -m benchmarks.bench_install m.onnx other.onnx --repeat 5
    python -m benchmarks.bench_install m.onnx --why              # which rule made each absent op available (and
                                                                 # whether only in constant classes), and the
                                                                 # bodies left out as setting only unread facts

The selection is the rules the model can use (eqsat.engine.rule_closure); of those, the gate installs the ones whose
queries can match during the run. Install time tracks the s-expressions installed (~11 µs each), not the characters.
`matched` counts the installed rules that matched at least once: no gate can install fewer without changing what the
run matches (the rest are rules whose tables hold rows but whose value guards never pass on this model).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Sequence

if TYPE_CHECKING:
    from eqsat.engine.rule_closure import Usable

SHARED = Path(__file__).resolve().parents[2] / "shared" / "models"


def default_models() -> list[Path]:
    """The shared models, then the real ones."""
    return sorted(SHARED.glob("*.onnx")) + sorted((SHARED / "real").glob("*.onnx"))


def usable_for(path: Path) -> "Usable":
    """The rules `eqsat optimize` installs for the model at `path` (default selection)."""
    return timed_closure(path)[0]


def timed_closure(path: Path) -> tuple["Usable", float]:
    """The rules `eqsat optimize` installs for the model at `path`, and the seconds the closure took (in this process:
    the first model's figure includes reading the rules, later ones reuse what was read)."""
    from eqsat.engine import rule_closure
    from eqsat.rewrites import registry
    from eqsat.session import load

    normalized = load(str(path)).normalized
    present, opset = rule_closure.present_constructors(normalized), rule_closure.model_opset(normalized)
    rules = registry.select()
    start = time.perf_counter()
    usable = rule_closure.usable_rules(rules, present, opset=opset)
    return usable, time.perf_counter() - start


class InstallRow(NamedTuple):
    """What installing the rules cost one model, saturated as `eqsat optimize` saturates it."""

    rules: int  # egglog rules installed by the end of the run
    matched: int  # of those, the ones that matched at least once
    chars: int  # their characters
    sexps: int  # their s-expressions
    at_start: float  # best seconds of a fresh backend: declarations, the rules ready before any graph, standard facts
    during: float  # best seconds installing rules during the run (those the gate opened: eqsat.engine.rule_gate)
    closure: float  # seconds the closure took to choose the selection


def install_row(path: Path, repeat: int) -> InstallRow:
    """What installing the rules costs the model at `path` (best of `repeat` fresh backends)."""
    from eqsat.engine import prepared
    from eqsat.engine.rule_gate import gated
    from eqsat.session import load, saturate

    usable, closure = timed_closure(path)
    loaded = load(str(path))
    at_start = during = float("inf")
    installed: set[str] = set()
    matched: set[str] = set()
    for _ in range(repeat):
        start = time.perf_counter()
        backend = prepared.fresh(usable.commands)
        at_start = min(at_start, time.perf_counter() - start)
        del backend  # freeing it (~15 ms) is not installing: the CLI never frees its backend (it ends with os._exit)
        prepared.clear()
        with prepared.single_run():
            session = saturate(loaded)
        during = min(during, session.saturation.install_seconds)
        installed = set(session.saturation.installed_rules)
        matched = set(session.saturation.matched_rules)
    commands = [rule.command for rule in gated(usable.commands) if rule.name in installed]
    chars, sexps = sum(map(len, commands)), sum(c.count("(") for c in commands)
    return InstallRow(len(commands), len(installed & matched), chars, sexps, at_start, during, closure)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", type=Path, help="ONNX files (default: the shared models)")
    parser.add_argument("--repeat", type=int, default=3, help="fresh installs per model; the best is shown")
    parser.add_argument(
        "--why", action="store_true", help="per model, the rule whose actions made each absent op or fact available"
    )
    args = parser.parse_args(argv)
    if args.why:
        for path in args.models or default_models():
            print(path.stem)
            usable = usable_for(path)
            for made, rule in usable.created_by.items():
                where = "  (constant classes only)" if made in usable.constant_only else ""
                print(f"  {made:28} <- {rule}{where}")
            if usable.unread:
                print(f"  not installed (they only set facts no installed rule reads): {', '.join(usable.unread)}")
        return
    from eqsat.engine import prepared

    prepared.fresh(())  # egglog's own start-up, outside the first model's figure
    columns = (
        ("rules", 5),
        ("matched", 7),
        ("chars", 8),
        ("sexps", 6),
        ("start ms", 8),
        ("run ms", 7),
        ("install ms", 10),
        ("closure ms", 10),
    )
    print(f"{'model':40} " + " ".join(f"{name:>{width}}" for name, width in columns))
    for path in args.models or default_models():
        row = install_row(path, args.repeat)
        print(
            f"{path.stem[:40]:40} {row.rules:5} {row.matched:7} {row.chars:8,} {row.sexps:6} "
            f"{row.at_start * 1000:8.1f} {row.during * 1000:7.1f} {(row.at_start + row.during) * 1000:10.1f} "
            f"{row.closure * 1000:10.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
