"""All default rules together on the bundled real models: every e-class of the saturated e-graph must hold
e-nodes that compute the same tensor (eqsat.testing.assert_egraph_sound).

Precision-changing rules are left out: dropping a Q/DQ pair changes a value by up to one quantization step,
and through a deep network those steps compound past any fixed per-class tolerance (that is what
`--allow precision-changing` accepts); their own properties check them on small graphs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from eqsat.session import saturate
from eqsat.testing import assert_egraph_sound, assert_optimization_sound, random_feeds
from tests.rule_graphs import model, node

pytestmark = pytest.mark.slow  # python -m pytest -m "not slow" leaves these out (README)


def test_every_eclass_is_consistent_on_real_models(bundled_model: Path) -> None:
    session = saturate(bundled_model)
    assert session.saturation.error is None, session.saturation.error
    visited = assert_egraph_sound(session, random_feeds(session.original), context=f"{bundled_model.name}: ")
    assert visited == len(session.egraph.nodes)


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("value", [2**60 + 1, np.iinfo(np.int64).max])
def test_single_element_int64_constants_stay_exact(value: int) -> None:
    m = model([node("Min", ["x", "c"], "y")], [("x", "INT64", (3,))], initializers={"c": np.array(value, np.int64)})
    assert_optimization_sound(m, {"x": np.array([1, 2**62, value], np.int64)})
