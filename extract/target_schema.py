"""The keys a hardware target's TOML may hold (extract/targets/*.toml): a misspelled key or table is an
error naming it, never silently ignored."""

from __future__ import annotations

from typing import Any, Mapping

#: The keys a target TOML may hold: top-level keys, and per table (None: any key, as dtype names in [peak]).
TARGET_SCHEMA: Mapping[str, Mapping[str, Any] | None] = {
    "": dict.fromkeys(
        (
            "name",
            "description",
            "bandwidth",
            "launch",
            "view_fraction",
            "supported_ops",
            "unsupported_penalty",
            "layout",
            "layout_penalty",
            "tie_break",
            "value_info_dims",
        )
    ),
    "peak": None,
    "op_scale": None,
    "emulated": None,
    "fallback": dict.fromkeys(("peak", "bandwidth")),
    "fused": dict.fromkeys(("name", "producers", "consumers", "other_inputs", "mode", "all_inputs", "dtypes")),
    "qdq": dict.fromkeys(("ops", "zero_point_ops")),
    "quant": dict.fromkeys(("types", "symmetric", "other")),
    "blocked_layout": dict.fromkeys(("producers", "ops", "block", "dtypes")),
    "serial": dict.fromkeys(("ops", "step")),
    "relayout": dict.fromkeys(("ops", "ranks")),
}


def check_keys(data: Mapping[str, Any]) -> None:
    """Raise `ValueError` naming the first key or table `TARGET_SCHEMA` does not know (a misspelled key
    would otherwise be ignored without a word)."""
    for key, value in data.items():
        if isinstance(value, (dict, list)) and key in TARGET_SCHEMA and key:
            known = TARGET_SCHEMA[key]
            tables = value if isinstance(value, list) else [value]
            for table in tables:
                unknown = sorted(set(table) - set(known)) if known is not None and isinstance(table, dict) else []
                if unknown:
                    raise ValueError(f"unknown key {unknown[0]!r} in [{key}] (known: {', '.join(known or ())})")
        elif key not in TARGET_SCHEMA[""]:
            kind = "table" if isinstance(value, (dict, list)) else "key"
            raise ValueError(
                f"unknown {kind} {key!r} (known keys: {', '.join(TARGET_SCHEMA[''] or ())}; "
                f"tables: {', '.join(k for k in TARGET_SCHEMA if k)})"
            )
