"""Target awareness on real models: one saturated e-graph, a different graph per target, each explainable.

cpu and gpu have LayerNormalization and Gelu kernels; the npu has none (extract/targets/npu.toml), so
there the extractor picks the decompositions that the same e-graph holds.

GlobalAveragePool vs ReduceMean (the e-graph holds both for a CNN head and for LayerNorm's mean):
- cpu: ONNX Runtime's CPU EP turns DQ -> GlobalAveragePool -> Q into one QLinearGlobalAveragePool and keeps
  GlobalAveragePool in its blocked NCHWc layout; DQ -> ReduceMean -> Q stays three float kernels
  (cpu.toml [qdq], [blocked_layout]);
- gpu: no QDQ fusion on the CUDA EP; GlobalAveragePool is cuDNN pooling with one thread per channel looping
  over the whole map, ReduceMean a parallel reduction (gpu.toml [serial]);
- npu: both are int8 kernels on a 4-D map (a tie, broken deterministically), but a rank-3 pooling needs a
  transpose to the 4-D image layout first, so LayerNorm's mean stays ReduceMean (npu.toml [relayout]).

No single bundled model separates all three targets: a CNN head offers one binary choice (GlobalAveragePool
or ReduceMean), and on the transformers cpu and gpu both have every fused kernel the e-graph offers (ONNX
Runtime's CPU EP runs LayerNormalization-17 and Gelu-20 as single kernels). So each pair of targets is
separated by one of two models, saturated once each.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter

import pytest

from eqsat.frontend import io
from eqsat.session import Session, saturate
from eqsat.extract.cost import FUSED_EPSILON, load_target, roofline
from tests.conftest import MODELS_DIR

TARGETS = ("cpu", "gpu", "npu")


@functools.lru_cache(maxsize=None)
def session(name: str, opset: int | None = None) -> Session:
    """Each model is saturated once per test run; every target re-extracts the same e-graph."""
    return saturate(MODELS_DIR / name, opset=opset)


@functools.lru_cache(maxsize=None)
def extracted(name: str, opset: int | None, target: str):  # noqa: ANN201 (eqsat.result.Result)
    result = session(name, opset).extract(target, verify=True)
    assert result.report.verification.ok, (name, target, result.report.verification)
    return result


def histogram(name: str, opset: int | None, target: str) -> Counter:
    return Counter(io.op_histogram(extracted(name, opset, target).model))


@pytest.mark.slow  # whole bundled models
@pytest.mark.parametrize(
    "name, opset, fused",
    [
        ("vit_l2_h128_legacy_op17.onnx", None, {"LayerNormalization": 5}),
        ("gpt2_l2_h128_legacy_op14.onnx", 20, {"LayerNormalization": 5, "Gelu": 2}),
    ],
)
def test_one_egraph_three_targets(name: str, opset: int | None, fused: dict[str, int]) -> None:
    ops = {t: histogram(name, opset, t) for t in TARGETS}
    for target in ("cpu", "gpu"):
        assert {op: ops[target][op] for op in fused} == fused, target
    assert all(ops["npu"][op] == 0 for op in fused), "the npu has no LayerNormalization/Gelu kernel"
    assert ops["npu"]["ReduceMean"] >= 2 * fused["LayerNormalization"], "LayerNorm decomposed on the npu"
    results = [extracted(name, opset, t).report.verification for t in ("cpu", "npu")]
    assert all(r.ok for r in results)


def _pool_pair(s: Session) -> tuple[int, int]:
    """The GlobalAveragePool and ReduceMean e-nodes of the CNN head's class."""
    g = s.egraph
    for c in g.classes:
        ops = {g.nodes[n].op: n for n in c.nodes}
        if "GlobalAveragePool" in ops and "ReduceMean" in ops and c.shape is not None and len(c.shape) == 4:
            return ops["GlobalAveragePool"], ops["ReduceMean"]
    raise AssertionError("the e-graph holds no GlobalAveragePool/ReduceMean alternative for the head")


QDQ, GPT2 = ("resnet18_w8_qdq.onnx", None), ("gpt2_l2_h128_legacy_op14.onnx", 20)


def test_every_target_pair_differs_and_each_difference_is_explained() -> None:
    hist = {(m, t): histogram(*m, t) for m in (QDQ, GPT2) for t in TARGETS}  # all verified numerically

    # resnet18_w8_qdq, CNN head: ... -> Q -> DQ -> {GlobalAveragePool | ReduceMean} -> Q -> DQ -> Flatten
    # cpu: DQ -> GlobalAveragePool -> Q is one QLinearGlobalAveragePool kernel in ONNX Runtime's CPU EP
    # (int8 in, int8 out); ReduceMean is in no QDQ rule, so it would run as DQ + float ReduceMean + Q.
    assert hist[QDQ, "cpu"]["GlobalAveragePool"] == 1 and hist[QDQ, "cpu"]["ReduceMean"] == 0
    # gpu: the CUDA EP runs Q and DQ as kernels of their own either way; GlobalAveragePool is cuDNN pooling
    # with the 7x7 map as the window (one thread per channel, 49 dependent steps), ReduceMean a reduction.
    assert hist[QDQ, "gpu"]["ReduceMean"] == 1 and hist[QDQ, "gpu"]["GlobalAveragePool"] == 0
    # the rest of the QDQ graph is kept as is on every target (Q/DQ stay: the runtime fuses them)
    for t in TARGETS:
        assert hist[QDQ, t]["QuantizeLinear"] == 33 and hist[QDQ, t]["Conv"] == 20, t

    # gpt2 at opset 20: cpu and gpu run LayerNormalization and Gelu as single kernels; the npu has
    # neither (npu.toml supported_ops), so it keeps the decompositions that the same e-graph holds, and
    # computes LayerNorm's mean with ReduceMean: a rank-3 GlobalAveragePool would first need a transpose
    # to the 4-D image layout of its pooling engine.
    for t in ("cpu", "gpu"):
        assert hist[GPT2, t]["LayerNormalization"] == 5 and hist[GPT2, t]["Gelu"] == 2, t
    assert hist[GPT2, "npu"]["LayerNormalization"] == 0 and hist[GPT2, "npu"]["Gelu"] == 0
    assert hist[GPT2, "npu"]["ReduceMean"] == 10 and hist[GPT2, "npu"]["GlobalAveragePool"] == 0
    assert hist[GPT2, "npu"]["Tanh"] == 2  # Gelu(approximate=tanh) written out

    # each pair of targets is told apart by at least one of the two models
    for a, b in (("cpu", "gpu"), ("cpu", "npu"), ("gpu", "npu")):
        assert any(hist[m, a] != hist[m, b] for m in (QDQ, GPT2)), (a, b)
    assert hist[QDQ, "cpu"] != hist[QDQ, "gpu"]
    assert hist[GPT2, "npu"] != hist[GPT2, "cpu"] and hist[GPT2, "npu"] != hist[GPT2, "gpu"]


def test_the_head_choice_is_costed_for_the_reasons_given() -> None:
    s = session(*QDQ)
    g = s.egraph
    gap, mean = (g.nodes[n] for n in _pool_pair(s))
    cpu, gpu, npu = (roofline(t) for t in TARGETS)
    launch = load_target("cpu").launch
    # cpu: the integer GlobalAveragePool is one kernel; ReduceMean pays its own kernel plus the DQ and the
    # Q that can no longer be absorbed: at least two more launches
    assert cpu(g, mean) > cpu(g, gap) + 2 * launch * 0.99
    # gpu: the difference is the serial window: 7 x 7 steps of one thread
    t = load_target("gpu")
    assert gpu(g, gap) - gpu(g, mean) == pytest.approx(49 * t.serial_step, rel=0.1)
    # npu: both are int8 kernels over the same 4-D map: an exact tie (broken by node order, deterministically)
    assert npu(g, gap) == npu(g, mean)
    # Q and DQ around the head cost the cpu only the tie-breaker: the integer kernels absorb them
    q = next(n for n in g.nodes if n.op == "QuantizeLinear" and gap.eclass in n.children)
    untied = roofline(dataclasses.replace(load_target("cpu"), tie_break=0.0))  # without cpu.toml's tie_break
    assert untied(g, q) == FUSED_EPSILON and gpu(g, q) > load_target("gpu").launch


def test_fp16_cnn_head_ties_on_cpu_only() -> None:
    # fp16 convs run on the x86 CPU EP through inserted Casts to fp32 (no fp16 Conv kernel), outside the
    # NCHWc layout (cpu.toml blocked_layout.dtypes): GlobalAveragePool and ReduceMean cost the same there.
    # The gpu's reasons (serial window) do not depend on the dtype. (fp32 NCHWc: tests/test_cost_hardware.py)
    s = session("resnet18_w8_fp16.onnx")
    g = s.egraph
    gap, mean = (g.nodes[n] for n in _pool_pair(s))
    assert roofline("cpu")(g, gap) == roofline("cpu")(g, mean)
    assert roofline("gpu")(g, gap) > roofline("gpu")(g, mean)
    assert histogram("resnet18_w8_fp16.onnx", None, "gpu")["ReduceMean"] == 1


def test_reextraction_is_deterministic() -> None:
    s = session(*QDQ)
    for t in TARGETS:
        assert dict(s.extract(t).extraction.choice) == dict(extracted(*QDQ, t).extraction.choice), t
