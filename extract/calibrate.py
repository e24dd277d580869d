"""Fitting a target's parameters to measured kernel times, and writing the calibrated target's TOML.

The model fitted is the roofline's own (extract/cost.py), kernel by kernel, plus a per-call constant:

    seconds(sample) = call + sum over its kernels k of  launch + op_scale[op_k] x max(flops_k / peak[dtype_k],
                                                                                      bytes_k / bandwidth)

(a view op's kernel costs `view_fraction x launch`). `call` is what one `session.run` costs beyond its kernels
(binding, feeds, output allocation): the same for every graph, so it changes no choice and is not written.
`op_scale` of the reference ops (`REFERENCE_OPS`: Add prices bandwidth, MatMul the peak) is 1, so the scales
say how an op's kernel compares to them, as the cpu target's Div = 1.5 does. The fit minimizes the squared
log error (every sample weighs alike, 5 us or 5 ms) by Levenberg-Marquardt over the logs of the parameters,
with the max smoothed by a p-norm while it converges, and a weak prior that each op_scale is 1 (SCALE_PRIOR);
a parameter no sample informs keeps its start value.

Measuring (onnxruntime) is elsewhere (eqsat.calibration): this module needs numpy only, so the fit is tested
on synthetic samples drawn from known parameters.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from eqsat.extract.op_traits import DTYPE_BYTES, VIEW_OPS

#: Ops whose op_scale is fixed at 1: Add defines the bandwidth, MatMul the peak of each dtype.
REFERENCE_OPS = frozenset({"Add", "MatMul"})
#: Weight of the prior that an op's kernel is priced as its peers' (op_scale 1), per unit of log(op_scale): a
#: factor 2 weighs as a 3.5% error on one graph. It settles what the graphs cannot tell apart (a kernel's launch
#: against its op's scale when every graph of the op is tiny) without moving what they can.
SCALE_PRIOR = 0.05
#: Exponent of the p-norm standing in for max() while the fit converges (then the true max is polished).
SMOOTHING = (4.0, 16.0, math.inf)


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One kernel of a measured graph, as the roofline sees it."""

    op: str
    dtype: str
    flops: float
    nbytes: float
    scaled: bool = True  # priced with op_scale[op] (a QDQ node unit's integer kernel is not: extract/cost.py)
    #: elements of each tensor a runtime casts around the kernel when its dtype is emulated (Params.emulated):
    #: its non-constant inputs, then its output
    casts: tuple[float, ...] = ()


@dataclasses.dataclass(frozen=True)
class Sample:
    """A measured graph: its kernels and the median seconds of one `session.run`."""

    name: str
    kernels: tuple[Kernel, ...]
    seconds: float


@dataclasses.dataclass(frozen=True)
class Params:
    """What the fit finds: the target's parameters and the per-call constant."""

    launch: float
    bandwidth: float
    view_fraction: float
    peak: Mapping[str, float]
    op_scale: Mapping[str, float]
    call: float = 0.0
    #: dtype -> the dtype its kernels run in between Casts (the base target's `emulated`: not fitted)
    emulated: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def predict(self, sample: Sample) -> float:
        return _predict(self, sample, math.inf)


@dataclasses.dataclass(frozen=True)
class Fit:
    """The fitted parameters, what they predict for each sample, and which parameters the samples informed."""

    params: Params
    samples: tuple[Sample, ...]
    fitted: frozenset[str]  # "launch", "bandwidth", "view_fraction", "call", "peak.FLOAT", "op_scale.Div", ...

    def errors(self) -> np.ndarray:
        """Relative error of each sample's prediction: predicted / measured - 1."""
        return np.array([self.params.predict(s) / s.seconds - 1 for s in self.samples])

    def error_summary(self) -> str:
        e = np.abs(self.errors())
        if not e.size:
            return "no samples"
        median, top = np.median(e) * 100, np.quantile(e, 0.9) * 100
        return f"median |error| {median:.1f}%, 90th percentile {top:.1f}%, max {e.max() * 100:.1f}%"


def _kernel_time(p: Params, k: Kernel, norm: float) -> float:
    if k.op in VIEW_OPS:
        return p.view_fraction * p.launch
    runs_as = p.emulated.get(k.dtype) if k.flops else None
    dtype = runs_as or k.dtype
    peak = p.peak.get(dtype, p.peak.get("default", 1.0))
    compute = k.flops / peak if k.flops else 0.0
    widen = DTYPE_BYTES[runs_as] / DTYPE_BYTES[k.dtype] if runs_as else 1.0
    memory = k.nbytes * widen / p.bandwidth
    casts = 0.0
    if runs_as:  # as extract/cost.py prices it: a Cast kernel for each tensor cast, then the kernel in `runs_as`
        per_element = (DTYPE_BYTES[k.dtype] + DTYPE_BYTES[runs_as]) / p.bandwidth * p.op_scale.get("Cast", 1.0)
        casts = sum(p.launch + n * per_element for n in k.casts)
    if math.isinf(norm) or not compute or not memory:
        work = max(compute, memory)
    else:
        top = max(compute, memory)
        work = top * ((compute / top) ** norm + (memory / top) ** norm) ** (1 / norm)
    return p.launch + (p.op_scale.get(k.op, 1.0) if k.scaled else 1.0) * work + casts


def _predict(p: Params, sample: Sample, norm: float) -> float:
    return p.call + sum(_kernel_time(p, k, norm) for k in sample.kernels)


def _names(samples: Sequence[Sample], emulated: Mapping[str, str]) -> list[str]:
    """The parameters the samples can inform, in a fixed order (an emulated dtype's peak is its runs-as one's)."""
    ops = {k.op for s in samples for k in s.kernels if k.scaled}
    ops |= {"Cast" for s in samples for k in s.kernels if k.casts and k.dtype in emulated}
    dtypes = {emulated.get(k.dtype, k.dtype) for s in samples for k in s.kernels if k.flops and k.op not in VIEW_OPS}
    names = ["call", "launch", "bandwidth"]
    names += ["view_fraction"] if ops & VIEW_OPS else []
    names += [f"peak.{d}" for d in sorted(dtypes)]
    names += [f"op_scale.{op}" for op in sorted(ops - REFERENCE_OPS - VIEW_OPS)]
    return names


def _get(p: Params, name: str) -> float:
    table, _, key = name.partition(".")
    if table == "peak":
        return p.peak.get(key, p.peak.get("default", 1.0))
    if table == "op_scale":
        return p.op_scale.get(key, 1.0)
    return float(getattr(p, name))


def _with(p: Params, names: Sequence[str], values: Iterable[float]) -> Params:
    plain: dict[str, Any] = {}
    peak, scale = dict(p.peak), dict(p.op_scale)
    for name, value in zip(names, values):
        table, _, key = name.partition(".")
        if table == "peak":
            peak[key] = float(value)
        elif table == "op_scale":
            scale[key] = float(value)
        else:
            plain[name] = float(value)
    return dataclasses.replace(p, peak=peak, op_scale=scale, **plain)


def fit(samples: Sequence[Sample], start: Params, *, iterations: int = 200) -> Fit:
    """Parameters minimizing the squared log error of the predictions over `samples`, from `start`.

    The per-call constant starts at a third of the fastest sample (it is positive: kept in logs, as the rest)."""
    samples = tuple(s for s in samples if s.seconds > 0 and math.isfinite(s.seconds))
    if not samples:
        return Fit(start, (), frozenset())
    names = _names(samples, start.emulated)
    fastest = min(s.seconds for s in samples)
    start = dataclasses.replace(start, call=start.call or fastest / 3, launch=min(start.launch, fastest))
    theta = np.log([_get(start, n) for n in names])
    measured = np.log([s.seconds for s in samples])
    for norm in SMOOTHING:
        theta = _levenberg_marquardt(samples, start, names, theta, measured, norm, iterations)
    params = _with(start, names, np.exp(theta))
    informed = _informed(samples, params, names)
    blind = [n for n in names if n not in informed]  # no sample depends on them: the start's values stay
    params = _with(params, blind, [_get(start, n) for n in blind])
    scale = {op: v for op, v in params.op_scale.items() if f"op_scale.{op}" in informed or op in start.op_scale}
    return Fit(dataclasses.replace(params, op_scale=scale), samples, frozenset(informed))


def _residuals(
    samples: Sequence[Sample], start: Params, names: Sequence[str], theta: np.ndarray, measured: np.ndarray, norm: float
) -> np.ndarray:
    """Log errors of the predictions, then the prior on each op_scale (SCALE_PRIOR x its log)."""
    p = _with(start, names, np.exp(theta))
    errors = np.log([_predict(p, s, norm) for s in samples]) - measured
    scales = np.array([SCALE_PRIOR * t for n, t in zip(names, theta) if n.startswith("op_scale.")])
    return np.concatenate([errors, scales])


def _jacobian(
    samples: Sequence[Sample], start: Params, names: Sequence[str], theta: np.ndarray, measured: np.ndarray, norm: float
) -> np.ndarray:
    """Forward differences in log space (a few dozen parameters, a few hundred samples: cheap)."""
    base = _residuals(samples, start, names, theta, measured, norm)
    jac = np.empty((len(base), len(names)))
    step = 1e-6
    for j in range(len(names)):
        moved = theta.copy()
        moved[j] += step
        jac[:, j] = (_residuals(samples, start, names, moved, measured, norm) - base) / step
    return jac


def _levenberg_marquardt(
    samples: Sequence[Sample],
    start: Params,
    names: Sequence[str],
    theta: np.ndarray,
    measured: np.ndarray,
    norm: float,
    iterations: int,
) -> np.ndarray:
    damping = 1e-3
    r = _residuals(samples, start, names, theta, measured, norm)
    loss = float(r @ r)
    for _ in range(iterations):
        jac = _jacobian(samples, start, names, theta, measured, norm)
        grad = jac.T @ r
        normal = jac.T @ jac
        improved = False
        while damping < 1e10:
            step = np.linalg.solve(normal + damping * (np.diag(np.diag(normal)) + 1e-12 * np.eye(len(names))), -grad)
            candidate = theta + np.clip(step, -2.0, 2.0)  # at most a factor e^2 per step
            r_new = _residuals(samples, start, names, candidate, measured, norm)
            new_loss = float(r_new @ r_new)
            if new_loss < loss:
                theta, r, improved = candidate, r_new, True
                gain, loss = loss - new_loss, new_loss
                damping = max(damping / 3, 1e-9)
                break
            damping *= 4
        if not improved or gain < 1e-12 * max(loss, 1e-30):
            break
    return theta


def _informed(samples: Sequence[Sample], p: Params, names: Sequence[str]) -> set[str]:
    """Parameters whose doubling moves some prediction by 5% or more (on the active side of its max)."""
    base = np.array([p.predict(s) for s in samples])
    informed = set()
    for name in names:
        moved = _with(p, [name], [_get(p, name) * 2])
        if np.any(np.abs(np.array([moved.predict(s) for s in samples]) / base - 1) >= 0.05):
            informed.add(name)
    return informed


# ---------------------------------------------------------------------------------------------------
# The calibrated target's TOML

#: Order of the top-level tables in a written target (as the shipped targets have them).
_TABLES = ("peak", "op_scale", "emulated", "fallback", "fused", "qdq", "quant", "blocked_layout", "serial", "relayout")


def calibrated_data(base: Mapping[str, Any], found: Params, *, name: str, description: str) -> dict[str, Any]:
    """The base target's TOML data with the fitted parameters in place of its own (its other sections kept)."""
    data = {k: v for k, v in base.items()}
    data.update(name=name, description=description)
    data.update(launch=found.launch, bandwidth=found.bandwidth, view_fraction=found.view_fraction)
    data["peak"] = {**base.get("peak", {}), **found.peak}
    scale = {op: v for op, v in found.op_scale.items() if op not in REFERENCE_OPS}
    data["op_scale"] = dict(sorted(scale.items()))
    if not data["op_scale"]:
        del data["op_scale"]
    launch = float(found.launch)
    data["tie_break"] = min(float(base.get("tie_break", 1e-9)), launch / 3000)  # below MAX_TIE_FRACTION x launch
    return data


def to_toml(data: Mapping[str, Any], comments: Sequence[str] = ()) -> str:
    """TOML text of a target's data (scalars, lists of scalars, tables, arrays of tables), `comments` first."""
    lines = [f"# {c}".rstrip() for c in comments]
    lines += [f"{k} = {_value(v)}" for k, v in data.items() if not isinstance(v, (dict, list)) or _scalars(v)]
    for table in [t for t in _TABLES if t in data] + [t for t in data if t not in _TABLES]:
        value = data[table]
        if isinstance(value, dict):
            lines += ["", f"[{table}]"] + [f"{_key(k)} = {_value(v)}" for k, v in value.items()]
        elif isinstance(value, list) and not _scalars(value):
            for item in value:
                lines += ["", f"[[{table}]]"] + [f"{_key(k)} = {_value(v)}" for k, v in item.items()]
    return "\n".join(lines) + "\n"


def _scalars(value: Any) -> bool:
    return isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value)


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else _value(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6e}" if value and (abs(value) < 1e-3 or abs(value) >= 1e4) else repr(float(f"{value:.6g}"))
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} into a target")
