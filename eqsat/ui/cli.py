"""The `eqsat` command line. Errors are one line on stderr with exit codes 2 (bad input), 3 (failed
verification) or 1 (internal); heavy libraries are imported only by the commands that need them."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, Sequence

import eqsat
from eqsat import run_warnings
from eqsat.ui import startup
from eqsat.errors import BadInputError, EqsatError


def _output_of(args: argparse.Namespace) -> str:
    """The output path: `eqsat optimize IN OUT` or `-o OUT` (both: they must agree); over the input only with
    --force."""
    given = [p for p in (args.output_path, args.output) if p]
    if not given:
        raise BadInputError(args.input, "no output given: eqsat optimize IN OUT (or -o OUT)")
    if len(given) == 2 and os.path.abspath(given[0]) != os.path.abspath(given[1]):
        raise BadInputError(given[1], f"two outputs given: {given[0]} and -o {given[1]}")
    output = given[0]
    if (
        os.path.exists(output)
        and os.path.exists(args.input)
        and os.path.samefile(output, args.input)
        and not args.force
    ):
        raise BadInputError(output, "is the input file: pass --force to overwrite it")
    if os.path.isdir(output) and not os.path.isdir(args.input):
        raise BadInputError(output, "is a folder: give the optimized model's file name")
    return output


def _optimize_kwargs(args: argparse.Namespace) -> dict:
    """What the flags ask of eqsat.pipeline.optimize (the same for one model and for a folder's)."""
    from eqsat.check.verify_inputs import load_npz

    return dict(
        verify=args.verify,
        target=args.target,
        extractor=args.extractor,
        time_limit=args.time_limit,
        node_limit=args.node_limit,
        iter_limit=args.iter_limit,
        allow=args.allow,
        opset=args.opset,
        disable=[rule for arg in args.disable for rule in arg.split(",") if rule],
        bisect=args.bisect,
        input_shapes=_shapes("--input-shape", args.input_shape),
        inputs=load_npz(args.inputs) if args.inputs else None,
        fix_input_shapes=_shapes("--fix-input-shape", args.fix_input_shape),
        strict=args.strict,
    )


def _cmd_optimize_folder(args: argparse.Namespace) -> int:
    from eqsat.ui import folder

    output = args.output or args.output_path
    if not output:
        raise BadInputError(args.input, "a folder needs an output folder: eqsat optimize DIR -o OUTDIR")
    if output.endswith(".onnx") and not os.path.isdir(output):
        raise BadInputError(
            args.input,
            "is a directory: a folder of models is optimized into a folder "
            "(eqsat optimize DIR -o OUTDIR), not into a .onnx file",
        )
    if args.report_json and args.report_json != "-":
        _check_writable(args.report_json)
        _check_report_is_no_model(args.report_json, args.input, output)
    human = sys.stderr if args.report_json == "-" else sys.stdout
    code, rows = folder.run(
        args.input, output, _optimize_kwargs(args), jobs=args.jobs, force=args.force, out=human, report=args.report
    )
    if args.report_json:
        _write_json(args.report_json, folder.folder_json(rows))
    return code


def _cmd_optimize(args: argparse.Namespace) -> int:
    from eqsat.engine import prepared
    from eqsat.pipeline import optimize
    from eqsat.view.progress import Progress
    from eqsat.view.tables import headline_text  # not eqsat.view.display: pictures are not needed here

    if os.path.isdir(args.input):
        return _cmd_optimize_folder(args)
    args.output = _output_of(args)
    if args.report_json and args.report_json != "-":
        _check_writable(args.report_json)
        _check_report_is_no_model(args.report_json, args.input, args.output)
    human = sys.stderr if args.report_json == "-" else sys.stdout  # stdout carries only the JSON then
    try:
        # Progress draws only on a terminal, erased when done; one model in this process: its backend is loaded
        # without egglog's push and pop (eqsat.engine.prepared.single_run: ~10 ms)
        with Progress(args.input, sys.stderr) as progress, prepared.single_run():
            result = optimize(args.input, output=args.output, progress=progress, **_optimize_kwargs(args))
    except EqsatError as exc:
        report = getattr(exc, "report", None)
        if report is not None and args.report:
            print(report.to_text(), file=human)
        bisection = getattr(exc, "bisection", None)
        if bisection is not None and args.report:
            print(bisection.to_text(), file=human)
        if report is not None and args.report_json:  # a failed verification: what failed, and why
            data = report.to_dict()
            if bisection is not None:
                data["bisection"] = bisection.to_dict()
            _write_json(args.report_json, data)
        raise
    for warning in result.report.warnings:  # a rule dropped as unsound on this model, a model not verified
        if not run_warnings.asked_for(warning):  # --no-verify, --disable: the report says it, stderr need not
            print(f"eqsat: warning: {warning}", file=sys.stderr)
    if args.report:
        print(result.report.to_text(), file=human)
    if args.report_json:
        data = result.report.to_dict()
        if result.bisection is not None:
            data["bisection"] = result.bisection.to_dict()
        _write_json(args.report_json, data)
    if not args.report:
        print(f"{args.output}: {headline_text(result.report)} in {result.report.seconds:.2f} s", file=human)
    return 0


def _shapes(flag: str, pairs: Sequence[tuple[str, tuple[int, ...]]]) -> dict[str, tuple[int, ...]]:
    """NAME:D0,D1 flags as a dict; an input given two shapes is an error."""
    shapes: dict[str, tuple[int, ...]] = {}
    for name, dims in pairs:
        if shapes.setdefault(name, dims) != dims:
            raise BadInputError(
                flag,
                f"input {name!r} is given two shapes: {','.join(map(str, shapes[name]))} "
                f"and {','.join(map(str, dims))}",
            )
    return shapes


def _input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """`NAME:D0,D1,...` (`NAME:` for a scalar) as (name, dims)."""
    name, colon, dims = text.rpartition(":")
    try:
        sizes = tuple(int(d) for d in dims.split(",")) if dims.strip() else ()
    except ValueError:
        sizes = (-1,)
    if not colon or not name or any(d < 1 for d in sizes):
        raise argparse.ArgumentTypeError(f"expected NAME:D0,D1,... with positive sizes, got {text!r}")
    return name, sizes


def _check_writable(
    path: str, problem: str = "cannot write the JSON report there (no such writable folder, or it is a folder)"
) -> None:
    """Fail before optimizing (or measuring) when the file cannot be written (never after the work is done)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise BadInputError(path, problem)


def _check_report_is_no_model(report: str, source: str, output: str) -> None:
    """The JSON report must not replace a model: the input, the output, or a model in their folders (a folder's
    run reads and writes `.onnx` files there)."""
    target = os.path.abspath(report)
    for model in (source, output):
        folder = os.path.isdir(model)
        same = os.path.exists(report) and os.path.exists(model) and os.path.samefile(report, model)
        inside = folder and os.path.dirname(target) == os.path.abspath(model) and target.endswith(".onnx")
        if same or target == os.path.abspath(model) or inside:
            raise BadInputError(report, f"the JSON report would overwrite the model {model}: give it another path")


def _write_json(path: str, data: dict) -> None:
    text = json.dumps(data, indent=2, sort_keys=True)
    if path == "-":
        print(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    except OSError as exc:
        raise BadInputError(path, f"cannot write the JSON report: {exc.strerror}") from None


def _cmd_info(args: argparse.Namespace) -> int:
    from eqsat.ui.info import describe

    print(describe(args.input))
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    from eqsat.ui.explain import explain

    print(explain(args.model, args.node))
    return 0


def _cmd_rules(args: argparse.Namespace) -> int:
    from eqsat.rewrites.registry import all_rules

    rules = all_rules()
    width = max(len(r.name) for r in rules)
    for r in rules:
        print(f"{r.name:<{width}}  {r.family:<13} {r.soundness:<18} {r.ruleset:<8}  {r.doc}")
        if args.verbose:
            print(f"{'':<{width}}  origin: {r.origin}")
            for command in r.commands():  # the egglog text installed (ops of generic constructors rendered)
                print(f"{'':<{width}}  {command}")
    print(f"{len(rules)} rules, {sum(len(r.egglog) for r in rules)} egglog rules")
    return 0


def _cmd_targets(args: argparse.Namespace) -> int:
    from eqsat.extract.cost import load_target, targets

    for name in targets():
        print(f"{name:<8} {load_target(name).description}")
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from eqsat.calibration import calibrate, check_options, user_target_path
    from eqsat.extract.cost import load_target

    check_options(budget=args.budget, provider=args.provider, threads=args.threads, name=args.name)
    load_target(args.base)  # an unknown base is refused before anything is made or measured
    output = args.output or str(user_target_path(args.name))
    if not output.endswith(".toml"):
        raise BadInputError(output, "a target is a .toml file: name the output FILE.toml")
    if args.output is None:  # the user targets folder is made on first use; a folder given is not
        os.makedirs(os.path.dirname(output), exist_ok=True)
    _check_writable(output, "cannot write the target there (no such writable folder, or it is a folder)")
    live = sys.stderr.isatty()

    def progress(fraction: float, text: str) -> None:
        if live:  # a bar redrawn in place; nothing on a pipe or in a log
            bar = "#" * round(20 * fraction)
            print(f"\rcalibrating [{bar:<20}] {fraction * 100:3.0f}%  {text:<40}", end="", file=sys.stderr, flush=True)

    result = calibrate(
        args.base, budget=args.budget, provider=args.provider, threads=args.threads, name=args.name, progress=progress
    )
    if live:
        print("\r" + " " * 80 + "\r", end="", file=sys.stderr, flush=True)
    path = result.write(output)
    use = args.name if args.output is None else str(path)
    print(
        f"{path}: {result.timed} graphs, {result.rounds} rounds in {result.seconds:.1f} s; fit: "
        f"{result.fit.error_summary()}; use it with --target {use}"
    )
    return 0


def _cmd_check_rules(args: argparse.Namespace) -> int:
    import time

    from eqsat.testing import check_rules
    from eqsat.testing.check import QUICK_EXAMPLES, rules_of_family
    from eqsat.rewrites.registry import all_rules

    names = list(args.rule)
    unknown = sorted(set(args.rule) - {r.name for r in all_rules()})
    if unknown:
        raise BadInputError("--rule", f"unknown rule(s): {', '.join(unknown)} (see `eqsat rules`)")
    for family in args.family:
        try:
            names += [n for n in rules_of_family(family) if n not in names]
        except KeyError as exc:
            raise BadInputError("--family", exc.args[0]) from None
    examples = args.examples if args.examples is not None else (QUICK_EXAMPLES if args.quick else 100)
    live = sys.stderr.isatty()
    started: dict[str, Any] = {"at": time.perf_counter(), "name": ""}

    def progress(name: str, drawn: int, total: int) -> None:
        if name != started["name"]:
            _end_rule(started, live)
            started.update(name=name, at=time.perf_counter())
            print(f"checking {name} ...", end="" if live else "\n", flush=True)
        if live:  # examples drawn out of the total, redrawn in place
            print(
                f"\rchecking {name} ... {drawn}/{total} examples, {time.perf_counter() - started['at']:.1f} s",
                end="",
                flush=True,
            )

    failures = check_rules(examples, names or None, progress=progress, shrink=True)
    _end_rule(started, live)
    for failure in failures:
        print(f"FAILED {failure}")
    checked = len(names) if names else "all"
    print(
        f"{checked} rules checked with {examples} examples each: "
        + (f"{len(failures)} failed" if failures else "all sound")
    )
    return 1 if failures else 0


def _end_rule(started: dict, live: bool) -> None:
    """The line of the rule just checked: its time."""
    import time

    if started["name"]:
        print(
            f"{chr(13) if live else ''}checked {started['name']} in {time.perf_counter() - started['at']:.1f} s"
            + (" " * 20 if live else ""),
            flush=True,
        )


def build_parser() -> argparse.ArgumentParser:
    from eqsat.extract import EXTRACTORS  # the registry alone: cost models and extractors load on use

    parser = argparse.ArgumentParser(prog="eqsat", description="Equality-saturation optimizer for ONNX graphs.")
    parser.add_argument("--version", action="version", version=f"eqsat {eqsat.__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    sub = parser.add_subparsers(dest="command", required=True)

    opt = sub.add_parser("optimize", help="optimize an ONNX model")
    opt.add_argument("input", help="input .onnx file, or a folder of them (then the output is a folder)")
    opt.add_argument(
        "output_path", nargs="?", metavar="output", help="output .onnx file (written only if verified), or -o"
    )
    opt.add_argument("-o", "--output", help="output .onnx file, or the output folder for a folder of models")
    opt.add_argument("--force", action="store_true", help="allow writing over the input file (or folder)")
    opt.add_argument(
        "--jobs",
        "-j",
        type=_at_least(int),
        default=1,
        metavar="J",
        help="with a folder: optimize J models at a time, each in a process of its own (default: 1)",
    )
    opt.add_argument("--target", default="cpu", help="hardware target the cost model describes (see `eqsat targets`)")
    opt.add_argument(
        "--extractor",
        default="auto",
        choices=("auto", *EXTRACTORS),
        help="extraction algorithm (default: auto = exact ILP, greedy-dag above 30k e-nodes)",
    )
    opt.add_argument("--time-limit", type=_at_least(float), metavar="S", help="saturation wall-clock limit (seconds)")
    opt.add_argument("--node-limit", type=_at_least(int), metavar="N", help="e-node limit (checked between iterations)")
    opt.add_argument("--iter-limit", type=_at_least(int), metavar="N", help="saturation iteration limit")
    opt.add_argument(
        "--allow",
        action="append",
        default=[],
        choices=("precision-changing",),
        help="admit rules of this soundness class (off by default)",
    )
    opt.add_argument(
        "--disable",
        action="append",
        default=[],
        metavar="RULE[,RULE]",
        help="disable rules by name (repeatable, or comma-separated)",
    )
    opt.add_argument(
        "--opset",
        type=_at_least(int, 1),
        metavar="N",
        help="upgrade the model to opset N first, making newer fused ops available (e.g. 20 for Gelu)",
    )
    opt.add_argument(
        "--bisect",
        action="store_true",
        help="with --strict: if verification fails, name the rule responsible in the error",
    )
    opt.add_argument(
        "--strict",
        action="store_true",
        help="if verification fails, write nothing and exit 3 (default: drop the rule responsible, "
        "re-optimize, write the verified result and warn); if no drawn input runs the model, "
        "exit 2 (default: write it unverified and warn)",
    )
    opt.add_argument(
        "--verify",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="check the result numerically against the input (default: on)",
    )
    opt.add_argument(
        "--skip-verify",
        "--no-check",
        dest="verify",
        action="store_false",
        help="aliases of --no-verify (onnxsim's --skip-verify, onnxslim's --no-check)",
    )
    opt.add_argument(
        "--input-shape",
        action="append",
        default=[],
        type=_input_shape,
        metavar="NAME:D0,D1,...",
        help="verify with this shape for input NAME (repeatable; default: sized from its dim names)",
    )
    opt.add_argument(
        "--inputs",
        metavar="FILE.npz",
        help="verify on these arrays (keys: input names; inputs left out are drawn as usual)",
    )
    opt.add_argument(
        "--fix-input-shape",
        "--overwrite-input-shape",
        action="append",
        default=[],
        type=_input_shape,
        metavar="NAME:D0,D1,...",
        help="make input NAME static with these dims before optimizing (repeatable), so shape "
        "computations fold (--overwrite-input-shape: onnxsim's name)",
    )
    opt.add_argument("--report", action="store_true", help="print a report of what was done")
    opt.add_argument("--report-json", metavar="FILE", help="write the report as JSON ('-' for stdout)")
    opt.set_defaults(run=_cmd_optimize)

    info = sub.add_parser("info", help="summarize a model: ops, inputs, outputs, sizes")
    info.add_argument("input", help="input .onnx file")
    info.set_defaults(run=_cmd_info)

    expl = sub.add_parser("explain", help="show where a node of an optimized model came from")
    expl.add_argument("model", help="a model written by `eqsat optimize`")
    expl.add_argument("node", help="node name (or the name of a value it produces)")
    expl.set_defaults(run=_cmd_explain)

    rules = sub.add_parser("rules", help="list the rewrite rules with family, soundness and doc")
    rules.add_argument(
        "-v", "--verbose", action="store_true", help="also show each rule's origin and its egglog rules as installed"
    )
    rules.set_defaults(run=_cmd_rules)

    targets = sub.add_parser("targets", help="list the hardware targets")
    targets.set_defaults(run=_cmd_targets)

    cal = sub.add_parser(
        "calibrate", help="measure this machine with onnxruntime and write a target fitted to it (a .toml)"
    )
    cal.add_argument(
        "-o", "--output", metavar="FILE.toml", help="where to write it (default: the user targets folder, by --name)"
    )
    cal.add_argument("--name", default="calibrated", help="the target's name, for --target NAME (default: calibrated)")
    cal.add_argument("--base", default="cpu", help="the target whose prices are refitted (default: cpu)")
    cal.add_argument(
        "--budget", type=float, default=120.0, metavar="S", help="seconds to spend, everything included (default: 120)"
    )
    cal.add_argument(
        "--provider", default="CPUExecutionProvider", help="onnxruntime execution provider (default: the CPU's)"
    )
    cal.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads (default: 1)")
    cal.set_defaults(run=_cmd_calibrate)

    check = sub.add_parser("check-rules", help="check each rule's soundness on random graphs (needs hypothesis)")
    check.add_argument(
        "--examples",
        type=_at_least(int, 1),
        default=None,
        metavar="N",
        help="graphs drawn per rule (default: 100; with --quick: 10)",
    )
    check.add_argument("--quick", action="store_true", help="10 examples per rule: a first look in seconds")
    check.add_argument("--rule", action="append", default=[], metavar="RULE", help="check only this rule (repeatable)")
    check.add_argument(
        "--family",
        action="append",
        default=[],
        metavar="NAME",
        help="check the rules of this family (repeatable; see `eqsat rules`)",
    )
    check.set_defaults(run=_cmd_check_rules)
    return parser


def _at_least(kind: type, least: float = 0) -> Callable[[str], float]:
    """An argparse type: a number of `kind` no smaller than `least`."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be >= {least}: {text}")
        return value

    return parse


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except EqsatError as exc:
        print(f"eqsat: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("eqsat: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader closed stdout (`eqsat info m.onnx | head`): stop quietly, as `cat` does
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # later flushes must not raise
        except (OSError, ValueError):
            pass
        return 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader went away
    except Exception as exc:  # a bug: say so in one line unless --debug asks for the traceback
        if args.debug:
            raise
        print(
            f"eqsat: internal error: {type(exc).__name__}: {exc} (rerun with --debug for a traceback)", file=sys.stderr
        )
        return 1


def run_command() -> None:
    """The `eqsat` executable (and `python -m eqsat`): `main` in a process of its own, which ends without the
    interpreter's teardown once everything is written and flushed (freeing the e-graphs and the imported
    modules took ~0.3 s of a 1.5 s run; the output file is complete, written atomically, before). Its imports
    are trimmed first (eqsat.ui.startup)."""
    startup.without_onnxruntime_telemetry()
    startup.single_threaded_blas()
    startup.fewer_young_collections()
    startup.load_egglog_bindings_alone()
    startup.defer_imports()
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):  # a closed pipe or stream: nothing more can be said
        code = code or 1
    os._exit(code)


if __name__ == "__main__":
    run_command()
