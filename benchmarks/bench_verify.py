"""What verification costs: its share of `eqsat optimize`'s wall time and its peak memory, per model.

    python -m benchmarks.bench_verify [FOLDER ...] [--node-tests] [--repeat N]

Each model (every .onnx in FOLDER, default ../shared/models/real, and `benchmarks.synthetic.dynamic_conv_net`,
a 689-node text-detector-like conv net with input [?,3,?,?]) is optimized by the CLI in a process of its own:
wall time, the process's peak resident memory, the verify phase from its JSON report and the sizes both
assignments ran on. Then `eqsat.check.verify.verify(original, output)` runs alone in a fresh process: its time and
peak memory (and how much verification added to what loading the models took). `--node-tests`: how many of
ONNX's backend node tests (`onnx.backend.test.case.node.collect_testcases()`, whose models onnxruntime runs on
their own inputs) verification can run on the inputs it draws.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

VERIFY_ALONE = """
import resource, sys, time
import onnx
from eqsat.check.verify import verify
original, optimized = onnx.load(sys.argv[1]), onnx.load(sys.argv[2])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
report = verify(original, optimized)
seconds = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(seconds, before // 1024, after // 1024, report.summary()[:120])
"""


def _child(argv: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak resident MB and stdout of a child process."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        out.seek(0)
        text = out.read()
    if proc.returncode:
        raise RuntimeError(f"{' '.join(argv[:4])}... exited {proc.returncode}")
    return seconds, usage.ru_maxrss // 1024, text


def bench_model(path: Path, work: Path, repeat: int) -> str:
    out, report = work / f"{path.stem}.opt.onnx", work / f"{path.stem}.json"
    runs = []
    for _ in range(repeat):
        wall, peak, _ = _child(
            [sys.executable, "-m", "eqsat", "optimize", str(path), "-o", str(out), "--report-json", str(report)]
        )
        data = json.loads(report.read_text())
        runs.append((wall, peak, data["phases"].get("verify", 0.0)))
    wall, peak, verify_s = min(runs)  # the least disturbed run
    verification = data.get("verification", {})
    sizes = (
        " and ".join(
            ", ".join(f"{k}:{'x'.join(map(str, v)) or 'scalar'}" for k, v in a.items())
            for a in verification.get("assignments", [])
        )
        or verification.get("unverified", "")[:60]
    )
    alone_wall, alone_peak, text = _child([sys.executable, "-c", VERIFY_ALONE, str(path), str(out)])
    seconds, before, after = text.split()[:3]
    return (
        f"| {path.name} | {wall:.2f} | {verify_s:.3f} | {100 * verify_s / wall:.0f}% | {peak} | "
        f"{float(seconds):.3f} | {after} (+{int(after) - int(before)}) | {sizes} |"
    )


def node_tests() -> str:
    import warnings

    import onnxruntime as ort
    from onnx.backend.test.case.node import collect_testcases

    from eqsat.check.verify import expected_outputs

    warnings.filterwarnings("ignore")
    ort.set_default_logger_severity(4)
    runs = unverified = 0
    missed = []
    options = ort.SessionOptions()
    options.log_severity_level = 4
    for case in collect_testcases():
        if not case.data_sets:
            continue
        inputs = [
            v.name for v in case.model.graph.input if v.name not in {t.name for t in case.model.graph.initializer}
        ]
        try:
            session = ort.InferenceSession(case.model.SerializeToString(), options, providers=["CPUExecutionProvider"])
            session.run(None, dict(zip(inputs, case.data_sets[0][0])))
        except Exception:  # noqa: BLE001 - onnxruntime cannot run it on its own inputs: not counted
            continue
        if expected_outputs(case.model, source=case.name).unverified:
            unverified += 1
            missed.append(case.name)
        else:
            runs += 1
    return (
        f"ONNX backend node tests onnxruntime runs on their own inputs: {runs + unverified}; verification runs "
        f"{runs}, not verified {unverified}: {', '.join(missed)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", default=[str(ROOT.parent / "shared" / "models" / "real")])
    parser.add_argument("--node-tests", action="store_true", help="count the ONNX backend node tests verified")
    parser.add_argument("--repeat", type=int, default=1, help="CLI runs per model (the fastest is shown)")
    args = parser.parse_args()
    from benchmarks.synthetic import dynamic_conv_net

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        net = work / "dynamic_conv_net.onnx"
        net.write_bytes(dynamic_conv_net().SerializeToString())
        models = [net, *(p for folder in args.folders for p in sorted(Path(folder).glob("*.onnx")))]
        print(
            "| model | CLI wall s | verify s | share | CLI peak MB | verify alone s | verify alone peak MB "
            "(+ over loading) | assignments |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for path in models:
            print(bench_model(path, work, args.repeat), flush=True)
    if args.node_tests:
        print(node_tests())


if __name__ == "__main__":
    main()
