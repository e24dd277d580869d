"""Symbols that meet in one e-class are unified (eqsat.engine.unify): the saturation keeps its symbolic facts."""

from __future__ import annotations

import contextlib

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import eqsat
from eqsat.engine import prepared
from eqsat.engine.unify import unified
from eqsat.frontend.symbols import ShapeFacts
from eqsat.session import saturate
from eqsat.testing.runs import plant_shape_facts
from eqsat.testing import op_counts
from eqsat.testing.models import make_model

RNG = np.random.default_rng(0)


def _recognizer() -> onnx.ModelProto:
    """A paddle OCR recognizer in small: input [?, 3, 48, ?], Conv + BN + scale blocks, a squeeze-excite branch
    (keepdims ReduceMean), and a head that reduces a transposed feature map (keepdims)."""
    inits: dict[str, np.ndarray] = {}
    nodes: list[onnx.NodeProto] = []

    def conv(x: str, cin: int, cout: int, k: int, name: str) -> str:
        inits[f"{name}_w"] = (RNG.standard_normal((cout, cin, k, k)) * 0.3).astype(np.float32)
        nodes.append(oh.make_node("Conv", [x, f"{name}_w"], [name], kernel_shape=[k, k], pads=[k // 2] * 4))
        return name

    def bn(x: str, name: str) -> str:
        for p, v in (("s", 1.1), ("b", 0.2), ("m", -0.3), ("v", 1.7)):
            inits[f"{name}_{p}"] = np.full(8, v, np.float32) + RNG.standard_normal(8).astype(np.float32) * 0.1
        nodes.append(oh.make_node("BatchNormalization", [x] + [f"{name}_{p}" for p in "sbmv"], [name]))
        return name

    def scale(x: str, name: str, const_first: bool = False) -> str:
        inits[f"{name}_c"] = np.array(1.5, np.float32)
        nodes.append(oh.make_node("Mul", [f"{name}_c", x] if const_first else [x, f"{name}_c"], [name]))
        return name

    h = scale(bn(conv("x", 3, 8, 3, "c1"), "bn1"), "s1")
    nodes.append(oh.make_node("ReduceMean", [h], ["pooled"], axes=[2, 3], keepdims=1))
    nodes += [
        oh.make_node("Sigmoid", [conv("pooled", 8, 8, 1, "se")], ["gate"]),
        oh.make_node("Mul", [h, "gate"], ["g"]),
    ]
    h = bn(scale(conv("g", 8, 8, 3, "c2"), "s2", const_first=True), "bn2")
    h = scale(bn(conv(h, 8, 8, 3, "c3"), "bn3"), "s3")
    nodes += [
        oh.make_node("Relu", [h], ["r"]),
        oh.make_node("Transpose", ["r"], ["t"], perm=[0, 1, 3, 2]),
        oh.make_node("ReduceMean", ["t"], ["y"], axes=[3], keepdims=1),
    ]
    return make_model(nodes, [("x", "FLOAT", (None, 3, 48, None))], ["y"], inits, opset=11)


def test_the_recognizer_folds_every_batchnorm_and_scale_without_a_conflict() -> None:
    result = eqsat.optimize(_recognizer())
    assert not result.report.saturation.note and not result.warnings
    counts = op_counts(result.proto)
    assert "BatchNormalization" not in counts and counts.get("Mul") == 1  # the gate's Mul stays
    assert result.report.verification is not None and result.report.verification.ok
    assert "x:2x3x48x16 and x:3x3x48x32" in result.report.verification.summary()  # two sizes of each dim


def _chain() -> onnx.ModelProto:
    return make_model(
        [oh.make_node("Relu", ["x"], ["r"]), oh.make_node("Sigmoid", ["r"], ["s"]), oh.make_node("Neg", ["s"], ["y"])],
        [("x", "FLOAT", ("n", 4))],
        ["y"],
    )


def _plant_second_symbol(monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...]) -> None:
    """The loader gives `names` a symbol "m" of their own where the recovery found x's "n"."""

    def plant(facts: ShapeFacts) -> None:
        m = facts.table.id("m")
        for name in names:
            facts.shapes[name] = (m, *facts.shapes[name][1:])

    plant_shape_facts(monkeypatch, plant)


@pytest.mark.parametrize("single_run", [False, True])
def test_two_symbols_that_meet_are_unified(monkeypatch: pytest.MonkeyPatch, single_run: bool) -> None:
    """r = Relu(x) loaded with [m, 4]: the analysis derives [n, 4] for it, so m = n. Saturation keeps symbolic
    facts (no fallback note), and the facts that depended on m (s, y) agree with those on n. In a single run
    (eqsat.engine.prepared.single_run) the second round cannot reuse the backend the first spent: a fresh one."""
    _plant_second_symbol(monkeypatch, ("r", "s", "y"))
    with prepared.single_run() if single_run else contextlib.nullcontext():
        session = saturate(_chain())
    n, m = session.encoding.symbols.ids["n"], session.encoding.symbols.ids["m"]
    assert session.saturation.note == "" and session.saturation.error is None
    assert session.encoding.unified == {m: n}
    shapes = {c.shape for c in session.egraph.classes if c.shape is not None and c.sort == "T"}
    assert shapes == {(n, 4)}
    result = session.extract(verify=True)
    assert result.report.verification is not None and result.report.verification.ok


def test_a_symbol_that_meets_a_size_becomes_that_size() -> None:
    assert unified([((-1, 4), (3, 4))], {}, lambda s: 0) == {-1: 3}
    assert unified([((-1, 4), (-2, 4))], {-3: -1}, lambda s: 1 if s == -2 else 0) == {-1: -2, -3: -2}


def test_two_sizes_or_ranks_that_meet_are_a_conflict_not_a_unification() -> None:
    assert unified([((2, 4), (3, 4))], {}, lambda s: 0) is None
    assert unified([((-1, 4), (-1, 4, 1))], {}, lambda s: 0) is None
    assert unified([((-1, 4), (3, 4)), ((-1,), (5,))], {}, lambda s: 0) is None  # -1 = 3 and -1 = 5


def test_different_sizes_in_one_eclass_still_fall_back_to_static_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fact that is plain wrong (r loaded as [n, 5], Relu keeps x's [n, 4]) is a real conflict: reported,
    never merged."""

    def wrong(facts: ShapeFacts) -> None:
        facts.shapes["r"] = (facts.shapes["r"][0], 5)

    plant_shape_facts(monkeypatch, wrong)
    session = saturate(_chain())
    assert "static shape facts only" in session.saturation.note
    with prepared.single_run():  # the fallback's fresh backend, after the first one was spent
        assert "static shape facts only" in saturate(_chain()).saturation.note
