"""Tensor rules: Concat and Split (typed list ops: `(Concat list axis)`, `(Out (Split x axis sizes) k)`).

    TAppend(TNil, r) -> r,  TAppend(TCons(h, t), r) -> TCons(h, TAppend(t, r))      list append (analysis)
    Concat([.., Concat(inner, ax), ..], ax) -> Concat([.., inner.., ..], ax)         nested Concats flattened
    Out(Split(Concat(parts, ax), ax, sizes), k) -> parts[k]      sizes[k] = shape(parts[k])[ax] for every k
    Concat([Transpose(a_i, p)...], ax) -> Transpose(Concat([a_i...], p[ax]), p)      transpose sinking

Lists are matched element by element: the rules are generated for lists of up to MAX_LIST items. List
classes keep list semantics (two list classes are only ever unioned when they are the same list: TAppend
is the append function), so an Opaque node sharing a list with a Concat is never changed by these rules.
"""

from __future__ import annotations

from eqsat.rule import Rule, fact, rw

FAMILY = "tensor"
#: Longest Concat input list the generated patterns match.
MAX_LIST = 8


def tlist(items: list[str], tail: str = "(TNil)") -> str:
    out = tail
    for item in reversed(items):
        out = f"(TCons {item} {out})"
    return out


def _append() -> tuple:
    return (fact("(= l (TAppend a r)) (= a (TNil))", "(union (TAppend a r) r)"),
            fact("(= l (TAppend a r)) (= a (TCons h t))", "(union (TAppend a r) (TCons h (TAppend t r)))"))


def _concat_merge() -> tuple:
    rules = []
    for n in range(1, MAX_LIST + 1):
        items = [f"e{k}" for k in range(n)]
        for i in range(n):
            flat = tlist(items[:i], f"(TAppend il {tlist(items[i + 1:])})")
            rules.append(rw(f"(Concat {tlist(items)} ax)", f"(Concat {flat} ax)", f"(= e{i} (Concat il ax))"))
    return tuple(rules)


def _split_concat() -> tuple:
    rules = []
    for n in range(2, MAX_LIST + 1):
        items = [f"e{k}" for k in range(n)]
        guards = " ".join(f"(= s{k} (shape e{k})) (< ax (vec-length s{k})) (= (vec-get sz {k}) (vec-get s{k} ax))"
                          for k in range(n))
        rules.append(fact(f"(= sp (Split c ax sz)) (= c (Concat {tlist(items)} ax)) (>= ax 0) (= (vec-length sz) {n}) "
                          f"{guards}", " ".join(f"(union (Out sp {k}) e{k})" for k in range(n))))
    return tuple(rules)


def _transpose_sink_concat() -> tuple:
    rules = []
    for n in range(1, MAX_LIST + 1):
        items = [f"e{k}" for k in range(n)]
        guards = " ".join(f"(= e{k} (Transpose a{k} p))" for k in range(n))
        inner = tlist([f"a{k}" for k in range(n)])
        rules.append(rw(f"(Concat {tlist(items)} ax)", f"(Transpose (Concat {inner} (vec-get p ax)) p)",
                        f"{guards} (>= ax 0) (< ax (vec-length p))"))
    return tuple(rules)


RULES = [
    Rule("list-append", FAMILY, "exact", "eqsat:analysis",
         "TAppend(TNil, r) -> r and TAppend(TCons(h, t), r) -> TCons(h, TAppend(t, r)) (the list append other "
         "tensor rules build)",
         _append(), ruleset="analysis"),
    Rule("concat-merge", FAMILY, "exact", "glow:ConcatNode merging; onnxruntime:ConcatSliceElimination",
         "Concat([a, Concat([b, c], ax), d], ax) -> Concat([a, b, c, d], ax) (lists of up to 8 items)",
         _concat_merge(), ruleset="simplify"),
    Rule("split-concat", FAMILY, "exact", "glow:SplitConcat; tvm:SimplifyExpr (split of concatenate)",
         "Out(Split(Concat(parts, ax), ax, sizes), k) -> parts[k] when sizes are the parts' sizes along ax",
         _split_concat(), ruleset="simplify"),
    Rule("transpose-sink-concat", FAMILY, "exact", "glow:sink-transpose (Concat); coremltools:reduce_transposes",
         "Concat([Transpose(a, p), Transpose(b, p), ...], ax) -> Transpose(Concat([a, b, ...], p[ax]), p)",
         _transpose_sink_concat()),
]
