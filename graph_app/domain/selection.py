"""The n-th largest of many scores, without partitioning all of them.

A ranking keeps the best thousand of some tens of thousands of scores. numpy's partition of the
whole array (what ``np.partition`` and ``argpartition`` do) costs about 250 µs at 35,000 values,
the largest single step of a compile at 100k facts. Most values are far below the ones kept, so
a sample of every ``SAMPLE_STEP``-th value gives a bound below which the n-th largest cannot lie
(in all but unusual orders of values, checked and then done the slow way): only the values above
it are partitioned, a few thousand, about a quarter of the time. The answer is the same value
either way. Pure numpy: no Django import.
"""

from __future__ import annotations

import numpy as np

#: One value in this many is sampled.
SAMPLE_STEP = 16
#: Below this many values the whole array is partitioned (a sample would not pay).
SAMPLED_MIN = 4096


def nth_largest(values: np.ndarray, n: int) -> float:
    """The ``n``-th largest of ``values`` (1 <= n <= len(values)): the value
    ``np.partition(values, len(values) - n)[len(values) - n]`` gives."""
    size = len(values)
    if not 1 <= n <= size:
        raise ValueError(f"n must be within [1, {size}]")
    if size >= SAMPLED_MIN and n * 4 <= size:
        sample = values[::SAMPLE_STEP]
        # Twice the sample's share of n, and a margin for a few: the sample holds at least
        # that many values at or above the bound, so the whole array very likely holds n.
        keep = min(len(sample), 2 * (n // SAMPLE_STEP) + 8)
        bound = np.partition(sample, len(sample) - keep)[len(sample) - keep]
        above = values[values >= bound]
        if len(above) >= n:  # the n largest are all at or above the bound
            return float(np.partition(above, len(above) - n)[len(above) - n])
    return float(np.partition(values, size - n)[size - n])
