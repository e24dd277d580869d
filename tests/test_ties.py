"""The tie-break every target has (extract/ties.py, `tie_break` in extract/targets/*.toml): among graphs of equal
cost fewer nodes win, then fewer bytes read; explicit all-zero zero points are dropped on every target except
where a runtime's fusion reads them (the cpu's ONNX Runtime selectors), zero points that are not the default stay."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given, strategies as st

import eqsat
from eqsat.extract import load_target, targets
from eqsat.extract import ties
from eqsat.extract.cost import TargetError
from tests.rule_graphs import model, node, property_settings

TARGETS = ("cpu", "gpu", "npu")


# ---- the key: every target has one, documented, bounded by its launch ----


@pytest.mark.parametrize("name", TARGETS)
def test_every_shipped_target_sets_a_tie_break_below_a_thousandth_of_a_launch(name: str) -> None:
    t = load_target(name)
    assert 0 < t.tie_break <= ties.MAX_TIE_FRACTION * t.launch
    assert "tie_break" in (Path(t.source).read_text())  # set (and commented) in the TOML, not only defaulted


def test_a_target_without_the_key_gets_the_default_and_a_large_one_is_refused(tmp_path: Path) -> None:
    text = Path(load_target("gpu").source).read_text()
    kept = "\n".join(line for line in text.splitlines() if not line.startswith("tie_break"))
    path = tmp_path / "plain.toml"
    path.write_text(kept)
    assert load_target(str(path)).tie_break == ties.DEFAULT_TIE_BREAK
    path.write_text(kept.replace("launch = 8.0e-6", "launch = 1.0e-7"))  # a short launch lowers the default
    assert load_target(str(path)).tie_break == pytest.approx(1.0e-10)
    path.write_text(kept + "\ntie_break = 1.0e-7\n")  # 1/80 of the gpu's launch: it would outweigh real costs
    with pytest.raises(TargetError, match="tie_break"):
        load_target(str(path))
    assert set(TARGETS) <= set(targets())


# ---- the order: fewer nodes, then fewer bytes read ----

SIZES = st.floats(min_value=0, max_value=2.0**63)


@property_settings()
@given(SIZES, SIZES, SIZES, SIZES)
def test_a_node_outweighs_any_two_inputs(a: float, b: float, c: float, m: float) -> None:
    """Gemm(A, B, c) against Add(MatMul(A, B), c): one node and three inputs against two nodes and four,
    whatever their sizes; and an input more (an explicit zero point) always costs."""
    tie = 1.0
    gemm = ties.tie_cost(tie, [(a, False), (b, False), (c, False)])
    unfused = ties.tie_cost(tie, [(a, False), (b, False)]) + ties.tie_cost(tie, [(m, False), (c, False)])
    assert gemm < unfused
    assert ties.tie_cost(tie, [(a, False), (b, False), (1.0, False)]) > ties.tie_cost(tie, [(a, False), (b, False)])
    assert ties.input_weight(max(a, b), False) >= ties.input_weight(min(a, b), False)  # then fewer bytes


# ---- zero points: an explicit all-zero one is dropped on every target, any other stays ----

S = np.array(0.05, np.float32)


def _qconv(zq: np.ndarray) -> onnx.ModelProto:
    """uint8 activations with an explicit zero point 0, int8 per-channel weights with zero points of zeros,
    Conv -> Relu, quantized again with `zq`; dynamic batch."""
    rng = np.random.default_rng(0)
    return model(
        [
            node("DequantizeLinear", ["x", "s", "z"], "dq"),
            node("DequantizeLinear", ["w", "sw", "zw"], "wf", axis=0),
            node("Conv", ["dq", "wf"], "cv", pads=[1, 1, 1, 1]),
            node("Relu", ["cv"], "r"),
            node("QuantizeLinear", ["r", "s", "zq"], "y"),
        ],
        [("x", "UINT8", ("N", 8, 6, 6))],
        initializers={
            "s": S,
            "z": np.array(0, np.uint8),
            "w": rng.integers(-20, 20, (8, 8, 3, 3)).astype(np.int8),
            "sw": np.linspace(0.01, 0.02, 8, dtype=np.float32),
            "zw": np.zeros(8, np.int8),
            "zq": zq,
        },
        opset=19,
    )


def _zero_points(m: onnx.ModelProto) -> dict[str, list]:
    """Per Q/DQ node (by its first input's name): its zero point's value (None: absent)."""
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer}
    consts = {
        n.output[0]: onnx.numpy_helper.to_array(n.attribute[0].t) for n in m.graph.node if n.op_type == "Constant"
    }
    out: dict[str, list] = {}
    for n in m.graph.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            z = n.input[2] if len(n.input) > 2 and n.input[2] else None
            value = None if z is None else inits.get(z, consts.get(z))
            out.setdefault(n.op_type, []).append(None if value is None else (value.dtype.name, value.tolist()))
    return out


@pytest.mark.parametrize("name", TARGETS)
def test_explicit_all_zero_zero_points_are_dropped_on_every_target(name: str) -> None:
    """qdq-zero-point-default's form reads one input fewer: the same kernels on every target, so the tie-break
    keeps it (on the npu the absorbed Q/DQ tied exactly; on the gpu an int8 DQ without zero point was costed
    as a nonzero one, which TensorRT refuses). Verified at two batch sizes. The one exception is the cpu's Q
    after the Relu: ONNX Runtime's ReluQuantFusion reads its zero point (the cpu's fused pattern
    relu-quantize), so it stays there (test_a_relus_quantize_keeps_its_zero_point_on_the_cpu)."""
    result = eqsat.optimize(_qconv(np.array(0, np.uint8)), target=name)
    assert result.report.verification is not None and result.report.verification.ok
    q = [("uint8", 0)] if name == "cpu" else [None]
    assert _zero_points(result.proto) == {"DequantizeLinear": [None, None], "QuantizeLinear": q}
    assert not any("input kept" in note for note in result.report.extraction.notes)  # chosen, not fallen back to


def _qunit(op: str, **attrs: object) -> onnx.ModelProto:
    """DQ -> op -> Q on uint8 activations [N, 8, 6, 6], every zero point an explicit 0 (Gemm: [N, 8] with int8
    weights [4, 8], transB)."""
    rng = np.random.default_rng(1)
    if op == "Gemm":
        nodes = [
            node("DequantizeLinear", ["x", "s", "z"], "dq"),
            node("DequantizeLinear", ["w", "s", "zw"], "wf"),
            node("Gemm", ["dq", "wf"], "y0", transB=1),
            node("QuantizeLinear", ["y0", "s", "z"], "y"),
        ]
        x = ("x", "UINT8", ("N", 8))
        extra = {"w": rng.integers(-20, 20, (4, 8)).astype(np.int8), "zw": np.array(0, np.int8)}
    else:
        nodes = [
            node("DequantizeLinear", ["x", "s", "z"], "dq"),
            node(op, ["dq"], "y0", **attrs),
            node("QuantizeLinear", ["y0", "s", "z"], "y"),
        ]
        x, extra = ("x", "UINT8", ("N", 8, 6, 6)), {}
    return model(nodes, [x], initializers={"s": S, "z": np.array(0, np.uint8), **extra}, opset=19)


@pytest.mark.parametrize("op", ["Gemm", "MaxPool", "Relu"])
def test_onnxruntimes_selectors_keep_their_zero_points_on_the_cpu(op: str) -> None:
    """ONNX Runtime forms QGemm, drops the DQ/Q pair around MaxPool (IsQDQPairSupported: "Q/DQ doesn't have
    optional input") and removes a Relu before a Q (ReluQuantFusion) only with explicit zero points: measured
    on resnet18_w8_qdq, dropping them left 6 DQ + 4 Q kernels (0.947 ms against 0.876). The cpu target keeps
    them; the npu, whose compiler takes either, drops them."""
    attrs = {"kernel_shape": [2, 2]} if op == "MaxPool" else {}
    cpu = eqsat.optimize(_qunit(op, **attrs), target="cpu")
    assert cpu.report.verification is not None and cpu.report.verification.ok
    points = _zero_points(cpu.proto)
    assert None not in points["QuantizeLinear"]
    if op != "Relu":  # a Relu's DQ is no unit's: its zero point may go
        assert None not in points["DequantizeLinear"]
    npu = eqsat.optimize(_qunit(op, **attrs), target="npu")
    assert all(z is None for zs in _zero_points(npu.proto).values() for z in zs)


def test_a_unit_that_does_not_read_zero_points_drops_them_on_the_cpu() -> None:
    """QLinearConv forms without zero points: the cpu's tie-break still drops them there (Conv -> Q, no Relu)."""
    result = eqsat.optimize(_qunit("GlobalAveragePool"), target="cpu")
    assert result.report.verification is not None and result.report.verification.ok
    assert _zero_points(result.proto) == {"DequantizeLinear": [None], "QuantizeLinear": [None]}


def test_a_fused_patterns_all_inputs_must_be_true_or_false(tmp_path: Path) -> None:
    text = Path(load_target("cpu").source).read_text().replace("all_inputs = true", 'all_inputs = "false"')
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(TargetError, match="all_inputs must be true or false"):
        load_target(str(bad))


@pytest.mark.parametrize("name", TARGETS)
@pytest.mark.parametrize("zq", [np.array(0, np.int8), np.array(5, np.uint8)], ids=["int8-0", "uint8-5"])
def test_a_zero_point_that_is_not_the_default_stays_on_q(name: str, zq: np.ndarray) -> None:
    """An int8 zero point 0 is not Q's default (an absent one quantizes to uint8: the output type would change),
    and 5 is not 0: both stay; the DQs' zeros still go."""
    result = eqsat.optimize(_qconv(zq), target=name)
    assert result.report.verification is not None and result.report.verification.ok
    got = _zero_points(result.proto)
    assert got["DequantizeLinear"] == [None, None]
    assert got["QuantizeLinear"] == [(zq.dtype.name, int(zq))]
    assert result.proto.graph.output[0].type.tensor_type.elem_type == onnx.helper.np_dtype_to_tensor_dtype(zq.dtype)
