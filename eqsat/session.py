"""Saturate once, extract many times: the e-graph engine behind `eqsat.optimize` and notebooks.

s = saturate("model.onnx")                 # load, fold, encode, saturate, decode
s.extract(target="npu")                    # re-extract in milliseconds: a new Result each time
s.extract(cost=my_cost_fn, extractor="greedy-dag")
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

import onnx

from eqsat.frontend import interface, io, normalize, weights
from eqsat.engine import prepared
from eqsat.engine.backend import Backend
from eqsat.engine.egraph import EGraph, decode, decoded
from eqsat.engine.encode import Encoding, encode
from eqsat.report import Report
from eqsat import run_warnings
from eqsat.breakdown import attach as attach_breakdown
from eqsat.engine.rule import SOUNDNESS, Rule
from eqsat.errors import InternalError
from eqsat.options import Options
from eqsat.engine.prepared import checkout
from eqsat.engine.rule_closure import CONSTRUCTORS, Usable, model_opset, present_constructors, usable_rules
from eqsat.engine.saturate import Limits, RunReport, run
from eqsat.engine import terms
from eqsat.engine.unify import MET_TABLE, Fact, met, unified

if TYPE_CHECKING:  # heavy modules stay lazy at run time
    import numpy as np
    import onnx_ir as ir

    from eqsat.result import Result
    from eqsat.extract.result import ExtractionResult
    from eqsat.check.ahead import ReferenceAhead
    from eqsat.check.verify import Reference
    from eqsat.subgraphs import Body


@dataclasses.dataclass
class Session:
    """A saturated e-graph and everything needed to lower any extraction of it."""

    source: str
    original: onnx.ModelProto  # the input as loaded
    normalized: onnx.ModelProto  # after folding: what was encoded (its large weights: `loaded.work`)
    encoding: Encoding
    egraph: EGraph
    saturation: RunReport
    rules: tuple[Rule, ...]
    phases: dict[str, float]
    bodies: tuple["Body", ...] = ()  # If/Loop/Scan bodies of the top-level graph (eqsat.subgraphs)
    children: dict[tuple[str, str, int], "Session"] = dataclasses.field(default_factory=dict)  # by body key
    notes: tuple[str, ...] = ()  # what loading decided (Ifs inlined by eqsat.frontend.decided_ifs)
    options: Options = Options()  # what it was asked (extractions default to it)
    loaded: "Loaded | None" = dataclasses.field(default=None, repr=False)  # what it saturated
    input_graph: EGraph | None = dataclasses.field(default=None, repr=False)  # the input, snapshot at load

    @property
    def roots(self) -> tuple[int, ...]:
        return tuple(self.egraph.refs[r] for r in self.encoding.outputs)

    @property
    def soundness(self) -> str:
        """The least exact soundness class among the rules that fired."""
        fired = self.saturation.rules_fired
        classes = {r.soundness for r in self.rules if r.name in fired}
        return max(classes, key=SOUNDNESS.index, default="exact")

    def input_extraction(self) -> "ExtractionResult":
        """The input graph as an extraction: the encoding as loaded, before any rule ran (snapshot at load),
        every e-class its one original e-node. Cost it like any extraction to compare before and after."""
        cached = self.__dict__.get("_input_extraction")
        if cached is None:
            from eqsat.extract.result import ExtractionResult

            graph = self.input_graph
            if graph is None:
                raise InternalError("the session holds no snapshot of its input graph")
            roots = tuple(graph.refs[r] for r in self.encoding.outputs)
            choice = {c.id: c.nodes[0] for c in graph.classes if c.nodes}
            cached = ExtractionResult(graph.with_roots(roots), choice, roots, "input", 0.0)
            self.__dict__["_input_extraction"] = cached
        return cached

    def _never_dearer_than_input(self, result: "ExtractionResult", cost: Callable) -> "ExtractionResult":
        """`result`, unless the chosen graph costs more on its own than among its alternatives (a cost model's
        per-class estimate, such as an epilogue fused with a producer its class holds but the choice does not
        use) and more than the input: then the input graph, with a note saying why."""
        result.check()
        estimate, own = result.dag_cost(cost), result.standalone().dag_cost(cost)
        if own <= estimate * (1 + 1e-9) + 1e-15:
            return result
        original = self.input_extraction()
        before = original.dag_cost(cost)
        if own <= before:
            return result
        why = (
            f"input kept: the {result.extractor} choice costs {own:.6g} as a graph of its own ({estimate:.6g} "
            f"estimated among its alternatives), the input {before:.6g}"
        )
        return dataclasses.replace(
            original, extractor=result.extractor, seconds=result.seconds, notes=result.notes + (why,)
        )

    def _repr_html_(self) -> str:
        from eqsat.view.display import session_html

        return session_html(self)

    def _repr_pretty_(self, p, cycle: bool) -> None:  # IPython's text form: not the models  # noqa: ANN001
        from eqsat.view.display import egraph_stats

        p.text(f"Session({self.source!r})\n{self.saturation.to_text()}\n{egraph_stats(self.egraph).to_text()}")

    def extract(
        self,
        target: str | None = None,
        *,
        options: Options | None = None,
        verify: bool | None = None,
        progress: Callable[[str], None] | None = None,
        reference: "Reference | ReferenceAhead | None" = None,
        breakdown: bool = True,
        **changes: Any,
    ) -> "Result":
        """Extract and lower the best graph for `target` (or for a custom `cost=fn(egraph, node)`), under
        `options` (default: the session's, verification off: a re-extraction is checked when asked) with
        `changes` (`cost`, `extractor`, `input_shapes`, `inputs`, `strict`: eqsat.options.Options fields).
        With `verify`, check it against the original on `inputs` (arrays by name) and inputs drawn with
        `input_shapes` (eqsat.check.verify.verify; `reference`: the original's outputs computed before, or being
        computed in a thread: eqsat.check.ahead). An original
        that no drawn input runs is not verified: a warning in the report, or with `strict` a BadInputError.
        `progress` is called with each phase's name as it starts. Without `options` or `verify` the result is
        not verified yet: its report says so, and `Result.verify()` or `.save()` checks it. With `breakdown`
        (off for bodies and bisection probes) the report gets the cost per op before and after
        (eqsat.breakdown) and with it the headline's cost change."""
        pending = options is None and verify is None and not changes.get("verify")
        options = (options or self.options.replace(verify=False)).replace(
            **changes,
            **({} if target is None else {"target": target}),
            **({} if verify is None else {"verify": verify}),
        )
        target, cost, extractor = options.target, options.cost, options.extractor
        from eqsat.engine.lower import lower
        from eqsat.result import Result, timed
        from eqsat.extract import extract_speculating
        from eqsat.extract.cost import load_target, roofline

        report = Report(
            self.source,
            io.proto_op_histogram(self.original),
            notes=list(self.notes),
            ops_folded=io.proto_op_histogram(self.normalized),
        )
        report.phases.update(self.phases)
        report.saturation = self.saturation
        note = progress or (lambda phase: None)
        note("extract")
        with timed(report, "extract"):
            if cost is None:
                hardware = load_target(target)  # its value_info_dims also say how lowering writes shapes
                cost_model: Callable = roofline(hardware)
            else:
                hardware, cost_model = None, cost
            inputs = {v.name for v in self.original.graph.input}  # their defaults are compared by value: kept in
            hold = None if self.bodies else (lambda name: name not in inputs)  # bodies compare outer weights too
            fresh_dims = hardware is not None and hardware.value_info_dims == "fresh"

            def lowered(choice: dict[int, int]) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
                return lower(self.egraph, choice, self.encoding, self.normalized, hold, fresh_dims)

            found, guess = extract_speculating(self.egraph, self.roots, cost_model, lowered, extractor=extractor)
            result = self._never_dearer_than_input(found, cost_model)
        # The extractor's provisional choice, lowered while it solved (eqsat.extract.speculation), counts as "lower":
        # "extract" is the time the run waited for the extractor beyond that, "lower" all the time spent lowering
        # (a speculation the final choice discards included); the phases still add up to the wall time.
        spent = guess.seconds if guess is not None else 0.0
        report.phases["extract"] -= spent
        report.extraction = result.summary(cost_model, target if cost is None else None)
        note("lower")
        report.phases["lower"] = report.phases.get("lower", 0.0) + spent
        with timed(report, "lower"):
            kept = guess.value if guess is not None and guess.matches(result) else None
            del guess  # a discarded model is not held through verification
            if kept is not None:  # lowering is a pure function of its inputs: the model lowering `result` gives
                model, arrays = kept
            else:  # no speculation, a different final choice, or the speculation failed (it fails here the same)
                model, arrays = lower(result.egraph, result.choice, self.encoding, self.normalized, hold, fresh_dims)
            del kept
        if self.bodies:
            from eqsat.subgraphs import put_back

            note("extract bodies")
            with timed(report, "extract bodies"):
                optimized: dict[tuple[str, str, int], object] = {}
                for key, child in self.children.items():
                    try:
                        optimized[key] = child.extract(options=options.replace(verify=False), breakdown=False).proto
                    except Exception as exc:  # noqa: BLE001 - any failure keeps the body as it was
                        optimized[key] = exc
                report.subgraphs = put_back(model, self.bodies, optimized)
        interface.restore(model, self.original)
        report.ops_after = io.proto_op_histogram(model)
        if options.verify:
            from eqsat.check.ahead import ReferenceAhead
            from eqsat.check.verify import verify as run_verify

            note("verify")
            with timed(report, "verify"):
                if isinstance(reference, ReferenceAhead):  # being computed in a thread: wait for it
                    reference = reference.result()
                report.verification = run_verify(
                    self.original,
                    model,
                    soundness=self.soundness,
                    source=self.source,
                    input_shapes=options.input_shapes,
                    inputs=options.inputs,
                    strict=options.strict,
                    reference=reference,
                    weights=arrays,
                    original_weights=self.encoding.arrays_by_name(),
                )
        run_warnings.add(
            report.warnings,
            run_warnings.of_saturation(self.saturation, options)
            + run_warnings.of_defaults(interface.overridable(self.original))
            + run_warnings.of_training_info(self.original)
            + run_warnings.of_bodies(report.subgraphs)
            + run_warnings.of_verification(report.verification, pending=pending),
        )
        held = {t.name: arrays[t.name] for t in model.graph.initializer if weights.is_placeholder(t)}
        del arrays  # verified: the output holds its weights, or `held` the large ones
        out = Result(
            model, report, result, session=self, cost_model=cost_model, pending_verification=pending, held=held
        )
        if breakdown:
            note("breakdown")
            with timed(report, "breakdown"):
                attach_breakdown(out)
        return out


#: egglog's complaint when two shape facts of one e-class differ in a size or a rank (shape-dim, shape-rank).
_SYMBOL_CONFLICT = "Illegal merge attempted for function shape"
#: Saturations again with symbols unified, at most (each round unifies at least one more symbol).
UNIFY_ROUNDS = 4


@dataclasses.dataclass(frozen=True)
class Loaded:
    """A model read, checked and normalized once: what every saturation of it starts from (bisection's
    probes saturate one Loaded again and again; the normalized IR is only read by encoding)."""

    label: str
    original: onnx.ModelProto  # as loaded (input shapes fixed when asked): the interface kept
    work: "ir.Model"  # normalized IR: what is encoded
    normalized: onnx.ModelProto  # its proto, large weights in `work` only: lowering, rule closure
    phases: dict[str, float]  # load and fold times


def load(
    model: io.ModelSource,
    options: Options | None = None,
    *,
    source: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Loaded:
    """Read and check `model`, fix input shapes and upgrade the opset as `options` ask, and normalize it."""
    options = options or Options()
    note = progress or (lambda phase: None)
    note("load")
    start = time.perf_counter()
    original, label = io.load_proto(model, name=source)
    if options.fix_input_shapes:
        from eqsat.frontend.fix_shapes import fix_input_shapes as fix

        original = fix(original, options.fix_input_shapes, label)
    upgraded = io.upgrade_opset(original, options.opset, label) if options.opset is not None else original
    phases = {"load": time.perf_counter() - start}
    note("fold")
    start = time.perf_counter()
    work, normalized = normalize.normalize_proto(upgraded, label)
    phases["fold"] = time.perf_counter() - start
    return Loaded(label, original, work, normalized, phases)


def saturate(
    model: "io.ModelSource | Loaded",
    options: Options | None = None,
    *,
    rules: Sequence[Rule] | None = None,
    limits: Limits | None = None,
    source: str | None = None,
    progress: Callable[[str], None] | None = None,
    depth: int = 0,
    lease: tuple[Backend, Usable] | None = None,
    ahead: "ReferenceAhead | None" = None,
    install_unread: bool = False,
    **changes: Any,
) -> Session:
    """Load, normalize, encode and saturate `model` under `options` (eqsat.options.Options, with `changes`:
    `allow`, `disable`, `opset`, `fix_input_shapes`, limits, ...); the returned Session extracts on demand.

    `rules` replaces the rules the options select (for experiments); `limits` the limits they name.
    `opset` upgrades the model first (onnx.version_converter) so that newer fused ops become available.
    `fix_input_shapes` makes those inputs' dims static first (eqsat.frontend.fix_shapes): the Session's original.
    `progress` is called with each phase's name as it starts (eqsat.view.display.Progress draws them).
    `model` may be a `Loaded` (eqsat.session.load): it is saturated as it is, not read or normalized again.
    If/Loop/Scan bodies get Sessions of their own (eqsat.subgraphs; `depth` is the nesting level of `model`).
    The rules installed are those the model can use (eqsat.engine.rule_closure; with `install_unread`, also those that
    only set facts no installed rule reads: tests counting a fact rule's matches), in a backend kept for the process
    (eqsat.engine.prepared); `lease` (a body's: its parent's backend and the rule selection it holds) is used
    instead, between push and pop. `ahead` (eqsat.check.ahead) is started on the original and the model's large
    weights once the model is loaded (phase "reference inputs"), before the rules are installed.
    """
    from eqsat.rewrites.registry import select

    note = progress or (lambda phase: None)
    options = (options or Options()).replace(**changes)
    limits = limits or Limits.from_options(options)
    loaded = model if isinstance(model, Loaded) else load(model, options, source=source, progress=progress)
    label, original, work, normalized = loaded.label, loaded.original, loaded.work, loaded.normalized
    phases = dict(loaded.phases) if loaded is not model else {}
    rules = tuple(rules) if rules is not None else select(options.allow, options.disable, options.extra_rules)
    if ahead is not None and not ahead.started:  # planned here, run in a thread from here on (eqsat.check.ahead)
        start = time.perf_counter()
        known = weights.large_arrays(work, (t.name for t in original.graph.initializer))  # what the runner reads
        ahead.start(original, known, label)
        phases["reference inputs"] = time.perf_counter() - start
    with contextlib.ExitStack() as lent:
        if lease is not None:  # a body: its parent's backend and rules
            backend, usable = lease
        else:  # the top-level model: a kept backend with the rules it (and its bodies) can use
            note("install rules")
            start = time.perf_counter()
            present, opset = present_constructors(normalized), model_opset(normalized)
            usable = usable_rules(rules, present, opset=opset, install_unread=install_unread)
            backend = lent.enter_context(checkout(usable))
            phases["install rules"] = time.perf_counter() - start
        bodies: tuple[Body, ...] = ()
        children: dict[tuple[str, str, int], Session] = {}
        if any(
            a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
            for n in normalized.graph.node
            for a in n.attribute
        ):
            from eqsat.subgraphs import bodies_of, problem_of

            note("saturate bodies")
            start = time.perf_counter()
            bodies = bodies_of(normalized, depth)
            for body in bodies:
                if body.child is None:
                    continue
                try:
                    if backend.broken:  # an egglog panic in an earlier body: the same rules, anew
                        backend = prepared.like(backend)
                    children[body.key] = saturate(
                        body.child,
                        options.replace(fix_input_shapes=None, opset=None),
                        source=body.where(),
                        depth=depth + 1,
                        lease=(backend, usable),
                        limits=limits,
                        rules=rules,
                    )
                except Exception as exc:  # noqa: BLE001 - any failure keeps the body as it was
                    body.problem = problem_of(body.where(), exc)
            phases["saturate bodies"] = time.perf_counter() - start
        note("encode")
        start = time.perf_counter()
        last = lease is None and prepared.take_single_load()  # the command's one model: no push, no pop
        egraph, encoding, report, input_graph = _saturate(backend, usable, work, limits, phases, start, note, last)
    report.rules_total = sum(len(r.egglog) for r in rules)
    notes = tuple(work.meta.get(normalize.DECIDED_IFS, ()))
    return Session(
        label,
        original,
        normalized,
        encoding,
        egraph,
        report,
        rules,
        phases,
        bodies,
        children,
        notes,
        options,
        loaded,
        input_graph,
    )


def _saturate(
    backend: Backend,
    usable: Usable,
    work: "ir.Model",
    limits: Limits,
    phases: dict[str, float],
    start: float,
    note: Callable[[str], None],
    last: bool = False,
) -> tuple[EGraph, Encoding, RunReport, EGraph]:
    """Encode `work` with symbolic shape facts and saturate it (with `last`, in `backend` without a push:
    `_in_backend`). Symbols that met in one e-class (facts the symbol recovery could not prove equal) are unified
    (eqsat.engine.unify) and the model saturated again with them, until none meet (at most `UNIFY_ROUNDS` times;
    every round's e-graph is sound). If two different sizes or ranks meet (egglog's illegal merge, at loading or
    during the run), again on static shape facts only, in a fresh backend: as sound as before symbols, and the
    report says so."""
    representatives: dict[int, int] = {}
    rounds = 0
    while True:
        encoding = encode(work, unified=representatives)
        try:
            egraph, report, input_graph, groups = _in_backend(
                backend, usable, encoding, limits, phases, start, note, last
            )
        except Exception as exc:  # egglog's EggSmolError while loading the facts
            if _SYMBOL_CONFLICT not in str(exc):
                raise
            where = "loading"
            break
        if report.error is not None and _SYMBOL_CONFLICT in report.error:
            where = "saturation"
            break
        found = unified(groups, representatives, encoding.symbols.preference) if groups else representatives
        if not groups or rounds == UNIFY_ROUNDS or found is None:
            if groups:
                report.note = f"symbols still met after {rounds} rounds of unification"
            return egraph, encoding, report, input_graph
        representatives, rounds = found, rounds + 1
    encoding = encode(work, symbolic=False)
    egraph, report, input_graph, _ = _in_backend(
        prepared.like(backend), usable, encoding, limits, phases, start, note, last
    )
    report.note = f"symbolic shape facts conflicted during {where}; saturated with static shape facts only"
    return egraph, encoding, report, input_graph


def _in_backend(
    backend: Backend,
    usable: Usable,
    encoding: Encoding,
    limits: Limits,
    phases: dict[str, float],
    start: float,
    note: Callable[[str], None],
    last: bool = False,
) -> tuple[EGraph, RunReport, EGraph, list[tuple[Fact, ...]]]:
    """`_run` in `backend` (declarations and rules installed) between a push and a pop; a backend an earlier
    egglog panic broke, or an earlier run spent, is replaced by a fresh one with the same rules, and a pop that fails
    (a panic during this run: the result is already decoded or fell back) leaves it marked broken
    (eqsat.engine.prepared drops it). With `last` (the process's one model: eqsat.engine.prepared.single_run) the
    model is loaded without a push and the backend is spent."""
    if backend.broken or backend.spent:
        backend = prepared.like(backend)
    prepared.reach_perm_rank(backend, encoding.perm_rank)  # below the push: loaded once per backend
    if last:
        backend.spent = True
        return _run(backend, usable, encoding, limits, phases, start, note)
    backend.push()
    try:
        return _run(backend, usable, encoding, limits, phases, start, note)
    finally:
        try:
            backend.pop()
        except BaseException as exc:  # egglog panics are BaseException; Backend.pop marked it broken
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise


def _run(
    backend: Backend,
    usable: Usable,
    encoding: Encoding,
    limits: Limits,
    phases: dict[str, float],
    start: float,
    note: Callable[[str], None],
) -> tuple[EGraph, RunReport, EGraph, list[tuple[Fact, ...]]]:
    """Load `encoding` into `backend` (declarations, `usable`'s rules and standard facts there), snapshot
    the input graph (every e-class its one original e-node: what the input costs), saturate, decode."""
    backend.load(terms.model_facts(encoding.perms, encoding.opset))
    backend.load_rows(encoding.rows)
    phases["encode"] = time.perf_counter() - start
    start = time.perf_counter()
    input_graph = decode(backend.snapshot(decoded), encoding.refs.values(), symbol_sizes=encoding.symbols.sizes())
    loaded = {node.op for node in input_graph.nodes} & CONSTRUCTORS  # by op: a generic table's rows are its ops
    if not loaded <= usable.constructors:  # a rule left out could match: eqsat.engine.rule_closure missed one
        raise InternalError(
            f"the encoding holds constructors {sorted(loaded - usable.constructors)} that the "
            "rule selection did not expect"
        )
    phases["snapshot input"] = time.perf_counter() - start
    note("saturate")
    start = time.perf_counter()
    report = run(backend, limits, loaded | {"Ref"})
    phases["saturate"] = time.perf_counter() - start
    note("decode")
    start = time.perf_counter()
    groups: list[tuple[Fact, ...]] = []
    try:
        tables = backend.snapshot(lambda name, sort: decoded(name, sort) or name == MET_TABLE)
        groups = met(tables)
        egraph = decode(tables, encoding.refs.values(), encoding.rows.ops(), encoding.symbols.sizes())
    except BaseException as exc:  # the e-graph is unusable after a panic: extract the input as it was
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        egraph = input_graph
        report.error = f"{report.error or type(exc).__name__}; fell back to the input graph"
    report.eclasses = sum(1 for c in egraph.classes if c.sort == "T")
    phases["decode"] = time.perf_counter() - start
    return egraph, report, input_graph, groups
