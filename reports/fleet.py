"""Judgments on a fleet run (several traces merged): how far the traces spread, which differ,
and the intervals of a sampled size pass. The terminal lines and the report's fleet section
only format what these functions decide."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from rpcbench.results import CodecResult, Estimate, Suite

ODD_TRACE_PCT = 15.0  #: a trace whose bytes per call (reference codec) is this far from the fleet's is named


@dataclass(frozen=True)
class Spread:
    """One codec's bytes per call over the fleet and across its traces."""

    codec: str
    merged: float  #: bytes per call over every trace
    low: float
    low_trace: str
    high: float
    high_trace: str

    @property
    def pct(self) -> float:
        """Highest minus lowest trace, as a percentage of the merged figure."""
        return (self.high - self.low) / self.merged * 100 if self.merged else 0.0


def per_trace(suite: Suite) -> Dict[str, Dict[str, CodecResult]]:
    """trace path -> codec -> its result on that trace."""
    return {t.trace["path"]: {r.codec: r for r in t.results} for t in suite.traces}


def spreads(suite: Suite) -> List[Spread]:
    """Each codec's spread of bytes per call between the traces (empty for a one-trace run)."""
    traces = per_trace(suite)
    out = []
    for merged in suite.results:
        means = [(r.sizes.mean, path) for path, by_codec in traces.items()
                 if (r := by_codec.get(merged.codec)) is not None and r.sizes]
        if merged.sizes and len(means) > 1:
            (low, low_trace), (high, high_trace) = min(means), max(means)
            out.append(Spread(merged.codec, merged.sizes.mean, low, low_trace, high, high_trace))
    return out


def odd_traces(suite: Suite, reference: Optional[str]) -> List[str]:
    """Plain sentences naming the traces that differ: bytes per call of the ``reference`` codec far from
    the fleet's, and codecs that fail or mismatch on some traces only."""
    notes: List[str] = []
    merged = suite.find(reference) if reference else None
    traces = per_trace(suite)
    if merged and merged.sizes:
        for path, by_codec in traces.items():
            r = by_codec.get(merged.codec)
            if r and r.sizes and abs(r.sizes.mean / merged.sizes.mean - 1) * 100 >= ODD_TRACE_PCT:
                notes.append(f"{path}: {r.sizes.mean:.1f} B/call with {merged.codec}, "
                             f"{r.sizes.mean / merged.sizes.mean:.2f}x the fleet's {merged.sizes.mean:.1f}")
    for codec, bad in _failing_somewhere(traces).items():
        if 0 < len(bad) < len(traces):
            notes.append(f"{codec} fails or mismatches on {len(bad)} of {len(traces)} traces only: "
                         + ", ".join(f"{path} ({n:,} calls)" for path, n in bad))
    return notes


def _failing_somewhere(traces: Dict[str, Dict[str, CodecResult]]) -> Dict[str, List[Tuple[str, int]]]:
    """codec -> the traces on which it failed or mismatched, with how many calls."""
    out: Dict[str, List[Tuple[str, int]]] = {}
    for path, by_codec in traces.items():
        for codec, r in by_codec.items():
            out.setdefault(codec, [])
            if r.failures + r.mismatches:
                out[codec].append((path, r.failures + r.mismatches))
    return out


def interval_text(interval: Tuple[float, float, float], confidence: float, unit: str) -> str:
    """``170.2 B/call (95 % CI 165.1-175.3)``: one of a sampled size pass's estimates with its interval."""
    low, mid, high = interval
    return f"{mid:,.1f}{unit} ({confidence * 100:.0f} % CI {low:,.1f}-{high:,.1f})"


def estimate_texts(e: Estimate) -> Tuple[str, str, str]:
    """A sampled size pass's bytes per call, bytes in all and failures, each with its interval."""
    return (interval_text(e.bytes_mean, e.confidence, " B/call"), interval_text(e.bytes_total, e.confidence, " B"),
            interval_text(e.failures, e.confidence, " calls"))


@dataclass(frozen=True)
class Fleet:
    """What a fleet run (or a sampled size pass) shows besides the merged figures, judged once."""

    traces: int  #: traces merged (0: one trace)
    calls: int  #: calls over every trace
    spreads: Tuple[Spread, ...]  #: the codecs' spreads between traces, widest first
    odd: Tuple[str, ...]  #: the traces that differ (:func:`odd_traces`)
    estimates: Tuple[Tuple[str, str, str, str], ...]  #: a sampled size pass: codec, bytes per call, bytes in
    #: all, failures (:func:`estimate_texts`)

    @property
    def shown(self) -> bool:
        """Anything to show: several traces, or a sampled size pass."""
        return bool(self.traces or self.estimates)


def judge(suite: Suite, reference: Optional[str]) -> Fleet:
    """The fleet's spread, the traces that differ from it (bytes per call of ``reference``) and the estimates."""
    odd = odd_traces(suite, reference) if suite.traces else []
    estimates = [(r.codec, *estimate_texts(r.estimate)) for r in suite.results if r.estimate]
    return Fleet(len(suite.traces), int(suite.trace.get("calls") or 0),
                 tuple(sorted(spreads(suite), key=lambda s: -s.pct)), tuple(odd), tuple(estimates))
