"""Differential verification: run the input and the optimized model on the same seeded inputs.

Inputs respect their meaning and the model's dynamic dims (eqsat.verify_inputs): the original is tried
on a few size assignments, smallest first, until it runs; the user may give sizes or arrays instead.

Tolerances (relative to each output's largest magnitude): float32 1e-4 for exact rules and 1e-3 for
fp-reassoc rules, float16/bfloat16 1e-2; integer outputs of quantized models within one quantization
step; other integer and bool outputs must match exactly.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np
import onnx
import onnx_ir as ir

from eqsat.errors import BadInputError, VerificationError, first_line
from eqsat.verify_inputs import Shape, candidate_shapes, check_given, make_inputs, shapes_text

__all__ = ["CannotRun", "OutputCheck", "VerifyReport", "compare", "make_inputs", "run", "verify"]

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
    where: str = ""     # the element with the largest difference: "at [0, 2]: expected 1.5, got 1.7"


@dataclasses.dataclass(frozen=True)
class VerifyReport:
    ok: bool
    runtime: str
    seed: int
    outputs: tuple[OutputCheck, ...]
    input_shapes: dict[str, Shape] = dataclasses.field(default_factory=dict)  # what both models ran on

    @property
    def first_failure(self) -> OutputCheck | None:
        return next((o for o in self.outputs if not o.ok), None)

    @property
    def max_abs_diff(self) -> float:
        return max((o.max_abs_diff for o in self.outputs), default=0.0)

    def summary(self) -> str:
        """One line: verified or not, on which inputs, the largest difference (where it failed)."""
        on = f", inputs {shapes_text(self.input_shapes)}" if self.input_shapes else ""
        if self.ok:
            return f"verified ({self.runtime}, seed {self.seed}{on}): max |diff| {self.max_abs_diff:.3g}"
        bad = self.first_failure
        assert bad is not None
        failed = sum(not o.ok for o in self.outputs)
        others = f" (and {failed - 1} more of {len(self.outputs)} outputs)" if failed > 1 else ""
        return (f"verification failed on output {bad.name!r}{others}: {bad.problem or 'difference'} "
                f"max |diff| {bad.max_abs_diff:.3g} > allowed {bad.allowed:.3g}"
                + (f" on {on[2:]}" if on else "") + (f" {bad.where}" if bad.where else ""))


class CannotRun(Exception):
    """Neither onnxruntime nor onnx.reference can run a model; the message has both complaints."""


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray], str]:
    """Outputs of `model` on `feeds`: onnxruntime (no graph optimizations), else onnx.reference."""
    outputs, runtime, _ = run_first(model, [feeds])
    return outputs, runtime


def run_first(model: onnx.ModelProto, candidates: Sequence[dict[str, np.ndarray]]
              ) -> tuple[list[np.ndarray], str, dict[str, np.ndarray]]:
    """Outputs, runtime and feeds of the first of `candidates` that onnxruntime (no graph optimizations)
    runs `model` on, else the first that onnx.reference runs it on (slow but complete: for ops onnxruntime
    lacks); `CannotRun` with the last complaint of each when neither runs it on any."""
    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 4  # a refused size is an exception here, not a log line on the user's terminal
    ort.set_default_logger_severity(3)  # warnings of model loading go to the default logger, not the session's
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        for feeds in candidates:
            try:
                return sess.run(None, feeds), "onnxruntime", feeds
            except Exception as exc:  # this size is refused: try the next
                ort_problem = first_line(exc)
    except Exception as exc:  # an op onnxruntime lacks
        ort_problem = first_line(exc)
    try:
        evaluator = ReferenceEvaluator(model)
        for feeds in candidates:
            try:
                return [np.asarray(o) for o in evaluator.run(None, feeds)], "onnx.reference", feeds
            except Exception as exc:
                ref_problem = first_line(exc)
    except Exception as exc:
        ref_problem = first_line(exc)
    raise CannotRun(f"onnxruntime: {ort_problem}; onnx.reference: {ref_problem}")


def tolerance_for(dtype: np.dtype, soundness: str = "exact") -> float:
    if dtype in (np.float16,) or dtype.name == "bfloat16":
        return max(LOW_PRECISION_TOLERANCE, SOUNDNESS_TOLERANCE[soundness])
    return SOUNDNESS_TOLERANCE[soundness]


def compare(names: Sequence[str], expected: Sequence[np.ndarray], actual: Sequence[np.ndarray],
            soundness: str = "exact", quantized: bool = False) -> tuple[OutputCheck, ...]:
    checks = []
    for name, ref, got in zip(names, expected, actual):
        ref, got = np.asarray(ref), np.asarray(got)
        if ref.shape != got.shape or ref.dtype != got.dtype:
            checks.append(OutputCheck(name, float("inf"), 0.0, 0.0, False,
                                      f"shape/dtype {got.shape}/{got.dtype} != {ref.shape}/{ref.dtype};"))
            continue
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
            gap = np.zeros(r64.shape)
            gap[finite] = np.abs(r64[finite] - g64[finite])
            if not nan_ok or not inf_ok:  # point at the first element where NaN/Inf disagree
                gap = (~np.isclose(r64, g64, equal_nan=True) & ~finite).astype(np.float64)
        else:
            diff = float(np.max(np.abs(ref.astype(np.int64) - got.astype(np.int64)), initial=0)) if ref.size else 0.0
            scale = float(np.max(np.abs(ref.astype(np.int64)), initial=0)) if ref.size else 0.0
            allowed = 1.0 if quantized and ref.dtype in (np.int8, np.uint8, np.int16, np.uint16) else 0.0
            ok, problem = diff <= allowed, ""
            gap = np.abs(ref.astype(np.int64) - got.astype(np.int64)) if ref.size else None
        where = "" if ok or gap is None or not ref.size else _where(ref, got, gap)
        checks.append(OutputCheck(name, diff, scale, allowed, ok, problem, where))
    return tuple(checks)


def _where(ref: np.ndarray, got: np.ndarray, gap: np.ndarray) -> str:
    """The element where `gap` is largest, with both values: `at [0, 2]: expected 1.5, got 1.7`."""
    index = np.unravel_index(int(np.argmax(gap)), ref.shape)
    show = (lambda v: f"{float(v):.6g}") if np.issubdtype(ref.dtype, np.floating) else (lambda v: str(v.item()))
    return f"at {list(map(int, index))}: expected {show(ref[index])}, got {show(got[index])}"


def verify(original: ir.Model | onnx.ModelProto, optimized: ir.Model | onnx.ModelProto, *,
           soundness: str = "exact", seed: int = 0, source: str = "<model>",
           input_shapes: Mapping[str, Sequence[int]] | None = None,
           inputs: Mapping[str, np.ndarray] | None = None) -> VerifyReport:
    """Compare both models' outputs on seeded inputs with the tolerance of `soundness`.

    `inputs` (arrays by input name) are used as given; `input_shapes` size the other inputs; dynamic dims
    left open are sized as `eqsat.verify_inputs.candidate_shapes` suggests, trying the next candidate while
    the original cannot run. An original that runs on no candidate is bad input (`BadInputError` naming
    `source`); an optimized model that cannot run while the original can fails verification
    (`VerificationError`).
    """
    orig = original if isinstance(original, onnx.ModelProto) else ir.serde.serialize_model(original)
    opt = optimized if isinstance(optimized, onnx.ModelProto) else ir.serde.serialize_model(optimized)
    shapes, arrays = check_given(orig, input_shapes or {}, inputs or {}, source)
    expected, runtime, feeds = run_original(orig, seed, source, shapes, arrays)
    try:
        actual, runtime2 = run(opt, feeds)
    except CannotRun as exc:
        raise VerificationError(f"{source}: the optimized model cannot be run ({exc}); output not written") from None
    quantized = any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in orig.graph.node)
    names = [o.name for o in orig.graph.output]
    checks = compare(names, expected, actual, soundness, quantized)
    used = runtime if runtime == runtime2 else f"{runtime}/{runtime2}"
    return VerifyReport(all(c.ok for c in checks), used, seed, checks,
                        {name: tuple(a.shape) for name, a in feeds.items()})


def run_original(model: onnx.ModelProto, seed: int, source: str, shapes: Mapping[str, Shape],
                 arrays: Mapping[str, np.ndarray]) -> tuple[list[np.ndarray], str, dict[str, np.ndarray]]:
    """The outputs, runtime and feeds of the first candidate input shapes `model` runs on; a one-line
    `BadInputError` naming the sizes tried when it runs on none."""
    candidates = list(candidate_shapes(model, shapes, arrays))
    try:
        return run_first(model, [make_inputs(model, seed, c, arrays) for c in candidates])
    except CannotRun as exc:
        if len(candidates) == 1:
            raise BadInputError(source, f"cannot be verified, no runtime runs it ({exc}); rerun with --no-verify") from None
        tried = "; ".join(shapes_text(c) for c in candidates)
        raise BadInputError(source, f"cannot be verified: no runtime runs it on any input sizes tried ({tried}; "
                                    f"last errors: {exc}); give sizes with --input-shape NAME:D0,D1,... or arrays "
                                    "with --inputs FILE.npz, or rerun with --no-verify") from None
