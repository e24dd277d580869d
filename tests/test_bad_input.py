"""Bad input through the CLI, in-process: exit code 2, one `eqsat: error:` line naming the file (and the node
where there is one), no traceback, nothing written. Also `--version` and `info`."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Callable

import numpy as np
import onnx.helper as oh
import pytest
from onnx import TensorProto

import eqsat
from eqsat.ui.cli import main

F32 = TensorProto.FLOAT
X, Y = ("x", F32, [2, 3]), ("y", F32, [2, 3])
MakeInput = Callable[[Path, Callable[..., Path], Path], Path]


def _missing(tmp: Path, model_file, models_dir: Path) -> Path:
    return tmp / "missing.onnx"


def _directory(tmp: Path, model_file, models_dir: Path) -> Path:
    (tmp / "folder.onnx").mkdir()
    return tmp / "folder.onnx"


def _empty(tmp: Path, model_file, models_dir: Path) -> Path:
    (tmp / "empty.onnx").write_bytes(b"")
    return tmp / "empty.onnx"


def _random_bytes(tmp: Path, model_file, models_dir: Path) -> Path:
    (tmp / "noise.onnx").write_bytes(np.random.default_rng(0).bytes(4096))
    return tmp / "noise.onnx"


def _truncated(tmp: Path, model_file, models_dir: Path) -> Path:
    data = min(models_dir.glob("*.onnx"), key=lambda p: p.stat().st_size).read_bytes()
    (tmp / "truncated.onnx").write_bytes(data[: len(data) // 2])
    return tmp / "truncated.onnx"


def _unknown_attribute(tmp: Path, model_file, models_dir: Path) -> Path:
    return model_file([oh.make_node("Relu", ["x"], ["y"], name="relu_foo", foo=3)], [X], [Y])


def _wrong_input_count(tmp: Path, model_file, models_dir: Path) -> Path:
    return model_file([oh.make_node("Add", ["x"], ["y"], name="lonely_add")], [X], [Y])


def _type_mismatch(tmp: Path, model_file, models_dir: Path) -> Path:
    """Only the full check (strict type inference) sees this one."""
    return model_file(
        [oh.make_node("Add", ["x", "ints"], ["y"], name="mixed_add")], [X], [Y], {"ints": np.ones((2, 3), np.int64)}
    )


def _cycle(tmp: Path, model_file, models_dir: Path) -> Path:
    return model_file(
        [
            oh.make_node("Add", ["x", "b"], ["a"], name="n1"),
            oh.make_node("Relu", ["a"], ["b"], name="n2"),
            oh.make_node("Identity", ["a"], ["y"], name="n3"),
        ],
        [X],
        [Y],
    )


def _undefined_input(tmp: Path, model_file, models_dir: Path) -> Path:
    return model_file([oh.make_node("Add", ["x", "ghost"], ["y"], name="adder")], [X], [Y])


def _valid(tmp: Path, model_file, models_dir: Path) -> Path:
    return model_file([oh.make_node("Relu", ["x"], ["y"])], [X], [Y], name="valid.onnx")


INPUT_CASES = [  # how the input is made; what the error line says after the input file's name
    pytest.param(_missing, r"no such file", id="missing-file"),
    pytest.param(_directory, r"is a directory", id="directory"),
    pytest.param(_empty, r"is empty", id="empty-file"),
    pytest.param(_random_bytes, r"is not an ONNX protobuf", id="random-bytes"),
    pytest.param(_truncated, r"is not an ONNX protobuf or is truncated", id="truncated-model"),
    pytest.param(
        _unknown_attribute,
        r"node 'relu_foo' \(Relu\): fails the ONNX checker: Unrecognized attribute: foo",
        id="unknown-attribute",
    ),
    pytest.param(
        _wrong_input_count, r"node 'lonely_add' \(Add\): fails the ONNX checker: .*input size 1", id="wrong-input-count"
    ),
    pytest.param(
        _type_mismatch, r"node 'mixed_add' \(Add\): fails the ONNX checker: .*inconsistent type", id="type-mismatch"
    ),
    pytest.param(_cycle, r"node 'n[12]' \((Add|Relu)\): the graph has a cycle", id="cycle"),
    pytest.param(_undefined_input, r"node 'adder' \(Add\): input 'ghost' is not defined", id="undefined-input"),
]
OUTPUT_CASES = [  # output path relative to tmp_path (where out/ is a directory); what the line says after it
    pytest.param("missing_dir/out.onnx", r"cannot be written: No such file or directory", id="output-dir-missing"),
    pytest.param("valid.onnx/out.onnx", r"cannot be written: Not a directory", id="output-parent-is-a-file"),
    pytest.param("out", r"is a folder: give the optimized model's file name", id="output-is-a-directory"),
]


def _files(root: Path) -> set[Path]:
    return set(root.rglob("*"))


def _run_and_check(
    argv: list[str],
    named: Path,
    says: str,
    tmp: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Run the CLI; expect exit code 2, one error line `eqsat: error: <named>: <says>`, nothing written."""
    before = _files(tmp)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert re.match(re.escape(f"eqsat: error: {named}: ") + says, lines[0]), lines[0]
    assert "Traceback" not in out + err
    # what would reach stderr outside pytest (which captures log records itself)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info], caplog.text
    assert _files(tmp) == before, "a file was written"


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    """tmp_path with an existing, empty out/ directory for outputs."""
    (tmp_path / "out").mkdir()
    return tmp_path


@pytest.mark.parametrize(("make_input", "says"), INPUT_CASES)
def test_bad_input_file(
    make_input: MakeInput,
    says: str,
    tmp: Path,
    model_file,
    models_dir: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = make_input(tmp, model_file, models_dir)
    _run_and_check(["optimize", str(source), "-o", str(tmp / "out" / "out.onnx")], source, says, tmp, capsys, caplog)


@pytest.mark.parametrize(("make_input", "says"), INPUT_CASES)
def test_info_rejects_bad_input_file(
    make_input: MakeInput,
    says: str,
    tmp: Path,
    model_file,
    models_dir: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = make_input(tmp, model_file, models_dir)
    _run_and_check(["info", str(source)], source, says, tmp, capsys, caplog)


@pytest.mark.parametrize(("output", "says"), OUTPUT_CASES)
def test_unwritable_output(
    output: str,
    says: str,
    tmp: Path,
    model_file,
    models_dir: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = _valid(tmp, model_file, models_dir)
    _run_and_check(["optimize", str(source), "-o", str(tmp / output)], tmp / output, says, tmp, capsys, caplog)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"eqsat {eqsat.__version__}"


def test_info(bundled_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import onnx

    proto = onnx.load(bundled_model)
    assert main(["info", str(bundled_model)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert f"nodes      {len(proto.graph.node)};" in out
    for value in [*proto.graph.input, *proto.graph.output]:
        assert re.search(rf"^(input|output) +{re.escape(value.name)}: ", out, re.MULTILINE), value.name
    counted = re.findall(r"^  \S+ +(\d+)$", out, re.MULTILINE)
    assert sum(map(int, counted)) == len(proto.graph.node)
