"""eqsat next to its peers: graph quality and speed on a folder of models, as one markdown table.

    python -m benchmarks.bench_peers [FOLDER] [--runs 50] [--repeat 3] [--tools eqsat,ort-basic,...]
                                     [--save /tmp/peers]

FOLDER defaults to ../shared/models beside the repository (its real/ subfolder holds real models). Per
model and tool (the input itself, eqsat, onnxruntime's basic level, and onnxoptimizer, onnxscript's
optimizer, onnxsim and onnxslim when they are importable: they are not dependencies of eqsat;
`pip install onnxoptimizer onnxscript onnxsim onnxslim` to include them):

- nodes / Transpose / Cast / Q+DQ / BatchNormalization, counted by `counts` for every tool alike:
  Constant nodes are not counted, the bodies of If/Loop/Scan are (recursively);
- optimize time: file in, optimized model in memory (best of --repeat runs, after a warm-up run of every
  tool so that lazy imports are not counted; eqsat with its default options, verification included; ORT
  basic is the session creation that writes the optimized model, `SessionOptions.optimized_model_filepath`
  at ORT_ENABLE_BASIC: standard ONNX ops only);
- latency under onnxruntime, 1 thread, graph optimizations disabled (DIS) and all enabled (ALL): the
  median of --runs runs after 5 warm-up runs; the runs are interleaved (each round runs every variant of
  the model once), so that load from other processes slows all variants alike;
- diff: the largest output difference from the input model on the same seeded inputs (eqsat.check.verify's
  inputs, or the feeds FOLDER/INPUTS.json describes), relative to each output's largest magnitude.

A tool that fails on a model gets a row saying "failed" (eqsat: "refused (exit N)") and a footnote with
the first line of its message; the others go on. --save DIR writes every tool's output as
DIR/<model>.<tool>.onnx for inspection.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import onnx

from eqsat.check import timing

DEFAULT_FOLDER = Path(__file__).resolve().parents[1].parent / "shared" / "models"
TOOLS = ("eqsat", "ort-basic", "onnxoptimizer", "onnxscript", "onnxsim", "onnxslim")
WARMUP_RUNS = 5
#: Seconds of back-to-back calls per tool and level in a round (benchmarks.bench_latency.ROUND_SECONDS: why).
ROUND_SECONDS = 0.004
#: The two levels each version is timed at (onnxruntime graph optimizations off, all on).
LEVELS = {"DIS": "DISABLE_ALL", "ALL": "ENABLE_ALL"}


@dataclasses.dataclass
class Measure:
    """One tool on one model."""

    tool: str
    counts: dict[str, int] | None = None
    optimize_s: float | None = None
    dis_ms: float | None = None
    all_ms: float | None = None
    diff: float | None = None
    error: str = ""


def all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of `graph` and, recursively, of the subgraphs its nodes hold (If/Loop/Scan bodies)."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else attr.graphs:
                yield from all_nodes(sub)


def op_types(model: onnx.ModelProto) -> collections.Counter[str]:
    """Op types of all nodes, subgraphs included, Constant nodes left out: the one counting convention."""
    return collections.Counter(n.op_type for n in all_nodes(model.graph) if n.op_type != "Constant")


def counts(model: onnx.ModelProto) -> dict[str, int]:
    ops = op_types(model)
    return {
        "nodes": sum(ops.values()),
        "Transpose": ops["Transpose"],
        "Cast": ops["Cast"],
        "QDQ": ops["QuantizeLinear"] + ops["DequantizeLinear"],
        "BN": ops["BatchNormalization"],
    }


# ---- the tools: path -> optimized ModelProto ----


class Refused(Exception):
    """eqsat declined a model: the exit code its CLI would return, and the first line of its message."""


def _eqsat(path: Path, workdir: Path, target: str) -> onnx.ModelProto:
    import eqsat
    from eqsat.errors import EqsatError, first_line

    try:
        return eqsat.optimize(path, target=target).proto
    except EqsatError as exc:
        raise Refused(f"refused (exit {exc.exit_code})", first_line(exc)) from exc


def _ort_basic(path: Path, workdir: Path, target: str) -> onnx.ModelProto:
    import onnxruntime as ort

    out = workdir / f"{path.stem}.ort-basic.onnx"
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(out)
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return onnx.load(str(out))


def _onnxoptimizer(path: Path, workdir: Path, target: str) -> onnx.ModelProto:
    import onnxoptimizer

    return onnxoptimizer.optimize(onnx.load(str(path)))


def _onnxsim(path: Path, workdir: Path, target: str) -> onnx.ModelProto:
    import onnxsim

    model, ok = onnxsim.simplify(onnx.load(str(path)))
    if not ok:
        raise RuntimeError("onnxsim's own check failed")
    return model


def _onnxscript(path: Path, workdir: Path, target: str) -> onnx.ModelProto:
    import onnxscript.optimizer

    return onnxscript.optimizer.optimize(onnx.load(str(path)))


def _onnxslim(path: Path, workdir: Path, target: str) -> onnx.ModelProto:
    import onnxslim

    return onnxslim.slim(onnx.load(str(path)))


RUNNERS: dict[str, Callable[[Path, Path, str], onnx.ModelProto]] = {
    "eqsat": _eqsat,
    "ort-basic": _ort_basic,
    "onnxoptimizer": _onnxoptimizer,
    "onnxscript": _onnxscript,
    "onnxsim": _onnxsim,
    "onnxslim": _onnxslim,
}
#: The module each tool needs (tools whose module is missing are left out, with a note).
MODULES = {
    "eqsat": "eqsat",
    "ort-basic": "onnxruntime",
    "onnxoptimizer": "onnxoptimizer",
    "onnxscript": "onnxscript",
    "onnxsim": "onnxsim",
    "onnxslim": "onnxslim",
}


def available(tools: Sequence[str]) -> tuple[list[str], list[str]]:
    """(tools that can run, notes about the ones that cannot)."""
    import importlib

    ok, notes = [], []
    for tool in tools:
        try:
            importlib.import_module(MODULES[tool])
            ok.append(tool)
        except ImportError as exc:
            notes.append(f"{tool} left out: {exc} (pip install {MODULES[tool]})")
    return ok, notes


# ---- running the models ----


def feeds_from_spec(spec: dict[str, list], seed: int = 0) -> dict[str, np.ndarray]:
    """Feeds as INPUTS.json describes them: name -> [shape, dtype, rule], rule one of normal | zeros | true |
    ints:LO:HI (uniform in [LO, HI)) | fill:V; drawn in the spec's order from one seeded generator."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, (shape, dtype, rule) in spec.items():
        kind, _, arg = rule.partition(":")
        if kind == "normal":
            value = rng.standard_normal(shape)
        elif kind == "zeros":
            value = np.zeros(shape)
        elif kind == "true":
            value = np.ones(shape, bool)
        elif kind == "ints":
            low, high = map(int, arg.split(":"))
            value = rng.integers(low, high, shape)
        elif kind == "fill":
            value = np.full(shape, float(arg))
        else:
            raise ValueError(f"{name}: unknown input rule {rule!r}")
        feeds[name] = np.asarray(value).astype(dtype)
    return feeds


def feeds_for(path: Path, model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The feeds INPUTS.json beside the model gives for it, else eqsat.check.verify's seeded inputs."""
    from eqsat.check.verify import make_inputs

    inputs = path.parent / "INPUTS.json"
    spec = json.loads(inputs.read_text()).get(path.name) if inputs.exists() else None
    return feeds_from_spec(spec) if spec else make_inputs(model, 0)


def difference(expected: Sequence[np.ndarray], actual: Sequence[np.ndarray]) -> float:
    """Largest |expected - actual| relative to the expected output's largest magnitude, over the outputs."""
    worst = 0.0
    for e, a in zip(expected, actual):
        e64, a64 = np.asarray(e, np.float64), np.asarray(a, np.float64)
        if e64.shape != a64.shape:
            return float("inf")
        if not e64.size:
            continue
        finite = np.isfinite(e64) & np.isfinite(a64)
        scale = max(float(np.max(np.abs(e64[finite]), initial=0.0)), 1e-3)
        worst = max(worst, float(np.max(np.abs(e64[finite] - a64[finite]), initial=0.0)) / scale)
    return worst


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, Refused):
        return ": ".join(exc.args)
    text = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"failed: {type(exc).__name__}: {text[0][:160] if text else ''}"


def bench_model(
    path: Path, tools: Sequence[str], workdir: Path, *, runs: int, repeat: int, target: str, save: Path | None = None
) -> list[Measure]:
    original = onnx.load(str(path))
    feeds = feeds_for(path, original)
    rows = [Measure("input", counts(original))]
    models = {"input": original}
    for tool in tools:
        row = Measure(tool)
        rows.append(row)
        try:
            best, model = float("inf"), None
            for _ in range(repeat):
                start = time.perf_counter()
                model = RUNNERS[tool](path, workdir, target)
                best = min(best, time.perf_counter() - start)
            row.optimize_s, row.counts = best, counts(model)
            models[tool] = model
            if save is not None:
                onnx.save(model, str(save / f"{path.stem}.{tool}.onnx"))
        except Exception as exc:  # a refused model or a peer's failure: a finding for the table
            row.error = _first_line(exc)
    timed: dict[tuple[str, str], timing.Timed] = {}
    outputs: dict[str, list] = {}  # per tool, its outputs with graph optimizations off
    for row in rows:
        if row.tool not in models:
            continue
        try:
            for level in LEVELS:
                session = timing.session(models[row.tool], level=LEVELS[level])
                names = {i.name for i in session.get_inputs()}
                t = timed[row.tool, level] = timing.Timed(
                    level, session, {k: v for k, v in feeds.items() if k in names}
                )
                t.warm_up(WARMUP_RUNS, ROUND_SECONDS)
            outputs[row.tool] = timed[row.tool, "DIS"].session.run(None, timed[row.tool, "DIS"].feeds)
        except Exception as exc:  # an output onnxruntime cannot load or run
            row.error = _first_line(exc)
            for level in LEVELS:
                timed.pop((row.tool, level), None)
    timing.time_interleaved(list(timed.values()), rounds=runs, shuffle=random.Random(0))
    for row in rows:
        if (row.tool, "ALL") in timed:
            row.dis_ms, row.all_ms = (timed[row.tool, level].median * 1000 for level in LEVELS)
            if "input" in outputs:
                row.diff = difference(outputs["input"], outputs[row.tool])
    return rows


# ---- the table ----


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def render(results: dict[str, list[Measure]]) -> str:
    """The table, then one footnote per failure: "failed [n]" or "refused (exit N) [n]" in the table."""
    footnotes: list[str] = []
    header = ["model", "tool", "nodes / T / Cast / QDQ / BN", "optimize ms", "DIS ms", "ALL ms", "diff"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for model, rows in results.items():
        fewest = min((r.counts["nodes"] for r in rows if r.counts and not r.error), default=None)
        fastest = min((r.all_ms for r in rows if r.all_ms is not None), default=None)
        for k, r in enumerate(rows):
            c = r.counts
            shape = "-" if c is None else f"{c['nodes']} / {c['Transpose']} / {c['Cast']} / {c['QDQ']} / {c['BN']}"
            if c is not None and c["nodes"] == fewest and r.tool != "input":
                shape = f"**{shape}**"
            all_ms = _cell(r.all_ms, ".2f")
            if r.all_ms is not None and r.all_ms == fastest:
                all_ms = f"**{all_ms}**"
            cells = [
                model if k == 0 else "",
                r.tool,
                shape,
                _cell(None if r.optimize_s is None else r.optimize_s * 1000, ".0f"),
                _cell(r.dis_ms, ".2f"),
                all_ms,
                _cell(r.diff, ".1e"),
            ]
            if r.error:
                footnotes.append(f"[{len(footnotes) + 1}] {model}, {r.tool}: {r.error}")
                cells[2 if c is None else 3 :] = [f"{r.error.split(':')[0]} [{len(footnotes)}]", "-", "-", "-", "-"]
                del cells[len(header) :]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + [""] + footnotes if footnotes else lines)


def summary(results: dict[str, list[Measure]]) -> str:
    """Per tool: models where it has the fewest nodes, median ALL-latency ratio to the input, failures."""
    tools = list(dict.fromkeys(r.tool for rows in results.values() for r in rows if r.tool != "input"))
    header = ["tool", "fewest nodes (of models)", "median ALL ms / input ALL ms", "median optimize ms", "failed"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for tool in tools:
        wins, ratios, times, failed = 0, [], [], 0
        for rows in results.values():
            fewest = min(
                (r.counts["nodes"] for r in rows if r.counts and r.tool != "input" and not r.error), default=None
            )
            me = next(r for r in rows if r.tool == tool)
            if me.error:
                failed += 1
                continue
            wins += me.counts is not None and me.counts["nodes"] == fewest
            if me.all_ms is not None and rows[0].all_ms:
                ratios.append(me.all_ms / rows[0].all_ms)
            if me.optimize_s is not None:
                times.append(me.optimize_s * 1000)
        ratio = f"{statistics.median(ratios):.2f}" if ratios else "-"
        optimize = f"{statistics.median(times):.0f}" if times else "-"
        lines.append(f"| {tool} | {wins} / {len(results)} | {ratio} | {optimize} | {failed} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_peers", description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER, help="folder of .onnx models")
    parser.add_argument("--runs", type=int, default=50, help="timed onnxruntime runs per model and level")
    parser.add_argument("--repeat", type=int, default=3, help="optimize runs per model and tool; the best counts")
    parser.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated, from {', '.join(TOOLS)}")
    parser.add_argument("--target", default="cpu", help="eqsat's target")
    parser.add_argument("--save", type=Path, help="folder to write every tool's output to (<model>.<tool>.onnx)")
    args = parser.parse_args(argv)
    models = sorted(args.folder.glob("*.onnx"))
    if not models:
        print(f"no .onnx files in {args.folder}", file=sys.stderr)
        return 2
    unknown = [t for t in args.tools.split(",") if t not in RUNNERS]
    if unknown:
        print(f"unknown tool(s): {', '.join(unknown)}; choose from {', '.join(TOOLS)}", file=sys.stderr)
        return 2
    tools, notes = available(args.tools.split(","))
    for note in notes:
        print(note, file=sys.stderr)
    if args.save is not None:
        args.save.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[Measure]] = {}
    with tempfile.TemporaryDirectory(prefix="eqsat-peers-") as tmp:
        for tool in tools:  # warm-up: lazy imports and first-call caches are not optimize time
            with contextlib.suppress(Exception):
                RUNNERS[tool](models[0], Path(tmp), args.target)
        for path in models:
            results[path.stem] = bench_model(
                path, tools, Path(tmp), runs=args.runs, repeat=args.repeat, target=args.target, save=args.save
            )
            print(f"benchmarked {path.name}", file=sys.stderr)
    print(render(results))
    print()
    print(summary(results))
    for note in notes:
        print(f"\nnote: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
