"""The nearest-rank percentiles of a histogram against the definition on the expanded, sorted values."""

from __future__ import annotations

import math
from collections import Counter
from typing import List

from hypothesis import given
from hypothesis import strategies as st

from rpcbench.histogram import nearest_rank, nearest_ranks


def by_definition(values: List[int], pct: float) -> float:
    """The value at rank ceil(pct/100 * n) (at least 1) of the sorted values; 0 for none."""
    if not values:
        return 0
    return float(sorted(values)[max(1, math.ceil(pct / 100 * len(values))) - 1])


@given(st.lists(st.integers(-1000, 10**6), max_size=200),
       st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=6))
def test_several_percentiles_in_one_sort_are_each_by_definition(values: List[int], pcts: List[float]) -> None:
    histogram = Counter(values)
    assert nearest_ranks(histogram, pcts) == tuple(by_definition(values, p) for p in pcts)
    assert [nearest_rank(histogram, p) for p in pcts] == [by_definition(values, p) for p in pcts]


def test_keys_read_back_from_json_as_text_sort_as_numbers() -> None:
    assert nearest_ranks({"9": 1, "10": 1, "100": 2}, (25, 50, 99)) == (9.0, 10.0, 100.0)
