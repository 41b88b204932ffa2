"""Seeded samples that merge exactly whichever task, chunk or worker saw a call: each call's priority
(:func:`priority`), the timing sample's candidates (the calls of smallest priority per method, a bottom-k
sample: :class:`Candidates`, kept with the calls and their tick windows: :class:`Drawn`) and its quotas per
stratum, how a task samples (:class:`SamplePlan`), and the estimates of a sampled size pass with their
intervals (:func:`sampled_estimate`)."""

from __future__ import annotations

import heapq
import itertools
import marshal
import math
import statistics
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, TypeVar

import numpy as np

from rpc_capture import Call

from .results import CONFIDENCE, Estimate
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
    timing_calls: int  #: the timing sample's candidates kept per method (0: nothing is timed, none drawn)
    size_fraction: float = 1.0
    held: Tuple[int, ...] = ()  #: per trace: its first calls, which trained the dictionaries (never measured)

    def held_out(self, trace: int, index: int) -> bool:
        """Is this call one the dictionaries are trained on (so no codec is measured on it)?"""
        return trace < len(self.held) and index < self.held[trace]


@dataclass(frozen=True)
class Drawn:
    """A task's (or a trace's merged) timing-sample candidates, taken during the size pass so that nothing reads
    the trace again: per method the calls of smallest priority, each call itself, and the tick windows of
    the timed batched --wire policy whose first call is among them (in the order they were sent).

    Calls are kept marshalled, as the trace stores them: compact, and a draw travels back from a forked task or a
    Dask worker whatever the nesting a trace allows (pickle recurses once per level and stops near 1,000 levels;
    a trace's values go to 2,000, :data:`rpc_capture.values.MAX_DEPTH`)."""

    ranked: Dict[str, Tuple[Tuple[float, int], ...]]  #: method -> (priority, index), smallest first
    calls: Dict[int, bytes]  #: index in the trace -> the call, marshalled (:meth:`call`)
    windows: Dict[int, bytes]  #: index of a window's first call -> the window's calls, marshalled (:meth:`window`)

    def call(self, index: int) -> Call:
        """The call at ``index`` of the trace."""
        return tuple.__new__(Call, marshal.loads(self.calls[index]))

    def window(self, first: int) -> Tuple[Call, ...]:
        """The window whose first call is at ``first``, in the order it was sent."""
        return tuple(tuple.__new__(Call, item) for item in marshal.loads(self.windows[first]))

    def merge(self, other: "Drawn", keep: int) -> "Drawn":
        """Both draws together, ``keep`` per method: exact, and the same whichever order draws of a trace's pieces
        merge in (calls and windows in trace order)."""
        ranked = {method: tuple(heapq.nsmallest(keep, [*self.ranked.get(method, ()), *other.ranked.get(method, ())]))
                  for method in {**self.ranked, **other.ranked}}
        kept = {index for pairs in ranked.values() for _, index in pairs}
        calls = {i: c for i, c in sorted(itertools.chain(self.calls.items(), other.calls.items())) if i in kept}
        windows = {i: w for i, w in sorted(itertools.chain(self.windows.items(), other.windows.items())) if i in kept}
        return Drawn(ranked, calls, windows)


NOTHING_DRAWN = Drawn({}, {}, {})


class Candidates:
    """The ``keep`` calls with the smallest priority per method (a bottom-k sample, mergeable exactly), the calls
    themselves, and the tick windows of ``policy`` (the timed batched one, if any) that start with one of them.
    Memory stays bounded: a call pushed out takes its window with it, and it never comes back (the bar only
    falls)."""

    def __init__(self, keep: int, policy: Optional[WirePolicy] = None) -> None:
        self.keep = keep
        self.ranked: Dict[str, List[Tuple[float, int]]] = {}  #: method -> (priority, index), the smallest among them
        self._bounds: Dict[str, float] = {}  #: method -> the priority a call must be under (none: any)
        self.calls: Dict[int, bytes] = {}
        self.windows: Dict[int, bytes] = {}
        self.batcher = Batcher(policy) if policy is not None else None

    def offer_all(self, chunk: Sequence[Call], ranks: np.ndarray, indices: Sequence[int]) -> None:
        """Offer the trace's calls ``chunk`` (in order) with priorities ``ranks`` and trace ``indices``; a call not
        under its method's bound is left out at once. Offers pile up per method and are cut back to the ``keep``
        smallest whenever twice that many are held; each cut lowers the bound a later call must be under."""
        ranked, calls, listed = self.ranked, self.calls, ranks.tolist()
        methods = [call.method for call in chunk]
        bound = {method: self._bounds.get(method, math.inf) for method in dict.fromkeys(methods)}
        for at in np.flatnonzero(ranks < np.fromiter(map(bound.__getitem__, methods), np.float64,
                                                     len(methods))).tolist():
            found = ranked.get(methods[at])
            if found is None:
                found = ranked[methods[at]] = []
            found.append((listed[at], indices[at]))
            calls[indices[at]] = marshal.dumps(tuple(chunk[at]))
        if self.batcher is not None:
            step = self.batcher.step
            for index, call in zip(indices, chunk):
                self._keep_window(step(call, (index, call)))
        for method, found in ranked.items():
            if len(found) >= 2 * self.keep:
                self._cut(method, found)

    def _cut(self, method: str, found: List[Tuple[float, int]]) -> None:
        found.sort()
        for _, index in found[self.keep:]:
            del self.calls[index]
            self.windows.pop(index, None)
        del found[self.keep:]
        self._bounds[method] = found[-1][0]

    def _keep_window(self, closed: Optional[Closed]) -> None:
        if closed is not None and closed[3][0][0] in self.calls:
            rows = closed[3]
            self.windows[rows[0][0]] = marshal.dumps(tuple(tuple(call) for _, call in rows))

    def export(self) -> Drawn:
        """What the task gives back: per method the ``keep`` smallest (priority, index), smallest first, their calls,
        and their windows (every window still open is closed first: the end of its calls)."""
        for closed in self.batcher.rest() if self.batcher is not None else ():
            self._keep_window(closed)
        ranked = {m: tuple(sorted(found)[:self.keep]) for m, found in self.ranked.items()}
        kept = {index for pairs in ranked.values() for _, index in pairs}
        return Drawn(ranked, {i: c for i, c in self.calls.items() if i in kept},
                     {i: w for i, w in self.windows.items() if i in kept})


def sampled_estimate(sizes: Dict[int, int], failures: int, measured: int, total: int) -> Optional[Estimate]:
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

    def interval(mean: float, var: float, n: int, scale: float) -> Tuple[float, float, float]:
        half = z * math.sqrt(max(var, 0.0) / n) * fpc
        return (mean - half) * scale, mean * scale, (mean + half) * scale

    per_call = sum1 / measured  # failed calls as 0 bytes: the total's estimator
    per_encoded = sum1 / encoded
    fail_rate = failures / measured
    return Estimate(
        measured, total, CONFIDENCE,
        bytes_total=interval(per_call, (sum2 - measured * per_call ** 2) / (measured - 1), measured, total),
        bytes_mean=interval(per_encoded, (sum2 - encoded * per_encoded ** 2) / max(encoded - 1, 1), encoded, 1),
        failures=interval(fail_rate, fail_rate * (1 - fail_rate) * measured / (measured - 1), measured, total),
    )
