"""Every judgment the reports make, in one place: which codec wins what, which failures
count against a codec, which timings to distrust and why.

The terminal table, the charts and report.html only format what these functions decide,
so they can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from rpcbench.results import CONFIDENCE, SLOW_STATE_FACTOR, CodecResult, Suite, Timing

from .coverage import SameCalls
from .formatting import fmt_ratio, fmt_us, latency_us

#: a timing is unstable when its median's 95 % confidence interval is wider than this, half-width as % of the
#: median. Chosen on real runs of the bundled sample (docs/methodology.md, "CPU time"): quiet runs stay under 3 %,
#: runs next to two busy loops go to 10-36 %; the standard deviation (pyperf's rule, over 10 % of the mean)
#: flagged 37-40 of 42 timings of a quiet run, since a few slow rounds inflate it without moving the median.
UNSTABLE_CI_PCT = 5.0
STATE_GAP = 1.05  #: ratios to the reference this far apart between the machine's two speed states are worth a warning
OPS = ("encode", "decode")
PROJECTED_CONNECTIONS = 10_000  #: the server size state memory is projected to

#: headline label -> (the figure it ranks by, lowest best; how the figure is written)
HEADLINES: Dict[str, Tuple[Callable[[CodecResult], Optional[float]], Callable[[float], str]]] = {
    "Smallest": (lambda r: r.sizes.mean if r.sizes else None, lambda v: f"{v:.1f} B/call"),
    "Fastest encode": (lambda r: r.encode.median_us if r.encode else None, lambda v: f"{fmt_us(v)} µs/call"),
    "Fastest decode": (lambda r: r.decode.median_us if r.decode else None, lambda v: f"{fmt_us(v)} µs/call"),
    "Shortest encode tail": (lambda r: latency_us(r, "encode", "p99"), lambda v: f"p99 {fmt_us(v)} µs/call"),
}


def timing_of(r: CodecResult, op: str) -> Optional[Timing]:
    """The codec's ``encode`` or ``decode`` timing, if it was measured."""
    return r.encode if op == "encode" else r.decode


def undeclared(r: CodecResult, column: str) -> int:
    """Of the codec's ``failures`` or ``mismatches``, the calls no declared problem explains (bugs)."""
    total, kinds = (r.failures, ("encode",)) if column == "failures" else (r.mismatches, ("decode", "mismatch"))
    return max(0, total - sum(p.count for p in r.problems if p.kind in kinds and p.declared))


def undeclared_calls(r: CodecResult) -> int:
    """Calls that failed or came back different without the codec declaring why."""
    return undeclared(r, "failures") + undeclared(r, "mismatches")


def rankable(suite: Suite) -> List[CodecResult]:
    """The codecs a headline ("Smallest", "Fastest encode"...) may name: every failure and mismatch declared."""
    return [r for r in suite.results if not undeclared_calls(r)]


def failed_text(r: CodecResult) -> str:
    """``79 calls failed to encode, declared; its figures cover the other 2,921``, for a codec with failures."""
    bad = undeclared(r, "failures")
    kind = "declared" if not bad else f"{bad:,} undeclared"
    return f"{r.failures:,} calls failed to encode, {kind}; its figures cover the other {r.calls:,}"


def ci_half_pct(t: Timing) -> float:
    """Half the width of the median's confidence interval, as % of the median: how sure the figure is."""
    lo, hi, _ = t.ci_us
    return (hi - lo) / 2 / t.median_us * 100 if t.median_us else 0.0


@dataclass(frozen=True)
class Stability:
    """How far one timing can be trusted (see :func:`stability`)."""

    ci_half_pct: float  #: half the median's confidence interval, % of the median
    low_confidence: bool  #: too few rounds for a 95 % interval: the min-max range, with the coverage it has
    unstable: bool  #: the interval is wider than ``UNSTABLE_CI_PCT``: the machine was busy or changed speed
    rounds: int


def stability(t: Timing) -> Stability:
    """The stability rule, the only one: a timing is unstable when its median's confidence interval half-width
    exceeds ``UNSTABLE_CI_PCT`` of the median; its interval is low-confidence under ``CONFIDENCE`` coverage."""
    half = ci_half_pct(t)
    return Stability(half, t.ci_us[2] < CONFIDENCE, half > UNSTABLE_CI_PCT, len(t.rounds_ns))


def unstable(r: CodecResult) -> List[str]:
    """Which of the codec's timings ("encode", "decode") are unstable (see :func:`stability`)."""
    return [op for op in OPS if (t := timing_of(r, op)) is not None and stability(t).unstable]


@dataclass(frozen=True)
class OpFigures:
    """One codec's encode or decode timing as every output shows it."""

    median_us: float
    ci_us: Tuple[float, float, float]  #: low, high, coverage
    stability: Stability
    ratio: Optional[float]  #: to the reference's, paired round by round (None: the reference has no timing)


@dataclass(frozen=True)
class CodecFigures:
    """One codec's figures, made once: what the table, the page, report.md and the verdict print of it."""

    codec: str
    bytes_mean: Optional[float]
    bytes_ratio: Optional[float]  #: mean bytes per call over the reference's
    encode: Optional[OpFigures]
    decode: Optional[OpFigures]
    cpu_us: Optional[float]  #: encode + decode medians
    undeclared_failures: int
    undeclared_mismatches: int
    #: a codec that does not carry every call: its ratios are on the calls it carries, beside the reference's on
    #: the same calls (reports/coverage.py); None for a codec that carries every call
    same_calls: Optional[SameCalls] = None
    floor_ratio: Optional[float] = None  #: bytes over the trace's floor (None for a partial codec: the floor is
    #: over every call)

    def op(self, name: str) -> Optional[OpFigures]:
        """The ``encode`` or ``decode`` figures."""
        return self.encode if name == "encode" else self.decode

    @property
    def unstable(self) -> Tuple[str, ...]:
        """Which timings ("encode", "decode") are unstable."""
        return tuple(op for op in OPS if (f := self.op(op)) is not None and f.stability.unstable)


def timed_both(r: Optional[CodecResult]) -> bool:
    """Both encode and decode timed: a reference CPU ratios (``enc/json``, ``dec/json``) can be to."""
    return r is not None and r.encode is not None and r.decode is not None


def codec_figures(r: CodecResult, ref: Optional[CodecResult], same: Optional[SameCalls] = None) -> CodecFigures:
    """``r``'s figures, ratios to ``ref`` (bytes when it has them; CPU when both its operations were timed); with
    ``same`` (a codec that does not carry every call), the ratios on the calls it carries, beside ``ref``'s on the
    same calls (CPU ratios None when those could not be compared)."""
    timed_ref = ref if timed_both(ref) else None

    def op(name: str) -> Optional[OpFigures]:
        t = timing_of(r, name)
        if t is None:
            return None
        ratio = same.cpu_ratio(name) if same else cpu_ratio(r, timed_ref, name) if timed_ref else None
        return OpFigures(t.median_us, t.ci_us, stability(t), ratio)

    ratio = r.sizes.mean / ref.sizes.mean if r.sizes and ref is not None and ref.sizes and ref.sizes.mean else None
    return CodecFigures(r.codec, r.sizes.mean if r.sizes else None, same.bytes_ratio if same else ratio, op("encode"),
                        op("decode"), cpu_us(r), undeclared(r, "failures"), undeclared(r, "mismatches"), same,
                        None if same else r.floor_ratio)


def rankings(suite: Suite) -> Dict[str, List[Tuple[float, CodecResult]]]:
    """Each headline label ("Smallest", "Fastest encode", ...) -> (figure, codec) of every codec measured on it,
    best first (ties in the order run); the first is the headline's winner.

    Only :func:`rankable` codecs compete: a codec never wins by failing calls."""
    candidates = rankable(suite)
    return {label: sorted(((v, r) for r in candidates if (v := value(r)) is not None), key=lambda pair: pair[0])
            for label, (value, _) in HEADLINES.items()}


def cpu_us(r: CodecResult) -> Optional[float]:
    """Encode + decode µs per call (medians): the CPU axis of the Pareto front; None unless both were timed."""
    return r.encode.median_us + r.decode.median_us if r.encode and r.decode else None


@dataclass(frozen=True)
class Axes:
    """The Pareto front's axes: per codec, bytes per call and encode + decode µs per call, and what each is."""

    bytes_label: str
    cpu_label: str
    bytes: Mapping[str, float]
    cpu: Mapping[str, float]

    @property
    def text(self) -> str:
        """Both axes in words, for the sentence that names the front."""
        return f"{self.bytes_label} against {self.cpu_label}"


def message_axes(suite: Suite) -> Axes:
    """Mean bytes and CPU per message: the front's axes when the run priced no wire."""
    return Axes("bytes per call (mean)", "encode + decode µs per call (medians)",
                MappingProxyType({r.codec: r.sizes.mean for r in suite.results if r.sizes}),
                MappingProxyType({r.codec: cpu for r in suite.results if (cpu := cpu_us(r)) is not None}))


def _front_candidates(suite: Suite, axes: Axes) -> List[CodecResult]:
    """Codecs that can stand on the front: every failure declared, bytes and CPU on both axes."""
    return [r for r in rankable(suite) if r.codec in axes.bytes and r.codec in axes.cpu and not r.error]


def dominated(suite: Suite, axes: Axes) -> Dict[str, str]:
    """Codec id -> a codec that beats it on both axes of the front: at least as good on both and better on one.
    Only front candidates are listed."""
    rows = [(axes.bytes[r.codec], axes.cpu[r.codec], r.codec) for r in _front_candidates(suite, axes)]
    beaten = {}
    for size, cpu, name in rows:
        better = [(s, c, n) for s, c, n in rows if n != name and s <= size and c <= cpu and (s < size or c < cpu)]
        if better:
            beaten[name] = min(better)[2]  # the smallest of those that beat it
    return beaten


def pareto_front(suite: Suite, axes: Axes) -> List[CodecResult]:
    """The codecs no other beats on both of the front's axes (bytes and CPU per call), smallest first.

    Codecs with undeclared failures, or without bytes or timings, are not on it."""
    beaten = dominated(suite, axes)
    front = [r for r in _front_candidates(suite, axes) if r.codec not in beaten]
    return sorted(front, key=lambda r: (axes.bytes[r.codec], axes.cpu[r.codec]))


def comparisons(notable: Sequence[CodecResult], references: Sequence[CodecResult]) -> List[str]:
    """One plain sentence per notable codec (and the references): bytes and CPU relative to each reference."""
    refs = [r for r in references if r.sizes and r.encode]
    shown = {r.codec: r for r in (*notable, *refs) if r.sizes and r.encode}
    lines = []
    for r in shown.values():
        parts = [relative(r, ref) for ref in refs if ref.codec != r.codec]
        if parts:
            lines.append(f"{r.codec}: " + "; ".join(parts) + (f" ({failed_text(r)})." if r.failures else "."))
    return lines


def relative(r: CodecResult, ref: CodecResult) -> str:
    """``0.76x json bytes at 2.38x json encode CPU (1.70x decode)``; both must have sizes and encode timings."""
    assert r.sizes and ref.sizes and r.encode and ref.encode
    text = (f"{fmt_ratio(r.sizes.mean / ref.sizes.mean)} {ref.codec} bytes at "
            f"{fmt_ratio(r.encode.ratio_to(ref.encode))} {ref.codec} encode CPU")
    if r.decode and ref.decode:
        text += f" ({fmt_ratio(r.decode.ratio_to(ref.decode))} decode)"
    return text


def warnings(suite: Suite, ref: Optional[CodecResult]) -> List[str]:
    """Reasons to distrust parts of the run: errors, undeclared fidelity problems, unstable timings, dropped calls."""
    notes = []
    for r in suite.results:
        bad = undeclared_calls(r)
        reasons = ([f"timing could not run ({r.error})"] if r.error else []) + (
            [f"{bad:,} calls failed or came back different, undeclared (see Fidelity)"] if bad else [])
        if reasons:
            notes.append(f"{r.codec}: {'; '.join(reasons)}.")
    titles = {"partial": "Partial run", "unstable": "Unstable timings", "speed states": "Speed states"}
    notes += [f"{titles[name]}: {text[0].upper()}{text[1:]}" for name, text in timing_notes(suite, ref)]
    recorder = suite.trace.get("recorder") or {}
    dropped = sum(v for k, v in recorder.items() if k.startswith("dropped") and isinstance(v, int))
    if dropped:
        notes.append(f"The recorder dropped {dropped:,} calls while capturing: the trace is not every call.")
    if suite.trace.get("truncated_bytes"):
        notes.append(f"The trace was truncated ({suite.trace['truncated_bytes']} bytes ignored).")
    return notes


def timing_notes(suite: Suite, ref: Optional[CodecResult]) -> List[Tuple[str, str]]:
    """The reasons to read the timings with care, as (name, text): a partial run, unstable rounds, speed states
    (ratios to ``ref``, the reference codec)."""
    partial = f"{suite.partial}: the timings cover the rounds done before it" if suite.partial else ""
    notes = [("partial", partial), ("unstable", unstable_summary(suite, ref)),
             ("speed states", state_summary(suite, ref))]
    return [(name, text) for name, text in notes if text]


def unstable_summary(suite: Suite, ref: Optional[CodecResult]) -> Optional[str]:
    """How many timings are unstable (see :func:`stability`), the worst named; None if none are."""
    shaky = sorted(((ci_half_pct(t), f"{r.codec} {op}") for r in suite.results for op in unstable(r)
                    if (t := timing_of(r, op)) is not None), reverse=True)
    if not shaky:
        return None
    timed = sum(1 for r in suite.results for op in OPS if timing_of(r, op))
    advice = (f"The enc/{ref.codec} and dec/{ref.codec} ratios pair each round with {ref.codec}'s round of the same "
              "turn, which cancels drift that slows every codec alike; compare codecs with them, or rerun on an idle "
              "machine." if ref is not None and timed_both(ref) else "Rerun on an idle machine.")
    return (f"{len(shaky)} of {timed} timings have a median whose 95% confidence interval is wider than "
            f"±{UNSTABLE_CI_PCT:.0f}% (worst: {shaky[0][1]} ±{shaky[0][0]:.1f}%): the machine was busy or changed "
            f"speed, and absolute µs move with it. {advice}")


def state_summary(suite: Suite, ref: Optional[CodecResult]) -> Optional[str]:
    """When the machine switched speed state during the run and codec ratios to ``ref`` differ between
    the states (see ``SLOW_STATE_FACTOR``): how often, and the codec most affected; else None."""
    if ref is None or ref.encode is None:
        return None
    gaps = []
    for r in suite.results:
        for op in OPS:
            mine, theirs = timing_of(r, op), timing_of(ref, op)
            by_state = mine.ratio_by_state(theirs) if mine and theirs and r is not ref else {}
            if by_state:
                fast, slow = by_state["fast"][0], by_state["slow"][0]
                gaps.append((max(fast, slow) / min(fast, slow), f"{r.codec} {op}", fast, slow))
    wide = [g for g in gaps if g[0] >= STATE_GAP]
    if not wide:
        return None
    gap, name, fast, slow = max(wide)
    slow_rounds = sum(ref.encode.slow_rounds)
    return (f"the machine changed speed state during the run: {slow_rounds} of {len(ref.encode.rounds_ns)} "
            f"{ref.codec} encode rounds ran over {SLOW_STATE_FACTOR:g}x slower than its fastest. Codecs do not slow "
            f"down alike, so their ratios to {ref.codec} differ between the states by {STATE_GAP:g}x or more for "
            f"{len(wide)} "
            f"timing{'s' if len(wide) > 1 else ''}, most for {name}: "
            f"{fmt_ratio(fast)} in fast rounds, {fmt_ratio(slow)} in slow ones ({gap:.2f}x apart). "
            f"The table's ratios mix the states as this run happened to; compare runs made in the same state "
            f"(results.json keeps every round), or rerun on an idle machine.")


def worst_method(r: CodecResult, op: str) -> Optional[str]:
    """The method with the highest per-call p99 for ``op``, if tails were measured."""
    methods = {m: v["p99"] for m, v in (r.latency.get(op) or {}).items() if m != "*"}
    return max(methods, key=methods.__getitem__) if methods else None


def cpu_ratio(r: CodecResult, ref: CodecResult, op: str) -> Optional[float]:
    """CPU time relative to ``ref``, paired round by round (see Timing.ratio_to); None if either is missing."""
    mine, theirs = timing_of(r, op), timing_of(ref, op)
    return mine.ratio_to(theirs) if mine and theirs else None
