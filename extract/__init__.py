"""Extraction: cost models, hardware targets (targets/*.toml) and extractors, one per module."""
