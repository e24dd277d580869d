"""Verification on models with dynamic dims: sizes from dim names and a ladder, the user's shapes and
arrays (--input-shape, --inputs), and static input dims written into the model (--fix-input-shape)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

import eqsat
from eqsat.bisect import find_culprit
from eqsat.ui.cli import main
from eqsat.errors import BadInputError
from eqsat.frontend.fix_shapes import fix_input_shapes
from eqsat.check.verify import expected_outputs, verify
from eqsat.check.verify_inputs import candidate_shapes, dim_kind, load_npz
from eqsat.check.verify_values import make_inputs
from tests.rule_graphs import model, node

F32, I64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64


def reflect_pad(width: int, dims: tuple = ("batch", None)) -> onnx.ModelProto:
    """x -> Pad(reflect, `width` each side of the last axis) -> Relu -> Relu: runs only when the last
    axis is longer than `width`."""
    return model(
        [node("Pad", ["x", "pads"], "p", mode="reflect"), node("Relu", ["p"], "r"), node("Relu", ["r"], "y")],
        [("x", F32, list(dims))],
        ["y"],
        {"pads": np.array([0, width, 0, width], np.int64)},
    )


def rows_of(width: int) -> onnx.ModelProto:
    """x -> Reshape([-1, `width`]) -> Relu: runs (on any runtime) only when `width` divides x's size."""
    return model(
        [node("Reshape", ["x", "shape"], "r"), node("Relu", ["r"], "y")],
        [("x", F32, ["batch", None])],
        ["y"],
        {"shape": np.array([-1, width], np.int64)},
    )


def save(m: onnx.ModelProto, path: Path) -> Path:
    path.write_bytes(m.SerializeToString())
    return path


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("eqsat: error: ") and "\n" not in err and "Traceback" not in err, err
    return err


# ---- sizes chosen by default --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, axis, rank, kind",
    [
        ("batch", 1, 3, "batch"),
        ("batch_size", 0, 2, "batch"),
        ("N", 0, 4, "batch"),
        ("bs", 0, 2, "batch"),
        ("", 0, 4, "batch"),  # an unnamed leading dim of a tensor is its batch
        ("sequence", 1, 2, "sequence"),
        ("src_len", 1, 2, "sequence"),
        ("T", 1, 3, "sequence"),
        ("num_tokens", 1, 2, "sequence"),
        ("height", 2, 4, "other"),
        ("", 2, 4, "other"),
        ("", 0, 1, "other"),
    ],
)
def test_dim_kind_from_name(name: str, axis: int, rank: int, kind: str) -> None:
    assert dim_kind(name, axis, rank) == kind


def test_reflect_pad_on_a_dynamic_dim_is_verified_by_default() -> None:
    result = eqsat.optimize(reflect_pad(4))
    verification = result.report.verification
    assert verification.ok
    assert verification.input_shapes == {"x": (2, 16)}  # batch 2, unnamed dim 16 ...
    assert verification.assignments == ({"x": (2, 16)}, {"x": (3, 32)})  # ... and a second size of each
    assert "inputs x:2x16 and x:3x32" in verification.summary()


def test_ladder_climbs_until_onnxruntime_runs_the_original() -> None:
    report = verify(reflect_pad(20), reflect_pad(20))  # 16 is too short for a reflect pad of 20
    assert report.ok and report.input_shapes == {"x": (2, 32)} and report.runtime == "onnxruntime"
    assert report.assignments == ({"x": (2, 32)}, {"x": (3, 64)})
    report = verify(rows_of(64), rows_of(64))  # 2 x 32 is one row of 64; 3 x 64 three
    assert report.ok and report.assignments == ({"x": (2, 32)}, {"x": (3, 64)})


def test_a_failure_names_the_inputs_it_ran_on() -> None:
    negated = model([node("Neg", ["x"], "y")], [("x", F32, ["batch", "T"])])
    relu = model([node("Relu", ["x"], "y")], [("x", F32, ["batch", "T"])])
    summary = verify(relu, negated).summary()
    assert summary.startswith("verification failed on output 'y'") and " on inputs x:2x16 at [" in summary


def test_a_size_the_original_refuses_is_bad_input() -> None:
    with pytest.raises(BadInputError, match=r"^in\.onnx: cannot be verified, no runtime runs it .*--no-verify"):
        verify(rows_of(16), rows_of(16), source="in.onnx", input_shapes={"x": (1, 1)})


def test_model_that_never_runs_is_not_verified_and_names_the_sizes_tried() -> None:
    report = verify(rows_of(20), rows_of(20), source="in.onnx")  # no size of the ladder is a multiple of 20
    assert report.ok and not report.verified and report.outputs == ()
    summary = report.summary()
    assert summary.startswith("not verified: no runtime runs the original on the inputs drawn") and "\n" not in summary
    for size in ("x:2x16", "x:2x32", "x:2x64", "x:2x224", "x:2x512", "x:1x512"):  # batch 1 only as a last resort
        assert size in summary
    with pytest.raises(BadInputError) as caught:  # --strict refuses, as before
        verify(rows_of(20), rows_of(20), source="in.onnx", strict=True)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("in.onnx: cannot be verified")
    for size in ("x:2x16", "x:2x32", "x:2x64", "x:2x224", "x:2x512"):
        assert size in message
    assert "--input-shape NAME:D0,D1,..." in message and "--inputs FILE.npz" in message and "--no-verify" in message


def test_batch_dim_is_two_and_a_dim_param_has_one_size_everywhere() -> None:
    m = model([node("Add", ["a", "b"], "y")], [("a", F32, ["N", "seq", 4]), ("b", F32, ["N", "seq", 4])])
    feeds = make_inputs(m)
    assert feeds["a"].shape == feeds["b"].shape == (2, 16, 4)
    assert verify(m, m).assignments == ({"a": (2, 16, 4), "b": (2, 16, 4)}, {"a": (3, 32, 4), "b": (3, 32, 4)})
    report = verify(m, m, input_shapes={"a": (2, 8, 4)})  # binds N=2, seq=8 for b too
    assert report.ok and report.input_shapes == {"a": (2, 8, 4), "b": (2, 8, 4)}


def test_static_models_get_one_candidate() -> None:
    m = model([node("Relu", ["x"], "y")], [("x", F32, [2, 3])])
    assert list(candidate_shapes(m)) == [{"x": (2, 3)}]


def test_integer_inputs_stay_in_range_with_dynamic_dims() -> None:
    table = np.random.default_rng(0).standard_normal((7, 4)).astype(np.float32)
    m = model(
        [
            node("Gather", ["table", "ids"], "e", axis=0),
            node("Cast", ["attention_mask"], "mf", to=F32),
            node("Unsqueeze", ["mf", "last"], "m1"),
            node("Mul", ["e", "m1"], "y"),
        ],
        [("ids", I64, ["batch", "sequence"]), ("attention_mask", I64, ["batch", "sequence"])],
        ["y"],
        {"table": table, "last": np.array([-1], np.int64)},
    )
    feeds = make_inputs(m)
    assert feeds["ids"].shape == (2, 16) and feeds["ids"].max() < 7
    np.testing.assert_array_equal(feeds["attention_mask"], np.ones((2, 16), np.int64))
    assert verify(m, m).ok


def test_scalar_sample_rate_is_16000() -> None:
    m = model(
        [node("Cast", ["sr"], "f", to=F32), node("Mul", ["x", "f"], "y")], [("x", F32, ["batch", "T"]), ("sr", I64, [])]
    )
    assert int(make_inputs(m)["sr"]) == 16000


# ---- the user's shapes and arrays ----------------------------------------------------------------------


def test_given_arrays_are_fed_as_they_are() -> None:
    x = np.arange(40, dtype=np.float64).reshape(1, 40)  # float64: cast to the input's float32
    result = eqsat.optimize(reflect_pad(20), inputs={"x": x})
    assert result.report.verification.ok and result.report.verification.input_shapes == {"x": (1, 40)}


@pytest.mark.parametrize(
    "given, problem",
    [
        ({"input_shapes": {"z": (1, 40)}}, "--input-shape: the model has no input named 'z' (its inputs: x)"),
        ({"input_shapes": {"x": (40,)}}, "--input-shape: input 'x' has rank 2, got shape 40"),
        ({"inputs": {"x": np.zeros((1, 2, 40), np.float32)}}, "--inputs: input 'x' has rank 2, got shape 1x2x40"),
        ({"inputs": {"x": np.zeros((1, 40), np.int64)}}, "--inputs: input 'x' is float32, the array is int64"),
        ({"inputs": {"x": np.zeros((1, 40), bool)}}, "--inputs: input 'x' is float32, the array is bool"),
    ],
)
def test_given_shapes_and_arrays_must_fit_the_model(given: dict, problem: str) -> None:
    with pytest.raises(BadInputError, match="^in.onnx: " + problem.replace("(", r"\(").replace(")", r"\)")):
        verify(reflect_pad(20), reflect_pad(20), source="in.onnx", **given)


def test_bisect_verifies_on_the_same_inputs() -> None:
    found = find_culprit(reflect_pad(20), input_shapes={"x": (1, 40)})
    assert not found.failed and "x:1x40" in found.probes[0].detail


def test_bisect_probes_use_the_outputs_of_the_original_they_are_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from eqsat.check import verify as verification

    reference = expected_outputs(reflect_pad(20))
    monkeypatch.setattr(verification, "_Search", None)  # the original is never run again
    found = find_culprit(reflect_pad(20), reference=reference)
    assert not found.failed and "inputs x:2x32 and x:3x64" in found.probes[0].detail


def test_default_verification_never_sizes_a_dynamic_dim_at_one_alone() -> None:
    m = model(
        [node("Add", ["a", "b"], "s"), node("ReduceSum", ["s"], "y", keepdims=0)],
        [("a", F32, ["batch", "seq", 4]), ("b", F32, [None, "seq", 4])],
        [("y", F32, [])],
    )
    report = verify(m, m)
    first, second = report.assignments
    for name in ("a", "b"):
        assert 1 not in first[name][:2] and 1 not in second[name][:2]
        assert first[name][0] != second[name][0] and first[name][1] != second[name][1]  # two sizes each
    assert first == {"a": (2, 16, 4), "b": (2, 16, 4)} and second == {"a": (3, 32, 4), "b": (3, 32, 4)}
    assert report.to_dict()["assignments"] == [{"a": [2, 16, 4], "b": [2, 16, 4]}, {"a": [3, 32, 4], "b": [3, 32, 4]}]


def _sum_of_rows(rows: int) -> onnx.ModelProto:
    """y = x[0] + ... + x[rows - 1]: the sum over a dynamic batch of x [batch, features] when it has `rows`."""
    picks = [node("Gather", ["x", f"i{k}"], f"r{k}", axis=0) for k in range(rows)]
    total = [node("Sum", [f"r{k}" for k in range(rows)], "y")]
    return model(
        picks + total,
        [("x", F32, ["batch", "features"])],
        [("y", F32, ["features"])],
        {f"i{k}": np.array(k, np.int64) for k in range(rows)},
    )


def test_a_dim_taken_as_one_or_as_two_is_caught() -> None:
    batch_sum = model(
        [node("ReduceSum", ["x", "zero"], "y", keepdims=0)],
        [("x", F32, ["batch", "features"])],
        [("y", F32, ["features"])],
        {"zero": np.array([0], np.int64)},
    )
    assert verify(batch_sum, batch_sum).ok
    taken_as_one = verify(batch_sum, _sum_of_rows(1)).summary()  # right only at batch 1: sized 2, it fails
    assert taken_as_one.startswith("verification failed on output 'y'") and " on inputs x:2x16 " in taken_as_one
    taken_as_two = verify(batch_sum, _sum_of_rows(2)).summary()  # right at batch 2: the second size, 3, catches it
    assert taken_as_two.startswith("verification failed on output 'y'") and " on inputs x:3x32 " in taken_as_two


def test_batch_one_only_when_nothing_larger_runs() -> None:
    """A Reshape that hard-codes batch 1 runs at no other batch: verified at 1, and the report says so."""
    m = model(
        [node("Reshape", ["x", "shape"], "y")],
        [("x", F32, ["batch", 8])],
        [("y", F32, [1, 2, 4])],
        {"shape": np.array([1, 2, 4], np.int64)},
    )
    report = verify(m, m)
    assert report.ok and report.assignments == ({"x": (1, 8)},)
    assert "batch-like dims sized 1: the original runs on no larger batch" in report.summary()


def test_a_second_size_the_original_refuses_is_noted() -> None:
    """A dim the model needs at exactly 16: checked at one size, and the report says why."""
    m = model(
        [node("Reshape", ["x", "shape"], "y")],
        [("x", F32, [2, "t"])],
        [("y", F32, [32])],
        {"shape": np.array([32], np.int64)},
    )
    report = verify(m, m)
    assert report.ok and report.assignments == ({"x": (2, 16)},)
    assert "checked at one size only: the original runs on no second sizes (x:2x32; x:2x64" in report.summary()


@pytest.mark.slow  # CLI runs: a whole optimize each
def test_cli_input_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, out, js = save(rows_of(20), tmp_path / "m.onnx"), tmp_path / "o.onnx", tmp_path / "r.json"
    assert main(["optimize", str(path), "-o", str(out), "--input-shape", "x:1,40", "--report-json", str(js)]) == 0
    assert json.loads(js.read_text())["verification"]["input_shapes"] == {"x": [1, 40]}
    assert main(["optimize", str(path), "-o", str(out), "--input-shape", "x:1,8"]) == 2  # not 20 wide rows
    assert "cannot be verified" in one_line_error(capsys)
    assert main(["optimize", str(path), "-o", str(out), "--input-shape", "y:1,8"]) == 2
    assert "no input named 'y'" in one_line_error(capsys)
    assert main(["optimize", str(path), "-o", str(out), "--input-shape", "x:1,40", "--input-shape", "x:1,60"]) == 2
    assert "--input-shape: input 'x' is given two shapes: 1,40 and 1,60" in one_line_error(capsys)
    with pytest.raises(SystemExit) as bad_syntax:
        main(["optimize", str(path), "-o", str(out), "--input-shape", "x=1,40"])
    assert bad_syntax.value.code == 2


def test_cli_inputs_npz(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, out, js = save(rows_of(20), tmp_path / "m.onnx"), tmp_path / "o.onnx", tmp_path / "r.json"
    good, wrong = tmp_path / "good.npz", tmp_path / "wrong.npz"
    np.savez(good, x=np.ones((1, 60), np.float32))  # the model runs on no size of the ladder
    np.savez(wrong, input=np.ones((1, 48), np.float32))
    assert main(["optimize", str(path), "-o", str(out), "--inputs", str(good), "--report-json", str(js)]) == 0
    assert json.loads(js.read_text())["verification"]["input_shapes"] == {"x": [1, 60]}
    out.unlink()
    assert main(["optimize", str(path), "-o", str(out), "--inputs", str(wrong)]) == 2
    assert "--inputs: the model has no input named 'input' (its inputs: x)" in one_line_error(capsys)
    assert not out.exists()
    assert main(["optimize", str(path), "-o", str(out), "--inputs", str(tmp_path / "missing.npz")]) == 2
    assert "missing.npz: --inputs: no such file" in one_line_error(capsys)


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"not a zip", "not a readable .npz file"),
        (None, "holds a single array"),
    ],
)
def test_load_npz_rejects_other_files(tmp_path: Path, content: bytes | None, problem: str) -> None:
    path = tmp_path / "bad.npz"
    if content is None:
        with open(path, "wb") as fh:
            np.save(fh, np.zeros(3))
    else:
        path.write_bytes(content)
    with pytest.raises(BadInputError, match=problem):
        load_npz(path)


# ---- static input dims written into the model ----------------------------------------------------------


def flatten_by_shape() -> onnx.ModelProto:
    """y = Reshape(x, [Shape(x)[0] * Shape(x)[1], -1]): folds to a constant target once x is static."""
    return model(
        [
            node("Shape", ["x"], "s"),
            node("Slice", ["s", "zero", "two"], "s01"),
            node("ReduceProd", ["s01"], "rows", keepdims=1),
            node("Concat", ["rows", "minus1"], "target", axis=0),
            node("Reshape", ["x", "target"], "y"),
        ],
        [("x", F32, ["batch", "C", "H", "W"])],
        ["y"],
        {"zero": np.array([0], np.int64), "two": np.array([2], np.int64), "minus1": np.array([-1], np.int64)},
    )


@pytest.mark.slow  # CLI runs: a whole optimize each
def test_cli_fix_input_shape_makes_the_input_static_and_folds(tmp_path: Path) -> None:
    path, out = save(flatten_by_shape(), tmp_path / "m.onnx"), tmp_path / "o.onnx"
    assert main(["optimize", str(path), "-o", str(out), "--fix-input-shape", "x:2,3,4,5"]) == 0
    written = onnx.load(out)
    dims = [d.dim_value for d in written.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [2, 3, 4, 5]
    assert [n.op_type for n in written.graph.node] == ["Reshape"]
    assert onnx.numpy_helper.to_array(written.graph.initializer[0]).tolist() == [6, -1]
    dynamic = eqsat.optimize(flatten_by_shape()).proto  # without the fix the shape computation stays
    assert [n.op_type for n in dynamic.graph.node] == ["Shape", "Slice", "ReduceProd", "Concat", "Reshape"]


def test_fix_input_shape_binds_the_dim_param_everywhere() -> None:
    m = model(
        [node("Add", ["a", "b"], "y")],
        [("a", F32, ["N", "seq", 4]), ("b", F32, ["N", "seq", 4])],
        [("y", F32, ["N", "seq", 4])],
    )
    fixed = fix_input_shapes(m, {"a": (2, 8, 4)})
    for value in (*fixed.graph.input, *fixed.graph.output):
        assert [d.dim_value for d in value.type.tensor_type.shape.dim] == [2, 8, 4]
    assert m.graph.input[1].type.tensor_type.shape.dim[0].dim_param == "N"  # the original is left alone


@pytest.mark.parametrize(
    "flag, problem",
    [
        ("z:1,2,3,4", "--fix-input-shape: the model has no input named 'z' (its inputs: x)"),
        ("x:1,2", "--fix-input-shape: input 'x' has rank 4, got shape 1x2"),
    ],
)
def test_cli_fix_input_shape_rejects_unknown_inputs_and_ranks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, problem: str
) -> None:
    path, out = save(flatten_by_shape(), tmp_path / "m.onnx"), tmp_path / "o.onnx"
    assert main(["optimize", str(path), "-o", str(out), "--fix-input-shape", flag]) == 2
    assert problem in one_line_error(capsys)
    assert not out.exists()


def test_question_mark_dims_are_unnamed() -> None:
    """paddle2onnx writes "?" for every unknown dim: not one name shared by height and width."""
    m = model([node("Relu", ["x"], "y")], [("x", F32, [-1, 3, "?", "?"])], [("y", F32, [-1, 3, "?", "?"])])
    assert [
        d.dim_value for d in fix_input_shapes(m, {"x": (1, 3, 48, 192)}).graph.input[0].type.tensor_type.shape.dim
    ] == [1, 3, 48, 192]
    assert verify(m, m, input_shapes={"x": (1, 3, 48, 192)}).ok
    assert make_inputs(m)["x"].shape == (2, 3, 16, 16)


def test_fix_input_shape_rejects_two_sizes_for_one_dim_param() -> None:
    m = model([node("Add", ["a", "b"], "y")], [("a", F32, ["N", 4]), ("b", F32, ["N", 4])])
    with pytest.raises(BadInputError, match="dim 'N' is given sizes 2 and 3"):
        fix_input_shapes(m, {"a": (2, 4), "b": (3, 4)})
