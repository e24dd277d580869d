"""The whole pipeline behind `eqsat optimize`: load, fold, saturate, extract, lower, verify, save."""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Sequence

from eqsat.frontend import io
from eqsat.errors import VerificationError
from eqsat.report import Report
from eqsat.result import Result, timed

__all__ = ["Result", "optimize"]  # Result lives in eqsat.result (Session.extract builds it too)


def optimize(model: io.ModelSource, *, target: str = "cpu", extractor: str = "auto",
             cost: Callable | None = None, time_limit: float | None = None, node_limit: int | None = None,
             iter_limit: int | None = None, allow: Sequence[str] = (), disable: Sequence[str] = (),
             opset: int | None = None, verify: bool = True, output: str | os.PathLike | None = None,
             progress: Callable[[str], None] | None = None, extra_rules: Sequence[Any] = (),
             bisect: bool = False, input_shapes: Mapping[str, Sequence[int]] | None = None,
             inputs: Mapping[str, Any] | None = None,
             fix_input_shapes: Mapping[str, Sequence[int]] | None = None, strict: bool = False) -> Result:
    """Optimize `model` (a path, ModelProto or ir.Model) for `target` and return the result.

    With `verify` (the default) both models run on seeded inputs and a difference beyond tolerance raises
    `VerificationError` before anything is written: `inputs` (numpy arrays by input name) are fed as they
    are, `input_shapes` (dims by input name) size the inputs drawn for the others, and dynamic dims left
    open are sized from their names (eqsat.check.verify_inputs). `fix_input_shapes` (dims by input name) makes
    those inputs static in the model itself before folding. With `output`, the result is saved atomically.
    `progress` is called with each phase's name as it starts (eqsat.view.display.Progress draws them).
    An original that no drawn input runs is not verified: the result is returned (and written) with a
    warning in its report, or with `strict` a `BadInputError` is raised.
    When verification fails, no valid model is refused: the rule responsible is found (`eqsat.bisect.
    find_culprit`), dropped, and the model re-optimized without it; that result (verified) is returned and
    written, its report saying in `warnings` which rule was unsound on this model (the Bisection is
    `result.bisection`). Only when no rule explains the failure, or with `strict`, does it raise
    `VerificationError`, naming the first output that differs and the rules that fired; with `bisect` (or
    without `strict`) also the bisection's verdict (its `bisection` attribute).
    `extra_rules` (eqsat.engine.rule.Rule records) run alongside the registered rules (experiments, tests).
    """
    from eqsat.engine.saturate import Limits
    from eqsat.session import saturate

    limits = Limits.from_options(iter_limit=iter_limit, node_limit=node_limit, time_limit=time_limit)
    source = str(model) if isinstance(model, (str, os.PathLike)) else "<model>"
    rules = None
    if extra_rules:
        from eqsat.rewrites.registry import select

        rules = (*select(allow, disable), *extra_rules)
    session = saturate(model, limits=limits, allow=allow, disable=disable, rules=rules, opset=opset,
                       source=source, fix_input_shapes=fix_input_shapes, progress=progress)
    options = dict(target=target, extractor=extractor, cost=cost, time_limit=time_limit, node_limit=node_limit,
                   iter_limit=iter_limit, opset=opset, source=source,
                   rules=rules if rules is not None else session.rules, input_shapes=input_shapes, inputs=inputs)
    try:
        result = session.extract(target, cost=cost, extractor=extractor, verify=verify, input_shapes=input_shapes,
                                 inputs=inputs, progress=progress, strict=strict)
    except VerificationError as exc:  # the optimized model cannot run at all
        problem = str(exc).removesuffix("; output not written")
        options["reference"] = getattr(exc, "reference", None)  # the original's outputs, for every probe
        result = _drop_culprit(problem, session, None, bisect, strict, options, progress)
    else:
        if verify:
            options["reference"] = result.report.verification.reference  # reused by every bisection probe
        if verify and not result.report.verification.ok:
            result = _drop_culprit(f"{source}: {result.report.verification.summary()}", session, result.report,
                                   bisect, strict, options, progress)
    report = result.report
    if output is not None:
        if progress is not None:
            progress("save")
        with timed(report, "save"):
            result.save(output)
    return result


def _drop_culprit(problem: str, session: Any, report: Report | None, bisect: bool, strict: bool,
                  options: dict[str, Any], progress: Callable[[str], None] | None) -> Result:
    """After a failed verification: unless `strict`, bisect to the rule(s) responsible and return the verified
    result of the run without them, with a warning in its report; otherwise raise the VerificationError."""
    fired = session.saturation.rules_fired
    if strict or not fired:  # nothing to drop when no rule fired
        raise _verification_failure(problem, session, report, bisect, options, progress)
    from eqsat.bisect import find_culprit

    if progress is not None:
        progress("bisect")
    bisection = find_culprit(session.original, **options, known_failure=(problem, tuple(fired)))
    if not bisection.confirmed or bisection.result is None:
        raise _verification_failure(problem, session, report, bisect, options, progress, bisection)
    result = bisection.result
    names = ", ".join(repr(c) for c in bisection.culprits)
    result.report.warnings.append(
        f"rule{'s' if len(bisection.culprits) > 1 else ''} {names} unsound on this model: verification failed "
        f"with {'them' if len(bisection.culprits) > 1 else 'it'} ({problem.removeprefix(str(options['source']) + ': ')}); "
        f"dropped and re-optimized ({len(bisection.probes)} probes; --strict refuses instead)")
    result.bisection = bisection
    return result


def _verification_failure(problem: str, session: Any, report: Report | None, bisect: bool,
                          options: dict[str, Any], progress: Callable[[str], None] | None,
                          bisection: Any = None) -> VerificationError:
    """The error for a failed verification: the problem, the rules that fired, and with `bisect` (or a
    `bisection` already made) the rule responsible (one line)."""
    fired = ", ".join(session.saturation.rules_fired) or "none"
    message = f"{problem}; rules fired: {fired}"
    if bisect and bisection is None:
        from eqsat.bisect import find_culprit

        if progress is not None:
            progress("bisect")
        bisection = find_culprit(session.original, **options)
    if bisection is not None:
        message += f"; {bisection.summary()}"
    elif session.saturation.rules_fired:
        message += "; rerun with --bisect to find the rule responsible"
    err = VerificationError(f"{message}; output not written")
    err.report = report  # type: ignore[attr-defined]
    err.bisection = bisection  # type: ignore[attr-defined]
    return err
