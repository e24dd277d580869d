"""Scaling of the whole pipeline on synthetic graphs: time per phase and e-graph size.

    python -m benchmarks.bench_scaling [--sizes 1000 5000 20000] [--extractor ilp] [--verify]
"""

from __future__ import annotations

import argparse
import resource
import time

import eqsat
from benchmarks.synthetic import block_chain

PHASES = ("load", "fold", "encode", "saturate", "decode", "extract", "lower", "verify")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    parser.add_argument("--extractor", default="ilp")
    parser.add_argument("--verify", action="store_true")
    args = parser.parse_args()
    print(f"| ops in | ops out | Transpose in/out | e-nodes loaded/saturated | e-classes | stop | "
          + " | ".join(PHASES) + " | total s | peak RSS MB |")
    print("|" + "---|" * (len(PHASES) + 7))
    for size in args.sizes:
        model = block_chain(size)
        start = time.perf_counter()
        result = eqsat.optimize(model, extractor=args.extractor, verify=args.verify)
        total = time.perf_counter() - start
        r = result.report
        sat = r.saturation
        phases = " | ".join(f"{r.phases.get(p, 0.0):.2f}" for p in PHASES)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"| {r.nodes_before} | {r.nodes_after} | {r.ops_before['Transpose']}/{r.ops_after['Transpose']} | "
              f"{sat.enodes_loaded}/{sat.enodes} | {sat.eclasses} | {sat.stop_reason} | {phases} | {total:.2f} | {rss:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
