"""Descriptive figures the reports show beside the decision's judgments: each method's share of the trace's
calls and of the reference codec's bytes, the timing sample's mix of methods against the trace's, each stage's
share of an operation, and the methods with the slowest tails. Computed once, by
:func:`reports.decision.decide`; report.html and report.md only write them down."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Dict, FrozenSet, Mapping, Optional, Sequence, Tuple

from rpcbench.results import CodecResult, Suite

from .analysis import OPS, timing_of, worst_method
from .formatting import latency_us

TOP_TAIL_METHODS = 8  #: rows of the per-method tail tables
MIN_TAIL_CALLS = 100  #: below this many calls of a method in the sample, its p99 is simply its slowest call


@dataclass(frozen=True)
class MethodShare:
    """One method of the trace: its calls, and its bytes under the reference codec."""

    method: str
    calls: int
    call_share: float  #: of the trace's calls
    byte_share: Optional[float]  #: of the reference codec's bytes (None: no per-method bytes for it)
    bytes_per_call: Optional[float]  #: under the reference codec


@dataclass(frozen=True)
class MethodBytes:
    """One method's calls, and its share of bytes and bytes per call under each of some codecs."""

    method: str
    calls: int
    call_share: float  #: of the first codec's calls
    codecs: Tuple[Tuple[Optional[float], Optional[float]], ...]  #: per codec: (share of its bytes, bytes per call)


@dataclass(frozen=True)
class SampleShare:
    """One method's share of the timing sample next to its share of the trace."""

    method: str
    trace_calls: int
    trace_share: float
    sample_calls: int
    sample_share: float
    points: float  #: sample share minus trace share, percentage points, one decimal


@dataclass(frozen=True)
class StageSplit:
    """A multi-step codec's operation: each stage's median µs and share of the stages' sum."""

    codec: str
    op: str
    stages: Tuple[Tuple[str, float, float], ...]  #: (stage, median µs, share of the stages' sum)
    total_us: float  #: the stages' medians added up
    whole_us: Optional[float]  #: the whole operation's median, timed separately
    #: (stage, the codec of that name timed alone: its median µs over the same turns), for a stage that is a codec
    #: of the run (json in json+zlib-1): what the stage compares with (see :func:`alone_on_same_turns`)
    alone: Tuple[Tuple[str, float], ...] = ()


@dataclass(frozen=True)
class MethodTails:
    """The methods with the highest per-call p99 of one operation, slowest first (median over the codecs)."""

    op: str
    codecs: Tuple[str, ...]  #: the codecs with per-call figures, in run order
    methods: Tuple[str, ...]  #: the slowest methods shown
    hidden: int  #: faster methods left out
    call_share: Mapping[str, Optional[float]]  #: of the trace's calls (None: not in the trace's counts)
    timed: Mapping[str, int]  #: calls of the method timed (the most over the codecs)
    p99: Mapping[Tuple[str, str], Optional[float]]  #: (method, codec) -> µs
    hot: FrozenSet[Tuple[str, str]]  #: (method, codec) at or above the codec's p99 over all calls: the tail itself
    muted: FrozenSet[str]  #: methods with under MIN_TAIL_CALLS calls timed: their p99 is their slowest call


@dataclass(frozen=True)
class Breakdown:
    """The descriptive figures of one run (see the module's docstring)."""

    methods: Tuple[MethodShare, ...]  #: busiest first
    methods_by_bytes: bool  #: the reference codec has per-method bytes (the byte columns exist)
    sample_state: str  #: ``unknown`` (older results), ``all`` (the sample's mix is the trace's) or ``sample``
    sample: Tuple[SampleShare, ...]  #: empty unless the mixes differ
    sample_gap: float  #: the largest gap between a method's sample and trace share, percentage points
    stages: Tuple[StageSplit, ...]
    tails: Mapping[str, MethodTails]  #: op -> its slowest methods, for the ops with per-method figures
    slowest_encode: Mapping[str, Optional[str]]  #: codec -> the method with its highest encode p99 (None: no tails)
    call_rate: Optional[float]  #: the trace's calls per second


def breakdown(suite: Suite, reference: Optional[CodecResult]) -> Breakdown:
    """The run's descriptive figures; method byte shares under ``reference``."""
    calls, duration = suite.trace.get("calls"), suite.trace.get("duration_s")
    state, sample, gap = sample_shares(suite)
    tails = {op: t for op in OPS if (t := method_tails(suite, op)) is not None}
    return Breakdown(method_shares(suite, reference), bool(reference and reference.by_method), state, sample, gap,
                     stage_splits(suite), tails, {r.codec: worst_method(r, "encode") for r in suite.results},
                     calls / duration if calls and duration else None)


def method_shares(suite: Suite, reference: Optional[CodecResult]) -> Tuple[MethodShare, ...]:
    """Each method of the trace, busiest first (ties by name): calls and share, bytes under ``reference``."""
    methods: Mapping[str, int] = suite.trace.get("methods") or {}
    total_calls = sum(methods.values()) or 1
    by_method = reference.by_method if reference else {}
    total_bytes = sum(m.get("bytes", 0) for m in by_method.values()) or 1
    out = []
    for name, count in sorted(methods.items(), key=lambda kv: (-kv[1], kv[0])):
        b = by_method.get(name, {}).get("bytes")
        share, per_call = (b / total_bytes, b / count) if b is not None and count > 0 else (None, None)
        out.append(MethodShare(name, count, count / total_calls, share, per_call))
    return tuple(out)


def method_bytes(codecs: Sequence[CodecResult], top: int) -> Tuple[MethodBytes, ...]:
    """The ``top`` methods carrying the most bytes under the first of ``codecs``: calls, share of calls, and share
    of bytes and bytes per call under each codec (empty without per-method figures)."""
    if not codecs or not codecs[0].by_method:
        return ()
    first = codecs[0].by_method
    calls_total = sum(m["calls"] for m in first.values()) or 1
    totals = [sum(m["bytes"] for m in r.by_method.values()) or 1 for r in codecs]

    def under(r: CodecResult, total: int, method: str) -> Tuple[Optional[float], Optional[float]]:
        figures = r.by_method.get(method)
        if not figures or not figures["calls"]:
            return None, None
        return figures["bytes"] / total, figures["bytes"] / figures["calls"]

    order = sorted(first, key=lambda m: -first[m]["bytes"])[:top]
    return tuple(MethodBytes(m, first[m]["calls"], first[m]["calls"] / calls_total,
                             tuple(under(r, total, m) for r, total in zip(codecs, totals))) for m in order)


def sample_shares(suite: Suite) -> Tuple[str, Tuple[SampleShare, ...], float]:
    """Whether the timing sample has the trace's mix of methods; when not, each method's two shares and the
    largest gap in percentage points."""
    sampled: Mapping[str, int] = suite.settings.get("sample_by_method") or {}
    traced: Mapping[str, int] = suite.trace.get("methods") or {}
    if not sampled or dict(sampled) == dict(traced):
        return ("all" if sampled else "unknown"), (), 0.0
    n_sample, n_trace = sum(sampled.values()) or 1, sum(traced.values()) or 1
    rows = []
    for method in sorted({*sampled, *traced}, key=lambda m: (-traced.get(m, 0), -sampled.get(m, 0), m)):
        trace_share, sample_share = traced.get(method, 0) / n_trace, sampled.get(method, 0) / n_sample
        rows.append(SampleShare(method, traced.get(method, 0), trace_share, sampled.get(method, 0), sample_share,
                                round((sample_share - trace_share) * 100, 1)))
    worst = max(abs(r.sample_share - r.trace_share) for r in rows)
    return "sample", tuple(rows), worst * 100


def stage_splits(suite: Suite) -> Tuple[StageSplit, ...]:
    """Every codec operation timed stage by stage, with the codec alone on the same turns for a stage that is one."""
    out = []
    for r in suite.results:
        for op in OPS:
            stages = r.stages.get(op) or {}
            if stages:
                total = sum(t.median_us for t in stages.values())
                whole = timing_of(r, op)
                alone = tuple((name, us) for name, t in stages.items()
                              if name != r.codec and (found := suite.find(name)) is not None
                              and (us := alone_on_same_turns(suite, found, op, len(t.rounds_ns))) is not None)
                out.append(StageSplit(r.codec, op, tuple((name, t.median_us, t.median_us / (total or 1))
                                                         for name, t in stages.items()),
                                      total, whole.median_us if whole else None, alone))
    return tuple(out)


def alone_on_same_turns(suite: Suite, codec: CodecResult, op: str, stage_rounds: int) -> Optional[float]:
    """``codec``'s median µs over the turns in which the stages were timed: the first rounds of each process set
    (the worker times stages in each set's first rounds, ``stage_rounds`` in all), so that a stage inside a
    composite and the codec alone are compared over the same moments of the run. None when the run does not say
    how its rounds fall into sets, or the codec was not timed."""
    t = timing_of(codec, op)
    repeat, sets = suite.settings.get("repeat"), suite.settings.get("processes") or 1
    if t is None or not isinstance(repeat, int) or repeat < 1 or stage_rounds % sets:
        return None
    turns = [t.rounds_ns[p * repeat + i] for p in range(sets) for i in range(stage_rounds // sets)
             if p * repeat + i < len(t.rounds_ns)]
    return statistics.median(turns) / 1000 if turns else None


def method_tails(suite: Suite, op: str) -> Optional[MethodTails]:
    """The methods with the highest per-call p99 for ``op`` (median over the codecs), the tail marked; None if no
    codec has per-method figures."""
    measured = [r for r in suite.results if r.latency]
    p99s: Dict[str, list] = {}
    timed: Dict[str, int] = {}
    for r in measured:
        for method, figures in r.latency.get(op, {}).items():
            if method != "*":
                p99s.setdefault(method, []).append(figures["p99"])
                timed[method] = max(timed.get(method, 0), int(figures["n"]))
    if not p99s:
        return None
    top = tuple(sorted(p99s, key=lambda m: -statistics.median(p99s[m]))[:TOP_TAIL_METHODS])
    traced: Mapping[str, int] = suite.trace.get("methods") or {}
    total = sum(traced.values()) or 1
    p99 = {(m, r.codec): latency_us(r, op, "p99", m) for m in top for r in measured}
    overall = {r.codec: latency_us(r, op, "p99") or math.inf for r in measured}
    hot = frozenset(key for key, v in p99.items() if (v or 0) >= overall[key[1]])
    return MethodTails(op, tuple(r.codec for r in measured), top, len(p99s) - len(top),
                       {m: traced[m] / total if m in traced else None for m in top}, {m: timed[m] for m in top},
                       p99, hot, frozenset(m for m in top if timed[m] < MIN_TAIL_CALLS))
