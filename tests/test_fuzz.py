"""Differential fuzzing in CI: random valid graphs over the supported ops (eqsat.testing.onnx_graphs), every
default rule together, checked by eqsat.fuzz.check_case (each e-node of the e-graph evaluated against its
class; each extractor's result valid, lowered to a checked model computing what the original computes).
Derandomized: the same graphs every run. The long run is `python -m benchmarks.fuzz --examples 10000`."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings

from eqsat.fuzz import check_case, fuzz
from eqsat.rule import Rule, rw
from eqsat.testing import GRAPH_FAMILIES, GraphCase, onnx_graphs, run

pytestmark = pytest.mark.slow  # python -m pytest -m "not slow" leaves these out (README)


def _settings(examples: int):
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


@_settings(150)
@given(onnx_graphs(max_nodes=6))
def test_drawn_graphs_are_valid_and_run(case: GraphCase) -> None:
    onnx.checker.check_model(case.model, full_check=True)  # the strategy checks too; say it here
    outputs = run(case.model, case.feeds)
    assert len(outputs) == len(case.model.graph.output)
    assert all(np.all(np.isfinite(o)) for o in outputs if o.dtype.kind == "f"), "values stay of moderate size"


@_settings(90)
@given(onnx_graphs(max_nodes=8))
def test_fuzz_default_rules(case: GraphCase) -> None:
    check_case(case)


@_settings(45)
@given(onnx_graphs(max_nodes=8, families=("conv", "quant", "layout", "elementwise", "share")))
def test_fuzz_conv_and_quant_chains(case: GraphCase) -> None:
    check_case(case)


@_settings(30)
@given(onnx_graphs(max_nodes=6, allow=("precision-changing",)))
def test_fuzz_precision_changing_rules(case: GraphCase) -> None:
    check_case(case)


def test_unknown_family_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown graph families"):
        onnx_graphs(families=("conv", "nope"))
    assert set(GRAPH_FAMILIES) >= {"layout", "conv", "quant", "share"}


NEG_DROP = Rule("neg-drop", "test", "exact", "test", "Neg(x) -> x (deliberately unsound)", (rw("(Neg x)", "x"),),
                ruleset="simplify")


@pytest.fixture
def unsound_rule_registered(monkeypatch: pytest.MonkeyPatch) -> Rule:
    """`neg-drop` registered like any rule (`eqsat.rewrites.registry.all_rules`)."""
    from eqsat.rewrites import registry

    registered = registry.all_rules
    monkeypatch.setattr(registry, "all_rules", lambda: (*registered(), NEG_DROP))
    return NEG_DROP


def test_fuzz_finds_an_unsound_rule_and_names_seed_and_graph(unsound_rule_registered: Rule, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.fuzz import main

    assert main(["--examples", "30", "--seed", "4", "--chunk", "30", "--families", "elementwise",
                 "--no-shrink", "--save-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("fuzz: seed 4, 30 examples")
    failure = re.search(r"^FAILURE \(seed 4, allow \[\]\): AssertionError: (.*)$", out, re.MULTILINE)
    assert failure and "neg-drop" in failure.group(1), out
    assert re.search(r"^\s*\[\S+\] \S+ = Neg \(", out, re.MULTILINE), "the failing graph is printed"
    assert "feeds: x: float32" in out
    saved = tmp_path / "fuzz-seed4.onnx"
    assert saved.exists() and (tmp_path / "fuzz-seed4.npz").exists()
    assert any(n.op_type == "Neg" for n in onnx.load(str(saved)).graph.node)
    assert re.search(r"fuzz: done in \d+ s: \d+ examples, seeds 4\.\.4, 1 unsound or failing", out)


def test_fuzz_counts_examples_and_rules() -> None:
    report = fuzz(12, seed=11, chunk=6, max_nodes=4)
    assert report.examples == 12 and report.seeds == [11, 12] and not report.failures
    assert report.ops and "fuzz: 12 examples, seeds 11..12 (2 chunks), 0 failures" in report.to_text()
