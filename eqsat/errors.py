"""The small exception hierarchy every eqsat failure belongs to.

Each error carries an exit code for the CLI and renders as one line naming the file, the node and the
problem, so a user never needs a traceback to know what went wrong.
"""

from __future__ import annotations


class EqsatError(Exception):
    """Base class of eqsat's errors. `exit_code` is what the CLI returns."""

    exit_code = 1


class BadInputError(EqsatError):
    """The input model cannot be optimized: missing, unreadable, malformed or invalid."""

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


class InternalError(EqsatError):
    """A bug in eqsat (never the user's input)."""

    exit_code = 1
