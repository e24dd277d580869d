"""eqsat's CLI speed beside each peer's, every tool timed as its users install it, interleaved.

    python -m benchmarks.bench_speed --eqsat-python /venvs/eqsat/bin/python \\
        --peer onnxsim=/venvs/onnxsim/bin/python [--peer onnxslim=... --peer ort-basic=...] [FOLDER ...]

eqsat runs from `--eqsat-python`: a venv where `pip install .` put it (non-editable: byte-compiled, as users
get it). Each peer runs from a venv of its own holding only that peer and onnxruntime (benchmarks.tools says
why). The table's header names each interpreter, its install kind and its environment's size; an editable
eqsat or a peer beside sympy is flagged there.

Per model (FOLDERs default to ../shared/models and ../shared/models/real), `--repeat` rounds; each round
runs every tool once, in turn (interleaved: a load spike hits every tool alike), each in a fresh process:
- `eqsat optimize M -o OUT` (verification on, its default);
- `onnxsim M OUT` and `onnxslim M OUT`, their CLIs (each checks its output as it does by default);
- ort-basic: an onnxruntime session at the basic level writing its optimized model (the library call).
The cells are medians; "ratio" is eqsat's over onnxsim's. "warm s" is a second in-process
`eqsat.optimize(M, verify=False)` in the eqsat interpreter. The last rows give, per folder, the median and the
worst ratio and the median warm time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from benchmarks.tools import PEER_SCRIPTS, installation, timed

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "models"
PEERS = ("onnxsim", "onnxslim", "ort-basic")
#: The package each peer's venv must hold.
PACKAGE = {"onnxsim": "onnxsim", "onnxslim": "onnxslim", "ort-basic": "onnxruntime"}

_WARM_SCRIPT = """
import json, sys, time
import eqsat
from eqsat.errors import EqsatError
found = {}
for path in sys.argv[1:]:
    try:
        eqsat.optimize(path, verify=False)
        start = time.perf_counter()
        eqsat.optimize(path, verify=False)
        found[path] = time.perf_counter() - start
    except EqsatError:
        found[path] = None
print(json.dumps(found))
"""


def command(tool: str, python: str, model: Path, out: Path) -> list[str]:
    """The command a user of `tool` runs on `model` (the interpreter's own console script for a CLI)."""
    if tool == "eqsat":
        return [python, "-m", "eqsat", "optimize", str(model), "-o", str(out), "--force"]
    if tool in ("onnxsim", "onnxslim"):
        return [str(Path(python).with_name(tool)), str(model), str(out)]
    return [python, "-c", PEER_SCRIPTS[tool], str(model), str(out)]


def _wall(cmd: list[str], cwd: Path) -> float:
    """Seconds the command takes; NaN when it fails."""
    try:
        return timed(cmd, cwd)[0]
    except RuntimeError:
        return float("nan")


def warm_seconds(python: str, models: Sequence[Path]) -> dict[str, float | None]:
    """Per model, a second in-process `eqsat.optimize(M, verify=False)` in `python` (None: refused)."""
    done = subprocess.run(
        [python, "-c", _WARM_SCRIPT, *map(str, models)], capture_output=True, text=True, cwd="/", check=True
    )
    return json.loads(done.stdout)


def bench(models: Sequence[Path], eqsat_python: str, peers: dict[str, str], repeat: int) -> str:
    tools = {"eqsat": eqsat_python, **peers}
    lines = [installation(eqsat_python, "eqsat")] + [installation(p, PACKAGE[name]) for name, p in peers.items()]
    lines += [f"{repeat} interleaved rounds per model, medians; fresh processes; seconds", ""]
    header = ["model", *(f"{t} s" for t in tools), "ratio (eqsat / onnxsim)", "eqsat warm s"]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    warm = warm_seconds(eqsat_python, models)
    ratios: dict[str, list[float]] = {}
    warms: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            times: dict[str, list[float]] = {t: [] for t in tools}
            for _ in range(repeat):
                for tool, python in tools.items():
                    out = Path(tmp) / f"{tool}.onnx"
                    times[tool].append(_wall(command(tool, python, model, out), cwd=model.parent))
            medians = {t: statistics.median(v) for t, v in times.items()}
            ratio = medians["eqsat"] / medians["onnxsim"] if "onnxsim" in medians else float("nan")
            folder = model.parent.name
            if ratio == ratio:  # not NaN: both ran
                ratios.setdefault(folder, []).append(ratio)
            seconds = warm[str(model)]
            if seconds is not None:
                warms.setdefault(folder, []).append(seconds)
            cells = [model.stem, *(f"{medians[t]:.2f}" for t in tools), f"{ratio:.2f}", _cell(seconds, ".3f")]
            rows.append("| " + " | ".join(cells) + " |")
            print(f"benchmarked {model.name}", file=sys.stderr, flush=True)
    blank = [""] * len(tools)
    for folder in ratios:
        median_warm = statistics.median(warms[folder]) if warms.get(folder) else None
        worst_warm = max(warms[folder]) if warms.get(folder) else None
        rows.append(
            "| "
            + " | ".join(
                [
                    f"**median ({folder})**",
                    *blank,
                    f"{statistics.median(ratios[folder]):.2f}",
                    _cell(median_warm, ".3f"),
                ]
            )
            + " |"
        )
        rows.append(
            "| "
            + " | ".join([f"**worst ({folder})**", *blank, f"{max(ratios[folder]):.2f}", _cell(worst_warm, ".3f")])
            + " |"
        )
    return "\n".join(lines + rows)


def _cell(value: float | None, fmt: str) -> str:
    return "refused" if value is None else format(value, fmt)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", type=Path, default=[SHARED, SHARED / "real"])
    parser.add_argument("--eqsat-python", default=sys.executable, help="an interpreter with eqsat pip-installed")
    parser.add_argument("--peer", action="append", default=[], metavar="NAME=PYTHON", help=f"one of {', '.join(PEERS)}")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds per model (median)")
    args = parser.parse_args(argv)
    peers = dict(p.split("=", 1) for p in args.peer)
    unknown = set(peers) - set(PEERS)
    if unknown:
        parser.error(f"unknown peer(s): {', '.join(sorted(unknown))}")
    models = [m for folder in args.folders for m in sorted(folder.glob("*.onnx"))]
    print(bench(models, args.eqsat_python, peers, args.repeat))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
