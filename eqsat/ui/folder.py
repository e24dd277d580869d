"""`eqsat optimize DIR -o OUTDIR`: every model of a folder, in a process pool (`--jobs`), one line per model
as it finishes and a summary table at the end."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import sys
import time
from typing import Any, Mapping, Sequence, TextIO

from eqsat import run_warnings
from eqsat.errors import BadInputError, EqsatError


def models_in(folder: str) -> list[str]:
    """The .onnx files directly in `folder`, sorted by name."""
    names = sorted(n for n in os.listdir(folder) if n.endswith(".onnx") and os.path.isfile(os.path.join(folder, n)))
    if not names:
        raise BadInputError(folder, "no .onnx files in this folder")
    return names


def optimize_one(source: str, output: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """One model in a worker: its headline, warnings and report (as data and text), or its error."""
    from eqsat.pipeline import optimize
    from eqsat.view.tables import headline_text

    start = time.perf_counter()
    row: dict[str, Any] = {"model": os.path.basename(source), "output": output}
    try:
        result = optimize(source, output=output, **kwargs)
    except EqsatError as exc:
        row.update(status="error", exit_code=exc.exit_code, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - a bug on one model must not stop the others
        row.update(status="error", exit_code=1, error=f"internal error: {type(exc).__name__}: {exc}")
    else:
        report = result.report
        row.update(
            status="warning" if report.warnings else "ok",
            exit_code=0,
            headline=report.headline(),
            summary=headline_text(report),
            warnings=list(report.warnings),
            report=report.to_dict(),
            text=report.to_text(),
        )
    row["seconds"] = time.perf_counter() - start
    return row


def run(
    folder: str,
    out_folder: str,
    kwargs: Mapping[str, Any],
    *,
    jobs: int,
    force: bool,
    out: TextIO,
    err: TextIO = sys.stderr,
    report: bool = False,
) -> tuple[int, list[dict[str, Any]]]:
    """Optimize every model of `folder` into `out_folder`; print a line per model as it finishes, then the
    summary table. Returns the exit code (0, or the worst error's) and the rows, in the folder's order."""
    names = models_in(folder)
    if os.path.realpath(folder) == os.path.realpath(out_folder) and not force:
        raise BadInputError(out_folder, "is the input folder: its models would be overwritten (pass --force)")
    if os.path.exists(out_folder) and not os.path.isdir(out_folder):
        raise BadInputError(out_folder, "is not a folder (a folder of models is written into a folder)")
    os.makedirs(out_folder, exist_ok=True)
    jobs = max(1, min(jobs, len(names)))
    rows: dict[str, dict[str, Any]] = {}
    start = time.perf_counter()

    def done(row: dict[str, Any]) -> None:
        rows[row["model"]] = row
        if row["status"] == "error":
            print(f"{row['model']}: error: {row['error']}", file=out, flush=True)
            return
        print(f"{row['model']}: {row['summary']} in {row['seconds']:.2f} s", file=out, flush=True)
        for warning in (w for w in row["warnings"] if not run_warnings.asked_for(w)):
            print(f"eqsat: warning: {row['model']}: {warning}", file=err, flush=True)
        if report:
            print(row["text"], file=out, flush=True)

    work = [(os.path.join(folder, n), os.path.join(out_folder, n)) for n in names]
    if jobs == 1:
        for source, output in work:
            done(optimize_one(source, output, kwargs))
    else:  # spawned workers: egglog's state is never forked
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
            futures = [pool.submit(optimize_one, source, output, dict(kwargs)) for source, output in work]
            for future in concurrent.futures.as_completed(futures):
                done(future.result())
    ordered = [rows[n] for n in names]
    print(summary_table(ordered, time.perf_counter() - start, jobs), file=out, flush=True)
    codes = [r["exit_code"] for r in ordered if r["exit_code"]]
    return (max(codes) if codes else 0), ordered


def summary_table(rows: Sequence[dict[str, Any]], seconds: float, jobs: int) -> str:
    """model, ops before and after, their change, estimated cost before and after, its change, seconds, status."""
    from eqsat.view.tables import format_cost, percent_change, text_table

    table = []
    for r in rows:
        h = r.get("headline")
        if h is None:
            table.append([r["model"], "", "", "", "", "", "", f"{r['seconds']:.1f}", f"error ({r['exit_code']})"])
            continue
        table.append(
            [
                r["model"],
                h["ops_before"],
                h["ops_after"],
                percent_change(h["ops_before"], h["ops_after"]),
                format_cost(h["cost_before"], h["unit"]),
                format_cost(h["cost_after"], h["unit"]),
                percent_change(h["cost_before"], h["cost_after"]),
                f"{r['seconds']:.1f}",
                r["status"] + (f" ({len(r['warnings'])})" if r["warnings"] else ""),
            ]
        )
    failed = sum(r["status"] == "error" for r in rows)
    head = (
        f"{len(rows)} models in {seconds:.1f} s with {jobs} job{'s' if jobs > 1 else ''}: "
        f"{len(rows) - failed} written, {failed} failed (ops: Constant nodes not counted)"
    )
    return (
        "\n"
        + head
        + "\n"
        + text_table(
            ["model", "ops before", "after", "change", "est. cost before", "after", "change", "s", "status"], table
        )
    )


def folder_json(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The JSON report of a folder run: each model's report (or error), by model."""
    return {
        "models": {
            r["model"]: (r["report"] if "report" in r else {"error": r["error"], "exit_code": r["exit_code"]})
            for r in rows
        }
    }
