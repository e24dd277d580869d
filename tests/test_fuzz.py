"""Differential fuzzing in CI: random valid graphs over the supported ops (eqsat.testing.onnx_graphs), every
default rule together, checked by eqsat.fuzz.check_case (each e-node of the e-graph evaluated against its
class; each extractor's result valid, lowered to a checked model computing what the original computes).
Derandomized: the same graphs every run. The long run is `python -m benchmarks.fuzz --examples 10000`."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from hypothesis import HealthCheck, given, settings

from eqsat.fuzz import check_case, fuzz
from eqsat.engine.rule import Rule, rw
from eqsat.testing import GRAPH_FAMILIES, GraphCase, make_model, onnx_graphs, run
from eqsat.testing.dynamic_dims import DIM_NAMES, Baked, Sym, at_b, product, reshape_spec, static

pytestmark = pytest.mark.slow  # python -m pytest -m "not slow" leaves these out (README)


def _settings(examples: int):
    return settings(
        max_examples=examples, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
    )


@_settings(150)
@given(onnx_graphs(max_nodes=6))
def test_drawn_graphs_are_valid_and_run(case: GraphCase) -> None:
    onnx.checker.check_model(case.model, full_check=True)  # the strategy checks too; say it here
    for feeds in case.all_feeds():  # at both sizes of the dynamic dims
        outputs = run(case.model, feeds)
        assert len(outputs) == len(case.model.graph.output)
        assert all(np.all(np.isfinite(o)) for o in outputs if o.dtype.kind == "f"), "values stay of moderate size"


@_settings(120)
@given(onnx_graphs(max_nodes=6, families=("chains", "layout", "elementwise", "linear", "reduce")))
def test_dynamic_dims_are_named_and_drawn_at_two_sizes_neither_one(case: GraphCase) -> None:
    """A dynamic input dim is declared by a name (batch-like or not) or left unnamed, and the case runs it at
    two different sizes, neither 1; one name is one size in every input."""
    declared = {i.name: i.type.tensor_type.shape.dim for i in case.model.graph.input}
    dynamic = {(name, k) for name, dims in declared.items() for k, d in enumerate(dims) if not d.HasField("dim_value")}
    assert bool(dynamic) == bool(case.more_feeds)
    for more in case.more_feeds:
        sizes: dict[str, set[tuple[int, int]]] = {}
        for name, k in dynamic:
            a, b = case.feeds[name].shape[k], more[name].shape[k]
            assert a != b and min(a, b) > 1
            param = declared[name][k].dim_param
            assert param in {n for n in DIM_NAMES if n} or param == ""
            if param:
                sizes.setdefault(param, set()).add((a, b))
        assert all(len(s) == 1 for s in sizes.values()), sizes
        for name, dims in declared.items():  # static dims are the same at both sizes
            assert all(
                case.feeds[name].shape[k] == more[name].shape[k] for k, d in enumerate(dims) if d.HasField("dim_value")
            )


def test_symbolic_dims_compare_by_what_they_are_not_by_their_size() -> None:
    batch, seq = Sym(2, "batch", 3), Sym(2, "seq", 5)
    assert batch == Sym(2, "batch", 3) and batch != seq and batch != 2 and 2 != batch
    merged = batch * 4
    assert isinstance(merged, Sym) and int(merged) == 8 and merged.b == 12 and merged == batch * 4 and merged != 8
    assert product([batch, 4]) == batch * 4 and at_b([batch, 4, seq - 1]) == (3, 4, 4)
    assert reshape_spec([batch, 8, seq * 2], [batch, 4, 2]) == [0, 8, -1]
    with pytest.raises(Baked):
        static([1, seq])


@_settings(90)
@given(onnx_graphs(max_nodes=8))
def test_fuzz_default_rules(case: GraphCase) -> None:
    check_case(case)


@_settings(45)
@given(onnx_graphs(max_nodes=8, families=("conv", "quant", "layout", "elementwise", "share")))
def test_fuzz_conv_and_quant_chains(case: GraphCase) -> None:
    check_case(case)


@_settings(60)
@given(onnx_graphs(max_nodes=6, families=("chains", "layout", "elementwise", "normalization", "share")))
def test_fuzz_shape_chains_under_dynamic_dims(case: GraphCase) -> None:
    check_case(case)


def _layernorm_broadcast_case() -> GraphCase:
    """Reshape(x, t) read by Expand(., t), t = Concat(Slice(Shape(x), 0, 1), [1], [8]); x [batch, 8] drawn at
    batch 2 and 3."""
    nodes = [
        oh.make_node("Shape", ["x"], ["s"]),
        oh.make_node("Slice", ["s", "zero", "one"], ["b"]),
        oh.make_node("Concat", ["b", "one", "eight"], ["t"], axis=0),
        oh.make_node("Reshape", ["x", "t"], ["r"]),
        oh.make_node("Expand", ["r", "t"], ["y"]),
    ]
    inits = {"zero": np.array([0]), "one": np.array([1]), "eight": np.array([8])}
    model = make_model(nodes, [("x", "FLOAT", ("batch", 8))], [("y", "FLOAT", ("batch", 1, 8))], inits, 15)
    rng = np.random.default_rng(0)
    return GraphCase(
        model,
        {"x": rng.standard_normal((2, 8)).astype(np.float32)},
        (),
        ({"x": rng.standard_normal((3, 8)).astype(np.float32)},),
    )


def test_fuzz_property_holds_on_the_layernorm_broadcast() -> None:
    check_case(_layernorm_broadcast_case())


def test_fuzz_property_checks_the_second_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """A front end that took the batch for its size at the first draw (2) is right there, and caught at 3."""
    from eqsat.frontend import shape_chains

    monkeypatch.setattr(
        shape_chains, "_reshape_target", lambda target, x_items, *_: [2 if isinstance(t, str) else t for t in target]
    )
    with pytest.raises(AssertionError, match=r"at x\[3, 8\]"):
        check_case(_layernorm_broadcast_case())


@_settings(30)
@given(onnx_graphs(max_nodes=6, allow=("precision-changing",)))
def test_fuzz_precision_changing_rules(case: GraphCase) -> None:
    check_case(case)


def test_unknown_family_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown graph families"):
        onnx_graphs(families=("conv", "nope"))
    assert set(GRAPH_FAMILIES) >= {"layout", "conv", "quant", "share", "chains"}


NEG_DROP = Rule(
    "neg-drop", "test", "exact", "test", "Neg(x) -> x (deliberately unsound)", (rw("(Neg x)", "x"),), ruleset="simplify"
)


@pytest.fixture
def unsound_rule_registered(monkeypatch: pytest.MonkeyPatch) -> Rule:
    """`neg-drop` registered like any rule (`eqsat.rewrites.registry.all_rules`)."""
    from eqsat.rewrites import registry

    registered = registry.all_rules
    monkeypatch.setattr(registry, "all_rules", lambda: (*registered(), NEG_DROP))
    return NEG_DROP


def test_fuzz_finds_an_unsound_rule_and_names_seed_and_graph(
    unsound_rule_registered: Rule, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.fuzz import main

    assert (
        main(
            [
                "--examples",
                "30",
                "--seed",
                "4",
                "--chunk",
                "30",
                "--families",
                "elementwise",
                "--no-shrink",
                "--save-dir",
                str(tmp_path),
            ]
        )
        == 1
    )
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
