"""Seeded samples that merge exactly whichever task, chunk or worker saw a call: each call's priority
(:func:`priority`), the timing sample's candidates (the calls of smallest priority per method, a bottom-k
sample: :class:`Candidates`) and its quotas per stratum, how a task samples (:class:`SamplePlan`), and the
estimates of a sampled size pass with their intervals (:func:`sampled_estimate`)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, TypeVar

import numpy as np

from .results import CONFIDENCE

Stratum = TypeVar("Stratum", str, Tuple[int, str])  #: a method, or (trace, method)
TIMING_SALT, SIZE_SALT = 1, 2  #: keep the samples (timing, size pass) independent
_MASK = (1 << 64) - 1


def priority(seed: int, trace: int, index: int, salt: int) -> float:
    """A seeded pseudo-random number in [0, 1) for one call (splitmix64): the same for a call
    whichever task, chunk or worker sees it, so samples drawn by it merge exactly."""
    z = (seed * 0x9E3779B97F4A7C15 + trace * 0xD1B54A32D192ED03 + index * 0xBF58476D1CE4E5B9 + salt) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return (z ^ (z >> 31)) / 2.0 ** 64


def priorities(seed: int, trace: int, indices: np.ndarray, salt: int) -> np.ndarray:
    """:func:`priority` of each call of ``indices`` (uint64) at once, bit for bit the same: numpy's uint64
    arithmetic wraps modulo 2**64 as the masks do, and its conversion to float rounds to nearest as int's does."""
    start = np.uint64((seed * 0x9E3779B97F4A7C15 + trace * 0xD1B54A32D192ED03 + salt) & _MASK)
    z: np.ndarray = start + indices * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    ranks: np.ndarray = (z ^ (z >> np.uint64(31))).astype(np.float64) / 2.0 ** 64
    return ranks


def proportional_quotas(counts: Dict[Stratum, int], size: int) -> Dict[Stratum, int]:
    """Split ``size`` among methods in proportion to ``counts`` (largest remainder, >= 1 each if room)."""
    total = sum(counts.values())
    if total <= size:
        return dict(counts)
    floor = 1 if len(counts) <= size else 0
    exact = {m: max(floor, size * c / total) for m, c in counts.items()}
    quotas = {m: min(counts[m], int(q)) for m, q in exact.items()}
    left = size - sum(quotas.values())
    for m in sorted(exact, key=lambda m: (int(exact[m]) - exact[m], m)):
        if left <= 0:
            break
        if quotas[m] < counts[m]:
            quotas[m] += 1
            left -= 1
    return {m: q for m, q in quotas.items() if q}


@dataclass(frozen=True)
class SamplePlan:
    """How a piece samples: the timing sample's candidates kept per method, the share of calls the size
    pass measures (1.0: every call), and the calls held out at the start of each trace (trained on)."""

    seed: int
    timing_calls: int
    size_fraction: float = 1.0
    held: Tuple[int, ...] = ()  #: per trace: its first calls, which trained the dictionaries (never measured)

    def held_out(self, trace: int, index: int) -> bool:
        """Is this call one the dictionaries are trained on (so no codec is measured on it)?"""
        return trace < len(self.held) and index < self.held[trace]


class Candidates:
    """The ``keep`` calls with the smallest priority per method: a bottom-k sample, mergeable exactly.

    Offers are kept per method as (priority, index) and cut back to the ``keep`` smallest whenever twice that
    many piled up; each cut sets the priority a later call must be under to be kept at all."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.ranked: Dict[str, List[Tuple[float, int]]] = {}  #: method -> (priority, index), the smallest among them
        self._bounds: Dict[str, float] = {}  #: method -> the priority a call must be under (none: any)

    def offer_all(self, methods: Sequence[str], ranks: np.ndarray, indices: Sequence[int]) -> None:
        """Offer calls of ``methods`` with priorities ``ranks`` and trace ``indices``; a call not under its
        method's bound is left out at once."""
        ranked, listed = self.ranked, ranks.tolist()
        bound = {method: self._bounds.get(method, math.inf) for method in dict.fromkeys(methods)}
        for at in np.flatnonzero(ranks < np.fromiter(map(bound.__getitem__, methods), np.float64,
                                                     len(methods))).tolist():
            found = ranked.get(methods[at])
            if found is None:
                found = ranked[methods[at]] = []
            found.append((listed[at], indices[at]))
        for method, found in ranked.items():
            if len(found) >= 2 * self.keep:
                found.sort()
                del found[self.keep:]
                self._bounds[method] = found[-1][0]

    def export(self) -> Dict[str, List[Tuple[float, int]]]:
        """Per method, the ``keep`` smallest (priority, index), smallest first."""
        return {m: sorted(found)[:self.keep] for m, found in self.ranked.items()}


def sampled_estimate(sizes: Dict[int, int], failures: int, measured: int, total: int) -> Optional[Dict[str, Any]]:
    """Byte total, bytes per call and failures estimated from a uniform sample of ``measured`` of
    ``total`` calls, each with a normal-approximation interval at CONFIDENCE (finite population
    correction included). Calls that failed to encode count 0 bytes in the total."""
    encoded = sum(sizes.values())
    if measured < 2 or not encoded:
        return None
    z = statistics.NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)
    fpc = math.sqrt(max(0.0, 1 - measured / total))
    sum1 = sum(n * k for n, k in sizes.items())
    sum2 = sum(n * n * k for n, k in sizes.items())

    def interval(mean: float, var: float, n: int, scale: float) -> List[float]:
        half = z * math.sqrt(max(var, 0.0) / n) * fpc
        return [(mean - half) * scale, mean * scale, (mean + half) * scale]

    per_call = sum1 / measured  # failed calls as 0 bytes: the total's estimator
    per_encoded = sum1 / encoded
    fail_rate = failures / measured
    return {
        "measured_calls": measured, "of_calls": total, "confidence": CONFIDENCE,
        "bytes_total": interval(per_call, (sum2 - measured * per_call ** 2) / (measured - 1), measured, total),
        "bytes_mean": interval(per_encoded, (sum2 - encoded * per_encoded ** 2) / max(encoded - 1, 1), encoded, 1),
        "failures": interval(fail_rate, fail_rate * (1 - fail_rate) * measured / (measured - 1), measured, total),
    }
