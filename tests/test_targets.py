"""Target awareness on real models: one saturated e-graph, a different graph per target, each explainable.

cpu and gpu have LayerNormalization and Gelu kernels; the npu has none (extract/targets/npu.toml), so
there the extractor picks the decompositions that the same e-graph holds."""

from __future__ import annotations

import pytest

from eqsat import io
from eqsat.session import saturate
from tests.conftest import MODELS_DIR


@pytest.mark.parametrize("name, opset, fused", [
    ("vit_l2_h128_legacy_op17.onnx", None, {"LayerNormalization": 5}),
    ("gpt2_l2_h128_legacy_op14.onnx", 20, {"LayerNormalization": 5, "Gelu": 2}),
])
def test_one_egraph_three_targets(name: str, opset: int | None, fused: dict[str, int]) -> None:
    session = saturate(MODELS_DIR / name, opset=opset)
    ops = {t: io.op_histogram(session.extract(t, verify=True).model) for t in ("cpu", "gpu", "npu")}
    for target in ("cpu", "gpu"):
        assert {op: ops[target][op] for op in fused} == fused, target
    assert all(ops["npu"][op] == 0 for op in fused), "the npu has no LayerNormalization/Gelu kernel"
    assert ops["npu"]["ReduceMean"] >= 2 * fused["LayerNormalization"], "LayerNorm decomposed on the npu"
    results = [session.extract(t, verify=True).report.verification for t in ("cpu", "npu")]
    assert all(r.ok for r in results)
