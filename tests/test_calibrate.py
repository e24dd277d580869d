"""`eqsat calibrate`: the fit recovers known parameters from synthetic measurements (no onnxruntime timing), a
small calibration writes a target that loads and validates, the budget is kept (by the clock calibration is
given: no wall-clock asserts), bad options are refused with what would be accepted, and a calibrated target is
found by name."""

from __future__ import annotations

import dataclasses
import itertools
import math
import tomllib
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx.reference import ReferenceEvaluator

from eqsat.calibration import (
    Calibration,
    FusedCheck,
    _with_fused,
    calibrate,
    check_options,
    predicted_cost,
    spearman,
)
from eqsat.calibration_cases import fit_cases, fused_cases
from eqsat.errors import BadInputError
from eqsat.extract.calibrate import Kernel, Params, Sample, calibrated_data, fit, to_toml
from eqsat.extract.cost import TARGET_DIR, load_target, roofline, targets
from eqsat.ui.cli import main

TRUE = Params(
    launch=4e-7,
    bandwidth=3e10,
    view_fraction=0.5,
    peak={"FLOAT": 1.2e11, "DOUBLE": 5e10},
    op_scale={"Div": 1.5, "Sigmoid": 2.5, "Conv": 1.3},
    call=3.5e-6,
)
START = Params(
    launch=3e-6,
    bandwidth=1e11,
    view_fraction=0.05,
    peak={"FLOAT": 1.024e12, "DOUBLE": 5.12e11, "INT8": 4.096e12, "default": 2.56e11},
    op_scale={"Div": 1.5},
)


def _synthetic(truth: Params, noise: float, seed: int = 0) -> list[Sample]:
    """Graphs like the calibration's, their seconds drawn from `truth` with a log-normal error."""
    shapes: list[tuple[str, tuple[Kernel, ...]]] = []
    for n in (1e3, 1.6e4, 2.6e5, 1e6):
        for op in ("Add", "Div", "Sigmoid"):
            shapes.append((f"{op} {n:g}", (Kernel(op, "FLOAT", n, 12 * n),)))
    for k in (1, 2, 4, 8):
        shapes.append((f"Relu x{k}", (Kernel("Relu", "FLOAT", 64, 512),) * k))
        shapes.append((f"view x{k}", (Kernel("Relu", "FLOAT", 64, 512), Kernel("Reshape", "FLOAT", 0, 0)) * k))
    for m in (64, 128, 256, 512):
        for dtype in ("FLOAT", "DOUBLE"):
            shapes.append((f"MatMul {dtype} {m}", (Kernel("MatMul", dtype, 2.0 * m**3, 12.0 * m * m),)))
        shapes.append((f"Conv {m}", (Kernel("Conv", "FLOAT", 2.0 * m**3, 12.0 * m * m),)))
    rng = np.random.default_rng(seed)
    return [
        Sample(name, kernels, truth.predict(Sample(name, kernels, 0)) * math.exp(rng.normal(0, noise)))
        for name, kernels in shapes
    ]


@pytest.mark.parametrize(("noise", "tolerance"), [(0.0, 0.01), (0.03, 0.12)])
def test_the_fit_recovers_known_parameters(noise: float, tolerance: float) -> None:
    found = fit(_synthetic(TRUE, noise), START)
    p = found.params
    for name, want, got in [
        ("launch", TRUE.launch, p.launch),
        ("bandwidth", TRUE.bandwidth, p.bandwidth),
        ("view_fraction", TRUE.view_fraction, p.view_fraction),
        ("call", TRUE.call, p.call),
        *[(f"peak.{d}", TRUE.peak[d], p.peak[d]) for d in ("FLOAT", "DOUBLE")],
        *[(f"op_scale.{op}", TRUE.op_scale[op], p.op_scale[op]) for op in ("Div", "Sigmoid", "Conv")],
    ]:
        assert abs(got / want - 1) < tolerance, f"{name}: fitted {got:.4g}, true {want:.4g}"
        assert name in found.fitted
    assert np.max(np.abs(found.errors())) < 0.05 + 4 * noise


def test_a_parameter_no_sample_informs_keeps_its_start_value() -> None:
    found = fit(_synthetic(TRUE, 0.0), START)
    assert found.params.peak["INT8"] == START.peak["INT8"] and "peak.INT8" not in found.fitted
    assert "Relu" not in found.params.op_scale  # its samples are all launch: no scale is written for it
    assert fit([], START).params == START


def test_the_written_target_loads_validates_and_prices_with_the_fit(tmp_path: Path) -> None:
    found = fit(_synthetic(TRUE, 0.0), START)
    base = tomllib.loads((TARGET_DIR / "cpu.toml").read_text())
    data = calibrated_data(base, found.params, name="mine", description='a "quoted" machine')
    path = tmp_path / "mine.toml"
    path.write_text(to_toml(data, ["measured here", "second line"]))
    target = load_target(path)
    assert target.name == "mine" and target.description == 'a "quoted" machine'
    assert math.isclose(target.launch, found.params.launch, rel_tol=1e-4)
    assert math.isclose(target.peak["FLOAT"], found.params.peak["FLOAT"], rel_tol=1e-4)
    assert math.isclose(target.op_scale["Sigmoid"], found.params.op_scale["Sigmoid"], rel_tol=1e-4)
    assert target.peak["INT8"] == 4.096e12 and target.blocked is not None and target.qdq_ops  # kept from cpu
    assert "MatMul" not in target.op_scale and target.tie_break <= 1e-3 * target.launch
    assert path.read_text().startswith("# measured here\n# second line\n")


def _check(added_us: float, fused_us: float = 1.0, own_us: float = 30.0) -> FusedCheck:
    return FusedCheck("matmul-bias", "Add", 70e-6, 34e-6, 70e-6 + added_us * 1e-6, fused_us * 1e-6, own_us * 1e-6)


def test_a_consumer_is_kept_fused_when_it_adds_nearer_its_fused_price() -> None:
    assert _check(2.0).fused and _check(-3.0).fused
    assert not _check(25.0).fused and not _check(16.0).fused
    base = tomllib.loads((TARGET_DIR / "cpu.toml").read_text())
    unfused = [dataclasses.replace(_check(25.0), pattern="conv-activation", consumer=op) for op in ("Relu", "Clip")]
    data = _with_fused(base, [_check(2.0), *unfused])
    kept = {f["name"]: f["consumers"] for f in data["fused"]}
    assert kept["matmul-bias"] == ["Add"]
    assert kept["conv-activation"] == ["LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid"]
    emptied = _with_fused(
        base,
        [_check(25.0)]
        + [
            dataclasses.replace(u, consumer=op)
            for u in unfused[:1]
            for op in ("LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "Relu", "Clip")
        ],
    )
    left = [f["name"] for f in emptied.get("fused", ())]  # patterns left with no consumer are dropped
    assert left == [f["name"] for f in base["fused"] if f["name"] not in ("matmul-bias", "conv-activation")]
    only = {"fused": [f for f in base["fused"] if f["name"] == "matmul-bias"]}
    assert "fused" not in _with_fused(only, [_check(25.0)])  # and the table with them


def _small_cases() -> list:
    cases = fit_cases()
    chosen = [c for c in cases if c.name.startswith(("Relu x", "Add FLOAT [", "MatMul FLOAT [64", "(Relu, Reshape)"))]
    return chosen + fused_cases([("matmul-bias", ["MatMul"], ["Add"], "constant")])


def test_a_small_calibration_writes_a_target_that_loads(tmp_path: Path) -> None:
    result = calibrate("cpu", budget=3.0, name="small", cases=_small_cases())
    assert isinstance(result, Calibration) and result.timed == len(_small_cases()) and result.rounds >= 1
    path = result.write(tmp_path / "small.toml")
    target = load_target(path)
    assert target.name == "small" and "launch" in result.fit.fitted and "bandwidth" in result.fit.fitted
    assert [c.consumer for c in result.fused] == ["Add"]
    text = path.read_text()
    assert "Relu x8 [64]" in text and "matmul-bias" in text and "median |error|" in text
    assert math.isclose(roofline(target).target.launch, result.data["launch"], rel_tol=1e-5)


class _FakeClock:
    """A clock that moves `step` seconds at every reading: the budget is checked against it, not the wall."""

    def __init__(self, step: float) -> None:
        self.now, self.step, self.readings = 0.0, step, 0

    def __call__(self) -> float:
        self.now += self.step
        self.readings += 1
        return self.now


def test_the_budget_is_kept_by_the_clock_given() -> None:
    clock = _FakeClock(0.01)
    result = calibrate("cpu", budget=2.0, cases=_small_cases(), clock=clock)
    assert result.seconds <= 2.0 and clock.now <= 2.0 + 0.05
    assert result.rounds >= 1


def test_a_budget_that_times_no_graph_writes_no_target() -> None:
    """Nothing timed: the base target's parameters are not written out as if this machine had measured them."""
    with pytest.raises(BadInputError, match="timed no graph"):
        calibrate("cpu", budget=0.5, cases=_small_cases(), clock=_FakeClock(1.0))


def test_a_budget_too_small_to_build_every_session_leaves_the_rest_out() -> None:
    clock = _FakeClock(0.05)
    cases = _small_cases()
    result = calibrate("cpu", budget=1.0, cases=cases, clock=clock)
    assert result.timed < len(cases) and any("no time left" in s for s in result.skipped)
    assert "no time left" in result.toml  # the TOML says what was left out


@pytest.mark.parametrize(
    ("options", "flag", "words"),
    [
        (dict(budget=0.0), "--budget", "positive number of seconds"),
        (dict(budget=math.inf), "--budget", "positive number of seconds"),
        (dict(threads=0), "--threads", "1 or more"),
        (dict(provider="NoSuchExecutionProvider"), "--provider", "CPUExecutionProvider"),
        (dict(name="cpu"), "--name", "shipped target"),
        (dict(name="a b"), "--name", "letters, digits"),
    ],
)
def test_bad_options_are_refused_with_what_is_accepted(options: dict, flag: str, words: str) -> None:
    given = dict(budget=5.0, provider="CPUExecutionProvider", threads=1, name="mine") | options
    with pytest.raises(BadInputError) as info:
        check_options(**given)
    assert flag in str(info.value) and words in str(info.value)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--budget", "0"], "positive number of seconds"),
        (["--threads", "0"], "1 or more"),
        (["--provider", "Nope"], "not available here"),
        (["--base", "nope"], "unknown target"),
        (["-o", "/no/such/folder/t.toml"], "cannot write the target there"),
        (["-o", "target.txt"], "a target is a .toml file"),
    ],
)
def test_the_command_refuses_bad_options_before_measuring(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # the user targets folder, were it made: not made
    assert main(["calibrate", "--budget", "1", *argv]) == 2
    assert words in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_a_calibrated_target_is_found_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    folder = tmp_path / "eqsat" / "targets"
    folder.mkdir(parents=True)
    text = (TARGET_DIR / "cpu.toml").read_text().replace('name = "cpu"', 'name = "here"')
    (folder / "here.toml").write_text(text)
    (folder / "cpu.toml").write_text(text.replace("launch = 3.0e-6", "launch = 9.0e-6"))  # never shadows a shipped one
    assert load_target("here").name == "here"
    assert load_target("cpu").launch == 3.0e-6
    assert targets()[-1] == "here" and targets().count("cpu") == 1
    with pytest.raises(BadInputError, match="unknown target"):
        load_target("elsewhere")


def test_every_calibration_graph_prices_what_it_runs() -> None:
    """Each fit graph's kernels are its nodes (views and all), so measured and priced are the same graph."""
    for case in fit_cases():
        ops = [n.op_type for n in case.model.graph.node if n.op_type not in ("DequantizeLinear", "QuantizeLinear")]
        assert [k.op for k in case.kernels] == ops, case.name  # a QDQ unit is one kernel (extract/cost.py)
        assert all(k.scaled for k in case.kernels) == (len(ops) == len(case.model.graph.node)), case.name
        assert all(k.nbytes > 0 or k.op == "Reshape" for k in case.kernels), case.name
    names = [c.name for c in fit_cases()]
    assert len(names) == len(set(names))
    assert list(itertools.islice(names, 1)) == ["Relu x1 [64]"]  # launch first: a small budget still fits it


def test_spearman_ranks_as_the_definition_says() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(0.8207826816681233)  # a tie: mean ranks
    assert math.isnan(spearman([1, 2], [2, 1])) and math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    with pytest.raises(ValueError):
        spearman([1, 2, 3], [1, 2])


def test_predicted_cost_prices_a_graph_as_loaded_by_each_target() -> None:
    """An extra Relu costs one kernel more; the cpu target and a cheaper-launch copy price it apart."""
    import onnx.helper as oh

    def chain(k: int):
        nodes = [oh.make_node("Relu", [f"v{i}"], [f"v{i + 1}"]) for i in range(k)]
        x = oh.make_tensor_value_info("v0", 1, [4, 256])
        y = oh.make_tensor_value_info(f"v{k}", 1, [4, 256])
        return oh.make_model(oh.make_graph(nodes, "g", [x], [y]), opset_imports=[oh.make_opsetid("", 17)])

    one, two = predicted_cost(chain(1), "cpu"), predicted_cost(chain(2), "cpu")
    assert two - one == pytest.approx(one, rel=0.01)  # each Relu: launch + its traffic
    assert one > 3.0e-6 and predicted_cost(chain(1), "gpu") != one


def test_fused_checks_build_each_consumer_of_a_pattern_with_its_other_inputs() -> None:
    """`other_inputs = "any"` (the gpu's conv-residual): every consumer's graphs read a second activation, a
    residual, as a graph input; with "constant" the consumer's other operand is an initializer."""
    for other, inputs in (("any", {"x", "r"}), ("constant", {"x"})):
        cases = fused_cases([("p", ["Conv"], ["Relu", "Add", "Mul"], other)])
        assert [c.pair for c in cases][:3] == [
            ("p", "Conv", "producer"),
            ("p", "Relu", "consumer"),
            ("p", "Relu", "both"),
        ]
        for op in ("Add", "Mul"):
            both = next(c for c in cases if c.pair == ("p", op, "both"))
            assert {i.name for i in both.model.graph.input} == inputs, (other, op)
            assert set(both.feeds) == inputs


def test_predicted_cost_prices_a_symbolic_dim_at_the_size_given() -> None:
    import onnx.helper as oh

    x = oh.make_tensor_value_info("x", 1, ["n", 256])
    y = oh.make_tensor_value_info("y", 1, ["n", 256])
    model = oh.make_model(
        oh.make_graph([oh.make_node("Relu", ["x"], ["y"])], "g", [x], [y]), opset_imports=[oh.make_opsetid("", 17)]
    )
    small, large = (predicted_cost(model, "cpu", {"x": (n, 256)}) for n in (4, 4096))
    assert large > 10 * small  # 4096 rows move 1024x the bytes of 4 (the launch is shared)


def _versions(mine: list[float], *peers: list[float]) -> list:
    from benchmarks.bench_latency import Version

    out = [
        Version("eqsat calibrated", None, rounds={"ENABLE_ALL": mine}, measured={"ENABLE_ALL": float(np.median(mine))})
    ]
    for k, times in enumerate(peers):
        out.append(
            Version(f"peer{k}", None, rounds={"ENABLE_ALL": times}, measured={"ENABLE_ALL": float(np.median(times))})
        )
    return out


def test_the_latency_verdict_interval_pairs_rounds_against_common_load() -> None:
    """bench_latency's interval resamples rounds in pairs: a load that slows round k of every version alike (here
    up to 1.3x) leaves a 6% lead certain, and the verdict counts it; unpaired, the same medians would be noise."""
    from benchmarks.bench_latency import ratio_interval, undecided, verdict

    rng = np.random.default_rng(1)
    load = 1 + 0.3 * rng.random(200)  # per round, shared by every version
    peer = list(1e-3 * load * (1 + 0.01 * rng.standard_normal(200)))
    fast = list(0.94e-3 * load * (1 + 0.01 * rng.standard_normal(200)))
    versions = _versions(fast, peer)
    low, high = ratio_interval(versions, "eqsat calibrated", ["peer0"]) or (0.0, 0.0)
    assert 0.92 < low < 0.94 < high < 0.95
    assert not undecided(versions, "eqsat calibrated", ["peer0"])
    picks = np.random.default_rng(0).integers(0, 200, size=(2, 2000, 200))  # unpaired: the two resampled apart
    unpaired = np.median(np.asarray(fast)[picks[0]], axis=1) / np.median(np.asarray(peer)[picks[1]], axis=1)
    assert np.quantile(unpaired, 0.975) > 0.95  # would leave it undecided
    said = verdict({"m": versions}, "eqsat calibrated", ["peer0"])
    assert "at least 5% faster surely on 1 (m)" in said and "slower than 1.03x surely on 0" in said


def test_the_latency_verdict_names_a_model_its_interval_cannot_decide() -> None:
    """A ratio of medians of 1.04 from rounds as noisy as the lead's machine (5% between identical graphs) is not a
    sure failure: the verdict says undecided (and --max-runs would time it again); a clear 1.10 is a failure."""
    from benchmarks.bench_latency import ratio_interval, undecided, verdict

    rng = np.random.default_rng(2)
    peer = list(1e-3 * (1 + 0.08 * rng.standard_normal(30)))
    close = list(1.04e-3 * (1 + 0.08 * rng.standard_normal(30)))
    far = list(1.10e-3 * (1 + 0.01 * rng.standard_normal(30)))
    assert undecided(_versions(close, peer), "eqsat calibrated", ["peer0"])
    said = verdict({"close": _versions(close, peer), "far": _versions(far, peer)}, "eqsat calibrated", ["peer0"])
    assert "surely on 1 (far" in said and "undecided on 1 (close" in said
    # the fastest peer is chosen again in each resample: a second, slower peer changes nothing
    slower = list(np.asarray(peer) * 1.2)
    assert ratio_interval(_versions(far, peer, slower), "eqsat calibrated", ["peer0", "peer1"]) == ratio_interval(
        _versions(far, peer), "eqsat calibrated", ["peer0"]
    )


def test_an_emulated_dtype_is_fitted_as_the_cost_model_prices_it() -> None:
    """A FLOAT16 kernel on a target that runs fp16 in float (cpu.toml [emulated]) is its float kernel plus a Cast
    per tensor cast: the fit prices it so (so peak.FLOAT16 is not fitted: nothing runs at it), the same price the
    cost model gives the calibration's fp16 graphs, and the Cast scale is recovered from such samples."""
    truth = dataclasses.replace(TRUE, emulated={"FLOAT16": "FLOAT"}, op_scale={**TRUE.op_scale, "Cast": 0.7})
    n = 2.6e5
    add = Kernel("Add", "FLOAT16", n, 6 * n, casts=(n, n, n))
    cast = truth.launch + n * 6 / truth.bandwidth * 0.7
    expected = truth.call + truth.launch + max(n / truth.peak["FLOAT"], 12 * n / truth.bandwidth) + 3 * cast
    assert truth.predict(Sample("add", (add,), 0)) == pytest.approx(expected)
    extra = [(f"Add FLOAT16 {m:g}", (Kernel("Add", "FLOAT16", m, 6 * m, casts=(m, m, m)),)) for m in (1e4, 2.6e5, 1e6)]
    extra += [(f"Cast {m:g}", (Kernel("Cast", "FLOAT", 0.0, 6 * m),)) for m in (1e4, 2.6e5, 1e6)]
    samples = _synthetic(truth, 0.0) + [Sample(k, ks, truth.predict(Sample(k, ks, 0))) for k, ks in extra]
    found = fit(samples, dataclasses.replace(START, emulated=truth.emulated))
    assert "peak.FLOAT16" not in found.fitted and abs(found.params.op_scale["Cast"] / 0.7 - 1) < 0.01
    # the calibration's own fp16 graphs: the fit's price (less a call) is the cost model's, on the shipped cpu
    cpu = load_target("cpu")
    params = Params(cpu.launch, cpu.bandwidth, cpu.view_fraction, cpu.peak, cpu.op_scale, emulated=cpu.emulated)
    fp16 = [c for c in fit_cases() if any(k.dtype == "FLOAT16" for k in c.kernels)]
    assert {c.kernels[0].op for c in fp16} == {"Add", "MatMul"}
    for case in fp16:
        model = onnx.ModelProto()
        model.CopyFrom(case.model)  # with its output's dims declared, as eqsat loads models
        out = ReferenceEvaluator(model).run(None, case.feeds)[0]
        model.graph.output[0].CopyFrom(
            oh.make_tensor_value_info("z", model.graph.output[0].type.tensor_type.elem_type, out.shape)
        )
        priced = predicted_cost(model, "cpu")
        assert params.predict(Sample(case.name, case.kernels, 0)) == pytest.approx(priced, rel=1e-3), case.name


def test_the_latency_verdict_widens_its_intervals_by_the_session_noise() -> None:
    """Two sessions of one graph differ by more than their rounds' spread (minilm's byte-identical cpu and
    calibrated outputs came out 3% apart, intervals disjoint): bench_latency measures that between the
    byte-identical versions of the run and widens the verdict's intervals by it."""
    from benchmarks.bench_latency import session_noise, verdict

    def graph(op: str) -> onnx.ModelProto:
        x = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
        return oh.make_model(oh.make_graph([oh.make_node(op, ["x"], ["y"])], "g", [x], [x.__class__(name="y")]))

    rng = np.random.default_rng(3)
    peer = list(1e-3 * (1 + 0.002 * rng.standard_normal(100)))
    mine = list(0.93e-3 * (1 + 0.002 * rng.standard_normal(100)))
    versions = _versions(mine, peer)
    versions[0].proto, versions[1].proto = graph("Relu"), graph("Neg")
    twin = dataclasses.replace(
        versions[1], label="twin", measured={"ENABLE_ALL": 1.03 * versions[1].measured["ENABLE_ALL"]}
    )  # the peer's graph again
    results = {"m": [*versions, twin]}
    noise, pairs = session_noise(results)
    assert pairs == 1 and noise == pytest.approx(0.03)
    assert "at least 5% faster surely on 1 (m)" in verdict(results, "eqsat calibrated", ["peer0"])
    widened = verdict(results, "eqsat calibrated", ["peer0"], widen=noise)
    assert "widened by the session noise (3.0%)" in widened and "at least 5% faster surely on 0" in widened
    assert "undecided on 1 (m 0.930" in widened


def test_interleaved_rounds_run_every_session_once_in_a_fresh_order_each_round() -> None:
    """bench_latency shuffles each round (eqsat.check.timing): no session always runs right after the same one, whose
    run leaves the caches to it; every session still runs exactly once a round, so rounds stay paired."""
    import random

    from eqsat.check import timing

    ran: list[str] = []

    class Recording:  # stands for an onnxruntime session: records each run
        def __init__(self, label: str) -> None:
            self.label = label

        def run(self, *args: object) -> None:
            ran.append(self.label)

    timed = [timing.Timed(label, Recording(label), {}) for label in "abcd"]
    assert timing.time_interleaved(timed, rounds=12, shuffle=random.Random(0)) == 12
    rounds = [ran[k : k + 4] for k in range(0, len(ran), 4)]
    assert all(sorted(r) == list("abcd") for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1
    assert all(len(t.times) == 12 for t in timed)
    ran.clear()
    timing.time_interleaved(timed, rounds=3)
    assert ran == list("abcd") * 3  # without `shuffle`: the order given
