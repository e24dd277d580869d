"""Which rule broke it? When verification fails, find the rule responsible by disabling fired rules.

    found = eqsat.bisect.find_culprit("model.onnx")          # same options as eqsat.optimize
    print(found.summary())   # rule 'x' is responsible: disabling it alone makes verification pass
    print(found.to_text())   # and every probe that led there

`eqsat optimize ... --bisect` runs this when verification fails and names the rule in its error line.

Each probe re-saturates the model with some rules disabled, extracts, lowers and verifies, exactly as
`eqsat.optimize` would (same target, extractor, limits and soundness classes). The candidates are the
rules that fired in the failing run, in schedule order (fact rules first, then simplify, then explore:
rules that only enable others come before the rules they enable). With `culprits` (found so far) always
disabled, a binary search finds the smallest prefix of the candidates that, enabled alone, still fails;
its last rule is the one the failure needs. Disabling that rule alone (with the earlier culprits) is
then confirmed to make verification pass. If it does not (two rules break the model independently), the
rule is kept as a culprit and the search runs again over the rules that still fire, until verification
passes or `max_culprits` are found. About log2(#fired) + 3 probes per culprit.

When the failure needs two rules together (a sound rewrite that exposes a pattern and an unsound one
that uses it), disabling either one fixes it; the search names the later of the two in schedule order,
and `needs` lists the smallest enabled prefix that still fails, for a human to read.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

from eqsat.frontend import io
from eqsat.errors import BadInputError, EqsatError
from eqsat.options import Options
from eqsat.engine.rule import RULESETS, Rule


if TYPE_CHECKING:
    from eqsat.session import Loaded


@dataclasses.dataclass(frozen=True)
class Probe:
    """One re-saturation: the rules disabled (beyond the caller's own), and whether it verified."""

    disabled: tuple[str, ...]
    ok: bool
    detail: str  # the verification summary, or the error that stood for it
    fired: tuple[str, ...] = ()  # rules that fired in this probe
    seconds: float = 0.0


@dataclasses.dataclass
class Bisection:
    """What `find_culprit` found. `culprits` empty: no rule explains the failure (or there was none)."""

    source: str
    failed: bool  # the run with every rule enabled failed verification
    failure: str  # its verification summary
    fired: tuple[str, ...]  # the rules that fired in it: the candidates
    culprits: tuple[str, ...] = ()  # disabling these (together) makes verification pass ...
    confirmed: bool = False  # ... as the last probe showed
    needs: tuple[str, ...] = ()  # smallest enabled prefix of candidates that failed (last culprit)
    probes: list[Probe] = dataclasses.field(default_factory=list)
    #: the Result of the confirming probe (culprits disabled, verified), when `confirmed`: what
    #: `eqsat.optimize` writes when it drops the culprits (not in `to_dict`)
    result: Any = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def culprit(self) -> str | None:
        """The single rule responsible, when there is exactly one."""
        return self.culprits[0] if self.confirmed and len(self.culprits) == 1 else None

    def summary(self) -> str:
        """One line (no newline): the verdict."""
        if not self.failed:
            return "bisect: verification passes with every rule enabled; nothing to bisect"
        n = len(self.probes)
        if self.confirmed and len(self.culprits) == 1:
            return (
                f"bisect: rule {self.culprits[0]!r} is responsible "
                f"(disabling it alone makes verification pass; {n} probes)"
            )
        if self.confirmed:
            names = ", ".join(repr(c) for c in self.culprits)
            return (
                f"bisect: rules {names} are responsible "
                f"(verification passes only with all of them disabled; {n} probes)"
            )
        if self.culprits:
            names = ", ".join(repr(c) for c in self.culprits)
            return f"bisect: rules {names} are involved, but verification still fails without them ({n} probes)"
        return (
            f"bisect: no rule is responsible: verification fails with every fired rule disabled "
            f"(a bug in encoding, extraction or lowering; {n} probes)"
        )

    def to_text(self) -> str:
        lines = [
            self.summary(),
            f"  failure: {self.failure}",
            f"  candidates ({len(self.fired)} fired): {', '.join(self.fired) or 'none'}",
        ]
        if self.needs:
            lines.append(f"  smallest failing prefix: {', '.join(self.needs)}")
        for k, p in enumerate(self.probes):
            what = f"disabled {', '.join(p.disabled)}" if p.disabled else "all rules enabled"
            lines.append(f"  probe {k}: {'pass' if p.ok else 'FAIL'} with {what} ({p.seconds:.2f} s): {p.detail}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("result", "probes")}
        return {**out, "probes": [dataclasses.asdict(p) for p in self.probes]}


def schedule_order(rules: Sequence[Rule]) -> list[Rule]:
    """Rules by ruleset (analysis, simplify, explore), registry order within a ruleset."""
    return sorted(rules, key=lambda r: RULESETS.index(r.ruleset))


def find_culprit(
    model: "io.ModelSource | Loaded",
    options: Options | None = None,
    *,
    rules: Sequence[Rule] | None = None,
    source: str | None = None,
    max_culprits: int = 4,
    progress: Callable[[str], None] | None = None,
    known_failure: tuple[str, Sequence[str]] | None = None,
    reference: Any = None,
    **changes: Any,
) -> Bisection:
    """Optimize `model` as `eqsat.optimize` would under `options` (eqsat.options.Options, with `changes`:
    `target`, `allow`, `extra_rules`, `input_shapes`, ...); if verification fails, find the rule(s) whose
    disabling makes it pass. `rules` replaces the rules the options select. `model` may be a session's
    `Loaded` (eqsat.session.load): then nothing is read, checked or normalized again.
    `known_failure` (the failure summary and the rules fired of a failed run with every rule enabled,
    as `eqsat.optimize` has one in hand) stands for the first probe.
    Every probe verifies on the same inputs (`inputs`, `input_shapes`, as in `eqsat.optimize`) against the
    same outputs of the original, computed once (`reference`, an `eqsat.check.verify.Reference` of this model, as
    `eqsat.optimize` has one in hand; made here otherwise). `progress` is called with a line per probe.
    Raises `BadInputError` for input that cannot be used (unreadable, or the original cannot run)."""
    from eqsat.rewrites.registry import select

    from eqsat.session import Loaded, load

    options = (options or Options()).replace(**changes)
    # read, check and normalize once (or never: a session's Loaded); every probe saturates it anew
    loaded = model if isinstance(model, Loaded) else load(model, options, source=source)
    proto, label = loaded.original, loaded.label
    probing = options.replace(verify=True)
    pool = tuple(rules) if rules is not None else select(options.allow, options.disable, options.extra_rules)
    order = {r.name: k for k, r in enumerate(schedule_order(pool))}
    say = progress or (lambda line: None)
    if reference is None or reference.unverified:
        from eqsat.check.verify import expected_outputs

        reference = expected_outputs(
            proto, source=label, input_shapes=options.input_shapes, inputs=options.inputs, strict=True
        )

    seen: dict[frozenset[str], Probe] = {}
    passing: dict[frozenset[str], Any] = {}  # Result of each probe that verified

    def probe(disabled: Sequence[str]) -> Probe:
        from eqsat.session import saturate

        off = frozenset(disabled)
        if off in seen:  # the same rules disabled again (a second search): the answer is known
            return seen[off]
        start = time.perf_counter()
        session = saturate(loaded, probing, rules=[r for r in pool if r.name not in off])
        fired = tuple(sorted(session.saturation.rules_fired, key=lambda n: order.get(n, len(order))))
        try:
            result = session.extract(options=probing, reference=reference, breakdown=False)
            ok, detail = result.report.verification.ok, result.report.verification.summary()
        except BadInputError:
            raise
        except EqsatError as exc:  # the optimized model cannot run, or lowering failed: a failure too
            ok, detail = False, str(exc)
        found = Probe(
            tuple(sorted(off, key=lambda n: order.get(n, len(order)))), ok, detail, fired, time.perf_counter() - start
        )
        if ok:
            passing[off] = result
        bisection.probes.append(found)
        seen[off] = found
        say(
            f"probe {len(bisection.probes) - 1}: {'pass' if ok else 'FAIL'} with {len(found.disabled)} rule(s) disabled"
        )
        return found

    bisection = Bisection(label, False, "", ())
    if known_failure is not None:
        detail, fired = known_failure
        bisection.failed, bisection.failure = True, detail
        bisection.fired = tuple(sorted(fired, key=lambda n: order.get(n, len(order))))
    else:
        first = probe(())
        bisection.failed, bisection.failure, bisection.fired = not first.ok, first.detail, first.fired
        if first.ok:
            return bisection
    culprits: list[str] = []
    candidates = list(bisection.fired)
    while candidates and len(culprits) < max_culprits:
        # invariant: with `culprits` disabled and every candidate enabled, verification fails
        none = probe([*culprits, *candidates])
        if not none.ok:
            break  # no candidate matters: the failure is not a rule's (or not only)
        lo, hi = 0, len(candidates)  # fails(hi) known; fails(lo) known not to
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if probe([*culprits, *candidates[mid:]]).ok:
                lo = mid
            else:
                hi = mid
        suspect = candidates[hi - 1]
        culprits.append(suspect)
        bisection.needs = tuple(candidates[:hi])
        confirm = probe(culprits)
        if confirm.ok:
            bisection.culprits, bisection.confirmed = tuple(culprits), True
            bisection.result = passing.get(frozenset(culprits))
            return bisection
        # another rule fails too: search again over what fires without the culprits found so far
        candidates = [n for n in confirm.fired if n not in culprits]
    bisection.culprits, bisection.confirmed = tuple(culprits), False
    return bisection
