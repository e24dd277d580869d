"""Benchmark eqsat on a folder of models and print one markdown table row per model.

    python -m benchmarks.bench_models [FOLDER] [--repeat N]

FOLDER defaults to ../shared/models beside the repository. Per model: nodes and watched ops (Transpose,
Cast, Q+DQ, BatchNormalization) before -> after; seconds per pipeline phase (whatever phases the report
has); in-process time from load to save without verification (best of N runs, after one warm-up run so
lazy imports are not counted); the CLI end to end with verification (`eqsat optimize ... --verify`, a fresh
interpreter); the largest output difference found by verification; whether the output passes
`onnx.checker.check_model(full_check=True)`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

import onnx

import eqsat
from eqsat.errors import EqsatError, first_line
from eqsat.report import Report

DEFAULT_FOLDER = Path(__file__).resolve().parents[1].parent / "shared" / "models"


@dataclasses.dataclass
class Row:
    """What one model's benchmark measured; `error` is set when eqsat refused or failed the model."""

    model: str
    report: Report | None = None
    in_process: float = float("nan")
    cli: str = "-"
    full_check: str = "-"
    error: str = ""


def _eqsat_command() -> list[str]:
    """The `eqsat` script installed beside this interpreter, else `python -m eqsat`."""
    script = Path(sys.executable).with_name("eqsat")
    return [str(script)] if script.exists() else [sys.executable, "-m", "eqsat"]


def bench_model(path: Path, workdir: Path, repeat: int) -> Row:
    row = Row(path.stem)
    out = workdir / f"{path.stem}.optimized.onnx"
    try:
        for _ in range(repeat):
            start = time.perf_counter()
            report = eqsat.optimize(path, output=out).report
            seconds = time.perf_counter() - start - report.phases.get("verify", 0.0)
            if row.report is None or seconds < row.in_process:
                row.report, row.in_process = report, seconds
    except Exception as exc:  # a refused model or an eqsat bug: either is a finding for the table
        row.error = first_line(exc) if isinstance(exc, EqsatError) else f"{type(exc).__name__}: {first_line(exc)}"
        return row
    try:
        onnx.checker.check_model(str(out), full_check=True)
        row.full_check = "ok"
    except Exception as exc:  # any failure is the finding to report
        row.full_check = f"FAIL: {first_line(exc)}"
    cli_out = workdir / f"{path.stem}.cli.onnx"
    start = time.perf_counter()
    done = subprocess.run(
        [*_eqsat_command(), "optimize", str(path), "-o", str(cli_out), "--verify"], capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    row.cli = f"{seconds:.2f}" if done.returncode == 0 else f"exit {done.returncode} ({seconds:.2f} s)"
    return row


def _change(report: Report, key: str) -> str:
    before, after = report.watched(report.ops_before)[key], report.watched(report.ops_after)[key]
    return f"{before}->{after}"


def render(rows: Sequence[Row]) -> str:
    """The markdown table; phase columns are the union of all reports' phases, in order of appearance."""
    reports = [row.report for row in rows if row.report is not None]
    phases = list(dict.fromkeys(p for report in reports for p in report.phases))
    watched = list(reports[0].watched(reports[0].ops_before)) if reports else []
    header = [
        "model",
        "nodes",
        *watched,
        *(f"{p} s" for p in phases),
        "in-process s (no verify)",
        "CLI s (with verify)",
        "max abs diff",
        "full check",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        if row.report is None:
            cells = [row.model, f"error: {row.error}"] + [""] * (len(header) - 2)
        else:
            r = row.report
            diff = f"{r.verification.max_abs_diff:.2g}" if r.verification is not None else "-"
            cells = [
                row.model,
                f"{r.nodes_before}->{r.nodes_after}",
                *(_change(r, k) for k in watched),
                *(f"{r.phases[p]:.3f}" if p in r.phases else "-" for p in phases),
                f"{row.in_process:.3f}",
                row.cli,
                diff,
                row.full_check,
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_models", description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER, help="folder of .onnx models")
    parser.add_argument("--repeat", type=int, default=3, help="in-process runs per model; the best counts")
    args = parser.parse_args(argv)
    models = sorted(args.folder.glob("*.onnx"))
    if not models:
        print(f"no .onnx files in {args.folder}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="eqsat-bench-") as tmp:
        with contextlib.suppress(Exception):  # warm-up: lazy imports and first-call caches
            eqsat.optimize(models[0])
        rows = []
        for path in models:
            rows.append(bench_model(path, Path(tmp), args.repeat))
            print(f"benchmarked {path.name}", file=sys.stderr)
    print(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
