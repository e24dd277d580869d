"""Rewrite rules, one family per module; `rewrites.registry` is the one place they are registered."""
