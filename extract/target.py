"""Hardware targets: the data of extract/targets/*.toml (or a calibrated one, eqsat calibrate) loaded into a
`Target` and validated. The cost models that price nodes for a target are in eqsat.extract.cost."""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from pathlib import Path
from typing import Any, Mapping

from eqsat.errors import BadInputError
from eqsat.extract.op_traits import DTYPE_BYTES, MOVE_OPS, QUANT_OTHER, QUANT_TYPES, VIEW_OPS
from eqsat.extract.target_schema import check_keys
from eqsat.extract.ties import check_tie_break, default_tie_break

TARGET_DIR = Path(__file__).with_name("targets")


#: The ways a target's output may write symbolic dims in value_info (Target.value_info_dims).
VALUE_INFO_DIMS = ("named", "fresh")


class TargetError(BadInputError):
    """An unknown or malformed hardware target."""


# ---------------------------------------------------------------------------------------------------
# Targets


@dataclasses.dataclass(frozen=True)
class FusedPattern:
    """A consumer op fused into the kernel of its producer (e.g. conv + bias + relu epilogue)."""

    name: str
    producers: frozenset[str]
    consumers: frozenset[str]
    other_inputs: str = "constant"  # "constant": the consumer's other inputs must be constant; "any"
    mode: str = "free"  # "free": reads its constants only; "epilogue": compute and traffic, no launch
    all_inputs: bool = False  # the consumer's optional inputs must all be present (a runtime's pattern reads them)
    dtypes: frozenset[str] | None = None  # the producer's output dtypes the runtime fuses (None: any)


@dataclasses.dataclass(frozen=True)
class BlockedLayout:
    """A blocked activation layout a CPU runtime keeps between its kernels (ONNX Runtime's NCHWc)."""

    producers: frozenset[str]  # ops that produce blocked outputs from plain NCHW inputs
    ops: frozenset[str]  # ops that consume (and produce) blocked activations
    block: int = 1  # channels per block: producers whose output channels are not a multiple stay NCHW
    dtypes: frozenset[str] = frozenset({"FLOAT"})


@dataclasses.dataclass(frozen=True)
class Target:
    """A hardware target, loaded from `extract/targets/<name>.toml`."""

    name: str
    description: str
    peak: Mapping[str, float]  # FLOP/s per ONNX dtype name; "default" for others
    bandwidth: float  # bytes/s
    launch: float  # seconds per op
    supported_ops: frozenset[str] | None  # None: every op
    unsupported_penalty: float = 0.0  # seconds per unsupported op (host round trip)
    fallback_peak: float = 1e11  # FLOP/s of the host that runs unsupported ops
    fallback_bandwidth: float = 1e10  # bytes/s of that host
    fused: tuple[FusedPattern, ...] = ()
    layout: str = "any"  # "NCHW", "NHWC" or "any"
    layout_penalty: float = 0.0  # extra activation traffic of a non-preferred layout
    view_fraction: float = 0.05  # cost of a view op, as a fraction of `launch`
    qdq_ops: frozenset[str] = frozenset()  # ops run as one integer kernel inside DQ -> op -> Q
    #: qdq ops whose unit needs explicit zero points on its DQs and its Q (the runtime's selector reads them)
    qdq_zero_point_ops: frozenset[str] = frozenset()
    blocked: BlockedLayout | None = None  # blocked activation layout (NCHWc) and the ops that keep it
    serial_ops: frozenset[str] = frozenset()  # one thread per output looping over the window
    serial_step: float = 0.0  # seconds per step of that loop
    relayout_ops: frozenset[str] = frozenset()  # ops whose kernels take only inputs of `relayout_ranks`
    relayout_ranks: frozenset[int] = frozenset()
    quant_types: frozenset[str] | None = None  # quantized types taken natively by Q/DQ (None: every type)
    quant_symmetric: bool = False  # ... with zero point 0 only
    quant_other: str = "convert"  # cost of any other Q/DQ: "unsupported" or "convert" (see QUANT_OTHER)
    tie_break: float = 0.0  # seconds per node, plus a share per input it reads (extract/ties.py)
    op_scale: Mapping[str, float] = dataclasses.field(default_factory=dict)  # measured factor per op
    #: dtype -> the dtype its compute ops run in between Casts the runtime inserts (cpu: FLOAT16 -> FLOAT)
    emulated: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: how the output's value_info writes a dim known only symbolically: "named" (the symbol, `batch`: shared
    #: where eqsat proved dims equal) or "fresh" (a name of its own per dim: the runtime cannot equate them)
    value_info_dims: str = "named"
    source: str = ""

    def peak_for(self, dtype: str) -> float | None:
        """FLOP/s for `dtype`, or None if the target cannot compute in it."""
        return self.peak.get(dtype, self.peak.get("default"))

    def supports(self, op: str) -> bool:
        return self.supported_ops is None or op in self.supported_ops


def user_target_dir() -> Path:
    """Where targets calibrated on this machine are kept by name (`eqsat calibrate --name NAME`):
    $XDG_CONFIG_HOME/eqsat/targets, by default ~/.config/eqsat/targets."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "eqsat" / "targets"


def targets() -> list[str]:
    """Names of the targets shipped in extract/targets/, then of those calibrated here (user_target_dir())."""
    shipped = sorted(p.stem for p in TARGET_DIR.glob("*.toml"))
    return shipped + sorted({p.stem for p in user_target_dir().glob("*.toml")} - set(shipped))


def load_target(name: str | os.PathLike[str]) -> Target:
    """Load a target by name (`cpu`, `gpu`, `npu`, ...; a shipped one, else one in user_target_dir()) or from a
    .toml path."""
    text = str(name)
    path = Path(text) if text.endswith(".toml") or os.sep in text else TARGET_DIR / f"{text}.toml"
    if not path.is_file() and path.parent == TARGET_DIR:
        path = user_target_dir() / path.name
    if not path.is_file():
        raise TargetError(f"target {text!r}", f"unknown target; available: {', '.join(targets())}")
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
        return _target_from_dict(data, str(path))
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as exc:
        raise TargetError(str(path), f"malformed target: {exc}") from exc


def _target_from_dict(data: Mapping[str, Any], source: str) -> Target:
    check_keys(data)
    ops = data.get("supported_ops", "*")
    fallback = data.get("fallback", {})
    target = Target(
        name=str(data["name"]),
        description=str(data.get("description", "")),
        peak={str(k): float(v) for k, v in data["peak"].items()},
        bandwidth=float(data["bandwidth"]),
        launch=float(data["launch"]),
        supported_ops=None if ops == "*" else _names(data, "supported_ops"),
        unsupported_penalty=float(data.get("unsupported_penalty", 0.0)),
        fallback_peak=float(fallback.get("peak", 1e11)),
        fallback_bandwidth=float(fallback.get("bandwidth", 1e10)),
        fused=tuple(
            FusedPattern(
                str(f["name"]),
                _names(f, "producers", required=True),
                _names(f, "consumers", required=True),
                str(f.get("other_inputs", "constant")),
                str(f.get("mode", "free")),
                _flag(f, "all_inputs"),
                _names(f, "dtypes") if "dtypes" in f else None,
            )
            for f in data.get("fused", ())
        ),
        layout=str(data.get("layout", "any")),
        layout_penalty=float(data.get("layout_penalty", 0.0)),
        view_fraction=float(data.get("view_fraction", 0.05)),
        qdq_ops=_names(data.get("qdq", {}), "ops"),
        qdq_zero_point_ops=_names(data.get("qdq", {}), "zero_point_ops"),
        blocked=_blocked_from_dict(data["blocked_layout"]) if "blocked_layout" in data else None,
        serial_ops=_names(data.get("serial", {}), "ops"),
        serial_step=float(data.get("serial", {}).get("step", 0.0)),
        relayout_ops=_names(data.get("relayout", {}), "ops"),
        relayout_ranks=_ranks(data.get("relayout", {})),
        quant_types=_names(data["quant"], "types") if "types" in data.get("quant", {}) else None,
        quant_symmetric=_flag(data.get("quant", {}), "symmetric"),
        quant_other=str(data.get("quant", {}).get("other", "convert")),
        tie_break=float(data.get("tie_break", default_tie_break(float(data["launch"])))),
        op_scale={str(k): float(v) for k, v in data.get("op_scale", {}).items()},
        emulated={str(k): str(v) for k, v in data.get("emulated", {}).items()},
        value_info_dims=str(data.get("value_info_dims", "named")),
        source=source,
    )
    _validate(target)
    return target


def _blocked_from_dict(data: Mapping[str, Any]) -> BlockedLayout:
    return BlockedLayout(
        _names(data, "producers", required=True),
        _names(data, "ops", required=True),
        int(data.get("block", 1)),
        _names(data, "dtypes") if "dtypes" in data else frozenset({"FLOAT"}),
    )


def _validate(t: Target) -> None:
    positive = {
        "bandwidth": t.bandwidth,
        "launch": t.launch,
        "fallback.peak": t.fallback_peak,
        "fallback.bandwidth": t.fallback_bandwidth,
        "view_fraction": t.view_fraction,
    }
    positive.update({f"peak.{k}": v for k, v in t.peak.items()} | {f"op_scale.{k}": v for k, v in t.op_scale.items()})
    for key, value in positive.items():
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(f"{key} must be a positive finite number, got {value}")
    for key, penalty in (("unsupported_penalty", t.unsupported_penalty), ("layout_penalty", t.layout_penalty)):
        if not (penalty >= 0 and math.isfinite(penalty)):
            raise ValueError(f"{key} must be a finite number >= 0, got {penalty}")
    if t.value_info_dims not in VALUE_INFO_DIMS:
        raise ValueError(f"value_info_dims must be one of {', '.join(VALUE_INFO_DIMS)}, got {t.value_info_dims!r}")
    check_tie_break(t.tie_break, t.launch)
    if not (t.serial_step >= 0 and math.isfinite(t.serial_step)):
        raise ValueError(f"serial.step must be a finite number >= 0, got {t.serial_step}")
    if t.blocked is not None:
        if t.blocked.block < 1:
            raise ValueError(f"blocked_layout.block must be >= 1, got {t.blocked.block}")
        if not t.blocked.producers <= t.blocked.ops:
            raise ValueError("blocked_layout: every producer must also be listed in ops")
    if t.quant_other not in QUANT_OTHER:
        raise ValueError(f"quant.other must be one of {', '.join(QUANT_OTHER)}, got {t.quant_other!r}")
    if t.quant_types is not None and not t.quant_types <= QUANT_TYPES:
        raise ValueError(f"quant.types must be among {sorted(QUANT_TYPES)}, got {sorted(t.quant_types - QUANT_TYPES)}")
    if t.layout not in ("NCHW", "NHWC", "any"):
        raise ValueError(f"layout must be NCHW, NHWC or any, got {t.layout!r}")
    for dtype, runs_as in t.emulated.items():
        if dtype not in DTYPE_BYTES or runs_as not in DTYPE_BYTES or runs_as in t.emulated:
            raise ValueError(f"emulated: {dtype} = {runs_as!r} must map a dtype to one with kernels of its own")
    for f in t.fused:
        if f.mode not in ("free", "epilogue") or f.other_inputs not in ("constant", "any"):
            raise ValueError(f"fused pattern {f.name}: mode must be free|epilogue, other_inputs constant|any")
        moving = f.consumers & (MOVE_OPS | VIEW_OPS)
        if moving:
            raise ValueError(f"fused pattern {f.name}: data movement ops cannot be fused away: {sorted(moving)}")


def _names(table: Mapping[str, Any], key: str, required: bool = False) -> frozenset[str]:
    """A list of names (ops, dtypes) of a TOML table: a bare string is an error (it would read as its letters)."""
    return _listed(table, key, str, 'names, as ["Conv", "Relu"]', required)


def _ranks(table: Mapping[str, Any]) -> frozenset[int]:
    """relayout.ranks: a list of integers (a string "45" is an error, not the ranks 4 and 5)."""
    return _listed(table, "ranks", int, "integers, as [4, 5]")


def _listed(table: Mapping[str, Any], key: str, kind: type, what: str, required: bool = False) -> frozenset[Any]:
    """The items of a TOML list of `kind` (bools are not integers), as a set; any other value is an error."""
    if required and key not in table:
        raise ValueError(f"{key} is required")
    value = table.get(key, ())
    fits = isinstance(value, (list, tuple)) and all(isinstance(v, kind) and not isinstance(v, bool) for v in value)
    if not fits:
        raise ValueError(f"{key} must be a list of {what}, got {value!r}")
    return frozenset(value)


def _flag(table: Mapping[str, Any], key: str) -> bool:
    """A true/false key of a TOML table (a string "false" is an error, not true)."""
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false, got {value!r}")
    return value
