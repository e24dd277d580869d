"""Rewrite rules, one family per module; `eqsat.rewrites.registry` is the one place they are registered."""
