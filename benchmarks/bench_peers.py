"""eqsat next to its peers: graph quality and speed on a folder of models, as one markdown table.

    python -m benchmarks.bench_peers [FOLDER] [--runs 50] [--repeat 3] [--tools eqsat,ort-basic,...]

FOLDER defaults to ../shared/models beside the repository. Per model and tool (the input itself, eqsat,
onnxruntime's basic level, and onnxoptimizer and onnxsim when they are importable: they are not
dependencies of eqsat; `pip install onnxoptimizer onnxsim` to include them):

- nodes / Transpose / Cast / Q+DQ / BatchNormalization in the top-level graph;
- optimize time: file in, optimized model in memory (best of --repeat runs, after a warm-up run of every
  tool so that lazy imports are not counted; eqsat without verification; ORT basic is the session
  creation that writes the optimized model, `SessionOptions.optimized_model_filepath` at
  ORT_ENABLE_BASIC: standard ONNX ops only);
- latency under onnxruntime, 1 thread, graph optimizations disabled (DIS) and all enabled (ALL): the
  median of --runs runs after 5 warm-up runs; the runs are interleaved (each round runs every variant of
  the model once), so that load from other processes slows all variants alike;
- diff: the largest output difference from the input model on the same seeded inputs (eqsat.verify's
  inputs), relative to each output's largest magnitude.

A tool that fails on a model gets a row saying so; the others go on.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import onnx

DEFAULT_FOLDER = Path(__file__).resolve().parents[1].parent / "shared" / "models"
TOOLS = ("eqsat", "ort-basic", "onnxoptimizer", "onnxsim")
WARMUP_RUNS = 5


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


def counts(model: onnx.ModelProto) -> dict[str, int]:
    ops = collections.Counter(n.op_type for n in model.graph.node)
    return {"nodes": len(model.graph.node), "Transpose": ops["Transpose"], "Cast": ops["Cast"],
            "QDQ": ops["QuantizeLinear"] + ops["DequantizeLinear"], "BN": ops["BatchNormalization"]}


# ---- the tools: path -> optimized ModelProto ----


def _eqsat(path: Path, workdir: Path, target: str) -> onnx.ModelProto:
    import eqsat

    return eqsat.optimize(path, target=target, verify=False).proto


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


RUNNERS: dict[str, Callable[[Path, Path, str], onnx.ModelProto]] = {
    "eqsat": _eqsat, "ort-basic": _ort_basic, "onnxoptimizer": _onnxoptimizer, "onnxsim": _onnxsim}
#: The module each tool needs (tools whose module is missing are left out, with a note).
MODULES = {"eqsat": "eqsat", "ort-basic": "onnxruntime", "onnxoptimizer": "onnxoptimizer", "onnxsim": "onnxsim"}


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


def _session(model: onnx.ModelProto, level: str):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_DISABLE_ALL if level == "DIS"
                                        else ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


class Timed:
    """One model under onnxruntime at one level (DIS or ALL), timed run by run."""

    def __init__(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray], level: str) -> None:
        self.session = _session(model, level)
        names = {i.name for i in self.session.get_inputs()}
        self.feeds = {k: v for k, v in feeds.items() if k in names}
        self.times: list[float] = []
        for _ in range(WARMUP_RUNS):
            self.outputs = self.session.run(None, self.feeds)

    def run(self) -> None:
        start = time.perf_counter()
        self.session.run(None, self.feeds)
        self.times.append(time.perf_counter() - start)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times) * 1000


def time_all(timed: Sequence[Timed], runs: int) -> None:
    """`runs` rounds, each running every model once: a busy machine slows all of them alike."""
    for _ in range(runs):
        for t in timed:
            t.run()


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
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:120] if text else ''}"


def bench_model(path: Path, tools: Sequence[str], workdir: Path, *, runs: int, repeat: int,
                target: str) -> list[Measure]:
    from eqsat.verify import make_inputs

    original = onnx.load(str(path))
    feeds = make_inputs(original, 0)
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
        except Exception as exc:  # a refused model or a peer's failure: a finding for the table
            row.error = _first_line(exc)
    timed: dict[tuple[str, str], Timed] = {}
    for row in rows:
        if row.tool not in models:
            continue
        try:
            for level in ("DIS", "ALL"):
                timed[row.tool, level] = Timed(models[row.tool], feeds, level)
        except Exception as exc:  # an output onnxruntime cannot load or run
            row.error = _first_line(exc)
            timed.pop((row.tool, "DIS"), None)
    time_all(list(timed.values()), runs)
    reference = timed.get(("input", "DIS"))
    for row in rows:
        if (row.tool, "ALL") in timed:
            row.dis_ms, row.all_ms = timed[row.tool, "DIS"].median_ms, timed[row.tool, "ALL"].median_ms
            if reference is not None:
                row.diff = difference(reference.outputs, timed[row.tool, "DIS"].outputs)
    return rows


# ---- the table ----


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def render(results: dict[str, list[Measure]]) -> str:
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
            cells = [model if k == 0 else "", r.tool, shape,
                     _cell(None if r.optimize_s is None else r.optimize_s * 1000, ".0f"),
                     _cell(r.dis_ms, ".2f"), all_ms, _cell(r.diff, ".1e")]
            if r.error:
                cells[3:] = [f"error: {r.error}", "", "", ""]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(results: dict[str, list[Measure]]) -> str:
    """Per tool: models where it has the fewest nodes, median ALL-latency ratio to the input, failures."""
    tools = list(dict.fromkeys(r.tool for rows in results.values() for r in rows if r.tool != "input"))
    header = ["tool", "fewest nodes (of models)", "median ALL ms / input ALL ms", "median optimize ms", "failed"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for tool in tools:
        wins, ratios, times, failed = 0, [], [], 0
        for rows in results.values():
            fewest = min((r.counts["nodes"] for r in rows if r.counts and r.tool != "input" and not r.error),
                         default=None)
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
    results: dict[str, list[Measure]] = {}
    with tempfile.TemporaryDirectory(prefix="eqsat-peers-") as tmp:
        for tool in tools:  # warm-up: lazy imports and first-call caches are not optimize time
            with contextlib.suppress(Exception):
                RUNNERS[tool](models[0], Path(tmp), args.target)
        for path in models:
            results[path.stem] = bench_model(path, tools, Path(tmp), runs=args.runs, repeat=args.repeat,
                                             target=args.target)
            print(f"benchmarked {path.name}", file=sys.stderr)
    print(render(results))
    print()
    print(summary(results))
    for note in notes:
        print(f"\nnote: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
