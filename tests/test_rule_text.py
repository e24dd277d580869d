"""The egglog text a rule record installs: shape facts recorded in shape-met, a computed vector written once."""

from __future__ import annotations

from eqsat.engine.rule import fact, shape_sets


def test_a_computed_shape_vector_is_bound_once_and_recorded() -> None:
    vector = "(vec-append (vec-of 1) s)"
    command = fact("(= y (Relu x)) (= s (shape x))", f"(let u (Unsqueeze x (vec-of 0))) (set (shape u) {vector})")
    text = command.command("explore", "r#0")
    assert text.count(vector) == 1
    assert f"(let __shape0 {vector}) (set (shape u) __shape0)" in text
    assert "(shape-met u __shape0)" in text


def test_a_shape_vector_read_from_the_query_is_recorded_as_it_is() -> None:
    text = fact("(= y (Relu x)) (= s (shape x))", "(let u (Neg x)) (set (shape u) s)").command("explore", "r#0")
    assert "(set (shape u) s)" in text and "(shape-met u s)" in text and "__shape" not in text


def test_shape_sets_reads_terms_and_vectors() -> None:
    actions = "(set (shape (Neg x)) (vec-of 1 2)) (set (dtype y) d) (set (shape y) s)"
    assert shape_sets(actions) == [("(Neg x)", "(vec-of 1 2)"), ("y", "s")]
