"""eqsat's speed next to onnxsim's CLI and onnxruntime's basic level, interleaved in one run.

    python -m benchmarks.bench_speed [FOLDER ...] [--repeat N]

Per model (FOLDERs default to ../shared/models and ../shared/models/real): the wall time of
`eqsat optimize M -o OUT` and of `onnxsim M OUT` (fresh interpreters, both checking their output as they
do by default; the median of N runs, the two tools alternating so that machine noise hits both), their
ratio, onnxruntime's basic level (in process: a session that writes its optimized model), and eqsat's time
per phase in process (warm: a second `eqsat.optimize(M, verify=False)` in the same interpreter).
The last rows give, per folder, the median and worst ratio and the median warm time: the figures issue
"Speed" asks for (on ../shared/models).
"CLI phases s" is the time the eqsat command reports for its phases (the rest of its wall time is the
interpreter's start and the imports). eqsat's sources are byte-compiled first, as `pip install` does: an
editable install under PYTHONDONTWRITEBYTECODE would compile ~50 modules at every start (~0.17 s).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

import eqsat
from eqsat.errors import EqsatError, first_line

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "models"


def _command(tool: str, model: Path, out: Path) -> list[str]:
    if tool == "eqsat":
        script = Path(sys.executable).with_name("eqsat")
        return [
            str(script) if script.exists() else sys.executable,
            *([] if script.exists() else ["-m", "eqsat"]),
            "optimize",
            str(model),
            "-o",
            str(out),
        ]
    return [shutil.which("onnxsim") or "onnxsim", str(model), str(out)]


def _wall(command: list[str]) -> float:
    """Seconds the command takes; NaN when it fails."""
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True)
    return time.perf_counter() - start if done.returncode == 0 else float("nan")


def _cli_phases(model: Path, out: Path) -> float:
    """Seconds of phases the eqsat command reports (its --report-json), NaN when it fails."""
    report = out.with_suffix(".json")
    done = subprocess.run([*_command("eqsat", model, out), "--report-json", str(report)], capture_output=True)
    if done.returncode != 0:
        return float("nan")
    return sum(json.loads(report.read_text())["phases"].values())


def _compile_sources() -> None:
    import compileall

    import eqsat.extract
    import eqsat.rewrites

    for folder in {*eqsat.__path__, *eqsat.rewrites.__path__, *eqsat.extract.__path__}:
        compileall.compile_dir(folder, quiet=1)


def _ort_basic(model: Path, out: Path) -> float:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.optimized_model_filepath = str(out)
    opts.log_severity_level = 3
    start = time.perf_counter()
    ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    return time.perf_counter() - start


def _warm_phases(model: Path) -> tuple[float, dict[str, float]]:
    """A second in-process `optimize` without verification: total seconds and seconds per phase."""
    eqsat.optimize(model, verify=False)
    start = time.perf_counter()
    report = eqsat.optimize(model, verify=False).report
    return time.perf_counter() - start, dict(report.phases)


def bench(models: Sequence[Path], repeat: int) -> str:
    _compile_sources()
    rows = [
        "| model | eqsat CLI s | CLI phases s | onnxsim CLI s | ratio | ort-basic s | eqsat warm s | "
        "phases (warm, ms) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ratios: dict[str, list[float]] = {}
    warms: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            times: dict[str, list[float]] = {"eqsat": [], "onnxsim": []}
            for _ in range(repeat):
                for tool in times:  # interleaved: eqsat, onnxsim, eqsat, onnxsim, ...
                    times[tool].append(_wall(_command(tool, model, Path(tmp) / f"{tool}.onnx")))
            ours, theirs = (statistics.median(times[t]) for t in ("eqsat", "onnxsim"))
            ratio = ours / theirs
            folder = model.parent.name
            if ratio == ratio:  # not NaN: both ran
                ratios.setdefault(folder, []).append(ratio)
            try:
                warm, phases = _warm_phases(model)
                warms.setdefault(folder, []).append(warm)
                shown = " ".join(f"{k} {v * 1000:.0f}" for k, v in phases.items())
            except EqsatError as exc:
                warm, shown = float("nan"), f"refused: {first_line(exc)[:60]}"
            basic = _ort_basic(model, Path(tmp) / "ort.onnx")
            phases_s = _cli_phases(model, Path(tmp) / "phases.onnx")
            rows.append(
                f"| {model.stem} | {ours:.2f} | {phases_s:.2f} | {theirs:.2f} | {ratio:.2f} | {basic:.3f} | "
                f"{warm:.3f} | {shown} |"
            )
            print(f"benchmarked {model.name}", file=sys.stderr)
    for folder in [f for f in ratios if f in warms]:  # in the order benchmarked
        rows.append(
            f"| **median ({folder})** | | | | {statistics.median(ratios[folder]):.2f} | | "
            f"{statistics.median(warms[folder]):.3f} | |"
        )
        rows.append(f"| **worst ({folder})** | | | | {max(ratios[folder]):.2f} | | {max(warms[folder]):.3f} | |")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, default=[SHARED, SHARED / "real"])
    parser.add_argument("--repeat", type=int, default=3, help="CLI runs per model and tool (median)")
    args = parser.parse_args(argv)
    models = [m for folder in args.folders for m in sorted(folder.glob("*.onnx"))]
    print(bench(models, args.repeat))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
