"""Coverage: which calls of the trace a codec can send, and its figures on exactly those calls beside the
reference's on the same calls.

A codec that fails to encode a call cannot send it, whether or not it declares why: declaring a limit
(``method``: no message for the method; ``big ints``...) says the failure is the format's, not a bug, but the
call still does not go. So every comparison between codecs is made over the same calls: a codec is a candidate
for the verdict, the headlines ("Smallest"...), the Pareto front, the capacity plan and the study only when it
carries at least ``--min-coverage`` of the calls offered to it (default all); declared *value changes* (tuple
-> list, int -> float) do not count against it, since the call is sent. A codec under the bar is listed with its
coverage, the reason and its figures on its covered calls beside the reference's on the same calls
(:func:`same_calls`).

Same calls, from results.json: bytes per method (``by_method``) of both codecs. For a method the codec carries
wholly, the reference's bytes on those calls are exact (the same calls); for a method it carries in part, they
are the reference's mean on that method times the calls carried (said: ``estimated``). CPU from the per-call
timings by method (``latency``, the tails replay of the timing sample, which is stratified by method): both
codecs' median µs per call of each method the codec carries, weighted by its timed calls of that method. Without
those timings (``--no-tails``) no CPU is compared, and that is said: the codec's own timing covers only the
sample calls it could encode, so its median is not comparable with the reference's over every sample call.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Tuple

from rpcbench.results import CodecResult, Suite

from .formatting import fmt_part, fmt_ratio, fmt_us

DEFAULT_MIN_COVERAGE = 1.0  #: ``--min-coverage``: the share of the calls a verdict candidate must carry
OPS = ("encode", "decode")


@dataclass(frozen=True)
class Coverage:
    """How many of the calls offered to a codec it sent, and why the others were not."""

    codec: str
    carried: int  #: calls encoded (their bytes are the codec's figures)
    offered: int  #: calls given to it (carried + failed to encode)
    lost: Tuple[Tuple[str, int, bool], ...]  #: (feature, calls, declared) of the encode failures, most first

    @property
    def share(self) -> float:
        """Carried over offered (1.0 for a codec that was offered nothing: there is nothing it failed)."""
        return self.carried / self.offered if self.offered else 1.0

    @property
    def full(self) -> bool:
        """Every call offered was sent."""
        return self.carried == self.offered

    def reason(self) -> str:
        """``8,480 calls fail to encode (method, declared: 8,480)``."""
        parts = ", ".join(f"{feature}, {'declared' if declared else 'undeclared'}: {n:,}"
                          for feature, n, declared in self.lost)
        return f"{self.offered - self.carried:,} calls fail to encode ({parts})"

    def text(self) -> str:
        """``carries 1,120 of 9,600 calls (11.7%)``."""
        return f"carries {self.carried:,} of {self.offered:,} calls ({fmt_part(self.carried, self.offered)})"


def coverage(r: CodecResult) -> Coverage:
    """The codec's coverage, from its call counts and encode-failure groups."""
    lost = sorted(((p.feature, p.count, p.declared) for p in r.problems if p.kind == "encode"),
                  key=lambda x: -x[1])
    return Coverage(r.codec, r.calls, r.calls + r.failures, tuple(lost))


def meets(r: CodecResult, min_coverage: float) -> bool:
    """The codec carries at least ``min_coverage`` of the calls offered to it (a stopped codec, offered nothing
    with figures, is judged by its error elsewhere)."""
    return coverage(r).share >= min_coverage


def comparable(suite: Suite, min_coverage: float) -> Suite:
    """The run with only the codecs that carry at least ``min_coverage`` of their calls: what the headlines, the
    Pareto front, the capacity plan and the study compare (over the same calls: every call, at the default)."""
    return replace(suite, results=tuple(r for r in suite.results if meets(r, min_coverage)))


def partial_text(r: CodecResult, ref: Optional[CodecResult], min_coverage: float) -> str:
    """Why ``r`` is not compared, with its figures on its own calls beside the reference's on the same calls."""
    cov = coverage(r)
    same = same_calls(r, ref) if ref is not None and ref.codec != r.codec else None
    return (f"{cov.text()}, under --min-coverage {min_coverage:.0%}: {cov.reason()}"
            + (f"; {same.text()}" if same else ""))


@dataclass(frozen=True)
class SameCalls:
    """A codec's figures on the calls it carried beside the reference's on the same calls."""

    codec: str
    reference: str
    coverage: Coverage
    bytes_mean: float  #: the codec's mean bytes per carried call
    reference_bytes_mean: float  #: the reference's mean bytes per call on the same calls
    estimated_methods: Tuple[str, ...]  #: methods carried in part: the reference's bytes there are its method mean
    cpu: Tuple[Tuple[str, float, float], ...]  #: (op, codec µs, reference µs) per call on the same methods
    cpu_note: str  #: why CPU is not compared, when it is not

    @property
    def bytes_ratio(self) -> float:
        """The codec's bytes over the reference's, on the same calls."""
        return self.bytes_mean / self.reference_bytes_mean if self.reference_bytes_mean else float("nan")

    def cpu_ratio(self, op: str) -> Optional[float]:
        """The codec's µs per call over the reference's on the same methods (None: not compared)."""
        return next((mine / theirs for name, mine, theirs in self.cpu if name == op and theirs), None)

    def text(self) -> str:
        """``on its calls: 13.0 B/call vs json 43.0 B (0.30x); encode 1.20 vs 1.33 µs (0.90x), ...``."""
        ref = self.reference
        how = f", estimated for {len(self.estimated_methods)} methods carried in part" if self.estimated_methods else ""
        text = (f"on the calls it carries: {self.bytes_mean:.1f} B/call vs {ref} {self.reference_bytes_mean:.1f} "
                f"B/call on the same calls ({fmt_ratio(self.bytes_ratio)}{how})")
        for op, mine, theirs in self.cpu:
            text += f"; {op} {fmt_us(mine)} vs {fmt_us(theirs)} µs/call ({fmt_ratio(mine / theirs)})"
        return text + (f"; {self.cpu_note}" if self.cpu_note else "")


def same_calls(r: CodecResult, ref: CodecResult) -> Optional[SameCalls]:
    """``r``'s bytes and CPU on the calls it carried beside ``ref``'s on the same calls (None: nothing carried,
    or the reference has no per-method bytes)."""
    pairs = [(m, mine, ref.by_method.get(m)) for m, mine in r.by_method.items() if mine.get("calls")]
    if not pairs or any(theirs is None or not theirs.get("calls") for _, _, theirs in pairs):
        return None
    calls = sum(mine["calls"] for _, mine, _ in pairs)
    mine_bytes = sum(mine["bytes"] for _, mine, _ in pairs)
    theirs_bytes = 0.0
    estimated = []
    for method, mine, theirs in pairs:
        assert theirs is not None
        if mine["calls"] == theirs["calls"]:
            theirs_bytes += theirs["bytes"]
        else:
            theirs_bytes += theirs["bytes"] / theirs["calls"] * mine["calls"]
            estimated.append(method)
    cpu, note = _same_cpu(r, ref)
    return SameCalls(r.codec, ref.codec, coverage(r), mine_bytes / calls, theirs_bytes / calls, tuple(estimated),
                     cpu, note)


def _same_cpu(r: CodecResult, ref: CodecResult) -> Tuple[Tuple[Tuple[str, float, float], ...], str]:
    """Per op: both codecs' per-call median µs over the methods ``r`` carried, weighted by ``r``'s timed calls."""
    out: List[Tuple[str, float, float]] = []
    for op in OPS:
        mine: Dict[str, Dict[str, float]] = {m: v for m, v in (r.latency.get(op) or {}).items() if m != "*"}
        theirs = ref.latency.get(op) or {}
        if not mine or any(m not in theirs for m in mine):
            continue
        weight = sum(v["n"] for v in mine.values())
        if weight:
            out.append((op, sum(v["n"] * v["p50"] for v in mine.values()) / weight / 1000,
                        sum(v["n"] * theirs[m]["p50"] for m, v in mine.items()) / weight / 1000))
    note = "" if out else ("CPU not compared: no per-method timings (run without --no-tails); its own timing "
                           "covers only the sample calls it could encode")
    return tuple(out), note
