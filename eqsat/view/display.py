"""Pictures, tables and progress: how models, reports, sessions and e-graphs show themselves.

Jupyter calls `_repr_html_` / `_repr_svg_`; `Report`, `Result` and `Session` delegate here, and the
functions below return objects that display themselves (a `Picture` is SVG, a table is HTML):

- `picture(model)`: one graph; `compare(result)` or `compare(before, after)`: the input and the output
  side by side, output nodes that rules produced highlighted (a node is *changed* when its `eqsat.rules`
  metadata is non-empty or it has no `eqsat.from` metadata at all), input nodes that were not carried over
  unchanged shaded. SVG comes from graphviz's `dot` binary when it is on PATH (DOT text is written here,
  no Python package needed); without it a picture degrades to a node listing (HTML and text).
- `egraph_picture(session)`: a small e-graph, one cluster per e-class (for teaching-size graphs).
- `breakdown(result)`: estimated cost per op type before and after under the result's cost model, and how
  many output nodes each rule produced (the pipeline computes it into the report: eqsat.breakdown);
  `breakdown_text`, `breakdown_html` render it.
- `egraph_stats(egraph)`: classes, e-nodes, e-nodes per op.
- `report_text(report)` (what `Report.to_text` and `eqsat optimize --report` print), `report_html`,
  `result_html`, `session_html`.
- `Progress` (eqsat.view.progress): phase names with elapsed time on stderr for long CLI runs, silent unless
  it is a terminal. Tables are built by eqsat.view.tables, models read as records by eqsat.view.model_view.

Nothing here imports onnx, onnxruntime or egglog at module level: the CLI imports this for `--report`.
"""

from __future__ import annotations

import collections
import dataclasses
import html
import os
import shutil
import subprocess
from typing import Any, Mapping, Sequence

from eqsat.metadata import PROVENANCE_KEY, RULES_KEY  # the node metadata lowering writes
from eqsat.view.model_view import ModelGraph, changed_nodes, is_changed, kept_nodes, model_graph, short_attr  # noqa: F401
from eqsat.view.progress import Progress  # noqa: F401 (changed_nodes, Progress: part of this module's API)
from eqsat.view.tables import CHANGED_FILL, format_cost, headline_text, html_table, percent_change, text_table  # noqa: F401
from eqsat.engine.terms import PLUMBING_OPS  # noqa: F401 (what cost functions in notebook 02 leave out)

#: Graphs above this many nodes (both sides of a comparison together) are listed, not drawn.
MAX_DRAWN_NODES = 1500
#: A Result's HTML embeds its before/after picture up to this many nodes (`compare(result)` draws more).
MAX_EMBEDDED_NODES = 400
#: Seconds `dot` may take before a picture falls back to the listing.
DOT_TIMEOUT = 60.0

_CHANGED_FILL, _CHANGED_LINE = CHANGED_FILL, "#2e7d32"
_DROPPED_FILL, _DROPPED_LINE = "#f6d6d6", "#b71c1c"
_PLAIN_FILL, _PLAIN_LINE = "#f2f2f2", "#8a8a8a"
_IO_FILL = "#dbe7f7"


# ---------------------------------------------------------------------------------------------------
# DOT and SVG


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _dot_body(g: ModelGraph, prefix: str, fills: Sequence[str | None], lines: list[str]) -> None:
    """Nodes and edges of `g` (ids prefixed), graph inputs and outputs as ellipses; initializers omitted."""
    producer: dict[str, str] = {}
    for k, (name, typ) in enumerate(g.inputs):
        if name in g.initializers:
            continue
        nid = f"{prefix}i{k}"
        producer[name] = nid
        lines.append(f'{nid} [shape=ellipse, fillcolor="{_IO_FILL}", label={_q(name + chr(10) + typ)}];')
    for n in g.nodes:
        nid = f"{prefix}n{n.index}"
        for out in n.outputs:
            if out:
                producer[out] = nid
        detail = short_attr(n.op.split("::")[-1], n.attrs)
        label = n.op + (f"\n{detail}" if detail else "")
        tip = [n.name or "(unnamed)"] + [f"{k}: {v}" for k, v in n.meta.items()]
        style = ""
        fill = fills[n.index]
        if fill == "changed":
            style = f', fillcolor="{_CHANGED_FILL}", color="{_CHANGED_LINE}", penwidth=1.6'
        elif fill == "dropped":
            style = f', fillcolor="{_DROPPED_FILL}", color="{_DROPPED_LINE}", style="rounded,filled,dashed"'
        lines.append(f"{nid} [label={_q(label)}, tooltip={_q(chr(10).join(tip))}{style}];")
    for n in g.nodes:
        for name in dict.fromkeys(i for i in n.inputs if i):
            src = producer.get(name)
            if src is not None:
                shape = g.shapes.get(name)
                lines.append(f"{src} -> {prefix}n{n.index}" + (f" [label={_q(shape)}];" if shape else ";"))
    for k, (name, typ) in enumerate(g.outputs):
        nid = f"{prefix}o{k}"
        lines.append(f'{nid} [shape=ellipse, fillcolor="{_IO_FILL}", label={_q(name + chr(10) + typ)}];')
        if name in producer:
            lines.append(f"{producer[name]} -> {nid};")


_DOT_HEADER = [
    'graph [rankdir=TB, fontname="Helvetica", fontsize=11, nodesep=0.2, ranksep=0.25];',
    f'node [shape=box, style="rounded,filled", fillcolor="{_PLAIN_FILL}", color="{_PLAIN_LINE}", '
    'fontname="Helvetica", fontsize=10, height=0.3, margin="0.08,0.03"];',
    'edge [color="#777777", arrowsize=0.6, fontname="Helvetica", fontsize=8, fontcolor="#666666"];',
]


def graph_dot(model: Any, *, highlight: bool = True, title: str | None = None) -> str:
    """DOT text for `model`; with `highlight`, the nodes eqsat changed (see `changed_nodes`) are green."""
    g = model_graph(model)
    marked = highlight and _has_provenance(g)
    fills = ["changed" if marked and is_changed(n) else None for n in g.nodes]
    lines = ["digraph model {", *_DOT_HEADER]
    if title:
        lines.append(f"labelloc=t; label={_q(title)};")
    _dot_body(g, "", fills, lines)
    lines.append("}")
    return "\n".join(lines)


def _has_provenance(g: ModelGraph) -> bool:
    return any(PROVENANCE_KEY in n.meta or RULES_KEY in n.meta for n in g.nodes)


def compare_dot(before: Any, after: Any) -> str:
    """DOT text with the input (left) and the output (right) as two clusters."""
    b, a = model_graph(before), model_graph(after)
    kept = kept_nodes(b, a)
    lines = ["digraph compare {", *_DOT_HEADER, "newrank=true;"]
    for prefix, g, fills, title in (
        (
            "b_",
            b,
            [None if k else "dropped" for k in kept],
            f"before: {len(b.nodes)} nodes ({kept.count(False)} not carried over unchanged, shaded red)",
        ),
        (
            "a_",
            a,
            ["changed" if is_changed(n) else None for n in a.nodes],
            f"after: {len(a.nodes)} nodes ({sum(map(is_changed, a.nodes))} changed by rules, green)",
        ),
    ):
        lines.append(f'subgraph cluster_{prefix[0]} {{ label={_q(title)}; labeljust=l; color="#cccccc"; style=rounded;')
        _dot_body(g, prefix, fills, lines)
        lines.append("}")
    lines.append("}")
    return "\n".join(lines)


def dot_available() -> str | None:
    """Path of graphviz's `dot` binary, or None."""
    return shutil.which("dot")


def render_svg(dot_text: str, timeout: float = DOT_TIMEOUT) -> tuple[str | None, str]:
    """(SVG text, "") from `dot -Tsvg`, or (None, why not) when dot is missing or fails."""
    dot = dot_available()
    if dot is None:
        return None, "graphviz's `dot` is not installed (apt-get install graphviz / brew install graphviz)"
    try:
        done = subprocess.run([dot, "-Tsvg"], input=dot_text, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"dot failed: {type(exc).__name__}: {exc}"
    if done.returncode != 0 or "<svg" not in done.stdout:
        return None, f"dot failed (exit {done.returncode}): {done.stderr.strip()[:200]}"
    return done.stdout[done.stdout.index("<svg") :], ""


class Picture:
    """A graph picture: SVG when graphviz's `dot` is available, else an HTML (and text) node listing.

    In Jupyter it shows itself; `.svg` is the SVG text (or None), `.dot` the DOT source, `.save(path)`
    writes .svg, .dot or (anything else) the text listing."""

    def __init__(
        self, dot: str, listing_html: str, listing_text: str, *, drawable: bool = True, note: str = ""
    ) -> None:
        self.dot, self.listing_html, self.listing_text = dot, listing_html, listing_text
        self.drawable, self.note = drawable, note
        self._svg: tuple[str | None, str] | None = None

    @property
    def svg(self) -> str | None:
        if self._svg is None:
            self._svg = render_svg(self.dot) if self.drawable else (None, self.note)
        return self._svg[0]

    @property
    def why_not_svg(self) -> str:
        return "" if self.svg is not None else (self._svg[1] if self._svg else "")

    def _repr_svg_(self) -> str | None:
        return self.svg

    def _repr_html_(self) -> str | None:
        if self.svg is not None:
            return None  # the SVG shows
        return (
            f'<div style="color:#777;font-size:11px">no picture: {html.escape(self.why_not_svg)}</div>'
            + self.listing_html
        )

    def html(self) -> str:
        """Inline HTML: the SVG when there is one, else the listing."""
        return self.svg if self.svg is not None else self._repr_html_() or ""

    def __repr__(self) -> str:
        return self.listing_text

    def save(self, path: str | os.PathLike) -> None:
        path = os.fspath(path)
        if path.endswith(".svg"):
            if self.svg is None:
                raise RuntimeError(f"no SVG: {self.why_not_svg}")
            text = self.svg
        elif path.endswith((".dot", ".gv")):
            text = self.dot
        else:
            text = self.listing_text
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)


def picture(model: Any, *, highlight: bool = True, title: str | None = None) -> Picture:
    """A picture of `model` (a ModelProto, onnx_ir Model, path or Result); eqsat's changes in green."""
    g = model_graph(model)
    too_big = len(g.nodes) > MAX_DRAWN_NODES
    return Picture(
        graph_dot(g, highlight=highlight, title=title),
        _listing_html(g, title),
        _listing_text(g, title),
        drawable=not too_big,
        note=f"{len(g.nodes)} nodes > {MAX_DRAWN_NODES}: listed, not drawn",
    )


def compare(before: Any, after: Any = None) -> Picture:
    """The input and the output side by side: `compare(result)` (the Result of `eqsat.optimize` or
    `Session.extract`) or `compare(before_model, after_model)`."""
    if after is None:
        result = before
        session = getattr(result, "session", None)
        if session is None:
            raise ValueError(
                "compare(result) needs a Result from eqsat.optimize or Session.extract; or pass compare(before, after)"
            )
        before, after = session.original, result.model
    b, a = model_graph(before), model_graph(after)
    kept = kept_nodes(b, a)
    too_big = len(b.nodes) + len(a.nodes) > MAX_DRAWN_NODES
    listing_html = (
        '<div style="display:flex;gap:16px;align-items:flex-start">'
        f"<div>{_listing_html(b, 'before', [not k for k in kept], _DROPPED_FILL)}</div>"
        f"<div>{_listing_html(a, 'after')}</div></div>"
    )
    listing_text = _listing_text(b, "before", [not k for k in kept], mark="-") + "\n\n" + _listing_text(a, "after")
    return Picture(
        compare_dot(b, a),
        listing_html,
        listing_text,
        drawable=not too_big,
        note=f"{len(b.nodes) + len(a.nodes)} nodes > {MAX_DRAWN_NODES}: listed, not drawn",
    )


def _listing_rows(g: ModelGraph) -> list[list[str]]:
    """One row per node (the callers mark the changed ones)."""
    rows = []
    for n in g.nodes:
        detail = short_attr(n.op.split("::")[-1], n.attrs)
        rules = n.meta.get(RULES_KEY, "").replace(",", ", ")
        rows.append(
            [
                str(n.index),
                n.op + (f" ({detail})" if detail else ""),
                n.name or "",
                ", ".join(i for i in n.inputs if i and i not in g.initializers),
                ", ".join(n.outputs),
                rules,
            ]
        )
    return rows


def _listing_marks(g: ModelGraph, marks: Sequence[bool] | None) -> list[bool]:
    if marks is not None:
        return list(marks)
    return [is_changed(n) for n in g.nodes] if _has_provenance(g) else [False] * len(g.nodes)


def _listing_html(
    g: ModelGraph, title: str | None, marks: Sequence[bool] | None = None, fill: str = _CHANGED_FILL
) -> str:
    marks = _listing_marks(g, marks)
    caption = f"{title + ': ' if title else ''}{len(g.nodes)} nodes" + (f", {sum(marks)} shaded" if any(marks) else "")
    table = html_table(
        ["#", "op", "name", "inputs", "outputs", "rules"],
        _listing_rows(g),
        caption=caption,
        shaded=[k for k, m in enumerate(marks) if m],
    )
    return table.replace(f'bgcolor="{_CHANGED_FILL}"', f'bgcolor="{fill}"')


def _listing_text(g: ModelGraph, title: str | None, marks: Sequence[bool] | None = None, mark: str = "*") -> str:
    marks = _listing_marks(g, marks)
    head = f"{title + ': ' if title else ''}{len(g.nodes)} nodes" + (
        f" ({sum(marks)} marked {mark})" if any(marks) else ""
    )
    ins = ", ".join(f"{n} {t}" for n, t in g.inputs if n not in g.initializers)
    outs = ", ".join(f"{n} {t}" for n, t in g.outputs)
    rows = [
        [mark if m else "", *r[:2], r[4], "<- " + r[3] if r[3] else "", r[5]] for m, r in zip(marks, _listing_rows(g))
    ]
    body = text_table(["", "#", "op", "outputs", "inputs", "rules"], rows)
    return f"{head}\n  inputs:  {ins}\n  outputs: {outs}\n{body}"


# ---------------------------------------------------------------------------------------------------
# e-graphs


@dataclasses.dataclass(frozen=True)
class EGraphStats:
    """Size of a decoded e-graph: tensor classes, e-nodes, e-nodes and classes per op."""

    eclasses: int  # classes of every sort (T, TL, N)
    tensor_classes: int  # sort T
    enodes: int
    constant_classes: int
    merged_classes: int  # classes holding more than one e-node: where alternatives exist
    largest_class: int
    classes_with_shape: int
    per_op: Mapping[str, int]  # op -> e-nodes, most first
    classes_per_op: Mapping[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in dataclasses.asdict(self).items()}

    def to_text(self) -> str:
        head = (
            f"e-graph: {self.enodes} e-nodes in {self.eclasses} e-classes ({self.tensor_classes} tensor, "
            f"{self.constant_classes} constant-only, {self.merged_classes} with alternatives, largest "
            f"{self.largest_class} e-nodes; {self.classes_with_shape} with a static shape)"
        )
        rows = [[op, n, self.classes_per_op[op]] for op, n in self.per_op.items()]
        return head + "\n" + text_table(["op", "e-nodes", "classes"], rows)

    def _repr_html_(self) -> str:
        return egraph_html(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.to_text())


def egraph_stats(egraph: Any) -> EGraphStats:
    """Statistics of an `eqsat.engine.egraph.EGraph` (or a Session: its e-graph)."""
    egraph = getattr(egraph, "egraph", egraph)
    per_op = collections.Counter(n.op for n in egraph.nodes)
    classes_per_op = collections.Counter(op for op, _ in {(n.op, n.eclass) for n in egraph.nodes})
    sizes = [len(c.nodes) for c in egraph.classes]
    return EGraphStats(
        eclasses=len(egraph.classes),
        tensor_classes=sum(c.sort == "T" for c in egraph.classes),
        enodes=len(egraph.nodes),
        constant_classes=sum(c.constant for c in egraph.classes),
        merged_classes=sum(s > 1 for s in sizes),
        largest_class=max(sizes, default=0),
        classes_with_shape=sum(c.shape is not None for c in egraph.classes),
        per_op=dict(sorted(per_op.items(), key=lambda kv: (-kv[1], kv[0]))),
        classes_per_op=dict(classes_per_op),
    )


def egraph_html(stats: EGraphStats) -> str:
    summary = html_table(
        ["", "count"],
        [
            ["e-classes", stats.eclasses],
            ["tensor e-classes", stats.tensor_classes],
            ["e-nodes", stats.enodes],
            ["constant-only classes", stats.constant_classes],
            ["classes with alternatives", stats.merged_classes],
            ["largest class (e-nodes)", stats.largest_class],
            ["classes with a static shape", stats.classes_with_shape],
        ],
        caption="e-graph",
    )
    ops = html_table(
        ["op", "e-nodes", "classes"],
        [[op, n, stats.classes_per_op[op]] for op, n in stats.per_op.items()],
        caption="e-nodes per op",
    )
    return _flex(summary, ops)


def _enode_label(node: Any) -> str:
    if node.op == "Input":
        return f"Input {node.attrs[0]}"
    if node.op == "Scalar":
        return f"{node.attrs[0]:g}"
    if node.op == "Const":
        return f"Const {str(node.attrs[0])[:6]}"
    if node.op == "Opaque" and node.attrs:
        return str(node.attrs[0]).split("::")[-1].split("#")[0]
    attrs = [",".join(map(str, a)) if isinstance(a, tuple) else str(a) for a in node.attrs]
    attrs = [a if len(a) <= 16 else a[:15] + "…" for a in attrs]
    return node.op + (f"\n{' '.join(attrs)}" if attrs else "")


def egraph_dot(egraph: Any, *, chosen: Mapping[int, int] | None = None) -> str:
    """DOT text of an e-graph: one dashed cluster per e-class, an edge from each e-node to its child
    classes; `chosen` (class -> node, e.g. `result.extraction.choice`) draws those e-nodes green."""
    egraph = getattr(egraph, "egraph", egraph)
    lines = ["digraph egraph {", *_DOT_HEADER, "compound=true;"]
    absent = {n.eclass for n in egraph.nodes if n.op == "Absent"}  # an omitted optional input: no box
    for c in egraph.classes:
        if not c.nodes or c.id in absent:
            continue
        fact = ("x".join(map(str, c.shape)) if c.shape else "") + (f" {c.dtype}" if c.dtype else "")
        rules = f"\nby {', '.join(c.rules)}" if c.rules else ""
        lines.append(
            f"subgraph cluster_c{c.id} {{ label={_q(f'c{c.id} {fact}'.strip() + rules)}; "
            'style="dashed,rounded"; color="#999999"; fontsize=9;'
        )
        for nid in c.nodes:
            node = egraph.nodes[nid]
            style = (
                f', fillcolor="{_CHANGED_FILL}", color="{_CHANGED_LINE}"'
                if chosen is not None and chosen.get(c.id) == nid
                else ""
            )
            lines.append(f"e{nid} [label={_q(_enode_label(node))}{style}];")
        lines.append("}")
    for node in egraph.nodes:
        if node.eclass in absent:
            continue
        for child in dict.fromkeys(node.children):
            members = egraph.classes[child].nodes
            if members and child not in absent:
                lines.append(f"e{node.id} -> e{members[0]} [lhead=cluster_c{child}];")
    lines.append("}")
    return "\n".join(lines)


def egraph_picture(session_or_egraph: Any, *, chosen: Any = None, max_nodes: int = 300) -> Picture:
    """A picture of a small e-graph (a Session or an EGraph); `chosen` may be a Result or an extraction
    (its chosen e-nodes are green). Above `max_nodes` e-nodes only the statistics are listed."""
    egraph = getattr(session_or_egraph, "egraph", session_or_egraph)
    choice = getattr(getattr(chosen, "extraction", chosen), "choice", chosen)
    stats = egraph_stats(egraph)
    drawable = len(egraph.nodes) <= max_nodes
    return Picture(
        egraph_dot(egraph, chosen=choice) if drawable else "",
        egraph_html(stats),
        stats.to_text(),
        drawable=drawable,
        note=f"{len(egraph.nodes)} e-nodes > {max_nodes}: statistics only",
    )


# ---------------------------------------------------------------------------------------------------
# cost breakdown


def breakdown(result: Any) -> Any:
    """The estimated cost per op type before and after, and the output nodes each rule produced: the
    `eqsat.breakdown.Breakdown` the pipeline computed into `result.report.breakdown`."""
    found = getattr(result.report, "breakdown", None)
    if found is None:
        why = [n for n in result.report.notes if n.startswith("no cost breakdown")]
        raise ValueError(why[0] if why else "this Result carries no cost breakdown (a body's or a probe's)")
    return found


#: Kept for old notebooks: the pipeline computes the breakdown now, this returns it.
add_breakdown = breakdown


def _breakdown_rows(b: Any, total: bool = True) -> list[list[Any]]:
    rows = [
        [
            o.op,
            o.nodes_before,
            o.nodes_after,
            format_cost(o.cost_before, b.unit),
            format_cost(o.cost_after, b.unit),
            percent_change(o.cost_before, o.cost_after),
        ]
        for o in b.ops
    ]
    if total:
        rows.append(
            [
                "total",
                sum(o.nodes_before for o in b.ops),
                sum(o.nodes_after for o in b.ops),
                format_cost(b.cost_before, b.unit),
                format_cost(b.cost_after, b.unit),
                percent_change(b.cost_before, b.cost_after),
            ]
        )
    return rows


#: The op table's header: "folded" is the input after constant folding (what was encoded).
_BREAKDOWN_HEADER = ["op", "nodes folded", "after", "cost before", "after", "change"]


def breakdown_text(b: Any) -> str:
    """An `eqsat.breakdown.Breakdown` as a text table."""
    title = f"estimated cost per op ({b.target or 'custom cost'})"
    return title + "\n" + text_table(_BREAKDOWN_HEADER, _breakdown_rows(b))


def breakdown_html(b: Any) -> str:
    """An `eqsat.breakdown.Breakdown` as an HTML table."""
    table = html_table(
        ["op", "nodes folded", "nodes after", "cost before", "cost after", "change"],
        _breakdown_rows(b),
        caption=f"estimated cost per op ({b.target or 'custom cost'})",
    )
    notes = "".join(f'<div style="color:#777;font-size:11px">{html.escape(n)}</div>' for n in b.notes)
    return table + notes


# ---------------------------------------------------------------------------------------------------
# reports


def _size_rows(report: Any) -> list[list[Any]]:
    """Rows of input / folded / output: ops without Constant nodes, Constant nodes, watched ops, e-nodes, cost.
    "folded" is what was encoded (after constant folding): the op table's "nodes folded" and "cost before"."""
    folded_ops = getattr(report, "ops_folded", None)
    before, after = report.watched(report.ops_before), report.watched(report.ops_after)
    folded = report.watched(folded_ops) if folded_ops is not None else {}
    count = report.ops_before_count if hasattr(report, "ops_before_count") else report.nodes_before
    count_after = report.ops_after_count if hasattr(report, "ops_after_count") else report.nodes_after
    count_folded = sum(n for op, n in folded_ops.items() if op != "Constant") if folded_ops is not None else ""
    rows: list[list[Any]] = [
        ["ops (no Constant)", count, count_folded, count_after, percent_change(count, count_after)]
    ]
    constants = [
        report.ops_before["Constant"],
        folded_ops["Constant"] if folded_ops is not None else "",
        report.ops_after["Constant"],
    ]
    if any(constants):
        rows.append(["Constant nodes", *constants, ""])
    rows += [[k, before[k], folded.get(k, ""), after[k], ""] for k in before if before[k] or after[k] or folded.get(k)]
    sat = report.saturation
    if sat is not None:
        rows.append(["e-nodes", "", sat.enodes_loaded, sat.enodes, ""])
    b = getattr(report, "breakdown", None)
    if b is not None:
        rows.append(
            [
                f"est. cost ({b.target or 'custom'})",
                "",
                format_cost(b.cost_before, b.unit),
                format_cost(b.cost_after, b.unit),
                percent_change(b.cost_before, b.cost_after),
            ]
        )
    elif report.extraction is not None:
        rows.append(
            [
                f"est. cost ({report.extraction.target or 'custom'})",
                "",
                "-",
                format_cost(report.extraction.dag_cost, "s" if report.extraction.target else ""),
                "",
            ]
        )
    return rows


_SIZE_HEADER = ["", "input", "folded", "after", "change"]


def _rule_rows(report: Any) -> list[list[Any]]:
    fired = report.saturation.rules_fired if report.saturation is not None else {}
    b = getattr(report, "breakdown", None)
    used = dict(b.rules_in_output) if b is not None else {}
    names = sorted(set(fired) | set(used), key=lambda r: (-used.get(r, 0), -fired.get(r, 0), r))
    return [[r, fired.get(r, 0), used.get(r, 0) if b is not None else "-"] for r in names]


def _saturation_lines(sat: Any) -> list[str]:
    lines = [
        f"saturation   {sat.stop_reason} after {sat.iterations} iterations in {sat.seconds * 1000:.0f} ms: "
        f"{sat.enodes_loaded} -> {sat.enodes} e-nodes"
        + (f", {sat.eclasses} e-classes" if sat.eclasses is not None else "")
    ]
    if sat.rules_total:
        lines.append(
            f"             {sat.rules_installed} of {sat.rules_total} egglog rules installed, "
            f"{sat.install_seconds * 1000:.0f} ms of it (the others read ops or facts this e-graph never held)"
        )
    if sat.overshoot:
        lines.append(
            f"             node limit {sat.limits.nodes} overshot by {sat.overshoot} "
            "(limits are checked between iterations)"
        )
    if not sat.deterministic:
        lines.append("             stopped by the time limit: results may differ run to run")
    if sat.error:
        lines.append(f"             egglog failed: {sat.error}")
    if sat.note:
        lines.append(f"             note: {sat.note}")
    return lines


def report_text(report: Any) -> str:
    """The report as text: the headline and the warnings first, then tables: sizes and estimated cost of the
    input, the folded input and the output, saturation, extraction, verification, rules (matches during
    saturation, nodes of the output they produced), cost per op, time per phase, notes."""
    lines = [f"eqsat report for {report.source}", f"  {headline_text(report)}"]
    warnings = list(getattr(report, "warnings", ()))
    lines += [f"  warning: {w}" for w in warnings]
    lines.append("")
    lines.append(text_table(_SIZE_HEADER, _size_rows(report)))
    lines.append("")
    if report.saturation is not None:
        lines += ["  " + line for line in _saturation_lines(report.saturation)]
    if report.extraction is not None:
        ext = report.extraction.to_text().splitlines()
        lines += [f"  {'extraction':<12} {ext[0].removeprefix('extraction ')}"]
        lines += [f"  {'':<12} {line.strip()}" for line in ext[1:]]
    if getattr(report, "subgraphs", None) is not None:
        lines.append(f"  {'subgraphs':<12} {report.subgraphs.summary()} (node counts include bodies)")
    lines.append(
        f"  {'verification':<12} " + (report.verification.summary() if report.verification is not None else "not run")
    )
    rules = _rule_rows(report)
    if rules:
        lines += ["", text_table(["rule", "matches", "in output"], rules)]
    elif report.saturation is not None:
        lines += ["", "  rules fired: none"]
    b = getattr(report, "breakdown", None)
    if b is not None and b.ops:
        lines += ["", text_table(_BREAKDOWN_HEADER, _breakdown_rows(b, total=False))]
    phases = [[k, f"{v * 1000:.0f}"] for k, v in report.phases.items()] + [["total", f"{report.seconds * 1000:.0f}"]]
    lines += ["", text_table(["phase", "ms"], phases)]
    notes = list(report.notes) + (list(b.notes) if b is not None else [])
    if notes:
        lines.append("")
        lines += [f"  note: {n}" for n in notes]
    return "\n".join(lines)


def _flex(*parts: str) -> str:
    return (
        '<div style="display:flex;flex-wrap:wrap;gap:4px 16px;align-items:flex-start">'
        + "".join(f"<div>{p}</div>" for p in parts if p)
        + "</div>"
    )


def report_html(report: Any) -> str:
    """The report as HTML tables (what `Report._repr_html_` shows)."""
    head = (
        f'<div style="font-weight:bold;margin:4px 0">eqsat report for {html.escape(str(report.source))}</div>'
        f'<div style="margin:2px 0">{html.escape(headline_text(report))}</div>'
        + "".join(
            f'<div style="color:#b71c1c;margin:2px 0">warning: {html.escape(w)}</div>'
            for w in getattr(report, "warnings", ())
        )
    )
    sizes = html_table(_SIZE_HEADER, _size_rows(report), caption="sizes")
    facts = []
    if report.saturation is not None:
        facts += [["saturation", line.split("   ", 1)[-1].strip()] for line in _saturation_lines(report.saturation)]
    if report.extraction is not None:
        facts.append(["extraction", report.extraction.to_text().split("\n")[0].removeprefix("extraction ")])
        facts += [["", n] for n in report.extraction.notes]
    if getattr(report, "subgraphs", None) is not None:
        facts.append(["subgraphs", report.subgraphs.summary()])
    facts.append(["verification", report.verification.summary() if report.verification is not None else "not run"])
    facts += [["note", n] for n in report.notes]
    run = html_table(["", ""], facts, caption="run") if facts else ""
    rules = _rule_rows(report)
    rule_table = html_table(["rule", "matches", "in output"], rules, caption="rules fired") if rules else ""
    phases = html_table(
        ["phase", "ms"],
        [[k, f"{v * 1000:.0f}"] for k, v in report.phases.items()] + [["total", f"{report.seconds * 1000:.0f}"]],
        caption="time per phase",
    )
    b = getattr(report, "breakdown", None)
    costs = breakdown_html(b) if b is not None else ""
    return head + _flex(sizes, run) + _flex(rule_table, costs, phases)


def result_text(result: Any) -> str:
    """A Result as text: its report (the cost breakdown in it)."""
    return report_text(result.report)


def result_html(result: Any, *, pictures: bool = True) -> str:
    """A Result: its report with the cost breakdown, and (collapsed) the input and output pictures."""
    out = report_html(result.report)
    session = getattr(result, "session", None)
    if pictures and session is not None:
        size = len(session.original.graph.node) + result.report.nodes_after
        if size <= MAX_EMBEDDED_NODES:
            pic = compare(result)
            body = pic.svg if pic.svg is not None else pic._repr_html_()
        else:
            body = f"<div>{size} nodes: show them with <code>eqsat.view.display.compare(result)</code></div>"
        out += f"<details><summary>before / after</summary>{body}</details>"
    return out


def session_html(session: Any) -> str:
    """A Session: what was saturated, the e-graph's statistics and the rules that fired."""
    head = (
        f'<div style="font-weight:bold;margin:4px 0">eqsat session for {html.escape(str(session.source))}</div>'
        f'<div style="font-size:12px">{html.escape(" / ".join(_saturation_lines(session.saturation)))}; '
        f"{len(session.rules)} rules installed; extract with <code>session.extract(target)</code> "
        "or <code>session.extract(cost=fn)</code></div>"
    )
    fired = session.saturation.rules_fired
    rules = (
        html_table(["rule", "matches"], sorted(fired.items(), key=lambda kv: (-kv[1], kv[0])), caption="rules fired")
        if fired
        else ""
    )
    phases = html_table(
        ["phase", "ms"], [[k, f"{v * 1000:.0f}"] for k, v in session.phases.items()], caption="time per phase"
    )
    return head + _flex(egraph_html(egraph_stats(session.egraph)), rules, phases)
