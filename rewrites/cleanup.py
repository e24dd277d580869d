"""Cleanup rules: no-ops and idempotent chains removed.

    Relu(Relu(x)) -> Relu(x)
    x * 1 -> x, 1 * x -> x        when the scalar does not change the shape
    x + 0 -> x, 0 + x -> x        likewise
    Identity(x) -> x
    Dropout(x) -> x               (inference: no ratio or training_mode inputs)
"""

from __future__ import annotations

from eqsat.rule import Rule, rw

RULES = [
    Rule("relu-merge", "cleanup", "exact", "coreml:merge_consecutive_relus",
         "Relu(Relu(x)) -> Relu(x)", (rw("(Relu (Relu x))", "(Relu x)"),), ruleset="simplify"),
    Rule("mul-one", "cleanup", "exact", "coreml:noop_elimination",
         "x * 1 -> x when the output shape is x's",
         (rw("(Mul x (Scalar 1.0 dt s))", "x", "(= (shape __root) (shape x))"),
          rw("(Mul (Scalar 1.0 dt s) x)", "x", "(= (shape __root) (shape x))")), ruleset="simplify"),
    Rule("add-zero", "cleanup", "exact", "coreml:noop_elimination",
         "x + 0 -> x when the output shape is x's",
         (rw("(Add x (Scalar 0.0 dt s))", "x", "(= (shape __root) (shape x))"),
          rw("(Add (Scalar 0.0 dt s) x)", "x", "(= (shape __root) (shape x))")), ruleset="simplify"),
    Rule("identity-remove", "cleanup", "exact", "onnxoptimizer:eliminate_identity",
         "Identity(x) -> x", (rw("(Identity x)", "x"),), ruleset="simplify"),
    Rule("dropout-remove", "cleanup", "exact", "onnxoptimizer:eliminate_nop_dropout",
         "Dropout(x) -> x in inference", (rw("(Dropout x)", "x"),), ruleset="simplify"),
]
