"""Scaling of the whole pipeline on synthetic graphs: time per phase and e-graph size.

python -m benchmarks.bench_scaling [--sizes 1000 5000 20000] [--extractor ilp] [--verify]
"""

from __future__ import annotations

import argparse
import resource
import time

import eqsat
from benchmarks.synthetic import block_chain

PHASES = ("load", "fold", "install rules", "encode", "saturate", "decode", "extract", "lower", "verify")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    parser.add_argument("--extractor", default="auto", help="as `eqsat optimize --extractor` (default auto)")
    parser.add_argument("--verify", action="store_true")
    parser.add_argument("--plot", default="scaling.png", help="where to save the time-per-phase plot ('' for none)")
    args = parser.parse_args()
    rows: list[tuple[int, dict[str, float], int]] = []
    print(
        "| ops in | ops out | Transpose in/out | e-nodes loaded/saturated | e-classes | stop | "
        + " | ".join(PHASES)
        + " | total s | peak RSS MB |"
    )
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
        print(
            f"| {r.nodes_before} | {r.nodes_after} | {r.ops_before['Transpose']}/{r.ops_after['Transpose']} | "
            f"{sat.enodes_loaded}/{sat.enodes} | {sat.eclasses} | {sat.stop_reason} | {phases} | "
            f"{total:.2f} | {rss:.0f} |",
            flush=True,
        )
        rows.append((r.nodes_before, dict(r.phases), sat.enodes))
    if args.plot:
        save_plot(rows, args.plot)
        print(f"\nplot saved to {args.plot}")


def save_plot(rows: list[tuple[int, dict[str, float], int]], path: str) -> None:
    """Stacked seconds per phase against graph size, e-graph size on a second axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [str(n) for n, _, _ in rows]
    fig, ax = plt.subplots(figsize=(7, 4))
    bottom = [0.0] * len(rows)
    for phase in PHASES:
        values = [phases.get(phase, 0.0) for _, phases, _ in rows]
        if any(values):
            ax.bar(sizes, values, bottom=bottom, label=phase)
            bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xlabel("ops in the input graph")
    ax.set_ylabel("seconds")
    ax.legend(fontsize=8, loc="upper left")
    twin = ax.twinx()
    twin.plot(sizes, [e for _, _, e in rows], "k.-", label="e-nodes after saturation")
    twin.set_ylabel("e-nodes")
    ax.set_title("eqsat on synthetic graphs: time per phase")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
