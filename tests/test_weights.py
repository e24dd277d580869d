"""Large weights kept out of protobuf round trips (eqsat.frontend.weights): the tools see the same model."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import pytest

from eqsat.check.verify import Runner
from eqsat.frontend import weights
from eqsat.frontend.fold import infer_proto


def _model(ir_version: int = 8) -> onnx.ModelProto:
    """x [batch, 64] @ w [64, 32] + b, Reshape by a small shape initializer: one large weight, small rest."""
    rng = np.random.default_rng(0)
    inits = [
        onh.from_array(rng.standard_normal((64, 32)).astype(np.float32), "w"),  # 8 KiB: large
        onh.from_array(rng.standard_normal(32).astype(np.float32), "b"),  # 128 bytes: small
        onh.from_array(np.array([-1, 4, 8], np.int64), "shape"),
    ]
    graph = oh.make_graph(
        [
            oh.make_node("MatMul", ["x", "w"], ["h"]),
            oh.make_node("Add", ["h", "b"], ["a"]),
            oh.make_node("Reshape", ["a", "shape"], ["y"]),
        ],
        "g",
        [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 64])],
        [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n", 4, 8])],
        initializer=inits,
    )
    if ir_version < 4:
        graph.input.extend(oh.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)], ir_version=ir_version)


@pytest.mark.parametrize("ir_version", [3, 8])
def test_shape_inference_on_the_light_copy_equals_it_on_the_model(ir_version: int) -> None:
    model = _model(ir_version)
    before = model.SerializeToString(deterministic=True)
    expected = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    light = weights.Light.of(model)
    assert [t.name for t in light.proto.graph.initializer] == ["b", "shape"]  # the weight is not copied
    assert infer_proto(model).SerializeToString(deterministic=True) == expected.SerializeToString(deterministic=True)
    assert model.SerializeToString(deterministic=True) == before  # the model itself never changes


def test_the_checker_still_checks_a_large_weight() -> None:
    model = _model()
    weights.check_model(model)
    bad = model.graph.initializer[0]
    bad.float_data.append(1.0)  # two value fields: the checker's complaint, for a tensor kept aside
    with pytest.raises(onnx.checker.ValidationError):
        weights.check_model(model)


def test_onnxruntime_fed_the_weights_computes_what_it_computes_with_the_model() -> None:
    model = _model()
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    w, b = (onh.to_array(t) for t in model.graph.initializer[:2])
    outputs, runtime = Runner(model).run({"x": x})
    assert runtime == "onnxruntime"
    np.testing.assert_allclose(outputs[0], (x @ w + b).reshape(-1, 4, 8), rtol=1e-5, atol=1e-5)
    light = weights.Light.of(model, floats_only=True)
    assert [i.name for i in light.proto.graph.input] == ["x", "w"]
    values = light.values()
    assert list(values) == ["w"] and np.array_equal(values["w"], w)


def test_a_weight_whose_data_disagrees_with_its_dims_is_a_load_problem_not_a_crash() -> None:
    model = _model()
    model.graph.initializer[0].raw_data = model.graph.initializer[0].raw_data[:-4]
    runner = Runner(model)
    assert not runner.loaded and runner.load_problem


def test_known_arrays_are_fed_only_where_their_bytes_equal_the_weight() -> None:
    """Verification feeds the arrays lowering wrote (and encoding read) instead of copies, but only an array
    that holds the initializer's exact type, dims and bytes: -0.0 against 0.0, another dtype or shape, or one
    changed element is copied from the model instead."""
    model = _model()
    w = onh.to_array(model.graph.initializer[0]).copy()
    w[0, 0] = 0.0
    model.graph.initializer[0].CopyFrom(onh.from_array(w, "w"))
    light = weights.Light.of(model, floats_only=True)
    assert light.values({"w": w})["w"] is w
    changed, negative_zero = w.copy(), w.copy()
    changed[3, 5] = np.nextafter(changed[3, 5], np.float32(np.inf))
    negative_zero[0, 0] = -0.0
    for other in (changed, negative_zero, w.astype(np.float64), w.reshape(32, 64)):
        value = light.values({"w": other})["w"]
        assert value is not other and np.array_equal(value.view(np.uint8), w.view(np.uint8))


def test_a_model_is_written_in_pieces_byte_for_byte() -> None:
    """Saving writes the graph's initializers one at a time: the bytes are SerializeToString's exactly, with
    model fields on both sides of the graph and graph fields on both sides of the initializers."""
    model = _model()
    model.producer_name, model.doc_string = "eqsat", "a model"
    model.metadata_props.add(key="k", value="v")
    model.graph.doc_string = "a graph"
    model.graph.value_info.append(oh.make_tensor_value_info("h", onnx.TensorProto.FLOAT, ["batch", 32]))
    pieces = list(weights.serialized(model))
    assert len(pieces) == 2 + len(model.graph.initializer)
    assert b"".join(pieces) == model.SerializeToString()
    small = _model()
    del small.graph.initializer[0]  # nothing large: one piece
    assert list(weights.serialized(small)) == [small.SerializeToString()]


@pytest.mark.parametrize("ir_version", [3, 8])
def test_normalizing_and_encoding_hold_each_weight_once(ir_version: int) -> None:
    """The IR's large initializers are numpy arrays that encoding reads as they are (one copy besides the
    input proto's), the normalized proto is without them, and the optimized model still computes the same;
    a large weight numpy cannot read as it is (typed float_data) stays the proto's tensor."""
    import onnx_ir as ir

    from eqsat import optimize
    from eqsat.session import saturate

    model = _model(ir_version)
    typed = oh.make_tensor("v", onnx.TensorProto.FLOAT, [32, 32], np.linspace(-1, 1, 1024).tolist())  # float_data
    model.graph.initializer.append(typed)
    if ir_version < 4:
        model.graph.input.append(oh.make_tensor_value_info("v", onnx.TensorProto.FLOAT, [32, 32]))
    model.graph.node.insert(2, oh.make_node("MatMul", ["a", "v"], ["av"]))
    model.graph.node[3].input[0] = "av"
    session = saturate(model)
    assert session.loaded is not None
    work = session.loaded.work.graph.initializers
    assert [t.name for t in session.normalized.graph.initializer if t.name in ("w", "v")] == []
    assert isinstance(work["v"].const_value, ir.serde.TensorProtoTensor)
    held = work["w"].const_value
    assert isinstance(held, ir.Tensor)
    if ir_version >= 4:  # below, every initializer is an input with a default: not a constant
        assert np.shares_memory(held.numpy(), session.encoding.arrays_by_name()["w"])
    assert list(work) == [t.name for t in model.graph.initializer]  # the input's order: encoding numbers by it
    result = optimize(model)
    assert result.report.verification is not None and result.report.verification.ok
    assert {"w", "v"} <= {t.name for t in result.proto.graph.initializer}


def test_shapes_inferred_again_after_folding_are_those_a_fresh_read_gives() -> None:
    """Normalizing infers shapes a second time after folding (some shape not static yet) and sets them on the
    IR's own values: each value's type and shape is what deserializing the inferred proto gives it, and the
    normalized proto is without the large weights. (A rewrite of a fresh deserialization: passes on main too.)"""
    import onnx_ir as ir

    from benchmarks.synthetic import transformer_encoder
    from eqsat.frontend import fold, normalize

    model = transformer_encoder(1, hidden=32, heads=2, ffn=64)
    seen: list[tuple[ir.Model, onnx.ModelProto]] = []
    infer_light = fold.infer_light

    def spy(light: weights.Light) -> onnx.ModelProto:
        inferred = infer_light(light)
        seen.append((ir.serde.deserialize_model(inferred), inferred))
        return inferred

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(normalize, "infer_light", spy)
        work, proto = normalize.normalize_proto(model)
    assert len(seen) == 2  # before folding and again after it
    fresh = seen[-1][0]
    mine = {o.name: (o.type, str(o.shape)) for n in work.graph for o in n.outputs}
    theirs = {o.name: (o.type, str(o.shape)) for n in fresh.graph for o in n.outputs}
    assert mine == theirs and any("batch" in shape for _, shape in mine.values())
    assert [(o.name, o.type, str(o.shape)) for o in work.graph.outputs] == [
        (o.name, o.type, str(o.shape)) for o in fresh.graph.outputs
    ]
    large = {t.name for t in model.graph.initializer if t.ByteSize() >= weights.LARGE_BYTES}
    assert large and not large & {t.name for t in proto.graph.initializer}


def _symbolic_chain(extra: list[onnx.NodeProto]) -> onnx.ModelProto:
    """x [batch, 64] -> Identity -> MatMul w -> Relu, plus `extra` nodes; symbolic batch: never all static."""
    model = _model()
    del model.graph.node[:]
    model.graph.node.extend(
        [
            oh.make_node("Identity", ["x"], ["xi"]),
            oh.make_node("MatMul", ["xi", "w"], ["h"]),
            oh.make_node("Relu", ["h"], ["y0"]),
            *extra,
        ]
    )
    model.graph.output[0].CopyFrom(oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None))
    return model


@pytest.mark.parametrize(
    "extra, again",
    [
        ([oh.make_node("Identity", ["y0"], ["y"])], False),  # folding only bypasses Identities: nothing to learn
        (  # a Reshape target computed from a constant (Neg: no data propagation): folding makes it one, and
            # inference learns y's shape only then
            [
                oh.make_node("Constant", [], ["minus"], value=onh.from_array(np.array([1, -4, -8], np.int64))),
                oh.make_node("Neg", ["minus"], ["target"]),
                oh.make_node("Reshape", ["y0", "target"], ["y"]),
            ],
            True,
        ),
    ],
)
def test_shapes_are_inferred_again_only_where_folding_can_add_facts(extra: list, again: bool) -> None:
    """With a symbolic dim no value is ever all static; shape inference runs again after folding only when
    folding computed new constants (or left a value of unknown shape): after bypassing an Identity every value
    keeps its facts. Either way each value's shape is what inferring the folded model afresh gives it."""
    import onnx_ir as ir

    from eqsat.frontend import fold, normalize

    calls: list[int] = []
    infer_light = fold.infer_light

    def spy(light: weights.Light) -> onnx.ModelProto:
        calls.append(1)
        return infer_light(light)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(normalize, "infer_light", spy)
        work, _ = normalize.normalize_proto(_symbolic_chain(extra))
    assert len(calls) == (2 if again else 1)
    fresh = ir.serde.deserialize_model(fold.infer_proto(ir.serde.serialize_model(work)))
    mine = {o.name: (o.type, str(o.shape)) for n in work.graph for o in n.outputs}
    assert mine == {o.name: (o.type, str(o.shape)) for n in fresh.graph for o in n.outputs}
    assert "batch" in mine["h"][1] and mine["y"][1].endswith(",4,8]" if again else "[batch,32]")


def test_optimize_holds_off_full_garbage_collections_and_restores_the_thresholds() -> None:
    """Each full collection walks every object alive (millions for a 10k-node model): none runs inside
    `eqsat.optimize`, even where one would run every other young collection (thresholds (500, 1, 1), every
    object frozen, so that nothing counts as long-lived), and the caller's thresholds are back afterwards;
    the result is the same."""
    import gc

    from eqsat import optimize

    expected = optimize(_model()).proto.SerializeToString(deterministic=True)
    full: list[int] = []
    inside = [False]

    def count(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2 and inside[0]:
            full.append(1)

    thresholds = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.collect()  # generation 2 empty: a full collection is due whenever its threshold is reached
    gc.set_threshold(500, 1, 1)
    gc.callbacks.append(count)
    try:
        inside[0] = True
        result = optimize(_model())
        inside[0] = False
        assert gc.get_threshold() == (500, 1, 1)
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*thresholds)
        gc.unfreeze()
    assert full == []
    assert result.proto.SerializeToString(deterministic=True) == expected


def _held(model: onnx.ModelProto, dtype: type = np.float32) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """`model` with its large weight a placeholder, and the array held for it."""
    held = {"w": onh.to_array(model.graph.initializer[0]).astype(dtype)}
    model.graph.initializer[0].CopyFrom(weights.placeholder("w", held["w"]))
    return model, held


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_a_placeholder_is_checked_fed_written_and_filled_from_its_array(dtype: type) -> None:
    """A weight held aside (a placeholder and its array) is what the model with the weight in it is: the
    same bytes written (in pieces, the placeholder's tensor made when written), the same outputs from
    onnxruntime fed the array, and `fill` makes the model that holds it."""
    full = _model()
    full.graph.initializer[0].CopyFrom(onh.from_array(onh.to_array(full.graph.initializer[0]).astype(dtype), "w"))
    if dtype is not np.float32:  # x @ w in w's type, then back to float
        full.graph.node.insert(0, oh.make_node("Cast", ["x"], ["xw"], to=oh.np_dtype_to_tensor_dtype(np.dtype(dtype))))
        full.graph.node[1].input[0] = "xw"
        full.graph.node.insert(2, oh.make_node("Cast", ["h"], ["h32"], to=onnx.TensorProto.FLOAT))
        full.graph.node[3].input[0] = "h32"
    model, held = _held(onnx.ModelProto.FromString(full.SerializeToString()), dtype)
    assert weights.is_placeholder(model.graph.initializer[0]) and not weights.is_placeholder(full.graph.initializer[0])
    assert model.ByteSize() < full.ByteSize() - held["w"].nbytes  # the data is not in the model
    weights.check_model(model, held=held)
    assert b"".join(weights.serialized(model, held)) == full.SerializeToString()
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    expected, _ = Runner(full).run({"x": x})
    got, runtime = Runner(model, held).run({"x": x})
    assert runtime == "onnxruntime"
    np.testing.assert_array_equal(got[0], expected[0])
    weights.fill(model, held)
    assert model.SerializeToString() == full.SerializeToString()


def test_a_placeholder_without_its_array_is_an_internal_error_not_a_written_model(tmp_path) -> None:  # noqa: ANN001
    """Never a partial or invalid file: a placeholder whose array is missing or of other dims stops the save."""
    from eqsat.errors import InternalError
    from eqsat.frontend import io

    model, held = _held(_model())
    for wrong in ({}, {"w": held["w"].reshape(32, 64)}, {"w": held["w"].astype(np.float64)}):
        with pytest.raises(InternalError, match="'w' has no data"):
            io.save(model, tmp_path / "out.onnx", held=wrong)
        assert list(tmp_path.iterdir()) == []


def test_an_optimized_model_holds_its_large_weights_aside_until_asked_for(tmp_path) -> None:  # noqa: ANN001
    """The output of a run keeps its large float weights as arrays behind placeholders (lowering never copies
    them into protobuf) through verification and saving: the file written, and `Result.proto` once asked
    for, are byte for byte the model with its weights in it, and that model computes what the input does."""
    from eqsat import optimize

    model = _model()
    result = optimize(model, output=tmp_path / "out.onnx")
    assert result.verified
    assert set(result.held) == {"w"} and weights.is_placeholder(result.built.graph.initializer[0])
    written = (tmp_path / "out.onnx").read_bytes()
    proto = result.proto
    assert not result.held and not any(weights.is_placeholder(t) for t in proto.graph.initializer)
    assert proto.SerializeToString() == written
    x = np.random.default_rng(2).standard_normal((5, 64)).astype(np.float32)
    np.testing.assert_allclose(Runner(proto).run({"x": x})[0][0], Runner(model).run({"x": x})[0][0], rtol=1e-6)
    assert result.verify().ok  # re-verifying the filled model


def test_a_model_with_weights_held_aside_is_verified_by_onnx_reference_too(monkeypatch) -> None:  # noqa: ANN001
    """Where onnxruntime cannot load a model, verification runs onnx.reference, which reads initializers from
    the model: an output whose weights are held aside is verified with them filled in."""
    import onnxruntime

    from eqsat import optimize

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no onnxruntime here")

    monkeypatch.setattr(onnxruntime, "InferenceSession", refuse)
    result = optimize(_model())
    assert result.held and result.report.verification.runtime == "onnx.reference"
    assert result.verified and result.report.verification.ok


def test_a_held_weight_is_written_from_its_array_without_copies() -> None:
    """Writing a placeholder's tensor reads the held array in place: the pieces of a model with a 16 MB weight
    allocate a small fraction of it (a tensor made with from_array, serialized and prefixed held three copies)."""
    import tracemalloc

    big = np.random.default_rng(2).standard_normal((2048, 2048)).astype(np.float32)  # 16 MB
    graph = oh.make_graph(
        [oh.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2048])],
        [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 2048])],
        [weights.placeholder("w", big)],
    )
    model = oh.make_model(graph)
    tracemalloc.start()
    try:
        written = sum(len(piece) for piece in weights.serialized(model, {"w": big}))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert written > big.nbytes
    assert peak < big.nbytes // 8


def test_large_arrays_of_the_names_asked_only_shared_with_the_model(monkeypatch) -> None:  # noqa: ANN001
    """The reference reads only the original's initializers: `large_arrays` with `names` gives those (the large
    ones), the same arrays as without; a weight the original held in a Constant node, an initializer after
    folding, is not handed to the reference."""
    from eqsat.check.ahead import ReferenceAhead
    from eqsat.session import load, saturate

    work = load(_model()).work
    every = weights.large_arrays(work)
    assert list(every) == ["w"]
    asked = weights.large_arrays(work, ["b", "w", "absent"])
    assert list(asked) == ["w"] and np.shares_memory(asked["w"], every["w"])
    assert weights.large_arrays(work, []) == {}
    in_node = _model()
    w = in_node.graph.initializer[0]
    in_node.graph.node.insert(0, oh.make_node("Constant", [], ["w"], value=w))
    in_node.graph.initializer.remove(w)
    handed: list[dict] = []
    monkeypatch.setattr(ReferenceAhead, "start", lambda self, original, known, label: handed.append(known))
    loaded = load(in_node)
    assert list(weights.large_arrays(loaded.work)) == ["w"]  # folding made it an initializer
    saturate(loaded, ahead=ReferenceAhead())
    assert handed == [{}]
