"""Long differential fuzzing run: random graphs optimized by eqsat and checked numerically.

    python -m benchmarks.fuzz --examples 10000 [--seed S] [--jobs J] [--chunk N] [--max-nodes K]
                              [--families conv,quant,...] [--save-dir DIR] [--no-shrink]

Graphs come from `eqsat.testing.onnx_graphs` and are checked by `eqsat.fuzz.check_case` (every e-node of
the saturated e-graph evaluated and compared with its class, for e-graphs up to 3000 e-nodes; every
extractor's result validated, lowered, checked and run against the original, at two sizes, neither 1, of
every dynamic dim a graph declares: `batch`, `N`, `seq`, ... or unnamed, read by run-time shape chains). The summary
also counts
how saturation stopped (a small graph that hits a limit is a rule set that does not terminate). Examples
run in chunks of N (default 250) with seeds S, S+1, ...; the seed (random unless given) is printed
first, and each chunk's seed, count and time as it finishes.
Any failure is shrunk and printed with its seed and failing graph, and the model and its inputs are saved
to DIR (default fuzz-failures/); replay one chunk with `--examples N --seed <its seed>`, or bisect the
saved model with `eqsat optimize DIR/fuzz-seedS.onnx -o /tmp/out.onnx --bisect`.
Exit status: 0 when every example was sound, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000, help="graphs to check (default 10000)")
    parser.add_argument("--seed", type=int, default=None, help="first chunk's seed (default: random, printed)")
    parser.add_argument("--chunk", type=int, default=None, help="examples per seed (default 250)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--max-nodes", type=int, default=None, help="steps per graph (default 10)")
    parser.add_argument("--families", default=None, help="comma-separated subset of eqsat.testing.GRAPH_FAMILIES")
    parser.add_argument("--save-dir", default="fuzz-failures", help="where failing models are saved")
    parser.add_argument("--no-shrink", action="store_true", help="report failures unshrunk (faster)")
    args = parser.parse_args(argv)

    from eqsat.fuzz import CHUNK, MAX_NODES, FuzzReport, fuzz

    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(3), "big")
    print(f"fuzz: seed {seed}, {args.examples} examples, jobs {args.jobs}", flush=True)
    start = time.perf_counter()

    def progress(total: FuzzReport, part: FuzzReport) -> None:
        status = f"{len(part.failures)} FAILED" if part.failures else "ok"
        print(
            f"  seed {part.seeds[0]}: {part.examples} examples {status} ({part.seconds:.0f} s); "
            f"total {total.examples} examples, {len(total.failures)} failures, "
            f"{time.perf_counter() - start:.0f} s",
            flush=True,
        )
        for failure in part.failures:
            print(failure.to_text(), flush=True)

    report = fuzz(
        args.examples,
        seed,
        chunk=args.chunk or CHUNK,
        max_nodes=args.max_nodes or MAX_NODES,
        families=args.families.split(",") if args.families else None,
        jobs=args.jobs,
        shrink=not args.no_shrink,
        save_dir=args.save_dir,
        progress=progress,
    )
    print(report.to_text().split("\nFAILURE")[0])
    print(
        f"fuzz: done in {time.perf_counter() - start:.0f} s: {report.examples} examples, seeds "
        f"{seed}..{seed + len(report.seeds) - 1}, {len(report.failures)} unsound or failing",
        flush=True,
    )
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
