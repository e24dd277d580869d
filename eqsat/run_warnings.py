"""The warnings of a run: every condition that changed what the run could do, said at the top of its report
(text, HTML, JSON `warnings`) and in `Result.warnings`, not only in a sub-report's note.

Kinds (each has a test in tests/test_warnings.py): shape facts dropped (symbolic facts conflicted, saturated
on static facts), a rule set restricted (`disable`), a time or node limit hit, egglog failing, an output
not verified (verification off, a re-extraction not yet checked, no drawn input ran the original), a body
left as it was, graph inputs with overridable defaults (read as inputs: nothing of them is folded), training
information dropped. A rule dropped as unsound is added by eqsat.pipeline when it drops it.
"""

from __future__ import annotations

from typing import Any

#: The warning of a re-extraction (`Session.extract` without `verify`): `Result.verify()` or `.save()` check it.
PENDING_VERIFICATION = (
    "not verified: a re-extraction is checked only when asked; Result.verify() or .save() verifies it"
)
VERIFICATION_OFF = "not verified: verification was off (--no-verify / verify=False)"
#: The end of the warning of a failed verification (`Result.save()` refuses such a result).
REFUSED = "; save() refuses to write it"


#: Warnings that restate what the user asked for on the command line (stderr leaves them out; reports keep them).
_ASKED_FOR = (VERIFICATION_OFF, "rule set restricted: ")


def asked_for(warning: str) -> bool:
    """Whether `warning` only restates a flag the user gave (--no-verify, --disable)."""
    return warning.startswith(_ASKED_FOR)


def of_saturation(saturation: Any, options: Any) -> list[str]:
    """What saturation gave up: shape facts, rules, a limit, egglog itself."""
    found = []
    if saturation.note:
        found.append(f"shape facts dropped: {saturation.note}; rules that need a symbolic dim could not fire")
    if options.disable:
        found.append(f"rule set restricted: disabled {', '.join(options.disable)}")
    if saturation.stop_reason == "node-limit":
        found.append(
            f"node limit hit: saturation stopped at {saturation.enodes} e-nodes (limit "
            f"{saturation.limits.nodes}) after {saturation.iterations} iterations; the best graph found "
            "so far was extracted (raise --node-limit to explore further)"
        )
    elif saturation.stop_reason == "time-limit":
        found.append(
            f"time limit hit: saturation stopped after {saturation.seconds:.2f} s (limit "
            f"{saturation.limits.seconds:g} s) and {saturation.iterations} iterations; the best graph "
            "found so far was extracted, and it may differ run to run"
        )
    if saturation.error:
        found.append(f"egglog failed: {saturation.error}")
    return found


def of_defaults(overridable: list[str]) -> list[str]:
    """Graph inputs with default values a caller may override: read as inputs, so nothing of them is folded."""
    if not overridable:
        return []
    names = ", ".join(repr(n) for n in overridable[:5]) + (" and more" if len(overridable) > 5 else "")
    return [
        f"inputs with defaults: {len(overridable)} graph input(s) ({names}) hold an initializer a caller may "
        "override, so they are read as inputs and nothing computed from them is folded (exported with initializers "
        "as inputs? remove those from the graph inputs to let eqsat fold the weights)"
    ]


def of_training_info(original: Any) -> list[str]:
    """A model's training information, which names its weights as they were: not written."""
    if not original.training_info:
        return []
    return ["training information dropped: it names the weights as they were, and the optimized model has others"]


def of_bodies(stats: Any) -> list[str]:
    """Bodies of If/Loop/Scan left as they were."""
    return [f"body left as it was: {problem}" for problem in (stats.problems if stats is not None else ())]


def add(warnings: list[str], new: list[str]) -> None:
    """Append each of `new` that `warnings` does not hold yet."""
    warnings.extend(w for w in new if w not in warnings)


def of_verification(verification: Any, *, pending: bool = False) -> list[str]:
    """An output not verified: verification off, a re-extraction not yet checked, or no drawn input ran the
    original."""
    if verification is None:
        return [PENDING_VERIFICATION if pending else VERIFICATION_OFF]
    if not verification.ok:
        return [f"{verification.summary()}{REFUSED}"]
    if verification.unverified:
        return [f"not verified: {verification.unverified}; pass --inputs FILE.npz or --input-shape to verify"]
    return []


def replace_verification(warnings: list[str], verification: Any) -> None:
    """After `Result.verify()`: the verification warnings replaced by what it found."""
    warnings[:] = [w for w in warnings if not w.startswith("not verified: ") and not w.endswith(REFUSED)]
    add(warnings, of_verification(verification))
