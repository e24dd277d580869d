"""The whole pipeline behind `eqsat optimize`: load, fold, saturate, extract, lower, verify, save."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from eqsat.frontend import io
from eqsat.errors import FoldOverflowError, VerificationError
from eqsat.options import Options
from eqsat.report import Report
from eqsat.result import Result, timed

if TYPE_CHECKING:
    from eqsat.check.ahead import ReferenceAhead
    from eqsat.session import Session

__all__ = ["Result", "optimize"]  # Result lives in eqsat.result (Session.extract builds it too)

#: Re-optimizations after rules folded a constant that overflows its dtype (each drops the rules that did).
MAX_OVERFLOW_RETRIES = 4


def optimize(
    model: io.ModelSource,
    *,
    target: str = "cpu",
    extractor: str = "auto",
    cost: Callable | None = None,
    time_limit: float | None = None,
    node_limit: int | None = None,
    iter_limit: int | None = None,
    allow: Sequence[str] = (),
    disable: Sequence[str] = (),
    opset: int | None = None,
    verify: bool = True,
    output: str | os.PathLike | None = None,
    progress: Callable[[str], None] | None = None,
    extra_rules: Sequence[Any] = (),
    bisect: bool = False,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    inputs: Mapping[str, Any] | None = None,
    fix_input_shapes: Mapping[str, Sequence[int]] | None = None,
    strict: bool = False,
) -> Result:
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
    from eqsat.session import saturate

    options = Options(
        target=target,
        extractor=extractor,
        cost=cost,
        time_limit=time_limit,
        node_limit=node_limit,
        iter_limit=iter_limit,
        allow=tuple(allow),
        disable=tuple(disable),
        extra_rules=tuple(extra_rules),
        opset=opset,
        verify=verify,
        strict=strict,
        bisect=bisect,
        input_shapes=input_shapes,
        inputs=inputs,
        fix_input_shapes=fix_input_shapes,
    )
    ahead = _reference_ahead(options) if verify else None
    overflows: list[tuple[FoldOverflowError, list[str]]] = []  # each error, and the rules dropped for it
    source: Any = model  # after an overflow, the model as read and normalized once (Session.loaded)
    with _no_full_collections(), _waited(ahead):
        while True:
            session = saturate(source, options, progress=progress, ahead=ahead)
            try:
                result = session.extract(options=options, progress=progress, reference=ahead)
            except FoldOverflowError as exc:  # rules folded a constant beyond its dtype: again without them
                if options.strict or len(overflows) >= MAX_OVERFLOW_RETRIES:
                    raise
                source = session.loaded if session.loaded is not None else source
                dropped = _overflow_culprits(source, options, exc.rules)
                overflows.append((exc, dropped))
                options = dataclasses.replace(options, disable=(*options.disable, *dropped))
                continue
            except VerificationError as exc:  # the optimized model cannot run at all
                problem = str(exc).removesuffix("; output not written")
                reference = getattr(exc, "reference", None)  # the original's outputs, for every probe
                result = _drop_culprit(problem, session, None, reference, progress)
            else:
                reference = result.report.verification.reference if verify else None  # reused by every probe
                if verify and not result.report.verification.ok:
                    result = _drop_culprit(
                        f"{session.source}: {result.report.verification.summary()}",
                        session,
                        result.report,
                        reference,
                        progress,
                    )
            break
        report = result.report
        report.warnings[:0] = [
            f"{exc}; dropped {', '.join(repr(r) for r in dropped)} and re-optimized (--strict refuses instead)"
            for exc, dropped in overflows
        ]
        if output is not None:
            if progress is not None:
                progress("save")
            with timed(report, "save"):
                result.save(output)
    return result


def _reference_ahead(options: Options) -> ReferenceAhead:
    """The original's outputs, computed in a thread from loading on (eqsat.check.ahead), as verify would."""
    from eqsat.check.ahead import ReferenceAhead

    return ReferenceAhead(input_shapes=options.input_shapes, inputs=options.inputs, strict=options.strict)


@contextlib.contextmanager
def _waited(ahead: ReferenceAhead | None) -> Iterator[None]:
    """On the way out of a run that failed before verification, the thread computing the original's outputs
    is waited for: nothing of a failed run keeps working after it."""
    try:
        yield
    except BaseException:
        if ahead is not None:
            ahead.wait()
        raise


#: Generation-2 threshold while optimizing: never reached (Python counts generation-1 collections up to it).
_NEVER = 1 << 30


@contextlib.contextmanager
def _no_full_collections() -> Iterator[None]:
    """Python's full garbage collections (generation 2) held off while inside, the thresholds restored after.

    Each full collection walks every object alive, and a 10k-node model's IR, e-graph and tables are
    millions: at 96 transformer layers eleven of them took 3.0 of 20 s (0.2 s with none), and each costs
    more the larger the model, so their total grew faster than the model. Young collections still run and
    free the short-lived cycles; what is left for the next full collection after return is the cyclic
    garbage that outlived them (the peak grew 9 MB at 96 layers)."""
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], _NEVER)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def _overflow_culprits(model: Any, options: Options, near: Sequence[str]) -> list[str]:
    """The fewest rules to drop so that no folded constant overflows (FoldOverflowError). `near`: the rules that
    made the classes nearest above the first such constant (the fold among them, perhaps beside a
    canonicalization). Of those, the first whose absence alone avoids this overflow, trying the ones that change
    values (not `exact`) first; all of them when none does; again for the next overflow met; then each rule
    dropped is given back if the others suffice. Unverified saturations and extractions, only after an overflow."""
    from eqsat.rewrites.registry import all_rules

    exact = {r.name for r in all_rules() if r.soundness == "exact"}
    dropped: list[str] = []
    for _ in range(MAX_OVERFLOW_RETRIES):
        ordered = sorted(near, key=lambda r: (r in exact, r))
        pick = next((r for r in ordered if _overflows(model, options, [*dropped, r]) is None), None)
        if pick is not None:  # its trial met no overflow at all
            dropped.append(pick)
            break
        dropped += ordered
        again = _overflows(model, options, dropped)
        if again is None:
            break
        near = again.rules
    for rule in list(dropped):
        if len(dropped) > 1 and _overflows(model, options, [r for r in dropped if r != rule]) is None:
            dropped.remove(rule)
    return dropped


def _overflows(model: Any, options: Options, without: Sequence[str]) -> FoldOverflowError | None:
    """The FoldOverflowError optimizing `model` without the rules `without` meets (unverified), or None."""
    from eqsat.session import saturate

    trial = dataclasses.replace(options, disable=(*options.disable, *without), verify=False)
    try:
        saturate(model, trial).extract(options=trial)
    except FoldOverflowError as exc:
        return exc
    return None


def _drop_culprit(
    problem: str, session: Session, report: Report | None, reference: Any, progress: Callable[[str], None] | None
) -> Result:
    """After a failed verification: unless `strict`, bisect to the rule(s) responsible and return the verified
    result of the run without them, with a warning in its report; otherwise raise the VerificationError."""
    fired = session.saturation.rules_fired
    if session.options.strict or not fired:  # nothing to drop when no rule fired
        raise _verification_failure(problem, session, report, reference, progress)
    if progress is not None:
        progress("bisect")
    bisection = _bisect(session, reference, known_failure=(problem, tuple(fired)))
    if not bisection.confirmed or bisection.result is None:
        raise _verification_failure(problem, session, report, reference, progress, bisection)
    result = bisection.result
    names = ", ".join(repr(c) for c in bisection.culprits)
    result.report.warnings.append(
        f"rule{'s' if len(bisection.culprits) > 1 else ''} {names} unsound on this model: verification failed "
        f"with {'them' if len(bisection.culprits) > 1 else 'it'} ({problem.removeprefix(session.source + ': ')}); "
        f"dropped and re-optimized ({len(bisection.probes)} probes; --strict refuses instead)"
    )
    result.bisection = bisection
    from eqsat.breakdown import attach

    with timed(result.report, "breakdown"):  # probes skip it: only the result kept is broken down
        attach(result)
    return result


def _bisect(session: Session, reference: Any, known_failure: tuple[str, tuple[str, ...]] | None = None) -> Any:
    """`eqsat.bisect.find_culprit` on what the session saturated (read, checked and normalized once) under
    the session's options."""
    from eqsat.bisect import find_culprit

    loaded = session.loaded if session.loaded is not None else session.original  # a session saturate made has one
    return find_culprit(loaded, session.options, known_failure=known_failure, reference=reference)


def _verification_failure(
    problem: str,
    session: Session,
    report: Report | None,
    reference: Any,
    progress: Callable[[str], None] | None,
    bisection: Any = None,
) -> VerificationError:
    """The error for a failed verification: the problem, the rules that fired, and with `bisect` (or a
    `bisection` already made) the rule responsible (one line)."""
    fired = ", ".join(session.saturation.rules_fired) or "none"
    message = f"{problem}; rules fired: {fired}"
    if session.options.bisect and bisection is None:
        if progress is not None:
            progress("bisect")
        bisection = _bisect(session, reference)
    if bisection is not None:
        message += f"; {bisection.summary()}"
    elif session.saturation.rules_fired:
        message += "; rerun with --bisect to find the rule responsible"
    err = VerificationError(f"{message}; output not written")
    err.report = report  # type: ignore[attr-defined]
    err.bisection = bisection  # type: ignore[attr-defined]
    return err
