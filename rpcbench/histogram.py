"""``{value: count}`` histograms: the nearest-rank percentile, the one percentile rule of the size pass's sizes,
the wire's payloads and latencies, and timing's per-call tails; and a histogram of many values at once."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np


def nearest_ranks(histogram: Mapping[Any, int], pcts: Sequence[float]) -> Tuple[float, ...]:
    """For each of ``pcts``, the smallest value with at least that % of the counts at or below it (values read
    as numbers, so keys that came back from JSON as text sort right; 0 when the histogram is empty): one sort
    for all of them."""
    count = sum(histogram.values())
    if not count:
        return tuple(0 for _ in pcts)
    ranks = [max(1, math.ceil(pct / 100 * count)) for pct in pcts]
    found: List[float] = [0] * len(pcts)
    waiting = sorted(range(len(pcts)), key=ranks.__getitem__)
    seen = 0
    for value, n in sorted((float(v), n) for v, n in histogram.items()):
        seen += n
        while waiting and seen >= ranks[waiting[0]]:
            found[waiting.pop(0)] = value
        if not waiting:
            break
    return tuple(found)


def nearest_rank(histogram: Mapping[Any, int], pct: float) -> float:
    """One percentile (see :func:`nearest_ranks`)."""
    return nearest_ranks(histogram, (pct,))[0]


def histogram_of(values: np.ndarray) -> Dict[int, int]:
    """How many of ``values`` (non-negative integers) are each value: a bincount while the largest is small,
    else a sort (a bincount's array would be as long as the largest value)."""
    if values.max() < 1 << 16:
        counts = np.bincount(values)
        found = np.flatnonzero(counts)
        return dict(zip(found.tolist(), counts[found].tolist()))
    found, counts = np.unique(values, return_counts=True)
    return dict(zip(found.tolist(), counts.tolist()))
