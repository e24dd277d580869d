"""The analysis facts the conv folds join (conv family): per-channel constants, the shape of a product by an
all-ones-shaped constant, and the finite and positive constants.

    per-channel(c, r)      c constant, an operand of + - * / whose other operand has shape r, shaped like r with
                           every axis but 1 set to 1
    shape(B(a, b)) = shape(a)   b of a's rank, all ones (and symmetrically)
    finite(c), positive(c)      through the ops that keep them
    bn-folds(y)                 1 where conv-bn-fold folds the batch norm y into its input's Conv, else 0
"""

from __future__ import annotations

from eqsat.engine.rule import fact, ones


def per_channel(c: str, ref: str) -> str:
    """Guards: `c` is a constant shaped like shape `ref` with every axis but 1 set to 1 (binds s_c)."""
    s = f"s_{c}"
    return (
        f"(is-const {c}) (= {s} (shape {c})) (> (vec-length {ref}) 1) (= (vec-length {s}) (vec-length {ref})) "
        f"(= {s} (vec-set {ones(ref)} 1 (vec-get {s} 1)))"
    )


#: per-channel(c, r): the constant c, an operand of an Add, Sub, Mul or Div whose other operand has shape r, is
#: shaped like r with every axis but 1 set to 1 (a per-channel constant or a scalar of r's rank): the guard of the
#: conv folds and bn-compose, computed once.
PER_CHANNEL = tuple(
    fact(f"{operand} (= r (shape a)) {per_channel('c', 'r')}", "(per-channel c r)")
    for operand in ("(= y (Binary op a c)) (arith op)", "(= y (Sub c a))")  # a + c, a - c, a * c, a / c; c - a
)


def broadcast_shape() -> tuple:
    """shape(B(a, b)) = shape(a) when b is all ones of a's rank (and symmetrically)."""
    return (
        fact(f"(= y (Binary op a b)) (arith op) (= sa (shape a)) (= (shape b) {ones('sa')})", "(set (shape y) sa)"),
        fact(f"(= y (Binary op a b)) (arith op) (= sb (shape b)) (= (shape a) {ones('sb')})", "(set (shape y) sb)"),
    )


def finite_facts() -> tuple:
    """finite(c): no element of the constant term c is NaN or infinite. Loaded constants get it from the loader;
    built ones from finite operands through ops that cannot make an infinity out of finite values except by
    overflowing the dtype: no division or reciprocal unless the divisor is positive (a zero divisor is how
    x / 0 = inf reaches a fold's weights as W * inf, whose sums are NaN)."""
    return (
        fact("(= y (Scalar v d s)) (< (abs v) inf)", "(finite y)"),
        fact("(view-of y c) (finite c)", "(finite y)"),  # Reshape, Transpose (reshape-facts)
        fact("(= y (Identity c)) (finite c)", "(finite y)"),
        fact("(= y (Unary op c)) (sign-unary op) (finite c)", "(finite y)"),  # -c, |c|
        fact("(= y (Unary op c)) (positive-unary op) (finite c) (positive c)", "(finite y)"),  # sqrt c, 1 / c
        fact('(= y (Binary op a b)) (arith op) (!= op "Div") (finite a) (finite b)', "(finite y)"),  # +, -, *
        fact("(= y (Div a b)) (finite a) (finite b) (positive b)", "(finite y)"),
    )


def positive_facts() -> tuple:
    return (
        fact("(= y (Scalar v d s)) (> v 0.0)", "(positive y)"),
        fact("(view-of y c) (positive c)", "(positive y)"),  # Reshape, Transpose (reshape-facts)
        fact("(= y (Unary op c)) (positive-unary op) (positive c)", "(positive y)"),  # sqrt c, 1 / c
        fact('(= y (Binary op a b)) (arith op) (!= op "Sub") (positive a) (positive b)', "(positive y)"),  # *, /, +
    )


#: bn-folds(y) is 1 where conv-bn-fold folds the foldable batch norm y into a Conv its input class holds (constant
#: weights of rank >= 3 of y's dtype; a bias of that dtype, or none: conv-zero-bias gives it a zero one first), else 0
#: (merged by max: egglog has no negation). The analysis saturates before each explore step, so bn-decompose reads
#: the e-graph's value. Mirrors conv-bn-fold's Conv query (ConvTranspose: always 0, decomposed as before).
BN_FOLDS = (
    fact("(bn-scale y x f t mu be dt)", "(set (bn-folds y) 0)"),
    fact(
        "(bn-scale y cv f t mu be dt) (= cv (Conv x w b ap dl g ks pd st)) (is-const w) (= sw (shape w)) "
        "(>= (vec-length sw) 3) (= dt (dtype w)) (= dt (dtype b))",
        "(set (bn-folds y) 1)",
    ),
    fact(
        "(bn-scale y cv f t mu be dt) (= cv (Conv x w (Absent) ap dl g ks pd st)) (is-const w) (= sw (shape w)) "
        "(>= (vec-length sw) 3) (= dt (dtype w)) (= sy (shape cv)) (> (vec-length sy) 1) (>= (vec-get sy 1) 0)",
        "(set (bn-folds y) 1)",
    ),
)
