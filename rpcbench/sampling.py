"""Seeded samples that merge exactly whichever task, chunk or worker saw a call: each call's priority
(:func:`priority`), the timing sample's candidates (the calls of smallest priority per method, a bottom-k
sample: :class:`Candidates`, kept with the calls and their tick windows: :class:`Drawn`) and its quotas per
stratum, how a task samples (:class:`SamplePlan`), and the estimates of a sampled size pass with their
intervals (:func:`sampled_estimate`)."""

from __future__ import annotations

import heapq
import itertools
import math
import statistics
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, TypeVar

from rpc_capture import Call

from .results import CONFIDENCE
from .wire import Batcher, Closed, WirePolicy

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


@dataclass(frozen=True)
class Drawn:
    """A task's (or a trace's merged) timing-sample candidates, taken during the size pass so that nothing reads
    the trace again: per method the calls of smallest priority, each call itself, and the tick windows of
    the timed batched --wire policy whose first call is among them (in the order they were sent)."""

    ranked: Dict[str, Tuple[Tuple[float, int], ...]]  #: method -> (priority, index), smallest first
    calls: Dict[int, Call]  #: index in the trace -> the call
    windows: Dict[int, Tuple[Call, ...]]  #: index of a window's first call -> the window's calls

    def merge(self, other: "Drawn", keep: int) -> "Drawn":
        """Both draws together (``other``'s calls come later in the trace), ``keep`` per method: exact."""
        ranked = {method: tuple(heapq.nsmallest(keep, [*self.ranked.get(method, ()), *other.ranked.get(method, ())]))
                  for method in {**self.ranked, **other.ranked}}
        kept = {index for pairs in ranked.values() for _, index in pairs}
        calls = {i: c for i, c in itertools.chain(self.calls.items(), other.calls.items()) if i in kept}
        windows = {i: w for i, w in itertools.chain(self.windows.items(), other.windows.items()) if i in kept}
        return Drawn(ranked, calls, windows)


NOTHING_DRAWN = Drawn({}, {}, {})


class Candidates:
    """The ``keep`` calls with the smallest priority per method (a bottom-k sample, mergeable exactly), the calls
    themselves, and the tick windows of ``policy`` (the timed batched one, if any) that start with one of them.
    Memory stays bounded: a call pushed out takes its window with it, and it never comes back (the bar only
    falls)."""

    def __init__(self, keep: int, policy: Optional[WirePolicy] = None) -> None:
        self.keep = keep
        self.heaps: Dict[str, List[Tuple[float, int]]] = {}  #: method -> (-priority, index) max-heap
        self.calls: Dict[int, Call] = {}
        self.windows: Dict[int, Tuple[Call, ...]] = {}
        self.batcher = Batcher(policy) if policy is not None else None

    def offer(self, rank: float, index: int, call: Call) -> None:
        """Take one call of the trace (in order), of priority ``rank``."""
        heap = self.heaps.setdefault(call.method, [])
        if len(heap) < self.keep:
            heapq.heappush(heap, (-rank, index))
            self.calls[index] = call
        elif rank < -heap[0][0]:
            _, out = heapq.heapreplace(heap, (-rank, index))
            self.calls[index] = call
            del self.calls[out]
            self.windows.pop(out, None)
        if self.batcher is not None:
            self._keep_window(self.batcher.step(call, (index, call)))

    def _keep_window(self, closed: Optional[Closed]) -> None:
        if closed is not None and closed[3][0][0] in self.calls:
            rows = closed[3]
            self.windows[rows[0][0]] = tuple(call for _, call in rows)

    def export(self) -> Drawn:
        """What the task gives back: every window still open is closed first (the end of its calls)."""
        for closed in self.batcher.rest() if self.batcher is not None else ():
            self._keep_window(closed)
        ranked = {m: tuple(sorted((-r, i) for r, i in heap)) for m, heap in self.heaps.items()}
        return Drawn(ranked, dict(self.calls), dict(self.windows))


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
