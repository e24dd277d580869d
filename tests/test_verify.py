"""Differential verification: corrupted outputs are caught (and never written by the CLI), inputs respect
integer semantics, tolerances follow dtype, quantization and soundness."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import onnx_ir as ir
import pytest
from onnx import TensorProto

import eqsat
from eqsat.frontend import normalize as normalizing
from eqsat.ui.cli import main
from eqsat.errors import BadInputError, VerificationError
from eqsat.result import Result
from eqsat.check.verify import compare, make_inputs, verify
from tests.conftest import build_model, custom_op_model

F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def _corrupt(model: ir.Model) -> None:
    """Change every element of the largest floating-point initializer (in place)."""
    value = max(
        (v for v in model.graph.initializers.values() if v.dtype.is_floating_point()), key=lambda v: v.const_value.size
    )
    array = value.const_value.numpy()
    value.const_value = ir.tensor(array + 1 + np.abs(array), name=value.name)


def test_corrupted_output_is_caught(bundled_model: Path, optimized_bundled: tuple[Path, Result]) -> None:
    original = onnx.load(bundled_model)
    optimized = ir.load(optimized_bundled[0])  # a fresh copy: the shared result stays intact
    _corrupt(optimized)
    report = verify(original, optimized)
    assert not report.ok
    bad = report.first_failure
    assert bad is not None and bad.name in [o.name for o in original.graph.output]
    assert f"verification failed on output {bad.name!r}" in report.summary()


def test_cli_failed_verification_exits_3_and_writes_nothing(
    models_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    normalize = normalizing.normalize_proto

    def normalize_and_corrupt(proto: onnx.ModelProto, label: str) -> tuple[ir.Model, onnx.ModelProto]:
        model, normalized = normalize(proto, label)
        _corrupt(model)
        return model, normalized

    monkeypatch.setattr(normalizing, "normalize_proto", normalize_and_corrupt)
    source = models_dir / "resnet18_w8_fp16.onnx"
    assert main(["optimize", str(source), "-o", str(tmp_path / "out.onnx")]) == 3
    err = capsys.readouterr().err
    assert err.startswith(f"eqsat: error: {source}: verification failed on output 'logits'")
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def _embedding_model(make_model, rows: int) -> onnx.ModelProto:
    """input_ids -> Reshape -> Gather(table of `rows`), scaled by Cast(attention_mask)."""
    return make_model(
        [
            oh.make_node("Reshape", ["input_ids", "flat"], ["ids"]),
            oh.make_node("Gather", ["table", "ids"], ["emb"], axis=0),
            oh.make_node("Cast", ["attention_mask"], ["mask"], to=F32),
            oh.make_node("Unsqueeze", ["mask", "last"], ["mask1"]),
            oh.make_node("Mul", ["emb", "mask1"], ["y"]),
        ],
        [("input_ids", I64, [1, 64]), ("attention_mask", I64, [64])],
        [("y", F32, [64, 4])],
        {
            "flat": np.array([64], np.int64),
            "last": np.array([1], np.int64),
            "table": np.random.default_rng(0).standard_normal((rows, 4)).astype(np.float32),
        },
    )


def test_integer_inputs_respect_semantics(make_model) -> None:
    model = _embedding_model(make_model, rows=7)
    feeds = make_inputs(model)
    assert feeds["input_ids"].dtype == np.int64 and feeds["input_ids"].shape == (1, 64)
    assert 0 <= feeds["input_ids"].min() and feeds["input_ids"].max() < 7
    assert len(np.unique(feeds["input_ids"])) > 1
    np.testing.assert_array_equal(feeds["attention_mask"], np.ones(64, np.int64))
    assert verify(model, model).ok  # out-of-range ids would make onnxruntime fail


def _ramp(dtype: str) -> np.ndarray:
    """16 values from -10 to 10: the output's scale is 10."""
    return np.linspace(-10, 10, 16).astype(dtype)


def _bumped(array: np.ndarray, delta: float) -> np.ndarray:
    out = array.copy()
    out[3] += np.asarray(delta).astype(array.dtype)
    return out


# dtype, change of one element, soundness, quantized model, accepted
TOLERANCE_CASES = [
    pytest.param("float32", 5e-4, "exact", False, True, id="fp32-within-1e-4-of-scale"),
    pytest.param("float32", 2e-3, "exact", False, False, id="fp32-beyond-1e-4-of-scale"),
    pytest.param("float32", 5e-3, "fp-reassoc", False, True, id="fp32-fp-reassoc-within-1e-3"),
    pytest.param("float32", 5e-2, "exact", False, False, id="fp32-rejects-fp16-sized-error"),
    pytest.param("float16", 5e-2, "exact", False, True, id="fp16-within-1e-2-of-scale"),
    pytest.param("float16", 0.25, "exact", False, False, id="fp16-beyond-1e-2-of-scale"),
    pytest.param("uint8", 1, "exact", True, True, id="quantized-uint8-one-step"),
    pytest.param("int8", 1, "exact", True, True, id="quantized-int8-one-step"),
    pytest.param("uint8", 2, "exact", True, False, id="quantized-uint8-two-steps"),
    pytest.param("uint8", 1, "exact", False, False, id="uint8-exact-when-not-quantized"),
    pytest.param("int64", 1, "exact", True, False, id="int64-exact-even-when-quantized"),
]


@pytest.mark.parametrize(("dtype", "delta", "soundness", "quantized", "accepted"), TOLERANCE_CASES)
def test_compare_tolerance(dtype: str, delta: float, soundness: str, quantized: bool, accepted: bool) -> None:
    reference = _ramp(dtype) if np.issubdtype(dtype, np.floating) else np.arange(16).astype(dtype)
    (check,) = compare(["out"], [reference], [_bumped(reference, delta)], soundness, quantized)
    assert check.ok == accepted, check


@pytest.mark.parametrize(
    "actual",
    [
        pytest.param(_bumped(_ramp("float32"), np.nan), id="nan-appears"),
        pytest.param(_ramp("float32")[:8], id="shape-differs"),
        pytest.param(_ramp("float64"), id="dtype-differs"),
    ],
)
def test_compare_rejects_structural_differences(actual: np.ndarray) -> None:
    (check,) = compare(["out"], [_ramp("float32")], [actual])
    assert not check.ok and check.problem


def test_original_no_runtime_runs_is_not_verified_or_with_strict_bad_input() -> None:
    report = verify(custom_op_model(), custom_op_model(), source="in.onnx")
    assert report.ok and not report.verified and "Mystery" in report.unverified
    assert report.summary().startswith("not verified: no runtime runs the original on the inputs drawn")
    with pytest.raises(BadInputError, match=r"^in\.onnx: cannot be verified.*Mystery.*--no-verify"):
        verify(custom_op_model(), custom_op_model(), source="in.onnx", strict=True)


def test_cli_writes_a_model_no_runtime_runs_with_a_warning_and_strict_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out, js = tmp_path / "in.onnx", tmp_path / "out.onnx", tmp_path / "report.json"
    source.write_bytes(custom_op_model().SerializeToString())
    assert main(["optimize", str(source), "-o", str(out), "--report-json", str(js)]) == 0
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("eqsat: warning: not verified: no runtime runs the original on the inputs drawn (")
    assert "Mystery" in line and line.endswith("; pass --inputs FILE.npz or --input-shape to verify")
    assert out.exists()
    report = json.loads(js.read_text())
    assert report["warnings"] == [line.removeprefix("eqsat: warning: ")]
    assert report["verification"]["verified"] is False and report["verification"]["unverified"] in line
    out.unlink()
    assert main(["optimize", str(source), "-o", str(out), "--strict"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"eqsat: error: {source}: cannot be verified, no runtime runs it (onnxruntime: ")
    assert not out.exists()


def test_optimize_returns_an_unverified_result_with_its_warning() -> None:
    result = eqsat.optimize(custom_op_model())
    assert not result.verified and result.report.verification.ok
    (warning,) = result.warnings
    assert warning.startswith("not verified: no runtime runs the original") and "Mystery" in warning
    assert "not verified: no runtime runs the original" in result.report.to_text()
    with pytest.raises(BadInputError, match="cannot be verified"):
        eqsat.optimize(custom_op_model(), strict=True)


def test_optimized_no_runtime_runs_fails_verification(make_model) -> None:
    relu = make_model([oh.make_node("Relu", ["x"], ["y"])], [("x", F32, [2])], [("y", F32, [2])])
    with pytest.raises(VerificationError, match=r"^in\.onnx: the optimized model cannot be run"):
        verify(relu, custom_op_model(), source="in.onnx")


def test_an_optimized_model_onnxruntime_refuses_fails_where_it_runs_the_original(make_model) -> None:
    """onnx.reference would run a model with two nodes of one name; onnxruntime, which runs the original,
    refuses it: a failure naming onnxruntime's complaint, not a model verified by the fallback."""
    spec = ([("x", F32, [2])], [("y", F32, [2])])
    relu = make_model([oh.make_node("Relu", ["x"], ["y"])], *spec)
    twice = make_model(
        [oh.make_node("Relu", ["x"], ["r"], name="n"), oh.make_node("Identity", ["r"], ["y"], name="n")], *spec
    )
    with pytest.raises(VerificationError, match=r"^in\.onnx: the optimized model cannot be run by onnxruntime, .*"):
        verify(relu, twice, source="in.onnx")
    with pytest.raises(VerificationError, match=r"two nodes with same node name \(n\)"):
        verify(relu, twice, source="in.onnx")


def test_onnx_reference_still_stands_in_where_onnxruntime_runs_neither(monkeypatch: pytest.MonkeyPatch) -> None:
    """An original onnxruntime cannot load is compared on onnx.reference, the optimized model too."""
    import onnxruntime

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no onnxruntime here")

    monkeypatch.setattr(onnxruntime, "InferenceSession", refuse)
    relu = oh.make_node("Relu", ["x"], ["y"])
    spec = ([("x", F32, [2])], [("y", F32, [2])])
    original = build_model([relu, oh.make_node("Neg", ["y"], ["z"])], spec[0], [("z", F32, [2])])
    optimized = build_model([relu, oh.make_node("Neg", ["y"], ["z"], name="n")], spec[0], [("z", F32, [2])])
    report = verify(original, optimized, source="in.onnx")
    assert report.ok and report.verified and report.runtime == "onnx.reference"


class _Runner:
    """A stand-in for verify's Runner: onnxruntime loaded; refuses feeds marked "refuse" unless falling back."""

    loaded = True

    def __init__(self) -> None:
        self.calls: list[tuple[int, bool]] = []

    def run(self, feeds: dict, fallback: bool = True) -> tuple[list, str]:
        from eqsat.check.verify import CannotRun

        self.calls.append((feeds["k"], fallback))
        if feeds.get("refuse"):
            if not fallback:
                raise CannotRun("onnxruntime: refused")
            return [feeds["k"] * 10], "onnx.reference"
        return [feeds["k"]], "onnxruntime"


def test_the_assignments_run_side_by_side_each_answered_in_order() -> None:
    """run_all: outputs in the order of the feeds; a run onnxruntime refuses falls back alone, as `run` would."""
    from eqsat.check.verify import run_all

    runner = _Runner()
    done = run_all(runner, [{"k": 1}, {"k": 2, "refuse": True}])  # type: ignore[arg-type]
    assert [(out, runtime, problem) for out, runtime, problem in done] == [
        ([1], "onnxruntime", None),
        ([20], "onnx.reference", None),
    ]
    assert sorted(runner.calls) == [(1, False), (2, False), (2, True)]
