"""Differential verification: run the input and the optimized model on the same seeded inputs.

Inputs respect their meaning and the model's dynamic dims (eqsat.check.verify_inputs for sizes,
eqsat.check.verify_values
for values): candidates are drawn lazily, smallest first, and the original is tried on each until it runs.
Every dynamic dim is checked at two sizes: the comparison runs on a first assignment (batch-like dims 2,
other dims the first rung of their ladder that runs) and on a second (batch 3, other dims another rung).
Each candidate is within the element budget (eqsat.check.verify_facts.ELEMENT_BUDGET, 2**24 elements for any one
value whose size shape inference knows, the outputs included, and for the inputs together) or skipped.
The user may give sizes or arrays instead (used as given). Outputs that depend on random ops are not
compared. The original's outputs (`Reference`) are computed once and reused: by both comparisons, and by
every probe of a bisection (eqsat.bisect). Each model is serialized once for onnxruntime. onnx.reference stands in
for onnxruntime only where onnxruntime does not run the original: an optimized model it refuses where it ran the
original fails verification.

When no candidate runs the original, nothing is refused: the report says why it is not verified
(`VerifyReport.unverified`); with `strict` (or sizes or arrays the user gave that it does not run on) it is
a `BadInputError`.

Tolerances (relative to each output's largest magnitude): float32 1e-4 for exact rules and 1e-3 for
fp-reassoc rules, float16/bfloat16 1e-2; integer outputs of quantized models within one quantization
step; other integer and bool outputs must match exactly.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import onnx
import onnx_ir as ir

from eqsat.errors import BadInputError, VerificationError, first_line
from eqsat.frontend import weights
from eqsat.check.verify_facts import fixed_sizes, over_budget, random_outputs
from eqsat.check.verify_inputs import (
    Shape,
    Sizes,
    assign,
    check_given,
    first_sizes,
    given_shapes,
    second_sizes,
    shapes_text,
)
from eqsat.check.verify_values import REDRAWS, Draw, Plan, feed_shapes, make_inputs

__all__ = [
    "CannotRun",
    "OutputCheck",
    "Reference",
    "VerifyReport",
    "compare",
    "expected_outputs",
    "make_inputs",
    "run",
    "verify",
]

#: Above this many nodes onnxruntime's sessions plan no memory pattern. Planning grows faster than the graph
#: (transformer, light form, per session: 96 layers 0.38 -> 0.32 s without it, 288 layers 2.14 -> 1.52 s) and
#: pays off only over many runs, where verification makes two; at a few thousand nodes with large activations
#: it wins (200 conv blocks: 17 ms more to create, 32 ms less to run twice). Outputs do not depend on it.
MEM_PATTERN_MAX_NODES = 4096

SOUNDNESS_TOLERANCE = {"exact": 1e-4, "fp-reassoc": 1e-3, "precision-changing": 1e-2}
LOW_PRECISION_TOLERANCE = 1e-2


@dataclasses.dataclass(frozen=True)
class OutputCheck:
    name: str
    max_abs_diff: float
    scale: float
    allowed: float
    ok: bool
    problem: str = ""
    where: str = ""  # the element with the largest difference: "at [0, 2]: expected 1.5, got 1.7"
    inputs: str = ""  # the assignment this check is from (the worst of them): "x:2x16"


@dataclasses.dataclass(frozen=True)
class Run:
    """The original on one assignment: what it was fed and what it returned."""

    feeds: dict[str, Any]
    outputs: list[Any]

    @property
    def shapes(self) -> dict[str, Shape]:
        return feed_shapes(self.feeds)


@dataclasses.dataclass(frozen=True)
class Reference:
    """The original's outputs on the inputs verification chose, computed once (`expected_outputs`)."""

    runs: tuple[Run, ...]  # one per assignment (two where a dynamic dim can take two sizes)
    runtime: str
    seed: int
    names: tuple[str, ...]  # the graph outputs
    random: tuple[str, ...] = ()  # outputs that depend on random ops: not compared
    quantized: bool = False
    notes: tuple[str, ...] = ()
    unverified: str = ""  # why no candidate runs the original ("" when one does)


@dataclasses.dataclass(frozen=True)
class VerifyReport:
    ok: bool
    runtime: str
    seed: int
    outputs: tuple[OutputCheck, ...]
    input_shapes: dict[str, Shape] = dataclasses.field(default_factory=dict)  # the first assignment
    assignments: tuple[dict[str, Shape], ...] = ()  # every assignment both models ran on
    random_outputs: tuple[str, ...] = ()  # not compared: they depend on random ops
    notes: tuple[str, ...] = ()
    unverified: str = ""  # why the original could not be run (then nothing was compared, and `ok`)
    reference: Reference | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def verified(self) -> bool:
        return not self.unverified

    @property
    def first_failure(self) -> OutputCheck | None:
        return next((o for o in self.outputs if not o.ok), None)

    @property
    def max_abs_diff(self) -> float:
        return max((o.max_abs_diff for o in self.outputs), default=0.0)

    def summary(self) -> str:
        """One line: verified or not, on which inputs, the largest difference (where it failed)."""
        if self.unverified:
            return f"not verified: {self.unverified}"
        on = " and ".join(shapes_text(a) for a in self.assignments if a)
        extra = "".join(f"; {n}" for n in self.notes)
        if self.random_outputs:
            extra += f"; not compared (they depend on random ops): {', '.join(self.random_outputs)}"
        if self.ok:
            on = f", inputs {on}" if on else ""
            return f"verified ({self.runtime}, seed {self.seed}{on}): max |diff| {self.max_abs_diff:.3g}{extra}"
        bad = self.first_failure
        assert bad is not None
        failed = sum(not o.ok for o in self.outputs)
        others = f" (and {failed - 1} more of {len(self.outputs)} outputs)" if failed > 1 else ""
        return (
            f"verification failed on output {bad.name!r}{others}: {bad.problem or 'difference'} "
            f"max |diff| {bad.max_abs_diff:.3g} > allowed {bad.allowed:.3g}"
            + (f" on inputs {bad.inputs}" if bad.inputs else "")
            + (f" {bad.where}" if bad.where else "")
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "verified": self.verified,
            "runtime": self.runtime,
            "seed": self.seed,
            "input_shapes": {k: list(s) for k, s in self.input_shapes.items()},
            "assignments": [{k: list(s) for k, s in a.items()} for a in self.assignments],
            "not_compared_random": list(self.random_outputs),
            "notes": list(self.notes),
            "unverified": self.unverified,
            "outputs": [dataclasses.asdict(o) for o in self.outputs],
        }


class CannotRun(Exception):
    """Neither onnxruntime nor onnx.reference can run a model; the message has both complaints."""


class Runner:
    """One model, serialized once: an onnxruntime session (no graph optimizations, one thread) made on first
    use, onnx.reference's evaluator (when falling back) where onnxruntime cannot load the model or run it on the
    feeds."""

    def __init__(self, model: onnx.ModelProto, weights: Mapping[str, np.ndarray] | None = None):
        self.model = model
        self._known = weights or {}  # initializers' arrays already in memory (checked equal before use)
        self._session: Any = None
        self._evaluator: Any = None
        self._weights: dict[str, np.ndarray] = {}  # float weights fed to onnxruntime as inputs
        self._serialized: bytes | None = None  # the model without them, for the session (`prepare`)
        self.load_problem = ""  # why onnxruntime cannot load the model

    @property
    def loaded(self) -> bool:
        """Whether onnxruntime loads the model (made on the first call)."""
        self._ort()
        return self._session is not None

    def prepare(self) -> None:
        """What loading needs the GIL for, done once: onnxruntime imported, the model serialized without its
        float weights, and those weights as arrays to feed (never copied). `_ort` then only makes the session
        (onnxruntime releases the GIL while it does)."""
        if self._serialized is None and not self.load_problem:
            import onnxruntime  # noqa: F401 - imported here, not in the thread that makes the session

            light = weights.Light.of(self.model, floats_only=True)  # the weights are fed, never copied
            try:
                self._weights = light.values(self._known)
                self._known = {}
                self._serialized = light.proto.SerializeToString()
            except Exception as exc:  # weights of another size than their dims
                self.load_problem = first_line(exc) or "cannot load"

    def _ort(self) -> Any:
        if self._session is None and not self.load_problem:
            self.prepare()
        if self._session is None and not self.load_problem:
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            opts.intra_op_num_threads = 1
            opts.inter_op_num_threads = 1
            opts.add_session_config_entry("session.disable_prepacking", "1")  # a packed copy of every weight
            opts.enable_mem_pattern = len(self.model.graph.node) <= MEM_PATTERN_MAX_NODES
            opts.log_severity_level = 4  # a refused size is an exception here, not a log line on the terminal
            ort.set_default_logger_severity(3)  # model loading warnings go to the default logger
            try:
                self._session = ort.InferenceSession(self._serialized, opts, providers=["CPUExecutionProvider"])
            except Exception as exc:  # an op onnxruntime lacks
                self.load_problem = first_line(exc) or "cannot load"
            self._serialized = None  # onnxruntime holds its own copy
        return self._session

    def _complete(self) -> onnx.ModelProto:
        return _complete_model(self.model, {**self._known, **self._weights})

    def run(self, feeds: Mapping[str, Any], fallback: bool = True) -> tuple[list[Any], str]:
        """Outputs and runtime on `feeds`; with `fallback`, onnx.reference when onnxruntime cannot load the model
        or refuses these feeds. `CannotRun` with each runtime's complaint otherwise (onnxruntime's alone without
        `fallback`)."""
        session = self._ort()
        problem = self.load_problem
        if session is None and not fallback:
            raise CannotRun(f"onnxruntime: {problem}")
        if session is not None:
            try:
                return session.run(None, {**self._weights, **feeds}), "onnxruntime"
            except Exception as exc:  # these feeds are refused
                problem = first_line(exc)
                if not fallback:
                    raise CannotRun(f"onnxruntime: {problem}") from None
        try:
            if self._evaluator is None:
                from onnx.reference import ReferenceEvaluator

                self._evaluator = ReferenceEvaluator(self._complete())
            with np.errstate(all="ignore"):  # numpy's overflow warnings (exp of a large input) are the values' business
                outputs = self._evaluator.run(None, dict(feeds))
            return [_plain(o) for o in outputs], "onnx.reference"
        except Exception as exc:
            raise CannotRun(f"onnxruntime: {problem}; onnx.reference: {first_line(exc)}") from None


def _complete_model(model: onnx.ModelProto, arrays: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """`model`, or a copy with its placeholders filled from `arrays` (eqsat.frontend.weights): onnx.reference
    reads initializers from the model."""
    if not any(weights.is_placeholder(t) for t in model.graph.initializer):
        return model
    complete = onnx.ModelProto()
    complete.CopyFrom(model)
    weights.fill(complete, arrays)
    return complete


def _plain(value: Any) -> Any:
    return value if isinstance(value, (list, dict)) or value is None else np.asarray(value)


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray], str]:
    """Outputs of `model` on `feeds`: onnxruntime (no graph optimizations), else onnx.reference."""
    return Runner(model).run(feeds)


def tolerance_for(dtype: np.dtype, soundness: str = "exact") -> float:
    if dtype in (np.float16,) or dtype.name == "bfloat16":
        return max(LOW_PRECISION_TOLERANCE, SOUNDNESS_TOLERANCE[soundness])
    return SOUNDNESS_TOLERANCE[soundness]


def compare(
    names: Sequence[str],
    expected: Sequence[Any],
    actual: Sequence[Any],
    soundness: str = "exact",
    quantized: bool = False,
) -> tuple[OutputCheck, ...]:
    """One check per output: tensors within tolerance; sequences element by element, optionals and maps
    by their values."""
    return tuple(
        _compare_value(name, ref, got, soundness, quantized) for name, ref, got in zip(names, expected, actual)
    )


def _compare_value(name: str, ref: Any, got: Any, soundness: str, quantized: bool) -> OutputCheck:
    if isinstance(ref, dict) or isinstance(got, dict):  # a map: its keys, then its values
        if not isinstance(ref, dict) or not isinstance(got, dict) or sorted(ref) != sorted(got):
            return OutputCheck(name, float("inf"), 0.0, 0.0, False, "map keys differ;")
        keys = sorted(ref)
        ref, got = np.array([ref[k] for k in keys]), np.array([got[k] for k in keys])
    if isinstance(ref, list) or isinstance(got, list):  # a sequence: its length, then each element
        if not isinstance(ref, list) or not isinstance(got, list) or len(ref) != len(got):
            return OutputCheck(name, float("inf"), 0.0, 0.0, False, "sequence lengths differ;")
        checks = [_compare_value(name, r, g, soundness, quantized) for r, g in zip(ref, got)]
        return _worst(checks) if checks else OutputCheck(name, 0.0, 0.0, 0.0, True)
    if ref is None or got is None:  # an optional: both empty, or both not
        same = ref is None and got is None
        return OutputCheck(
            name, 0.0 if same else float("inf"), 0.0, 0.0, same, "" if same else "optional presence differs;"
        )
    return _compare_tensor(name, np.asarray(ref), np.asarray(got), soundness, quantized)


def _compare_tensor(name: str, ref: np.ndarray, got: np.ndarray, soundness: str, quantized: bool) -> OutputCheck:
    if ref.shape != got.shape or ref.dtype != got.dtype:
        return OutputCheck(
            name, float("inf"), 0.0, 0.0, False, f"shape/dtype {got.shape}/{got.dtype} != {ref.shape}/{ref.dtype};"
        )
    if ref.dtype.kind in "OUS":  # strings must match exactly
        same = bool(np.array_equal(ref, got))
        return OutputCheck(name, 0.0 if same else float("inf"), 0.0, 0.0, same, "" if same else "strings differ;")
    if np.issubdtype(ref.dtype, np.complexfloating):
        ref, got = np.stack([ref.real, ref.imag], -1), np.stack([got.real, got.imag], -1)
    if np.issubdtype(ref.dtype, np.floating):
        r64, g64 = ref.astype(np.float64), got.astype(np.float64)
        nan_ok = np.array_equal(np.isnan(r64), np.isnan(g64))
        finite = np.isfinite(r64) & np.isfinite(g64)
        inf_ok = np.array_equal(r64[~finite & ~np.isnan(r64)], g64[~finite & ~np.isnan(r64)])
        diff = float(np.max(np.abs(r64[finite] - g64[finite]), initial=0.0))
        scale = float(np.max(np.abs(r64[finite]), initial=0.0))
        allowed = tolerance_for(ref.dtype, soundness) * max(scale, 1e-3)
        ok = nan_ok and inf_ok and diff <= allowed
        problem = "" if nan_ok and inf_ok else "NaN/Inf positions differ;"
        gap: np.ndarray | None = np.zeros(r64.shape)
        gap[finite] = np.abs(r64[finite] - g64[finite])  # type: ignore[index]  # just made
        if not nan_ok or not inf_ok:  # point at the first element where NaN/Inf disagree
            gap = (~np.isclose(r64, g64, equal_nan=True) & ~finite).astype(np.float64)
    else:
        diff = float(np.max(np.abs(ref.astype(np.int64) - got.astype(np.int64)), initial=0)) if ref.size else 0.0
        scale = float(np.max(np.abs(ref.astype(np.int64)), initial=0)) if ref.size else 0.0
        allowed = 1.0 if quantized and ref.dtype in (np.int8, np.uint8, np.int16, np.uint16) else 0.0
        ok, problem = diff <= allowed, ""
        gap = np.abs(ref.astype(np.int64) - got.astype(np.int64)) if ref.size else None
    where = "" if ok or gap is None or not ref.size else _where(ref, got, gap)
    return OutputCheck(name, diff, scale, allowed, ok, problem, where)


def _where(ref: np.ndarray, got: np.ndarray, gap: np.ndarray) -> str:
    """The element where `gap` is largest, with both values: `at [0, 2]: expected 1.5, got 1.7`."""
    index = np.unravel_index(int(np.argmax(gap)), ref.shape)
    show = (lambda v: f"{float(v):.6g}") if np.issubdtype(ref.dtype, np.floating) else (lambda v: str(v.item()))
    return f"at {list(map(int, index))}: expected {show(ref[index])}, got {show(got[index])}"


def verify(
    original: ir.Model | onnx.ModelProto,
    optimized: ir.Model | onnx.ModelProto,
    *,
    soundness: str = "exact",
    seed: int = 0,
    source: str = "<model>",
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    inputs: Mapping[str, np.ndarray] | None = None,
    strict: bool = False,
    reference: Reference | None = None,
    weights: Mapping[str, np.ndarray] | None = None,
    original_weights: Mapping[str, np.ndarray] | None = None,
) -> VerifyReport:
    """Compare both models' outputs on seeded inputs with the tolerance of `soundness`.

    `inputs` (arrays by input name) are used as given; `input_shapes` size the other inputs; dynamic dims
    left open are sized by `eqsat.check.verify_inputs` (two assignments). `reference` (from `expected_outputs`
    on this original) saves running the original again. An original that runs on no candidate is not
    verified (`VerifyReport.unverified` says why; `ok` stays true), or with `strict` (or with sizes or arrays
    the user gave) bad input (`BadInputError` naming `source`); an optimized model that cannot run while the
    original can fails verification (`VerificationError`), as does one onnxruntime cannot load or run where it
    ran the original (onnx.reference stands in only for originals onnxruntime does not run). `weights` and
    `original_weights` (arrays by initializer name already in memory: what lowering wrote, what encoding read)
    are fed to onnxruntime where they equal the model's initializers byte for byte, instead of copies.
    """
    orig = _proto(original)
    if reference is None:
        reference = expected_outputs(
            orig,
            seed=seed,
            source=source,
            input_shapes=input_shapes,
            inputs=inputs,
            strict=strict,
            weights=original_weights,
        )
    if reference.unverified:
        return VerifyReport(
            True, "", reference.seed, (), {}, (), reference.random, reference.notes, reference.unverified, reference
        )
    runner = Runner(_proto(optimized), weights)
    compared = [k for k, name in enumerate(reference.names) if name not in reference.random]
    names = [reference.names[k] for k in compared]
    per_run, runtimes = [], set()
    # an original onnxruntime ran: the optimized model must run there too (onnx.reference's run would hide that
    # the output is worse than the input for onnxruntime, refused, e.g. for two nodes of one name)
    ort_only = reference.runtime == "onnxruntime"
    feeds = [r.feeds for r in reference.runs]
    for done, (actual, runtime, problem) in zip(reference.runs, run_all(runner, feeds, fallback=not ort_only)):
        if problem is not None:
            raise _cannot_run(source, problem, reference, ort_only)
        runtimes.add(runtime)
        checks = compare(
            names, [done.outputs[k] for k in compared], [actual[k] for k in compared], soundness, reference.quantized
        )
        per_run.append([dataclasses.replace(c, inputs=shapes_text(done.shapes)) for c in checks])
    worst = tuple(_worst(checks) for checks in zip(*per_run))
    used = reference.runtime if runtimes <= {reference.runtime} else f"{reference.runtime}/{'/'.join(sorted(runtimes))}"
    assignments = tuple(done.shapes for done in reference.runs)
    return VerifyReport(
        all(c.ok for c in worst),
        used,
        reference.seed,
        worst,
        assignments[0],
        assignments,
        reference.random,
        reference.notes,
        "",
        reference,
    )


def _cannot_run(source: str, problem: CannotRun, reference: Reference, ort_only: bool) -> VerificationError:
    """The failure of an optimized model that cannot run where the original does (`reference` attached)."""
    where = " by onnxruntime, which runs the original" if ort_only else ""
    err = VerificationError(f"{source}: the optimized model cannot be run{where} ({problem}); output not written")
    err.reference = reference  # type: ignore[attr-defined]
    return err


def run_all(
    runner: Runner, feeds: Sequence[Mapping[str, Any]], fallback: bool = True
) -> list[tuple[list[Any], str, CannotRun | None]]:
    """`runner.run` on each of `feeds`, in order: (outputs, runtime, None), or ([], "", why) when no runtime runs
    them. onnxruntime runs them side by side (one thread each: it releases the GIL, and the session's
    one intra-op thread each leaves the other cores free; their activations are alive at once, each value within
    the element budget); with `fallback`, feeds it refuses, and every run when it cannot load the model, go to
    `runner.run` one after another (its onnx.reference fallback is made once); without, they are answered
    with onnxruntime's complaint."""
    done: list[tuple[list[Any], str, CannotRun | None] | None] = [None] * len(feeds)

    def attempt(k: int, fallback: bool) -> None:
        try:
            done[k] = (*runner.run(feeds[k], fallback=fallback), None)
        except CannotRun as exc:
            done[k] = ([], "", exc)

    if len(feeds) > 1 and runner.loaded:
        threads = [threading.Thread(target=attempt, args=(k, False), daemon=True) for k in range(1, len(feeds))]
        for thread in threads:
            thread.start()
        attempt(0, False)
        for thread in threads:
            thread.join()
    for k, outcome in enumerate(done):
        if outcome is None or (fallback and outcome[2] is not None):  # not run yet, or refused: as `run` would
            attempt(k, fallback)
    return done  # type: ignore[return-value]


def _worst(checks: Sequence[OutputCheck]) -> OutputCheck:
    """One output's check over the assignments: the first that failed, else the largest difference."""
    return next((c for c in checks if not c.ok), None) or max(checks, key=lambda c: c.max_abs_diff)


def _proto(model: ir.Model | onnx.ModelProto) -> onnx.ModelProto:
    return model if isinstance(model, onnx.ModelProto) else ir.serde.serialize_model(model)


def expected_outputs(
    original: ir.Model | onnx.ModelProto,
    *,
    seed: int = 0,
    source: str = "<model>",
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    inputs: Mapping[str, np.ndarray] | None = None,
    strict: bool = False,
    weights: Mapping[str, np.ndarray] | None = None,
    runner: Runner | None = None,
) -> Reference:
    """The original's outputs on the first candidate it runs on, and on a second assignment of other sizes
    where it has dynamic dims (see the module docstring); `Reference.unverified` says why when it runs on
    none, unless `strict` (or the user gave sizes or arrays): then a one-line `BadInputError`. `weights`:
    as `verify`'s `original_weights`. `runner` runs the original instead of one made here (eqsat.check.ahead
    plans with one that promises every run)."""
    orig = _proto(original)
    shapes, arrays = check_given(orig, input_shapes or {}, inputs or {}, source)
    search = _Search(orig, seed, shapes, arrays, weights, runner)
    names = tuple(o.name for o in orig.graph.output)
    random = tuple(random_outputs(orig))
    quantized = any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in orig.graph.node)
    first = search.first_run()
    if first is None:
        why = search.why()
        if strict or shapes or arrays:
            raise BadInputError(source, search.refusal()) from None
        return Reference((), "", seed, names, random, quantized, tuple(search.notes), why)
    runs = [first[0]]
    second = search.second_run(first[1])
    if second is not None:
        runs.append(second)
    return Reference(tuple(runs), search.runtime, seed, names, random, quantized, tuple(search.notes))


class _Search:
    """The lazy search for assignments the original runs on: candidates smallest first, each drawn only
    when tried, skipped when over the element budget, redrawn (up to REDRAWS times) when a draw was
    uncertain and refused."""

    def __init__(
        self,
        model: onnx.ModelProto,
        seed: int,
        shapes: dict[str, Shape],
        arrays: dict[str, Any],
        weights: Mapping[str, np.ndarray] | None = None,
        runner: Runner | None = None,
    ):
        self.model, self.seed, self.shapes, self.arrays = model, seed, shapes, arrays
        self.plan = Plan(model)
        self.runner = runner if runner is not None else Runner(model, weights)
        self._given = given_shapes(shapes, arrays)
        self._fixed: set[str] | None = None
        self.tried: list[str] = []  # the sizes tried, as text
        self.skipped: list[str] = []  # candidates over the budget, and why
        self.notes: list[str] = []
        self.problem = ""  # the last complaint
        self.runtime = "onnxruntime"
        self.smallest: Draw | None = None  # the first draw within the budget: for onnx.reference at the end
        self.smallest_sizes: Sizes | None = None
        self.seen: list[dict[str, Shape]] = []

    @property
    def fixed(self) -> set[str]:
        """The values whose size is known without the verifier's choice (given, or fixed by the model alone): the
        budget does not count them. Inferred on first use: only a candidate over the budget counting every value
        needs them (leaving values out only lowers the count), and inference holds the GIL (a thread's time)."""
        if self._fixed is None:
            self._fixed = fixed_sizes(self.plan.facts.infer(self._given)) | set(self._given)
        return self._fixed

    def _candidates(self, choices: Iterator[Sizes]) -> Iterator[tuple[Sizes, dict[str, Shape]]]:
        for sizes in choices:
            shapes = assign(self.model, sizes, self.shapes, self.arrays)
            if shapes not in self.seen:
                self.seen.append(shapes)
                yield sizes, shapes

    def _try(self, shapes: dict[str, Shape], fallback: bool, sizes_chosen: Sizes | None = None) -> Run | None:
        for attempt in range(REDRAWS):
            drawn = self.plan.draw(shapes, self.arrays, self.seed, attempt)
            sizes = feed_shapes(drawn.feeds)
            facts = self.plan.facts.infer(sizes, drawn.constants) if drawn.constants or not drawn.facts else drawn.facts
            over = over_budget(facts, sizes) and over_budget(facts, sizes, self.fixed)
            if over:
                self.skipped.append(f"{shapes_text(sizes)} ({over})")
                return None
            self.tried.append(shapes_text(sizes) + (f" (redraw {attempt})" if attempt else ""))
            if self.smallest is None:
                self.smallest, self.smallest_sizes = drawn, sizes_chosen
            try:
                outputs, runtime = self.runner.run(drawn.feeds, fallback=fallback or not self.runner.loaded)
            except CannotRun as exc:
                self.problem = str(exc)
                if not drawn.uncertain:
                    return None
                continue
            self.runtime = runtime
            return Run(drawn.feeds, outputs)
        return None

    def first_run(self) -> tuple[Run, Sizes] | None:
        for sizes, shapes in self._candidates(first_sizes()):
            found = self._try(shapes, fallback=False, sizes_chosen=sizes)
            if found is not None:
                if sizes.batch == 1 and self._has_batch():
                    self.notes.append("batch-like dims sized 1: the original runs on no larger batch")
                return found, sizes
        if self.runner.loaded and self.smallest is not None:  # onnxruntime refuses every one: onnx.reference
            try:
                outputs, self.runtime = self.runner.run(self.smallest.feeds, fallback=True)
            except CannotRun as exc:
                self.problem = str(exc)
            else:
                return Run(self.smallest.feeds, outputs), self.smallest_sizes or next(first_sizes())
        return None

    def _has_batch(self) -> bool:
        return assign(self.model, Sizes(1, 0), self.shapes, self.arrays) != assign(
            self.model, Sizes(2, 0), self.shapes, self.arrays
        )

    def second_run(self, first: Sizes) -> Run | None:
        tried, skipped = len(self.tried), len(self.skipped)
        for _, shapes in self._candidates(second_sizes(first)):
            found = self._try(shapes, fallback=self.runtime != "onnxruntime")
            if found is not None:
                return found
        missed = self.tried[tried:] + [f"{s}: over the budget" for s in self.skipped[skipped:]]
        if missed:
            self.notes.append(f"checked at one size only: the original runs on no second sizes ({'; '.join(missed)})")
        return None

    def why(self) -> str:
        """Why nothing runs, in one line, for the warning."""
        tried = "; ".join(self.tried) or "none"
        skipped = f"; skipped over the budget: {'; '.join(self.skipped)}" if self.skipped else ""
        return (
            f"no runtime runs the original on the inputs drawn (sizes tried: {tried}{skipped}; "
            f"last errors: {self.problem or 'none'})"
        )

    def refusal(self) -> str:
        """The same for `BadInputError`."""
        if len(self.tried) == 1 and not self.skipped:
            return f"cannot be verified, no runtime runs it ({self.problem}); rerun with --no-verify"
        return (
            f"cannot be verified: no runtime runs it on any input sizes tried ({'; '.join(self.tried)}"
            + (f"; skipped over the budget: {'; '.join(self.skipped)}" if self.skipped else "")
            + f"; last errors: {self.problem}); give sizes with --input-shape NAME:D0,D1,... or arrays "
            "with --inputs FILE.npz, or rerun with --no-verify"
        )
