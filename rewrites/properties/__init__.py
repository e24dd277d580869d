"""Hypothesis properties beside the rules: `<family>.py` holds the graph builders of rewrites/<family>.py,
one per rule (`PROPERTIES`: rule name -> strategy of `eqsat.testing.RuleCase`), built with the drawing
toolkit of eqsat.testing (`rule_case`, `DrawnGraph`, eqsat.testing.draw). `eqsat.testing.PROPERTIES`
gathers them all; tests/test_structure.py fails if a family has no module here.
"""

from __future__ import annotations

from eqsat.rewrites.properties import (
    activation,
    analysis,
    cast,
    cleanup,
    conv,
    elementwise,
    layout,
    linear,
    normalization,
    pool,
    quant,
    reduce,
    tensor,
)

#: Every family's property module.
FAMILIES = (
    activation,
    analysis,
    cast,
    cleanup,
    conv,
    elementwise,
    layout,
    linear,
    normalization,
    pool,
    quant,
    reduce,
    tensor,
)
