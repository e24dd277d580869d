"""Work beside the ILP's solve (eqsat.extract.speculation): the hook gets the greedy-dag choice on the calling thread
while HiGHS runs in a worker; the session keeps the lowering of that choice when the ILP returns it, and lowers the
final choice otherwise. Results are those of a run without speculation, on random e-graphs and bundled models."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from eqsat.extract import ExtractionError, ExtractionResult, extract, extract_speculating, greedy_dag, ilp
from eqsat.extract.problem import Problem, restrict
from eqsat.extract.speculation import Speculation
from tests.conftest import MODELS_DIR
from tests.test_extract import highs_case, random_case


def _greedy(case: Any) -> dict[int, int]:
    problem = Problem.build(case.graph, case.graph.roots, case.cost)
    return restrict(problem, greedy_dag.solve(problem)[0])


def _same(a: Any, b: Any) -> bool:
    return dict(a.choice) == dict(b.choice) and a.notes == b.notes and a.roots == b.roots and a.egraph is b.egraph


@pytest.mark.slow  # random graphs
def test_ilp_speculates_on_the_greedy_choice_and_returns_what_it_would_without() -> None:
    """On 400 small random e-graphs: whenever HiGHS runs, the hook gets the greedy-dag choice once, on the calling
    thread; the result is the one without a hook; `matches` says whether the ILP returned the greedy choice. Both
    cases occur (the ILP agrees with the greedy choice, the ILP beats it); the hook is not called when the lower
    bound skips HiGHS."""
    rng = random.Random(1)
    seen = {"agrees": 0, "beats greedy": 0, "HiGHS not run": 0}
    calls: list[tuple[dict[int, int], threading.Thread]] = []
    for _ in range(400):
        case = random_case(rng, 6, 6)
        calls.clear()

        def hook(choice: dict[int, int]) -> int:
            calls.append((choice, threading.current_thread()))
            return len(choice)

        try:
            plain = extract(case.graph, None, case.cost, "ilp")
        except ExtractionError:
            with pytest.raises(ExtractionError):
                extract_speculating(case.graph, None, case.cost, hook, "ilp")
            continue
        result, guess = extract_speculating(case.graph, None, case.cost, hook, "ilp")
        assert _same(result, plain)
        if any("HiGHS not run" in n or "zero-cost" in n for n in plain.notes):
            assert guess is None and not calls
            seen["HiGHS not run"] += 1
            continue
        assert guess is not None and len(calls) == 1
        assert calls[0][1] is threading.main_thread()
        assert guess.choice == calls[0][0] == _greedy(case) and guess.value == len(guess.choice)
        assert guess.matches(result) == (dict(result.choice) == guess.choice)
        seen["agrees" if guess.matches(result) else "beats greedy"] += 1
    assert all(seen.values()), seen


@pytest.mark.parametrize("name", ["greedy-dag", "tree"])
def test_extractors_that_do_not_speculate_never_call_the_hook(name: str) -> None:
    case = random_case(random.Random(3), 6, 6)
    result, guess = extract_speculating(case.graph, None, case.cost, lambda choice: 1 / 0, name)
    assert guess is None and _same(result, extract(case.graph, None, case.cost, name))


def _runs_highs(seed: int) -> Any:
    """The first random e-graph (seeded) on which the ILP runs HiGHS."""
    return highs_case(seed, lambda notes: not any("HiGHS not run" in n or "zero-cost" in n for n in notes))


def test_an_exception_in_highs_is_raised_on_the_callers_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """HiGHS runs in a worker thread beside the hook; what its run raises comes up from `extract`, after the hook
    ran."""
    case = _runs_highs(5)
    threads: list[threading.Thread] = []
    real = ilp._highs

    def broken() -> Any:
        highspy, h = real()

        def run() -> None:
            threads.append(threading.current_thread())
            raise RuntimeError("HiGHS broke")

        h.run = run
        return highspy, h

    monkeypatch.setattr(ilp, "_highs", broken)
    hooked: list[dict[int, int]] = []
    with pytest.raises(RuntimeError, match="HiGHS broke"):
        extract_speculating(case.graph, None, case.cost, hooked.append, "ilp")
    assert len(hooked) == 1 and threads and threads[0] is not threading.main_thread()


def test_an_exception_in_the_hook_is_recorded_and_changes_nothing() -> None:
    case = _runs_highs(5)
    result, guess = extract_speculating(case.graph, None, case.cost, lambda choice: 1 / 0, "ilp")
    assert guess is not None and isinstance(guess.error, ZeroDivisionError) and guess.value is None
    assert not guess.matches(result) and _same(result, extract(case.graph, None, case.cost, "ilp"))


def test_the_extractors_seconds_leave_out_the_hooks() -> None:
    """A hook that takes 0.3 s: the extraction (a few ms on a small e-graph) is not reported as taking it."""
    import time

    case = _runs_highs(5)
    result, guess = extract_speculating(case.graph, None, case.cost, lambda choice: time.sleep(0.3), "ilp")
    assert guess is not None and guess.seconds >= 0.3 and 0.0 <= result.seconds < guess.seconds


# ---------------------------------------------------------------------------------------------------
# The session: lowering the greedy choice while HiGHS runs


@pytest.fixture(scope="module")
def sessions() -> dict[str, Any]:
    from eqsat.session import saturate

    return {
        name: saturate(str(MODELS_DIR / f"{name}.onnx"))
        for name in ("nhwc_tfstyle_resnet_legacy", "bert_l2_h128_fp16_mixed")
    }


def _without_speculation(monkeypatch: pytest.MonkeyPatch) -> None:
    import eqsat.extract

    def plain(egraph: Any, roots: Any, cost: Any, hook: Any, extractor: str = "auto", **options: Any) -> Any:
        return extract(egraph, roots, cost, extractor, **options), None

    monkeypatch.setattr(eqsat.extract, "extract_speculating", plain)


def _lowerings(monkeypatch: pytest.MonkeyPatch, fail: int = 0) -> list[dict[int, int]]:
    """Count the calls of `lower` (the first `fail` of them raise instead)."""
    import eqsat.engine.lower as lowering

    calls: list[dict[int, int]] = []
    real = lowering.lower

    def counted(egraph: Any, choice: Any, *args: Any) -> Any:
        calls.append(dict(choice))
        if len(calls) <= fail:
            raise lowering.LoweringError("planted")
        return real(egraph, choice, *args)

    monkeypatch.setattr(lowering, "lower", counted)
    return calls


def _outcome(result: Any) -> tuple[Any, ...]:
    summary = result.report.extraction.to_dict()
    del summary["seconds"]
    return result.proto.SerializeToString(deterministic=True), summary, dict(result.extraction.choice)


@pytest.mark.slow  # whole bundled models
@pytest.mark.parametrize(("name", "used"), [("nhwc_tfstyle_resnet_legacy", True), ("bert_l2_h128_fp16_mixed", False)])
def test_the_session_keeps_the_speculative_lowering_only_when_the_ilp_returns_the_greedy_choice(
    sessions: dict[str, Any], monkeypatch: pytest.MonkeyPatch, name: str, used: bool
) -> None:
    """nhwc: HiGHS runs and returns the greedy choice, lowered while it ran (one lowering); bert: the ILP beats the
    greedy choice, whose lowering is dropped (two lowerings). Outputs and extraction reports equal a run without
    speculation; the phases add up as before (the speculative lowering counts as "lower")."""
    session = sessions[name]
    with monkeypatch.context() as patch:
        _without_speculation(patch)
        plain_calls = _lowerings(patch)
        plain = session.extract()
    calls = _lowerings(monkeypatch)
    result = session.extract()
    assert len(plain_calls) == 1 and len(calls) == (1 if used else 2)
    assert (calls[0] == dict(result.extraction.choice)) == used and calls[-1] == dict(result.extraction.choice)
    assert _outcome(result) == _outcome(plain)
    assert result.report.phases["lower"] > 0 and result.report.phases["extract"] > 0


@pytest.mark.slow  # a whole bundled model
def test_a_failed_speculative_lowering_falls_back_to_lowering_the_final_choice(
    sessions: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lowering done beside HiGHS raises: the final choice is lowered as without speculation, same output; a
    lowering error that the final choice meets too is raised from there, as without speculation."""
    session = sessions["nhwc_tfstyle_resnet_legacy"]
    with monkeypatch.context() as patch:
        _without_speculation(patch)
        plain = session.extract()
    with monkeypatch.context() as patch:
        calls = _lowerings(patch, fail=1)
        result = session.extract()
    assert len(calls) == 2 and calls[0] == calls[1] and _outcome(result) == _outcome(plain)
    import eqsat.engine.lower as lowering

    calls = _lowerings(monkeypatch, fail=2)
    with pytest.raises(lowering.LoweringError, match="planted"):
        session.extract()
    assert len(calls) == 2


def test_a_speculation_matches_the_same_choice_in_the_same_egraph_only() -> None:
    """`Speculation.matches` asks for the same e-graph and choice and a hook that succeeded."""
    case = random_case(random.Random(2), 4, 2)
    result = ExtractionResult(case.graph, {0: 0}, (0,), "ilp", 0.0)
    assert Speculation(case.graph, {0: 0}, "v", None, 0.0).matches(result)
    assert not Speculation(case.graph, {0: 1}, "v", None, 0.0).matches(result)
    assert not Speculation(case.graph, {0: 0}, None, ValueError(), 0.0).matches(result)
    assert not Speculation(case.graph.with_roots(case.graph.roots), {0: 0}, "v", None, 0.0).matches(result)
