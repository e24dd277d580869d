"""Layout rules: transposes merged, removed, and sunk through the ops they commute with.

    Transpose(Transpose(x, p), q)     -> Transpose(x, p o q)
    Transpose(x, identity)            -> x
    U(Transpose(x, p))                -> Transpose(U(x), p)              U unary elementwise
    B(Transpose(a, p), Transpose(b, p)) -> Transpose(B(a, b), p)         B binary elementwise
    B(Transpose(a, p), c)             -> Transpose(B(a, Transpose(c, p^-1)), p)   c constant, same rank
    Pad(Transpose(x, p), pads)        -> Transpose(Pad(x, pads o p^-1), p)

Sinking keeps both forms in the e-graph; transposes that meet cancel through the first two rules, and
the extractor decides which layout to keep (coremltools reduce_transposes, Glow transpose sinking).
"""

from __future__ import annotations

from eqsat.rule import Rule, fact, op_pattern, rw
from eqsat.terms import BINARY, UNARY

COMPOSE = '(unstable-vec-map (unstable-fn "vec-get" p) q)'  # (p o q)[i] = p[q[i]]
MAX_RANK = 6

#: Unary ops with parameters that are elementwise and layout-agnostic.
PARAM_UNARY = ("LeakyRelu", "Elu", "HardSigmoid", "Gelu", "Clip", "Cast")


def _identity(rank: int) -> str:
    return "(vec-of " + " ".join(map(str, range(rank))) + ")"


def _pad_remap(rank: int) -> str:
    """pads' with pads'[j] = pads[ip[j]] and pads'[r+j] = pads[r+ip[j]]."""
    begins = [f"(vec-get pads (vec-get ip {j}))" for j in range(rank)]
    ends = [f"(vec-get pads (+ {rank} (vec-get ip {j})))" for j in range(rank)]
    return "(vec-of " + " ".join(begins + ends) + ")"


RULES = [
    Rule("transpose-merge", "layout", "exact", "glow:MergeTransposes; coreml:merge_consecutive_transposes",
         "Transpose(Transpose(x, p), q) -> Transpose(x, p o q)",
         (rw("(Transpose (Transpose x p) q)", f"(Transpose x {COMPOSE})", "(= (vec-length p) (vec-length q))"),),
         ruleset="simplify"),
    Rule("transpose-identity", "layout", "exact", "onnxoptimizer:eliminate_nop_transpose",
         "Transpose(x, identity perm) -> x",
         tuple(rw("(Transpose x p)", "x", f"(= p {_identity(r)})") for r in range(1, MAX_RANK + 1)),
         ruleset="simplify"),
    Rule("transpose-sink-unary", "layout", "exact", "glow:SinkTranspose; coreml:reduce_transposes",
         "U(Transpose(x, p)) -> Transpose(U(x), p) for unary elementwise U (Relu, Clip, Cast, Sigmoid, ...)",
         tuple(rw(op_pattern(op, "(Transpose x p)"), f"(Transpose {op_pattern(op, 'x')} p)")
               for op in sorted(UNARY) + list(PARAM_UNARY))),
    Rule("transpose-sink-binary", "layout", "exact", "glow:SinkTranspose; coreml:reduce_transposes",
         "B(Transpose(a, p), Transpose(b, p)) -> Transpose(B(a, b), p) for binary elementwise B",
         tuple(rw(f"({op} (Transpose a p) (Transpose b p))", f"(Transpose ({op} a b) p)") for op in sorted(BINARY))),
    Rule("transpose-sink-binary-const", "layout", "exact", "glow:SinkTranspose; coreml:reduce_transposes",
         "B(Transpose(a, p), c) -> Transpose(B(a, Transpose(c, p^-1)), p) for a constant c of the same rank "
         "that does not enlarge the output (either operand order)",
         tuple(
             fact(f"(= y ({op} (Transpose a p) c)) (is-const c) (= (vec-length (shape c)) (vec-length p)) "
                  "(= (shape y) (shape (Transpose a p))) (= ip (inv-perm p)) (= sa (shape a))",
                  f"(union y (Transpose ({op} a (Transpose c ip)) p)) (set (shape ({op} a (Transpose c ip))) sa)")
             for op in sorted(BINARY)
         ) + tuple(
             fact(f"(= y ({op} c (Transpose a p))) (is-const c) (= (vec-length (shape c)) (vec-length p)) "
                  "(= (shape y) (shape (Transpose a p))) (= ip (inv-perm p)) (= sa (shape a))",
                  f"(union y (Transpose ({op} (Transpose c ip) a) p)) (set (shape ({op} (Transpose c ip) a)) sa)")
             for op in sorted(BINARY)
         )),
    Rule("transpose-sink-pad", "layout", "exact", "glow:SinkTranspose; coreml:reduce_transposes",
         "Pad(Transpose(x, p), pads) -> Transpose(Pad(x, pads permuted by p^-1), p)",
         tuple(rw("(Pad (Transpose x p) pads v mode)", f"(Transpose (Pad x {_pad_remap(r)} v mode) p)",
                  f"(= (vec-length p) {r})", f"(= (vec-length pads) {2 * r})", "(= ip (inv-perm p))")
               for r in range(1, MAX_RANK + 1))),
]
