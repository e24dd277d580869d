"""Costs for people: seconds as us/ms/s (the roofline targets' unit), anything else with 4 significant digits.
Shared by the extraction summary (extract/result.py) and the views (eqsat.view.tables)."""

from __future__ import annotations

import math


def format_cost(value: float | None, unit: str = "s") -> str:
    """A cost for people: seconds as us/ms/s, anything else with 4 significant digits; None or NaN as '-'."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if unit != "s":
        return f"{value:.4g}"
    if value == 0:
        return "0"
    if not math.isfinite(value):
        return str(value)
    if abs(value) < 1e-3:
        return f"{value * 1e6:.1f} us"
    if abs(value) < 1:
        return f"{value * 1e3:.2f} ms"
    return f"{value:.3f} s"
