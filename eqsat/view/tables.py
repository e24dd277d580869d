"""Text and HTML tables, cost formatting and the one-line headline for reports, breakdowns and listings
(eqsat.view.display; the command prints `headline_text` without importing the pictures)."""

from __future__ import annotations

import html
from typing import Any, Iterable, Sequence

from eqsat.extract.units import format_cost  # noqa: F401 (part of this module's API)


#: Fill of what eqsat changed: highlighted nodes in pictures, marked rows in tables.
CHANGED_FILL = "#c8ecc8"
_TABLE = (
    'style="border-collapse:collapse;font-size:12px;margin:4px 12px 8px 0;'
    'font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif"'
)
_CELL = 'style="border:1px solid #ddd;padding:2px 6px;text-align:{}"'


# ---------------------------------------------------------------------------------------------------
# tables


def text_table(header: Sequence[str], rows: Iterable[Sequence[Any]], indent: str = "  ") -> str:
    """Aligned text columns: the first column left-aligned, numbers right-aligned."""
    cells = [[str(h) for h in header]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    numeric = [i > 0 and all(_numeric(r[i]) for r in cells[1:]) for i in range(len(header))]
    lines = []
    for row in cells:
        parts = [c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append((indent + "  ".join(parts)).rstrip())
    return "\n".join(lines)


def html_table(
    header: Sequence[str], rows: Iterable[Sequence[Any]], *, caption: str | None = None, shaded: Iterable[int] = ()
) -> str:
    """An HTML table (cells escaped); rows whose index is in `shaded` get the "changed" background."""
    rows = [["" if c is None else str(c) for c in row] for row in rows]
    numeric = [i > 0 and bool(rows) and all(_numeric(r[i]) for r in rows) for i in range(len(header))]
    marked = set(shaded)
    out = [f"<table {_TABLE}>"]
    if caption:
        out.append(f'<caption style="text-align:left;font-weight:bold;padding:2px 0">{html.escape(caption)}</caption>')
    if any(str(h) for h in header):
        out.append("<tr>" + "".join(f"<th {_CELL.format('left')}>{html.escape(str(h))}</th>" for h in header) + "</tr>")
    for k, row in enumerate(rows):
        bg = f' bgcolor="{CHANGED_FILL}"' if k in marked else ""
        out.append(
            f"<tr{bg}>"
            + "".join(
                f"<td {_CELL.format('right' if numeric[i] else 'left')}>{html.escape(c)}</td>"
                for i, c in enumerate(row)
            )
            + "</tr>"
        )
    out.append("</table>")
    return "".join(out)


def _numeric(text: str) -> bool:
    t = text.strip().replace(",", "").replace("%", "").replace("+", "").replace("-", "")
    t = t.split(" ")[0] if t else t
    try:
        float(t)
        return True
    except ValueError:
        return text.strip() in ("", "-")


def percent_change(before: float | None, after: float | None) -> str:
    if before is None or after is None or not before:
        return ""
    change = (after - before) / before * 100
    return "0%" if abs(change) < 0.05 else f"{change:+.1f}%"


def headline_text(report: Any) -> str:
    """One line: ops (Constant nodes not counted) before and after, Constant nodes lifted, estimated cost change."""
    h = report.headline() if hasattr(report, "headline") else {}
    if not h:
        return f"{report.nodes_before} -> {report.nodes_after} nodes"
    text = f"{h['ops_before']} -> {h['ops_after']} ops"
    change = percent_change(h["ops_before"], h["ops_after"])
    text += f" ({change})" if change else ""
    if h["constants_before"] or h["constants_after"]:
        text += (
            f", Constant nodes {h['constants_before']} -> {h['constants_after']} (lifted to initializers, not counted)"
        )
    if h["cost_after"] is not None:
        where = h["target"] or "custom cost"
        before, after = format_cost(h["cost_before"], h["unit"]), format_cost(h["cost_after"], h["unit"])
        text += f"; est. cost ({where}) {before} -> {after}"
        change = percent_change(h["cost_before"], h["cost_after"])
        text += f" ({change})" if change else ""
    return text
