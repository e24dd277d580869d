"""Hypothesis strategies for shapes, permutations and arrays (hypothesis is imported on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from eqsat.testing.models import numpy_dtype

if TYPE_CHECKING:  # heavy imports only where they are used
    from hypothesis.strategies import SearchStrategy


# --------------------------------------------------------------------------------------------------
# hypothesis strategies


def hypothesis_strategies() -> Any:
    try:
        from hypothesis import strategies
    except ImportError as exc:  # pragma: no cover - hypothesis is a test dependency
        raise ImportError("eqsat.testing strategies need hypothesis: pip install 'eqsat[test]'") from exc
    return strategies


def shapes(
    min_rank: int = 1, max_rank: int = 4, max_dim: int = 3, min_dim: int = 1
) -> "SearchStrategy[tuple[int, ...]]":
    """Static shapes with rank in [min_rank, max_rank] and every dim in [min_dim, max_dim]."""
    st = hypothesis_strategies()
    return st.lists(st.integers(min_dim, max_dim), min_size=min_rank, max_size=max_rank).map(tuple)


def perms(rank: int) -> "SearchStrategy[tuple[int, ...]]":
    """Permutations of range(rank)."""
    return hypothesis_strategies().permutations(list(range(rank))).map(tuple)


def inverse(perm: Sequence[int]) -> tuple[int, ...]:
    """The inverse permutation: inverse(p)[p[i]] = i."""
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def broadcastable_shapes(shape: Sequence[int], *, same_rank: bool = False) -> "SearchStrategy[tuple[int, ...]]":
    """Shapes that broadcast to `shape` without enlarging it: a suffix of it (the full rank when
    `same_rank`), with any dims replaced by 1."""
    st = hypothesis_strategies()
    rank = len(shape)

    @st.composite
    def draw_shape(draw: Callable) -> tuple[int, ...]:
        k = rank if same_rank else draw(st.integers(0, rank))
        dims = tuple(shape[rank - k :])
        ones = draw(st.lists(st.booleans(), min_size=k, max_size=k))
        return tuple(1 if one else d for d, one in zip(dims, ones))

    return draw_shape()


def value_range(dtype: np.dtype, low: float, high: float) -> tuple[float, float]:
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return max(low, info.min), min(high, info.max)
    return low, high


def arrays(
    dtype: Any, shape: Sequence[int], low: float = -8.0, high: float = 8.0, *, integers: bool = False
) -> "SearchStrategy[np.ndarray]":
    """Arrays of `dtype` and `shape` with values in [low, high] (clipped to the dtype's range).

    Values come from a numpy generator seeded by hypothesis (so every element differs, which layout
    bugs need; shrinking acts on the seed), with a few exact 0, 1 and -1 mixed in; `integers` makes
    float values integral (comparisons then see equal elements).
    """
    st = hypothesis_strategies()
    np_dtype = numpy_dtype(dtype)

    def build(args: tuple[int, int]) -> np.ndarray:
        seed, special = args
        rng = np.random.default_rng(seed)
        size = int(np.prod(shape, dtype=np.int64))
        if np_dtype == np.bool_:
            return (rng.random(size) < 0.5).reshape(shape)
        lo, hi = value_range(np_dtype, low, high)
        if np_dtype.kind in "iu" or integers:
            data = rng.integers(int(np.ceil(lo)), int(np.floor(hi)) + 1, size=size).astype(np.float64)
        else:
            data = rng.uniform(lo, hi, size=size)
        if special and size:
            picks = rng.integers(0, size, size=max(1, size // 4))
            data[picks] = np.clip(rng.choice([0.0, 1.0, -1.0], size=picks.size), lo, hi)
        return data.astype(np_dtype).reshape(shape)

    return st.tuples(st.integers(0, 2**32 - 1), st.booleans()).map(build)


def float_arrays(
    shape: Sequence[int], dtype: Any = np.float32, low: float = -8.0, high: float = 8.0
) -> "SearchStrategy[np.ndarray]":
    """Finite float arrays of moderate magnitude (|x| <= 8 by default); see `arrays`."""
    return arrays(dtype, shape, low, high)
