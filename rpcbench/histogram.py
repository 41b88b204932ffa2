"""The nearest-rank percentile of a ``{value: count}`` histogram: the one percentile rule of the size pass's
sizes, the wire's payloads and latencies, and timing's per-call tails."""

from __future__ import annotations

import math
from typing import Any, Mapping


def nearest_rank(histogram: Mapping[Any, int], pct: float) -> float:
    """The smallest value with at least ``pct`` % of the counts at or below it (values read as numbers,
    so keys that came back from JSON as text sort right); 0 when the histogram is empty."""
    count = sum(histogram.values())
    if not count:
        return 0
    rank, seen = max(1, math.ceil(pct / 100 * count)), 0
    for value, n in sorted((float(v), n) for v, n in histogram.items()):
        seen += n
        if seen >= rank:
            return value
    return 0
