"""eqsat on ONNX's own backend node tests, run as a user runs the CLI: one table by outcome.

    python -m benchmarks.bench_onnx_tests [--jobs J] [--only SUBSTRING ...] [--timeout S] [--list OUTCOME]

Every case that the installed onnx generates (`onnx.backend.test.case.node.collect_testcases()`: the model and
the reference inputs and outputs the onnx wheels ship as test data) is written to a file and optimized by
`eqsat optimize IN -o OUT` with no flags (in-process, through `eqsat.ui.cli.main`, each worker process under a
memory limit). Then:
- the original is run on the test's own inputs (onnxruntime, else onnx.reference): a model neither runs is
  "not runnable", and a refusal of it is fine;
- a written model must pass the full checker, have exactly the original's graph inputs (names, types,
  initializer defaults) and outputs, and give the original's outputs on the test's inputs with the same
  runtime (within the test's own tolerance); anything else is "wrong".
Outcomes: written+verified, written-unverified (the "not verified" warning), refused (a runnable original:
a failure of eqsat), refused-not-runnable, crash (exit 1, a timeout or a dead worker), wrong.
Exit status 0 when there is no crash, no wrong output and no refusal of a runnable model.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import io
import multiprocessing
import os
import resource
import signal
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from eqsat.ops import NONDETERMINISTIC

MEMORY_LIMIT = 6 << 30  # bytes of address space per worker: a runaway allocation fails instead of swapping
OUTCOMES = ("written+verified", "written-unverified", "refused", "refused-not-runnable", "crash", "wrong")
BAD = ("refused", "crash", "wrong")


@dataclasses.dataclass
class Case:
    """One backend node test: its model, inputs by name and expected outputs."""

    name: str
    model: bytes
    inputs: dict[str, Any]
    outputs: list[Any]
    rtol: float
    atol: float


@dataclasses.dataclass
class Outcome:
    name: str
    outcome: str
    detail: str = ""
    seconds: float = 0.0
    ops: str = ""
    runnable: bool = True  # the original runs on the test's own inputs (onnxruntime or onnx.reference)


def cases(only: Sequence[str] = ()) -> list[Case]:
    """The node test cases of the installed onnx, with their first data set."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        found = collect_testcases(None)
    result = []
    for case in found:
        if case.model is None or not case.data_sets:
            continue
        if only and not any(o in case.name for o in only):
            continue
        model = case.model
        inputs, outputs = case.data_sets[0]
        names = [v.name for v in model.graph.input if v.name not in {t.name for t in model.graph.initializer}]
        result.append(
            Case(
                case.name,
                model.SerializeToString(),
                dict(zip(names, inputs)),
                list(outputs),
                float(case.rtol),
                float(case.atol),
            )
        )
    return result + shipped_cases(only)


#: Folders of the onnx wheel's test data with a model.onnx and test_data_set_0/ per case.
SHIPPED = ("pytorch-converted", "pytorch-operator", "simple")


def shipped_cases(only: Sequence[str] = ()) -> list[Case]:
    """The model tests the onnx wheel ships as files (pytorch exports of IR version 3 among them)."""
    import onnx

    data = Path(onnx.__file__).parent / "backend" / "test" / "data"
    result = []
    for folder in SHIPPED:
        for case_dir in sorted((data / folder).glob("*/")):
            name = f"{folder}/{case_dir.name}"
            sets = case_dir / "test_data_set_0"
            if (
                (only and not any(o in name for o in only))
                or not (case_dir / "model.onnx").exists()
                or not sets.is_dir()
            ):
                continue
            model = onnx.load(str(case_dir / "model.onnx"))
            initializers = {t.name for t in model.graph.initializer}
            fed = [v for v in model.graph.input if v.name not in initializers]
            inputs = {
                v.name: _read_value(sets / f"input_{k}.pb", v.type)
                for k, v in enumerate(fed)
                if (sets / f"input_{k}.pb").exists()
            }
            outputs = [_read_value(sets / f"output_{k}.pb", v.type) for k, v in enumerate(model.graph.output)]
            result.append(Case(name, model.SerializeToString(), inputs, outputs, 1e-3, 1e-7))
    return result


def _read_value(path: Path, value_type: Any) -> Any:
    """A test data file as numpy: a tensor, a list (sequence), a value or None (optional), a dict (map)."""
    import onnx
    from onnx import numpy_helper

    data = path.read_bytes()
    kind = value_type.WhichOneof("value")
    proto, convert = {
        "sequence_type": (onnx.SequenceProto, numpy_helper.to_list),
        "optional_type": (onnx.OptionalProto, numpy_helper.to_optional),
        "map_type": (onnx.MapProto, numpy_helper.to_dict),
    }.get(kind, (onnx.TensorProto, numpy_helper.to_array))
    message = proto()
    message.ParseFromString(data)
    return convert(message)


def run_model(model: Any, feeds: dict[str, Any]) -> tuple[list[Any], str]:
    """Outputs of `model` (a ModelProto) on `feeds` and the runtime that gave them: onnxruntime (no
    optimizations), else onnx.reference."""
    problems = []
    for runtime in ("onnxruntime", "onnx.reference"):
        try:
            return run_with(model, feeds, runtime), runtime
        except Exception as exc:
            problems.append(f"{runtime}: {_first_line(exc)}")
    raise RuntimeError("; ".join(problems))


def run_with(model: Any, feeds: dict[str, Any], runtime: str) -> list[Any]:
    """Outputs of `model` on `feeds` with `runtime` ("onnxruntime", no graph optimizations, or "onnx.reference")."""
    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator

    if runtime == "onnxruntime":
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        opts.log_severity_level = 4
        return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(
            None, feeds
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(ReferenceEvaluator(model).run(None, feeds))


def _first_line(exc: BaseException) -> str:
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)[:300]


def same(expected: Any, actual: Any, rtol: float, atol: float) -> bool:
    """Equal values (arrays within tolerance, NaN where NaN; sequences and optionals item by item)."""
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(expected) == len(actual)
            and all(same(e, a, rtol, atol) for e, a in zip(expected, actual))
        )
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and expected.keys() == actual.keys()
            and all(same(expected[k], actual[k], rtol, atol) for k in expected)
        )
    e, a = np.asarray(expected), np.asarray(actual)
    if e.shape != a.shape:
        return False
    if e.dtype.kind in "fc" and a.dtype.kind in "fc":
        return bool(
            np.allclose(
                e.astype(np.float64), a.astype(np.float64), rtol=max(rtol, 1e-4), atol=max(atol, 1e-6), equal_nan=True
            )
        )
    if e.dtype.kind in "OSU" or a.dtype.kind in "OSU":
        return bool(np.array_equal(e.astype(str), a.astype(str)))
    return e.dtype == a.dtype and bool(np.array_equal(e, a))


def interface(model: Any) -> tuple:
    """What a caller sees: graph inputs (name, type, default value), outputs (name, type)."""
    defaults = {t.name: t.SerializeToString() for t in model.graph.initializer}
    inputs = tuple((v.name, v.type.SerializeToString(), defaults.get(v.name)) for v in model.graph.input)
    outputs = tuple((v.name, v.type.SerializeToString()) for v in model.graph.output)
    return inputs, outputs


def _passes_full_check(model: Any) -> bool:
    import onnx

    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception:
        return False
    return True


def _interface_problem(original: Any, optimized: Any) -> str:
    (ins_a, outs_a), (ins_b, outs_b) = interface(original), interface(optimized)
    if [i[0] for i in ins_a] != [i[0] for i in ins_b]:
        return f"graph inputs {[i[0] for i in ins_a]} became {[i[0] for i in ins_b]}"
    for a, b in zip(ins_a, ins_b):
        if a[1] != b[1]:
            return f"input {a[0]!r} changed type"
        if a[2] != b[2]:
            return f"input {a[0]!r} " + ("lost its default" if b[2] is None else "changed its default")
    if outs_a != outs_b:
        return f"outputs {[o[0] for o in outs_a]} changed (names or types)"
    return ""


def check_case(case: Case, timeout: float = 120.0) -> Outcome:
    """Optimize one case with the CLI's defaults and classify what happened."""
    import onnx

    from eqsat.ui import cli

    original = onnx.load_from_string(case.model)
    ops = ",".join(sorted({n.op_type for n in original.graph.node}))
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / f"{case.name.replace('/', '_')}.onnx"
        target = Path(tmp) / "out.onnx"
        source.write_bytes(case.model)
        err = io.StringIO()
        signal.alarm(int(timeout))
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                code = cli.main(["optimize", str(source), "-o", str(target)])
        except _Timeout:
            return Outcome(case.name, "crash", f"timeout after {timeout:.0f} s", time.perf_counter() - start, ops)
        except BaseException as exc:  # MemoryError, SystemExit from argparse, ...
            return Outcome(
                case.name, "crash", f"{type(exc).__name__}: {_first_line(exc)}", time.perf_counter() - start, ops
            )
        finally:
            signal.alarm(0)
        seconds = time.perf_counter() - start
        message = " | ".join(line for line in err.getvalue().splitlines() if line.startswith("eqsat:"))
        try:
            expected, runtime = run_model(original, case.inputs)
        except Exception as exc:
            expected, runtime = None, _first_line(exc)
        if code != 0:
            if code == 1:
                return Outcome(case.name, "crash", message, seconds, ops)
            return Outcome(
                case.name,
                "refused" if expected is not None else "refused-not-runnable",
                message,
                seconds,
                ops,
                runnable=expected is not None,
            )
        if not target.exists():
            return Outcome(case.name, "wrong", "exit 0 but nothing written", seconds, ops)
        written = onnx.load(str(target))
        try:  # held to the standard the input meets (onnx's strict inference rejects some of its own tests)
            onnx.checker.check_model(written, full_check=_passes_full_check(original))
        except Exception as exc:
            return Outcome(case.name, "wrong", f"invalid output: {_first_line(exc)}", seconds, ops)
        if problem := _interface_problem(original, written):
            return Outcome(case.name, "wrong", problem, seconds, ops)
        unverified = "not verified" in message
        kind = "written-unverified" if unverified else "written+verified"
        if expected is None:
            return Outcome(
                case.name,
                kind,
                f"original not runnable on the test's inputs ({runtime}); {message}",
                seconds,
                ops,
                runnable=False,
            )
        try:
            actual = run_with(written, case.inputs, runtime)
        except Exception as exc:
            return Outcome(case.name, "wrong", f"the output does not run ({runtime}): {_first_line(exc)}", seconds, ops)
        names = [o.name for o in original.graph.output]
        random = RANDOM_OPS & {n.op_type for g in _graphs(original.graph) for n in g.node}
        for name, e, a in zip(names, expected, actual):
            if random:  # a random draw: only its shape and type can be compared
                e, a = _shape_of(e), _shape_of(a)
            if not same(e, a, case.rtol, case.atol):
                return Outcome(case.name, "wrong", f"output {name!r} differs from the original's", seconds, ops)
        return Outcome(case.name, kind, message, seconds, ops)


#: Ops whose outputs are random draws (the op table's random family; Dropout only in training mode, but that is
#: not worth telling apart).
RANDOM_OPS = NONDETERMINISTIC | {"Dropout"}


def _graphs(graph: Any) -> list[Any]:
    from eqsat.frontend.io import all_graphs

    return all_graphs(graph)


def _shape_of(value: Any) -> Any:
    """What can be compared of a random value: its structure, shapes and dtypes."""
    if value is None or isinstance(value, (list, tuple)):
        return value if value is None else [_shape_of(v) for v in value]
    array = np.asarray(value)
    return np.array(array.shape + (array.dtype.str,), dtype=object).astype(str)


class _Timeout(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def _init_worker() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    signal.signal(signal.SIGALRM, _on_alarm)
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def _check_in_worker(args: tuple[Case, float]) -> Outcome:
    case, timeout = args
    try:
        return check_case(case, timeout)
    except BaseException as exc:
        return Outcome(case.name, "crash", f"benchmark: {type(exc).__name__}: {_first_line(exc)}")


def run(selected: Sequence[Case], jobs: int = 2, timeout: float = 120.0, progress: bool = True) -> list[Outcome]:
    """Each case in a worker process (memory-limited); a worker that dies counts its case as a crash."""
    outcomes: list[Outcome] = []
    ctx = multiprocessing.get_context("forkserver")
    pending = list(selected)
    start = time.perf_counter()
    while pending:  # a dead worker breaks the pool: restart it on the cases left
        with ctx.Pool(jobs, initializer=_init_worker, maxtasksperchild=100) as pool:
            results = pool.imap(_check_in_worker, [(c, timeout) for c in pending], chunksize=1)
            done = 0
            try:
                for outcome in results:
                    outcomes.append(outcome)
                    done += 1
                    if progress and len(outcomes) % 50 == 0:
                        print(
                            f"  {len(outcomes)}/{len(selected)} cases, {time.perf_counter() - start:.0f} s",
                            file=sys.stderr,
                            flush=True,
                        )
            except Exception as exc:  # the pool lost a worker
                outcomes.append(Outcome(pending[done].name, "crash", f"worker died: {_first_line(exc)}"))
                done += 1
            pending = pending[done:]
    return outcomes


def table(outcomes: Iterable[Outcome], show: Sequence[str] = BAD) -> str:
    outcomes = list(outcomes)
    counts = collections.Counter(o.outcome for o in outcomes)
    lines = ["| outcome | cases |", "|---|---|"]
    lines += [f"| {name} | {counts.get(name, 0)} |" for name in OUTCOMES]
    lines.append(f"| total | {len(outcomes)} |")
    runnable = [o for o in outcomes if o.runnable]
    verified = sum(o.outcome == "written+verified" for o in runnable)
    written = sum(o.outcome in ("written+verified", "written-unverified") for o in runnable)
    if runnable:
        lines.append(
            f"\nof the {len(runnable)} cases whose original runs on the test's own inputs: {written} written "
            f"({100 * written / len(runnable):.1f}%), {verified} verified on eqsat's own inputs "
            f"({100 * verified / len(runnable):.1f}%)"
        )
    for name in show:
        listed = sorted((o for o in outcomes if o.outcome == name), key=lambda o: o.name)
        if listed:
            lines.append(f"\n{name} ({len(listed)}):")
            lines += [f"- {o.name} [{o.ops}]: {o.detail}" for o in listed]
    seconds = sorted(o.seconds for o in outcomes)
    if seconds:
        lines.append(f"\neqsat time per case: median {seconds[len(seconds) // 2]:.2f} s, max {seconds[-1]:.1f} s")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_onnx_tests", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--only", nargs="*", default=(), help="cases whose name contains one of these")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per case (default 120)")
    parser.add_argument(
        "--list",
        nargs="*",
        default=list(BAD),
        choices=OUTCOMES,
        help="outcomes whose cases are listed (default: the failures)",
    )
    args = parser.parse_args(argv)
    selected = cases(args.only)
    print(f"bench_onnx_tests: {len(selected)} node test cases, {args.jobs} jobs", file=sys.stderr, flush=True)
    start = time.perf_counter()
    outcomes = run(selected, args.jobs, args.timeout)
    print(table(outcomes, args.list))
    print(f"\n{len(outcomes)} cases in {time.perf_counter() - start:.0f} s")
    return 1 if any(o.outcome in BAD for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
