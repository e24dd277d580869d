"""`eqsat calibrate`: measure on this machine, through onnxruntime, what a target prices, fit the target's
parameters and write the calibrated target's TOML.

    calibrate(base="cpu", budget=120, provider="CPUExecutionProvider", threads=1) -> Calibration

Within `budget` seconds (wall clock, all included): onnxruntime sessions of the graphs of
eqsat.calibration_cases are built and warmed up in their priority order (until BUILD_SHARE of the budget is
spent: a small budget times fewer graphs), then timed in interleaved rounds (eqsat.check.timing) until the
budget less FIT_RESERVE is reached; the fit (eqsat.extract.calibrate) finds launch, bandwidth, view_fraction,
the peak of each dtype measured and an op_scale per op; each fused pattern of the base target keeps the
consumers whose measured time after their producer is nearer the pattern's price (an epilogue's compute, a free
consumer's constants) than their price as a kernel of their own, and drops the others. Everything else of the
base target (its QDQ units, blocked layout, ...) is kept as it is. The TOML's comments hold the machine, every
measurement beside its prediction, and the fit's error.
"""

from __future__ import annotations

import dataclasses
import math
import os
import platform
import time
import tomllib
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from eqsat.calibration_cases import Case, fit_cases, fused_cases
from eqsat.check import timing
from eqsat.errors import BadInputError
from eqsat.extract.calibrate import Fit, Params, Sample, calibrated_data, fit, to_toml
from eqsat.extract.cost import TARGET_DIR, load_target, user_target_dir

#: Share of the budget that building and warming up sessions may take.
BUILD_SHARE = 0.35
#: Seconds kept for the fit and the TOML at the end (a fraction of the budget, at least this much).
FIT_RESERVE = 0.5
#: Seconds of work per timed graph per round (calls per round are set from the warm-up to reach it).
PER_ROUND = 4e-4

Progress = Callable[[float, str], None]


@dataclasses.dataclass(frozen=True)
class FusedCheck:
    """One consumer of a base target's fused pattern, measured (seconds per call): the producer, the consumer
    alone, both; what the consumer adds after the producer against what the target would price it fused and
    as a kernel of its own. It stays in the pattern when the time it adds is nearer the first."""

    pattern: str
    consumer: str
    producer_s: float
    consumer_s: float
    both_s: float
    as_fused: float  # the pattern's price of the consumer (epilogue: its compute; free: its constants' reading)
    as_kernel: float  # the consumer alone, less a call's fixed cost

    @property
    def added(self) -> float:
        return self.both_s - self.producer_s

    @property
    def fused(self) -> bool:
        return self.added < (self.as_fused + self.as_kernel) / 2


@dataclasses.dataclass(frozen=True)
class Calibration:
    """A calibrated target: its TOML data and text, the fit behind it, the fused checks, what was timed."""

    data: dict[str, Any]
    toml: str
    fit: Fit
    fused: tuple[FusedCheck, ...]
    rounds: int
    timed: int  # graphs timed
    skipped: tuple[str, ...]  # graphs left out: onnxruntime refused them, or the budget ran out first
    seconds: float

    def write(self, path: str | os.PathLike[str]) -> Path:
        out = Path(path)
        out.write_text(self.toml, encoding="utf-8")
        load_target(out)  # what was written loads and validates
        return out


def user_target_path(name: str) -> Path:
    """Where `eqsat calibrate --name NAME` writes a target that `--target NAME` then finds."""
    return user_target_dir() / f"{name}.toml"


def check_options(*, budget: float, provider: str, threads: int, name: str) -> None:
    """Refuse bad options before anything is measured, each with what would be accepted."""
    if not (budget > 0 and math.isfinite(budget)):
        raise BadInputError("--budget", f"must be a positive number of seconds, got {budget}")
    if threads < 1:
        raise BadInputError("--threads", f"must be 1 or more, got {threads}")
    providers = timing.available_providers()
    if provider not in providers:
        raise BadInputError("--provider", f"{provider!r} is not available here; onnxruntime has {', '.join(providers)}")
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise BadInputError("--name", f"a target name is letters, digits, '-' and '_', got {name!r}")
    if (TARGET_DIR / f"{name}.toml").is_file():
        raise BadInputError("--name", f"{name!r} is a shipped target: choose another name")


def calibrate(
    base: str = "cpu",
    *,
    budget: float = 120.0,
    provider: str = "CPUExecutionProvider",
    threads: int = 1,
    name: str = "calibrated",
    progress: Progress | None = None,
    clock: Callable[[], float] = time.perf_counter,
    cases: Sequence[Case] | None = None,
) -> Calibration:
    """Measure, fit and build the calibrated target (see the module docstring); `cases` replaces the graphs
    timed (tests), `clock` the clock the budget is kept by."""
    check_options(budget=budget, provider=provider, threads=threads, name=name)
    began = clock()
    note = progress or (lambda fraction, text: None)
    target = load_target(base)
    with open(target.source, "rb") as fh:
        base_data = tomllib.load(fh)
    patterns = [
        (str(f["name"]), list(f["producers"]), list(f["consumers"]), str(f.get("other_inputs", "constant")))
        for f in base_data.get("fused", ())
    ]
    todo = list(cases) if cases is not None else fit_cases() + fused_cases(patterns)
    deadline = began + budget - max(FIT_RESERVE, 0.05 * budget)
    built, skipped = _build(todo, provider, threads, began + BUILD_SHARE * budget, clock, note)
    runs = [run for _, run in built]

    def on_round(done: int) -> None:
        note(min(1.0, (clock() - began) / budget), f"timing {len(runs)} graphs, round {done}")

    rounds = (
        0
        if not runs
        else timing.time_interleaved(runs, rounds=100_000, until=deadline, min_rounds=1, clock=clock, on_round=on_round)
    )
    note(min(1.0, (clock() - began) / budget), "fitting")
    samples = [Sample(case.name, case.kernels, run.median) for case, run in built if case.kernels and not case.pair]
    if not samples or not rounds:  # the base target's parameters would be written as if measured
        raise BadInputError("--budget", f"{budget:g} s timed no graph on this machine: give it more seconds")
    start = Params(target.launch, target.bandwidth, target.view_fraction, dict(target.peak), dict(target.op_scale))
    start = dataclasses.replace(start, emulated=dict(target.emulated))
    found = fit(samples, start)
    modes = {str(f["name"]): str(f.get("mode", "free")) for f in base_data.get("fused", ())}
    checks = _fused_checks(built, found.params, modes)
    data = calibrated_data(base_data, found.params, name=name, description=_description(provider, threads))
    data = _with_fused(data, checks)
    seconds = clock() - began
    comments = _comments(base, provider, threads, budget, rounds, found, checks, skipped, seconds)
    toml = to_toml(data, comments)
    note(1.0, "done")
    return Calibration(data, toml, found, tuple(checks), rounds, len(runs), tuple(skipped), seconds)


def _build(
    cases: Sequence[Case], provider: str, threads: int, until: float, clock: Callable[[], float], note: Progress
) -> tuple[list[tuple[Case, timing.Timed]], list[str]]:
    """Sessions for `cases` in order, warmed up, until `until`; the cases left out (refused or out of time)."""
    built: list[tuple[Case, timing.Timed]] = []
    skipped: list[str] = []
    for k, case in enumerate(cases):
        if clock() >= until:
            skipped += [f"{c.name} (no time left)" for c in cases[k:]]
            break
        try:
            run = timing.Timed(case.name, timing.session(case.model, provider=provider, threads=threads), case.feeds)
            run.warm_up(3, PER_ROUND)
        except Exception as exc:  # noqa: BLE001 - onnxruntime refuses a kernel (no fp16 MatMul, ...): left out
            skipped.append(f"{case.name} ({type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''})")
            continue
        built.append((case, run))
        note(0.0, f"building sessions {k + 1}/{len(cases)}")
    return built, skipped


def _fused_checks(built: Sequence[tuple[Case, timing.Timed]], found: Params, modes: dict[str, str]) -> list[FusedCheck]:
    """The fused patterns' checks from the timed pair graphs, priced with the fitted parameters."""
    times = {case.pair: run.median for case, run in built if case.pair is not None}
    kernels = {case.pair: case.kernels[0] for case, _ in built if case.pair is not None and case.kernels}
    producers = {pattern: s for (pattern, _, part), s in times.items() if part == "producer"}
    checks = []
    for (pattern, op, part), both in times.items():
        alone, kernel = times.get((pattern, op, "consumer")), kernels.get((pattern, op, "consumer"))
        if part != "both" or alone is None or kernel is None or pattern not in producers:
            continue
        memory = kernel.nbytes / found.bandwidth
        if modes.get(pattern) == "epilogue":
            peak = found.peak.get(kernel.dtype, found.peak.get("default", 1.0))
            as_fused = max(found.op_scale.get(op, 1.0) * kernel.flops / peak, memory)
        else:
            as_fused = memory
        as_kernel = max(alone - found.call, 0.0)
        checks.append(FusedCheck(pattern, op, producers[pattern], alone, both, as_fused, as_kernel))
    return checks


def _with_fused(data: dict[str, Any], checks: Sequence[FusedCheck]) -> dict[str, Any]:
    """Each fused pattern without the consumers measured unfused; a pattern left with none is dropped."""
    unfused = {(c.pattern, c.consumer) for c in checks if not c.fused}
    kept = []
    for pattern in data.get("fused", ()):
        consumers = [op for op in pattern["consumers"] if (pattern["name"], op) not in unfused]
        if consumers:
            kept.append({**pattern, "consumers": consumers})
    data = dict(data)
    if kept:
        data["fused"] = kept
    else:
        data.pop("fused", None)
    return data


def _machine() -> str:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), "?")
    except OSError:
        cpu = platform.processor() or "?"
    return f"{platform.node()}: {cpu}, {os.cpu_count()} cores"


def _description(provider: str, threads: int) -> str:
    import onnxruntime as ort

    return f"calibrated on {_machine()}; onnxruntime {ort.__version__} {provider}, {threads} thread(s)"


def _comments(
    base: str,
    provider: str,
    threads: int,
    budget: float,
    rounds: int,
    found: Fit,
    checks: Sequence[FusedCheck],
    skipped: Sequence[str],
    seconds: float,
) -> list[str]:
    import onnxruntime as ort

    p = found.params
    lines = [
        f"Calibrated by `eqsat calibrate --base {base}` on {_machine()}",
        f"onnxruntime {ort.__version__}, {provider}, {threads} intra-op thread(s), ORT_ENABLE_ALL; budget {budget:g} s,"
        f" {rounds} interleaved rounds, {seconds:.1f} s",
        f"Fit (eqsat.extract.calibrate, log least squares): {found.error_summary()} over {len(found.samples)} graphs;",
        f"a call's fixed cost {p.call * 1e6:.2f} us (not in the target: the same for every graph).",
        "Fitted: " + ", ".join(sorted(found.fitted)) + "; every other value is the base target's.",
        "",
        "graph                                            measured us  predicted us   error",
    ]
    for sample, error in zip(found.samples, found.errors()):
        lines.append(
            f"  {sample.name:46} {sample.seconds * 1e6:11.2f} {p.predict(sample) * 1e6:13.2f} {error * 100:+6.1f}%"
        )
    if checks:
        lines += [
            "",
            "Fused kernels, us per call: producer, consumer alone, both; what the consumer adds after the producer",
            "against its price fused and as a kernel of its own (nearer the first: kept in the pattern):",
        ]
        for c in checks:
            verdict = "kept" if c.fused else "dropped from the pattern"
            lines.append(
                f"  {c.pattern:16} {c.consumer:11} {c.producer_s * 1e6:8.2f} {c.consumer_s * 1e6:8.2f} "
                f"{c.both_s * 1e6:8.2f}  adds {c.added * 1e6:7.2f}  fused {c.as_fused * 1e6:7.2f}  "
                f"own {c.as_kernel * 1e6:7.2f}  {verdict}"
            )
    if skipped:
        lines += ["", f"Left out ({len(skipped)}):"] + [f"  {s}" for s in skipped]
    return lines + [""]


# ---------------------------------------------------------------------------------------------------
# Checking a target against the clock (benchmarks/bench_latency.py, notebooks/04_calibration.ipynb)


def predicted_cost(
    model: Any, target: str | os.PathLike[str], input_shapes: dict[str, tuple[int, ...]] | None = None
) -> float:
    """What `target`'s cost model says `model` (a path, ModelProto or ir.Model) costs: loaded and folded as eqsat
    loads a model, no rule run, every e-class its one node (Session.input_extraction), each node costed once.
    `input_shapes` (name -> dims) makes those inputs static first, so that a graph is priced at the sizes it is
    timed at (a symbolic dim is otherwise priced at a guess)."""
    from eqsat.extract.cost import roofline
    from eqsat.session import saturate

    session = saturate(model, rules=(), verify=False, fix_input_shapes=dict(input_shapes or {}))
    return float(session.input_extraction().standalone().dag_cost(roofline(load_target(target))))


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation of two sequences (ties get their mean rank); NaN below 3 pairs or when
    either is constant."""
    if len(x) != len(y):
        raise ValueError(f"spearman: {len(x)} values against {len(y)}")
    if len(x) < 3:
        return math.nan
    rx, ry = _ranks(np.asarray(x, float)), _ranks(np.asarray(y, float))
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values), dtype=float)
    for value in np.unique(values):
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    return ranks
