"""The metadata eqsat.lower writes on every output node, read by eqsat.display, eqsat.explain and
eqsat.subgraphs: the input nodes it came from, and the rules that made it (empty: carried over)."""

PROVENANCE_KEY = "eqsat.from"
RULES_KEY = "eqsat.rules"
