"""The small exception hierarchy every eqsat failure belongs to.

Each error carries an exit code for the CLI and renders as one line naming the file, the node and the
problem, so a user never needs a traceback to know what went wrong.
"""

from __future__ import annotations


class EqsatError(Exception):
    """Base class of eqsat's errors. `exit_code` is what the CLI returns."""

    exit_code = 1


class BadInputError(EqsatError):
    """The user's input cannot be used: a model that is missing, unreadable, malformed, invalid or cannot
    run, or an output path that cannot be written."""

    exit_code = 2

    def __init__(self, source: str, problem: str, node: str | None = None, op: str | None = None):
        self.source, self.problem, self.node, self.op = source, problem, node, op
        where = source
        if node is not None:
            where += f": node {node!r}" + (f" ({op})" if op else "")
        super().__init__(f"{where}: {problem}")


class VerificationError(EqsatError):
    """The optimized model does not reproduce the input's results within tolerance."""

    exit_code = 3


class FoldOverflowError(EqsatError):
    """Rules folded a constant that overflows its dtype (a scale folded into fp16 weights beyond 65504): the
    optimized model would compute inf where the input does not. `rules`: those that made the classes nearest above
    it (the fold among them, perhaps beside a canonicalization); eqsat.pipeline finds which to drop."""

    exit_code = 3

    def __init__(self, rules: list[str], constant: str, dtype: str):
        self.rules, self.constant, self.dtype = rules, constant, dtype
        named = ", ".join(repr(r) for r in rules)
        super().__init__(
            f"the constant {constant!r} that rewrites folded (rules near it: {named}) is beyond the largest "
            f"{dtype} (inf where the input computes finite values)"
        )


class InternalError(EqsatError):
    """A bug in eqsat (never the user's input)."""

    exit_code = 1


def first_line(exc: BaseException) -> str:
    """The first non-blank line of an exception's message (its type name if it has none)."""
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
