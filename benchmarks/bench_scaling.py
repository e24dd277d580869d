"""Scaling of the whole pipeline on models shaped like real exports: time per node of every phase, peak memory,
and the peers on the same files.

    python -m benchmarks.bench_scaling                                   # transformer at 1k, 3k, 10k and 30k nodes
    python -m benchmarks.bench_scaling --model resnet --sizes 200 600     # ResNet-like stacks, in blocks
    python -m benchmarks.bench_scaling --peer onnxsim=/venvs/onnxsim/bin/python --peer ort-basic=/venvs/ort/bin/python

Models (benchmarks.synthetic, seeded): `transformer` (a torch-style encoder, hidden 256, symbolic batch and seq,
run-time head reshapes; sizes in layers, ~108 nodes a layer), `resnet` (Conv+BN+Relu basic blocks, symbolic batch;
sizes in blocks, 7 nodes a block), `chain` (Transpose/Relu/scale/Conv blocks, static; sizes in ops).
Each run is a fresh process (`python -m eqsat optimize`, verification on), so
peak memory is that run's own. Peers run in the interpreter given (a venv of their own, as their users install
them), interleaved with eqsat's runs: `onnxsim` (`onnxsim.simplify()`, not its CLI, which spends most of its time
printing a summary), `onnxslim` (`onnxslim.slim()`), `ort-basic` (onnxruntime's basic level, the optimized model
written). eqsat runs in `--eqsat-python` (default: this interpreter; a non-editable install for figures to quote).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import onnx

from benchmarks import synthetic
from benchmarks.tools import PEER_SCRIPTS, timed

PHASES = (
    "load",
    "fold",
    "install rules",
    "encode",
    "reference inputs",
    "snapshot input",
    "saturate",
    "decode",
    "extract",
    "lower",
    "verify",
    "save",
)
MODELS = {
    "transformer": synthetic.transformer_encoder,
    "resnet": synthetic.resnet_stack,
    "chain": synthetic.block_chain,
}
DEFAULT_SIZES = {"transformer": (10, 28, 96, 288), "resnet": (70, 200, 600), "chain": (1000, 5000, 20000)}


def run_eqsat(python: str, model: Path, out: Path) -> dict:
    """One CLI run in a fresh process: wall time, peak RSS and the report's phases."""
    report = out.with_suffix(".json")
    command = [python, "-m", "eqsat", "optimize", str(model), "-o", str(out), "--force", "--report-json", str(report)]
    wall, peak = timed(command, cwd=model.parent)  # not the checkout: `-m eqsat` would import it from there
    data = json.loads(report.read_text())
    return {"wall": wall, "peak_mb": peak, "phases": data.get("phases", {}), "nodes_after": data.get("nodes_after")}


def run_peer(name: str, python: str, model: Path, out: Path) -> dict:
    wall, peak = timed([python, "-c", PEER_SCRIPTS[name], str(model), str(out)], cwd=model.parent)
    return {"wall": wall, "peak_mb": peak, "nodes_after": _count(out)}


def _count(path: Path) -> int | None:
    if not path.exists():
        return None
    model = onnx.load(str(path), load_external_data=False)
    return sum(1 for n in model.graph.node if n.op_type != "Constant")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(MODELS), default="transformer")
    parser.add_argument("--sizes", type=int, nargs="+", help="layers (transformer) or blocks (resnet)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each tool per size (median reported)")
    parser.add_argument("--eqsat-python", default=sys.executable)
    parser.add_argument(
        "--peer", action="append", default=[], metavar="NAME=PYTHON", help=f"one of {sorted(PEER_SCRIPTS)}"
    )
    parser.add_argument(
        "--tmpdir",
        help="where the models and outputs are written (default: the system's temporary folder); a tmpfs such as "
        "/dev/shm takes the disk's write-back out of `save` (an fsync'd write of the whole file)",
    )
    args = parser.parse_args(argv)
    peers = dict(p.split("=", 1) for p in args.peer)
    unknown = set(peers) - set(PEER_SCRIPTS)
    if unknown:
        parser.error(f"unknown peer(s): {', '.join(sorted(unknown))}")
    sizes = args.sizes or DEFAULT_SIZES[args.model]
    print(
        f"model {args.model}; eqsat: {args.eqsat_python}; files in {args.tmpdir or tempfile.gettempdir()}; "
        "per-phase figures in microseconds per input node\n"
    )
    header = ["size", "nodes", "MB", "out", "wall s", "peak MB", *PHASES] + [f"{p} s / MB / out" for p in peers]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    with tempfile.TemporaryDirectory(dir=args.tmpdir) as tmp:
        for size in sizes:
            proto = MODELS[args.model](size)
            nodes = len(proto.graph.node)
            path = Path(tmp) / f"{args.model}{size}.onnx"
            onnx.save(proto, str(path))
            megabytes = path.stat().st_size / 2**20
            del proto
            runs: dict[str, list[dict]] = {"eqsat": [], **{p: [] for p in peers}}
            for _ in range(args.repeat):  # interleaved: a load spike hits every tool alike
                runs["eqsat"].append(run_eqsat(args.eqsat_python, path, Path(tmp) / "eqsat.onnx"))
                for name, python in peers.items():
                    runs[name].append(run_peer(name, python, path, Path(tmp) / f"{name}.onnx"))
            eq = _median_run(runs["eqsat"])
            phases = [f"{1e6 * eq['phases'].get(p, 0.0) / nodes:.0f}" for p in PHASES]
            cells = [
                str(size),
                str(nodes),
                f"{megabytes:.0f}",
                str(eq["nodes_after"]),
                f"{eq['wall']:.2f}",
                f"{eq['peak_mb']:.0f}",
                *phases,
            ]
            for name in peers:
                r = _median_run(runs[name])
                cells.append(f"{r['wall']:.2f} / {r['peak_mb']:.0f} / {r['nodes_after']}")
            print("| " + " | ".join(cells) + " |", flush=True)
    return 0


def _median_run(runs: list[dict]) -> dict:
    return sorted(runs, key=lambda r: r["wall"])[len(runs) // 2]


if __name__ == "__main__":
    raise SystemExit(main())
