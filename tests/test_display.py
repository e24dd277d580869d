"""eqsat.view.display: pictures (with graphviz's `dot`, with a stand-in `dot`, and without any), report and cost
tables, e-graph statistics, the Jupyter hooks on Report/Result/Session, the CLI report and progress line."""

from __future__ import annotations

import io as stdio
import json
import shutil
import stat
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto as TP

import eqsat
from eqsat.view import display
from eqsat.ui.cli import main
from eqsat.session import saturate
from tests.conftest import MODELS_DIR, build_model

F = TP.FLOAT
REAL_DOT = shutil.which("dot")


def _sandwich() -> onnx.ModelProto:
    """Transpose -> Relu -> inverse Transpose next to a Mul by one: eqsat leaves one Relu."""
    nodes = [
        oh.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1], name="t_in"),
        oh.make_node("Relu", ["t"], ["r"], name="relu"),
        oh.make_node("Transpose", ["r"], ["u"], perm=[0, 3, 1, 2], name="t_out"),
        oh.make_node("Mul", ["u", "one"], ["y"], name="times_one"),
    ]
    return build_model(nodes, [("x", F, [1, 2, 3, 4])], [("y", F, [1, 2, 3, 4])], {"one": np.ones((1,), np.float32)})


@pytest.fixture(scope="module")
def result() -> eqsat.Result:
    return eqsat.optimize(_sandwich())


@pytest.fixture
def no_dot(monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "dot" else real(name, *a, **k))


@pytest.fixture
def fake_dot(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A stand-in `dot` that answers any DOT text with a small SVG naming how many bytes it read."""
    script = tmp_path / "dot"
    script.write_text(
        f"#!{sys.executable}\nimport sys\ntext = sys.stdin.read()\n"
        "print('<?xml version=\"1.0\"?>')\n"
        "print(f'<svg xmlns=\"http://www.w3.org/2000/svg\"><text>fake {len(text)}</text></svg>')\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: str(script) if name == "dot" else real(name, *a, **k))
    return script


def test_metadata_keys_match_lowering() -> None:
    from eqsat.engine.lower import PROVENANCE_KEY, RULES_KEY

    assert (display.PROVENANCE_KEY, display.RULES_KEY) == (PROVENANCE_KEY, RULES_KEY)


def test_changed_nodes_follow_the_metadata() -> None:
    nodes = [
        oh.make_node("Relu", ["x"], ["a"], name="kept"),
        oh.make_node("Relu", ["a"], ["b"], name="rewritten"),
        oh.make_node("Relu", ["b"], ["y"], name="new"),
    ]
    for node, meta in zip(nodes, [{"eqsat.from": "kept"}, {"eqsat.from": "r", "eqsat.rules": "relu-merge"}, {}]):
        for key, value in meta.items():
            entry = node.metadata_props.add()
            entry.key, entry.value = key, value
    model = build_model(nodes, [("x", F, [2])], [("y", F, [2])])
    assert display.changed_nodes(model) == [False, True, True]
    dot = display.graph_dot(model)
    assert dot.count(display._CHANGED_FILL) == 2 and "Relu" in dot
    # a model eqsat never touched has no provenance at all: nothing is highlighted
    plain = build_model([oh.make_node("Relu", ["x"], ["y"])], [("x", F, [2])], [("y", F, [2])])
    assert display._CHANGED_FILL not in display.graph_dot(plain)


def test_picture_without_dot_is_a_listing(result: eqsat.Result, no_dot: None) -> None:
    pic = display.picture(result)
    assert pic.svg is None and pic._repr_svg_() is None
    page = pic._repr_html_()
    assert "not installed" in page and "<table" in page and "Relu" in page
    assert "Relu" in repr(pic) and "inputs:" in repr(pic)
    both = display.compare(result)
    assert both.svg is None
    page = both._repr_html_()
    assert "before" in page and "after" in page and "Transpose" in page
    text = repr(both)
    assert text.startswith("before: 4 nodes") and "after: 1 nodes" in text


def test_picture_with_a_stand_in_dot(result: eqsat.Result, fake_dot: Path, tmp_path: Path) -> None:
    pic = display.compare(result)
    assert pic.svg is not None and pic.svg.startswith("<svg") and f"fake {len(pic.dot)}" in pic.svg
    assert pic._repr_svg_() == pic.svg and pic._repr_html_() is None  # Jupyter shows the SVG only
    pic.save(tmp_path / "c.svg")
    pic.save(tmp_path / "c.dot")
    assert (tmp_path / "c.svg").read_text().startswith("<svg") and "cluster_b" in (tmp_path / "c.dot").read_text()
    assert "<svg" in result._repr_html_()


@pytest.mark.skipif(REAL_DOT is None, reason="graphviz's dot is not installed: the stand-in test covers the path")
def test_picture_with_graphviz(result: eqsat.Result) -> None:
    svg = display.compare(result).svg
    assert svg is not None and svg.startswith("<svg") and "Relu" in svg and display._CHANGED_FILL in svg
    assert "Input x" in display.egraph_picture(result.session, chosen=result).svg


def test_compare_marks_what_changed(result: eqsat.Result) -> None:
    dot = display.compare(result).dot
    before, after = dot.split("subgraph cluster_a")
    # every input node was rewritten away or merged: all shaded; the output's one Relu came from rules
    assert before.count("dashed") == 4 and after.count(display._CHANGED_FILL) == 1
    assert "4 nodes" in before and "1 nodes (1 changed by rules" in after
    with pytest.raises(ValueError):
        display.compare(eqsat.Result(result.proto, result.report))  # no session: say what to pass instead


def test_large_graphs_are_listed_not_drawn(result: eqsat.Result, fake_dot: Path, monkeypatch) -> None:
    monkeypatch.setattr(display, "MAX_DRAWN_NODES", 2)
    pic = display.compare(result)
    assert pic.svg is None and "listed, not drawn" in pic._repr_html_()


def test_breakdown_costs_before_and_after(result: eqsat.Result) -> None:
    b = display.add_breakdown(result)
    assert b is result.report.breakdown and display.add_breakdown(result) is b
    assert b.target == "cpu" and b.unit == "s"
    assert b.cost_after == pytest.approx(result.report.extraction.dag_cost)
    assert b.cost_before == pytest.approx(result.session.input_extraction().dag_cost(result.cost_model))
    assert b.cost_before > b.cost_after > 0
    ops = {o.op: o for o in b.ops}
    assert ops["Transpose"].nodes_before == 2 and ops["Transpose"].nodes_after == 0
    assert ops["Relu"].nodes_after == 1
    assert sum(o.cost_after for o in b.ops) == pytest.approx(b.cost_after)
    assert sum(o.cost_before for o in b.ops) == pytest.approx(b.cost_before)
    assert b.rules_in_output and all(n >= 1 for n in b.rules_in_output.values())
    assert "transpose-merge" in b.rules_in_output or "transpose-sink-unary" in b.rules_in_output
    assert "Transpose" in b.to_text() and "Transpose" in b._repr_html_()
    data = json.loads(json.dumps(result.report.to_dict()))
    assert data["breakdown"]["cost_before"] == pytest.approx(b.cost_before)
    assert {o["op"] for o in data["breakdown"]["ops"]} >= {"Transpose", "Relu"}


def test_breakdown_of_a_custom_cost_function() -> None:
    session = saturate(_sandwich())
    custom = session.extract(cost=lambda egraph, node: 1.0, extractor="greedy-dag")
    b = display.breakdown(custom)
    assert b.target is None and b.unit == "" and b.cost_before is not None
    assert "custom cost" in b.to_text()


def test_report_text_and_html(result: eqsat.Result) -> None:
    display.add_breakdown(result)
    report = result.report
    text = report.to_text()
    for expected in (
        "eqsat report for",
        "before",
        "after",
        "nodes",
        "est. cost (cpu)",
        "saturation",
        "extraction",
        "verification",
        "rule",
        "matches",
        "in output",
        "phase",
        "total",
    ):
        assert expected in text, expected
    fired = report.saturation.rules_fired
    assert all(name in text for name in fired)
    page = report._repr_html_()
    for expected in ("<table", "rules fired", "time per phase", "estimated cost per op", "sizes"):
        assert expected in page, expected
    assert all(name in page for name in fired)
    page = result._repr_html_()
    assert "before / after" in page and "rules fired" in page


def test_report_without_engine_data() -> None:
    from collections import Counter

    from eqsat.report import Report

    report = Report("m.onnx", Counter({"Relu": 2}), Counter({"Relu": 1}), {"load": 0.01})
    assert "2 -> 1 ops" in report.to_text() and "rule" not in report.to_text()
    assert "<table" in report._repr_html_()


def test_session_and_egraph_stats() -> None:
    session = saturate(_sandwich())
    stats = display.egraph_stats(session)
    assert stats.enodes == session.egraph.num_nodes and sum(stats.per_op.values()) == stats.enodes
    assert stats.eclasses == len(session.egraph.classes) and stats.merged_classes >= 1
    assert set(stats.classes_per_op) == set(stats.per_op)
    assert "e-nodes per op" in session._repr_html_() and "Transpose" in session._repr_html_()
    assert "e-graph:" in stats.to_text() and stats.to_dict()["enodes"] == stats.enodes
    dot = display.egraph_dot(session.egraph)
    absent = {n.eclass for n in session.egraph.nodes if n.op == "Absent"}  # an omitted optional input: no box
    assert dot.count("subgraph cluster_c") == sum(1 for c in session.egraph.classes if c.nodes and c.id not in absent)
    assert "Absent" not in dot
    small = display.egraph_picture(session, max_nodes=1)
    assert small.svg is None and "e-nodes per op" in small._repr_html_()


def test_cli_report_is_a_table_and_stderr_stays_quiet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = MODELS_DIR / "nhwc_tfstyle_resnet_legacy.onnx"
    out, js = tmp_path / "o.onnx", tmp_path / "r.json"
    assert main(["optimize", str(model), "-o", str(out), "--report", "--report-json", str(js)]) == 0
    stdout, stderr = capsys.readouterr()
    assert stderr == ""  # no progress line: stderr is not a terminal here
    assert "est. cost (cpu)" in stdout and "matches" in stdout and "transpose-merge" in stdout
    data = json.loads(js.read_text())
    assert data["breakdown"]["cost_before"] > data["breakdown"]["cost_after"] > 0
    assert data["saturation"]["rules_fired"]["transpose-merge"] > 0 and "phases" in data
    assert main(["optimize", str(model), "-o", str(out)]) == 0
    stdout, stderr = capsys.readouterr()
    assert stderr == "" and stdout.count("\n") == 1  # the one-line summary, as before


class _Terminal(stdio.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TERM", raising=False)
    term = _Terminal()
    with display.Progress("m.onnx", term, delay=0.0, interval=0.01) as progress:
        progress("load")
        time.sleep(0.05)
        progress("saturate")
        time.sleep(0.05)
    text = term.getvalue()
    assert "\r" in text and "eqsat: m.onnx" in text and "load" in text and "saturate" in text
    assert text.endswith("\r") and text.rstrip("\r").split("\r")[-1].strip() == ""  # erased at the end
    quiet = stdio.StringIO()
    with display.Progress("m.onnx", quiet, delay=0.0, interval=0.01) as progress:
        progress("load")
        time.sleep(0.03)
    assert quiet.getvalue() == ""
    # a narrow terminal keeps the model, the current phase and the total; older phases go first
    line = progress.line(width=40)
    assert len(line) <= 40 and line.startswith("eqsat: m.onnx") and "load" in line
    progress("encode")
    assert "... > encode" in progress.line(width=48) and "load" not in progress.line(width=48)
    # a short run on a terminal prints nothing either (the line waits for `delay`)
    term = _Terminal()
    with display.Progress("m.onnx", term, delay=5.0) as progress:
        progress("load")
    assert term.getvalue() == ""


def test_optimize_reports_each_phase_to_progress() -> None:
    seen: list[str] = []
    eqsat.optimize(_sandwich(), progress=seen.append)
    assert seen == [
        "load",
        "fold",
        "install rules",
        "encode",
        "saturate",
        "decode",
        "extract",
        "lower",
        "verify",
        "breakdown",
    ]


def test_tables() -> None:
    text = display.text_table(["op", "n"], [["Conv", 3], ["Relu", 12]])
    assert text.splitlines()[1].endswith(" 3") and text.splitlines()[2].endswith("12")
    page = display.html_table(["a", "b"], [["<x>", 1]], caption="c&d", shaded=[0])
    assert "&lt;x&gt;" in page and "c&amp;d" in page and "bgcolor" in page
    assert display.format_cost(3.2e-5) == "32.0 us" and display.format_cost(0.0123) == "12.30 ms"
    assert display.format_cost(2.0, "") == "2" and display.format_cost(None) == "-"


def test_cli_report_json_on_stdout_is_pure_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With --report-json -, stdout carries the JSON only; the summary line goes to stderr."""
    out = tmp_path / "o.onnx"
    assert (
        main(["optimize", str(MODELS_DIR / "nhwc_tfstyle_resnet_legacy.onnx"), "-o", str(out), "--report-json", "-"])
        == 0
    )
    stdout, stderr = capsys.readouterr()
    assert json.loads(stdout)["saturation"]["rules_fired"]["transpose-merge"] > 0
    assert " ops (" in stderr and "est. cost (cpu)" in stderr


def test_cli_unwritable_report_path_fails_before_writing_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "o.onnx"
    code = main(
        [
            "optimize",
            str(MODELS_DIR / "nhwc_tfstyle_resnet_legacy.onnx"),
            "-o",
            str(out),
            "--report-json",
            str(tmp_path / "no-such-folder" / "r.json"),
        ]
    )
    assert code == 2 and not out.exists()
    assert "cannot write the JSON report" in capsys.readouterr().err
