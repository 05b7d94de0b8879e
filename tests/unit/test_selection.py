"""The n-th largest score by a sample's bound (``graph_app.domain.selection``): the same value
as partitioning every score, whatever the scores' shape, in the sampled path and out of it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_app.domain import selection
from graph_app.domain.selection import SAMPLED_MIN, nth_largest


def _partitioned(values: np.ndarray, n: int) -> float:
    return float(np.partition(values, len(values) - n)[len(values) - n])


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(1).exponential(1.0, 35_000),  # a ranking's scores
        np.round(np.random.default_rng(2).exponential(1.0, 35_000), 1),  # many ties
        np.zeros(20_000),  # all equal
        np.arange(50_000, dtype=np.float64),  # ascending: the sample holds the largest few
        np.arange(50_000, dtype=np.float64)[::-1].copy(),
    ],
    ids=["exponential", "ties", "equal", "ascending", "descending"],
)
@pytest.mark.parametrize("n", [1, 3, 160, 1000, 4000])
def test_the_sampled_bound_finds_the_value_a_full_partition_finds(
    values: np.ndarray, n: int
) -> None:
    assert nth_largest(values, n) == _partitioned(values, n)


def test_a_sample_that_misses_the_largest_falls_back_to_every_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The largest values all sit between the sampled places: the sample's bound lies above
    # all but a few of them, and the whole array is partitioned instead.
    values = np.zeros(SAMPLED_MIN * 4)
    values[np.arange(len(values)) % selection.SAMPLE_STEP != 0] = 1.0
    values[:: selection.SAMPLE_STEP] = 2.0  # the sample sees only these 2.0s
    calls: list[int] = []
    real = np.partition

    def counted(a: np.ndarray, kth: int) -> np.ndarray:
        calls.append(len(a))
        return real(a, kth)

    monkeypatch.setattr(selection.np, "partition", counted)
    n = len(values) // selection.SAMPLE_STEP + 10  # more than the 2.0s the sample bound keeps
    assert nth_largest(values, n) == 1.0
    assert calls[-1] == len(values)  # the answer came from every value


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=SAMPLED_MIN, max_value=3 * SAMPLED_MIN),
    st.integers(min_value=1, max_value=SAMPLED_MIN // 4),
    st.integers(min_value=0, max_value=2**32 - 1),
    st.sampled_from(["uniform", "spiky", "coarse"]),
)
def test_any_scores_give_the_same_nth_largest(size: int, n: int, seed: int, shape: str) -> None:
    rng = np.random.default_rng(seed)
    values = rng.random(size)
    if shape == "spiky":  # a few large values in places a sample may skip
        values[rng.integers(0, size, 50)] += 100.0
    elif shape == "coarse":
        values = np.floor(values * 5)
    assert nth_largest(values, n) == _partitioned(values, n)


@pytest.mark.parametrize("n", [0, 11])
def test_n_outside_the_values_is_refused(n: int) -> None:
    with pytest.raises(ValueError, match="n must be within"):
        nth_largest(np.ones(10), n)
