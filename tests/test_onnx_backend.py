"""ONNX's own backend tests as an oracle: a representative subset of `python -m benchmarks.bench_onnx_tests`.

Each case runs `eqsat optimize IN -o OUT` with no flags, as a user runs it, then checks what was written:
valid, the original's interface, the original's outputs on the test's own inputs. A model that onnxruntime
or onnx.reference runs must be written; nothing may crash.
"""

from __future__ import annotations

import pytest

from benchmarks.bench_onnx_tests import BAD, cases, check_case

#: One or two cases per kind of trouble the whole benchmark found: integer inputs that index, shape or
#: count (gather, scatter, tile, reshape, expand, topk, cumsum, onehot, resize), strings, sequences and
#: optionals, If/Loop with sequences, random ops, IR-3 pytorch exports with weights as inputs, PRelu
#: weights, opset-11 sequence folding, ops whose outputs change type under inference (Unique).
SUBSET = (
    "test_gather_0",
    "test_gather_elements_1",
    "test_gathernd_example_int32",
    "test_scatternd",
    "test_scatter_elements_with_axis",
    "test_tile",
    "test_reshape_reordered_all_dims",
    "test_expand_dim_changed",
    "test_top_k",
    "test_cumsum_1d_reverse",
    "test_onehot_with_axis",
    "test_resize_upsample_sizes_nearest",
    "test_string_concat",
    "test_strnormalizer_export_monday_casesensintive_lower",
    "test_identity_opt",
    "test_identity_sequence",
    "test_sequence_insert_at_back",
    "test_optional_get_element_tensor",
    "test_loop13_seq",
    "test_if_seq",
    "test_split_to_sequence_1",
    "test_bernoulli_expanded",
    "test_dropout_default_mask",
    "test_unique_sorted_with_axis",
    "test_constantofshape_int_zeros",
    "test_slice_default_axes",
    "test_range_float_type_positive_delta_expanded",
    "pytorch-converted/test_Conv2d",
    "pytorch-converted/test_PReLU_2d_multiparam",
    "pytorch-converted/test_PixelShuffle",
    "pytorch-operator/test_operator_params",
    "simple/test_sequence_model5",
    "simple/test_sequence_model8",
)


@pytest.fixture(scope="module")
def subset() -> dict:
    found = {c.name: c for c in cases(SUBSET) if c.name in SUBSET}
    assert set(found) == set(SUBSET), sorted(set(SUBSET) - set(found))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("name", SUBSET)
def test_backend_case(name: str, subset: dict) -> None:
    outcome = check_case(subset[name])
    assert outcome.outcome not in BAD, f"{outcome.outcome}: {outcome.detail}"
