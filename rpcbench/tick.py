"""The server's tick, read from a trace's timestamps, and each trace's --wire policies resolved by it.

``tick:auto`` batches by the tick found in the server-to-client timestamps (:func:`detect_tick`); a direction
whose timestamps already fall on the tick is marked quantized (its flush is the call's own time); a trace
with no tick drops ``tick:auto`` (:func:`resolve`). The plan resolves every trace's policies once before the
size pass (:func:`trace_wire`), from its first :data:`DETECT_CALLS` calls (``docs/wire.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from rpc_capture import C2S, S2C, Call

from .wire import WirePolicy

BURST_NS = 1_000_000  #: calls closer than this to the one before are one flush (tick detection, quantized traces)
QUANTIZED_SHARE = 0.9  #: a direction's calls are tick-quantized when this share of its gaps is a burst or a tick
DETECT_CALLS = 20_000  #: tick detection reads at most this many calls of a trace
MAX_GAP_MS, MAX_GAPS = 260, 2000  #: tick detection scores the first gaps between flushes up to this long


@dataclass(frozen=True)
class TickGuess:
    """What a trace's timestamps say of its server's tick."""

    tick_ms: Optional[float]  #: None: no tick found (too few usable gaps, or none that a period explains)
    confidence: float  #: mean cosine of the gaps' phase at that tick (1: every gap a whole number of ticks)
    gaps: int  #: gaps between server flushes it was found from
    quantized: Tuple[str, ...]  #: directions whose calls come in bursts, one per tick (recorded at the flush)


MIN_GAPS = 8  #: fewer server flush gaps than this (within MAX_GAP_MS) tell no tick, nor that time was recorded


def detect_tick(calls: Iterable[Call], limit: int = DETECT_CALLS) -> TickGuess:
    """The server's tick from the gaps between its flushes to each connection (``limit`` calls at most).

    Calls under BURST_NS apart are one flush (a burst); each gap between bursts' starts should be a whole
    number of ticks, so the tick is the longest period T (4-250 ms) at a peak of the score, the mean of
    cos(2 pi gap / T), within 10 % of the best (T/2 and T/3 score as well as T; 2T does not), refined to
    0.002 ms.
    """
    gaps = _burst_gaps(calls, limit)
    flushes = np.array(gaps[S2C], dtype=float) / 1e6
    flushes = flushes[flushes <= MAX_GAP_MS][:MAX_GAPS]
    if len(flushes) < MIN_GAPS:  # too few gaps a tick could explain (counted after the long pauses go)
        return TickGuess(None, 0.0, len(flushes), ())

    def score(periods: Any) -> Any:
        return np.cos(2 * np.pi * flushes[None, :] / periods[:, None]).mean(axis=1)

    coarse = np.arange(4.0, 250.0, 0.1)
    scores = np.concatenate([score(chunk) for chunk in np.array_split(coarse, 10)])
    peaks = (scores[1:-1] >= scores[:-2]) & (scores[1:-1] >= scores[2:]) & (scores[1:-1] >= 0.9 * scores.max())
    if not peaks.any():  # the score only climbs toward an end of the range: no period in it explains the gaps
        return TickGuess(None, 0.0, len(flushes), ())
    top = float(coarse[1:-1][peaks].max())
    fine = np.arange(top - 0.1, top + 0.1, 0.002)
    fine_scores = score(fine)
    best = float(fine[int(fine_scores.argmax())])
    quantized = tuple(d for d, found in gaps.items() if _on_ticks(found, best * 1e6))
    return TickGuess(round(best, 2), round(float(fine_scores.max()), 3), len(flushes), quantized)


def _burst_gaps(calls: Iterable[Call], limit: int) -> Dict[str, List[int]]:
    """Per direction, the ns from one burst's first call to the next's on the same connection."""
    bursts: Dict[Any, Tuple[int, int]] = {}  #: (connection, direction) -> (its burst's first call, last call)
    gaps: Dict[str, List[int]] = {C2S: [], S2C: []}
    for n, call in enumerate(calls):
        if n >= limit:
            break
        key = (call.conn, call.dir)
        found = bursts.get(key)
        if found is not None and call.t - found[1] < BURST_NS:
            bursts[key] = (found[0], call.t)
            continue
        if found is not None and call.dir in gaps:
            gaps[call.dir].append(call.t - found[0])
        bursts[key] = (call.t, call.t)
    return gaps


def _on_ticks(gaps: Sequence[int], tick_ns: float) -> bool:
    """Do a direction's calls come at the flush: nearly every gap between flushes a whole number of ticks?"""
    near = sum(abs(g - round(g / tick_ns) * tick_ns) <= BURST_NS for g in gaps)
    return bool(gaps) and near >= QUANTIZED_SHARE * len(gaps)


def resolve(policies: Sequence[WirePolicy], guess: TickGuess) -> Tuple[WirePolicy, ...]:
    """The policies for one trace whose timestamps showed ``guess``: with no tick found, ``tick:auto`` is
    dropped, and so is every batched policy when too few gaps show time was recorded at all; else
    ``tick:auto`` at the tick found and the quantized directions marked on every batched policy."""
    if guess.tick_ms is None:
        timed = guess.gaps >= MIN_GAPS  # timestamps that move, just no tick in them: a fixed tick:N still applies
        return tuple(p for p in policies if not p.batched or (timed and not p.auto))
    out = []
    for policy in policies:
        if policy.batched:
            policy = replace(policy, quantized=guess.quantized)
        if policy.auto:
            policy = replace(policy, tick_ms=guess.tick_ms, confidence=guess.confidence)
        out.append(policy)
    return tuple(out)


@dataclass(frozen=True)
class TraceWire:
    """One trace's --wire policies, resolved once before the size pass by the tick its first calls show."""

    policies: Tuple[WirePolicy, ...]
    tick: Optional[TickGuess] = None  #: what its timestamps showed (None: the run has no batched policy)
    timed: Optional[WirePolicy] = None  #: the policy whose packets timing replays (the run's first batched one)


def trace_wire(policies: Tuple[WirePolicy, ...], head: Iterable[Call]) -> TraceWire:
    """A trace's policies from its first calls ``head`` (read only when a policy is batched)."""
    first = next((p for p in policies if p.batched), None)
    if first is None:
        return TraceWire(policies)
    guess = detect_tick(head)
    resolved = resolve(policies, guess)
    return TraceWire(resolved, guess, next((p for p in resolved if p.text == first.text), None))
