"""The command's conventions next to onnxsim and onnxslim: `eqsat optimize IN OUT`, aliases of their flags,
--force to write over the input, a folder of models with a process pool; and the Python API saying what the
CLI says (`Result.report.to_text()` is the `--report` text of the same run)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import onnx
import pytest

import eqsat.pipeline
from eqsat.ui import cli
from eqsat.ui.cli import main
from tests.conftest import MODELS_DIR
from tests.test_display import _sandwich

MODEL = MODELS_DIR / "nhwc_tfstyle_resnet_legacy.onnx"


def test_output_as_a_positional_argument(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.onnx"
    assert main(["optimize", str(MODEL), str(out)]) == 0
    onnx.checker.check_model(onnx.load(out))
    assert main(["optimize", str(MODEL), str(out), "-o", str(out)]) == 0  # both, agreeing
    capsys.readouterr()
    assert main(["optimize", str(MODEL), str(out), "-o", str(tmp_path / "other.onnx")]) == 2
    assert "two outputs given" in capsys.readouterr().err
    assert main(["optimize", str(MODEL)]) == 2
    assert "no output given" in capsys.readouterr().err


def test_writing_over_the_input_needs_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "m.onnx"
    shutil.copy(MODEL, model)
    before = model.read_bytes()
    assert main(["optimize", str(model), str(model)]) == 2
    assert "--force" in capsys.readouterr().err and model.read_bytes() == before
    assert main(["optimize", str(model), "-o", str(model), "--force"]) == 0
    assert model.read_bytes() != before


def test_the_current_folder_as_the_output_of_one_model_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`eqsat optimize m.onnx .`: a clear error before any work (a named folder: tests/test_bad_input.py)."""
    monkeypatch.chdir(tmp_path)
    assert main(["optimize", str(MODEL), "."]) == 2
    err = capsys.readouterr().err
    assert ".: is a folder" in err and "internal error" not in err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("over", ["input", "output"])
def test_the_json_report_never_overwrites_a_model(
    over: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    shutil.copy(MODEL, model)
    before = model.read_bytes()
    report = model if over == "input" else out
    assert main(["optimize", str(model), "-o", str(out), "--report-json", str(report)]) == 2
    assert "the JSON report would overwrite the model" in capsys.readouterr().err
    assert model.read_bytes() == before and not out.exists()


def test_an_opset_older_than_the_models_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """eqsat only upgrades: --opset below the model's is a clear error (it was silently ignored), 0 a usage error."""
    assert main(["optimize", str(MODEL), str(tmp_path / "o.onnx"), "--opset", "7"]) == 2
    assert "opset 7 is older than the model's opset" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["optimize", "a.onnx", "b.onnx", "--opset", "0"])
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["check-rules", "--examples", "0"])
    assert not (tmp_path / "o.onnx").exists()


@pytest.mark.parametrize("alias", ["--skip-verify", "--no-check", "--no-verify"])
def test_aliases_of_no_verify(alias: str) -> None:
    args = cli.build_parser().parse_args(["optimize", "a.onnx", "b.onnx", alias])
    assert args.verify is False


def test_overwrite_input_shape_is_fix_input_shape() -> None:
    args = cli.build_parser().parse_args(["optimize", "a.onnx", "b.onnx", "--overwrite-input-shape", "x:1,3"])
    assert args.fix_input_shape == [("x", (1, 3))]


def test_the_api_report_is_the_cli_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """For the same run, `result.report.to_text()` is exactly what `--report` prints."""
    seen = []
    real = eqsat.pipeline.optimize

    def keep(*args, **kwargs):
        seen.append(real(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(eqsat.pipeline, "optimize", keep)
    js = tmp_path / "r.json"
    assert main(["optimize", str(MODEL), str(tmp_path / "o.onnx"), "--report", "--report-json", str(js)]) == 0
    (result,) = seen
    assert capsys.readouterr().out == result.report.to_text() + "\n"
    assert json.loads(js.read_text()) == json.loads(json.dumps(result.report.to_dict(), sort_keys=True))
    text = result.report.to_text()
    assert "est. cost (cpu)" in text and "-" != text.split("est. cost (cpu)")[1].split()[0]
    assert "nodes folded" in text  # the per-op table, without notebooks' display.add_breakdown


def test_a_python_result_shows_the_per_op_table() -> None:
    text = eqsat.optimize(_sandwich()).report.to_text()
    assert "nodes folded" in text and "Transpose" in text.split("nodes folded")[1]


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    shutil.copy(MODEL, folder / "a.onnx")
    onnx.save(_sandwich(), folder / "b.onnx")
    (folder / "notes.txt").write_text("not a model")
    return folder


def test_a_folder_of_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder, out = _folder(tmp_path), tmp_path / "out"
    js = tmp_path / "r.json"
    assert main(["optimize", str(folder), "-o", str(out), "--jobs", "2", "--report-json", str(js)]) == 0
    text = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["a.onnx", "b.onnx"]
    lines = text.splitlines()
    assert sum(line.startswith(("a.onnx: ", "b.onnx: ")) and " ops (" in line for line in lines) == 2
    assert "2 models in" in text and "2 written, 0 failed" in text
    table = lines[lines.index(next(line for line in lines if line.startswith("2 models in"))) + 1 :]
    assert table[0].split()[:3] == ["model", "ops", "before"] and len(table) == 3
    data = json.loads(js.read_text())
    assert set(data["models"]) == {"a.onnx", "b.onnx"} and data["models"]["a.onnx"]["headline"]["ops_after"] > 0


def test_a_folder_reports_a_broken_model_and_goes_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder, out = _folder(tmp_path), tmp_path / "out"
    (folder / "broken.onnx").write_bytes(b"not onnx")
    assert main(["optimize", str(folder), str(out)]) == 2
    text = capsys.readouterr().out
    assert "broken.onnx: error:" in text and "2 written, 1 failed" in text
    assert sorted(p.name for p in out.iterdir()) == ["a.onnx", "b.onnx"]


def test_a_folder_is_not_written_over_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _folder(tmp_path)
    assert main(["optimize", str(folder), "-o", str(folder)]) == 2
    assert "--force" in capsys.readouterr().err


def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    """`eqsat info m.onnx | head -1`: the reader goes away; no internal error, no traceback on stderr. The
    reader here (`true`) leaves before the command writes anything, so the write always meets a closed pipe."""
    import subprocess
    import sys

    model = Path(__file__).parent / "models" / "nhwc_tfstyle_resnet_legacy.onnx"
    command = f"{sys.executable} -m eqsat info {model} | true"
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True)
    assert done.stderr == "", done.stderr
