"""Soundness, determinism and idempotence of eqsat on a folder of models, as a markdown table.

    python -m benchmarks.bench_soundness [FOLDER] [--target cpu] [--allow precision-changing]

FOLDER defaults to ../shared/models beside the repository. For every model:
- verified: `eqsat.optimize` with verification passes (largest difference found / allowed tolerance);
- deterministic: a second run (verification off) writes a byte-identical file;
- idempotent: optimizing the output again (with verification) gives the same op counts;
- the saturation stop reason (a time limit would make runs differ; the default limits do not use one).
Exit status 0 when every model passes all three, 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

import eqsat
from eqsat.errors import EqsatError, first_line

DEFAULT_FOLDER = Path(__file__).resolve().parents[1].parent / "shared" / "models"


@dataclasses.dataclass
class Row:
    model: str
    nodes: str = ""
    verified: str = ""
    deterministic: str = ""
    idempotent: str = ""
    stop: str = ""
    seconds: float = 0.0
    ok: bool = False

    def cells(self) -> list[str]:
        return [
            self.model,
            self.nodes,
            self.verified,
            self.deterministic,
            self.idempotent,
            self.stop,
            f"{self.seconds:.1f}",
        ]


HEADER = [
    "model",
    "nodes before -> after",
    "verified (max diff / allowed)",
    "byte-identical rerun",
    "idempotent (2nd pass nodes)",
    "stop reason",
    "s",
]


def check(path: Path, target: str = "cpu", allow: Sequence[str] = ()) -> Row:
    row = Row(path.name)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        a, b, c = (Path(tmp) / name for name in ("a.onnx", "b.onnx", "c.onnx"))
        try:
            first = eqsat.optimize(path, output=a, target=target, allow=allow, strict=True)
        except EqsatError as exc:
            row.verified = f"FAIL: {first_line(exc)}"
            row.seconds = time.perf_counter() - start
            return row
        r = first.report
        v = r.verification
        worst = max(v.outputs, key=lambda o: o.max_abs_diff / o.allowed if o.allowed else 0.0, default=None)
        row.nodes = f"{r.nodes_before} -> {r.nodes_after}"
        row.verified = f"yes ({worst.max_abs_diff:.2g} / {worst.allowed:.2g})" if worst else "yes"
        row.stop = r.saturation.stop_reason if r.saturation is not None else ""
        eqsat.optimize(path, output=b, target=target, allow=allow, verify=False)
        same = a.read_bytes() == b.read_bytes()
        row.deterministic = "yes" if same else f"NO ({a.stat().st_size} vs {b.stat().st_size} bytes)"
        try:
            again = eqsat.optimize(a, output=c, target=target, allow=allow, strict=True)
        except EqsatError as exc:
            row.idempotent = f"FAIL: {first_line(exc)}"
        else:
            before, after = first.report.ops_after, again.report.ops_after
            if before == after:
                row.idempotent = f"yes ({again.report.nodes_after})"
            else:
                changed = sorted(k for k in set(before) | set(after) if before[k] != after[k])
                row.idempotent = "NO: " + ", ".join(f"{k} {before[k]}->{after[k]}" for k in changed)
        row.ok = same and row.idempotent.startswith("yes")
    row.seconds = time.perf_counter() - start
    return row


def table(rows: Sequence[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r.cells()) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_soundness", description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(DEFAULT_FOLDER), help="folder of .onnx models")
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--allow", action="append", default=[], choices=("precision-changing",))
    args = parser.parse_args(argv)
    paths = sorted(Path(args.folder).glob("*.onnx"))
    if not paths:
        print(f"no .onnx models in {args.folder}", file=sys.stderr)
        return 2
    rows = []
    for path in paths:
        rows.append(check(path, args.target, args.allow))
        print(
            f"  {path.name}: {'ok' if rows[-1].ok else 'PROBLEM'} ({rows[-1].seconds:.1f} s)",
            file=sys.stderr,
            flush=True,
        )
    print(table(rows))
    bad = [r.model for r in rows if not r.ok]
    print(
        f"\n{len(rows) - len(bad)} of {len(rows)} models verified, deterministic and idempotent"
        + (f"; problems: {', '.join(bad)}" if bad else "")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
