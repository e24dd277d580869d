"""The metadata eqsat.engine.lower writes on every output node, read by eqsat.view.display, eqsat.ui.explain and
eqsat.subgraphs: the input nodes it came from, and the rules that made it (empty: carried over)."""

PROVENANCE_KEY = "eqsat.from"
RULES_KEY = "eqsat.rules"
