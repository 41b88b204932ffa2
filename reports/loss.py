"""Under loss (``--loss``): each codec's figures on the lossy link per loss rate, the rate the verdict decides at,
and what each way of living with loss costs (``docs/decide.md``, the link model: ``docs/wire.md``).

The link figures come from the run (results.json ``link``: one set per codec, --wire policy and loss rate, wire
bytes including resends, acks and the run's --transport headers). From them, per codec and rate: wire bytes per call
sent, kbit/s per player (wire bytes x 8 / 1000 over the trace's connection-seconds, the capacity plan's and the wire
view's denominator), calls lost (by method), resent and ack bytes, and the delay loss adds (p50, p99). Judgments
only; the terminal, page, report.md and charts format the :class:`LossView`, each from the same :func:`cells`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from rpcbench.errors import BenchError
from rpcbench.results import CodecResult, Suite
from rpcbench.results_wire import LinkFigures

from .analysis import Axes
from .formatting import MISSING
from .wire import connection_seconds

UDP, RELIABLE, ACKDELTA = "udp", "reliable", "ackdelta"  #: the link's ways of delivery (results.json ``delivery``)
METHODS_SHOWN = 3  #: methods named in a row's "lost by method" cell, most lost first
#: the loss table's columns, as every output titles them (:func:`cells` gives a row's cells in this order)
COLUMNS = ("codec", "delivery", "B/call on the wire", "kbit/s per player", "lost calls", "lost by method",
           "resent B/call", "ack B/call", "added ms p50", "added ms p99")
#: the terminal's compact table: these columns of :data:`COLUMNS`
TERMINAL_COLUMNS = ("codec", "delivery", "B/call on the wire", "kbit/s per player", "lost calls", "added ms p99")


@dataclass(frozen=True)
class LossRow:
    """One codec at one loss rate, under the decided --wire policy (figures per call are per call sent)."""

    codec: str
    loss_pct: float
    delivery: str  #: udp (lost calls stay lost), reliable (resent in order) or ackdelta (deltas against acked state)
    calls: int  #: calls sent
    lost_calls: int
    lost_by_method: Tuple[Tuple[str, int], ...]  #: most lost first
    bytes_per_call: float  #: wire bytes per call: payload incl. resends, acks and headers of every packet
    kbps: float  #: kbit/s per player, both ways
    resend_per_call: float
    ack_per_call: float
    latency_p50_ms: float  #: delay loss adds over loss-free delivery (resend waits, head-of-line)
    latency_p99_ms: float
    mismatches: int = 0  #: delivered messages that did not decode to their call over the link
    problem: Optional[str] = None  #: the first of them

    @property
    def lost_text(self) -> str:
        """``12 (move 8, chat 3, +1 more)``: the calls lost and the methods they were, most first."""
        shown = ", ".join(f"{m} {n:,}" for m, n in self.lost_by_method[:METHODS_SHOWN])
        more = len(self.lost_by_method) - METHODS_SHOWN
        return shown + (f", +{more} more" if more > 0 else "")


@dataclass(frozen=True)
class LossView:
    """The loss section of the decision; empty (``chosen`` None) when the run had no --loss."""

    policy: Optional[str]  #: the --wire policy the rows are under
    rates: Tuple[float, ...]  #: loss rates measured, in %, lowest first
    chosen: Optional[float]  #: the rate the verdict and the capacity plan decide at
    why: str  #: how that rate was chosen
    link: str  #: the link's settings in words (RTT, jitter, bursts, seed, headers)
    rows: Tuple[LossRow, ...]
    rankings: Mapping[float, Tuple[str, ...]]  #: rate -> codecs, fewest wire bytes per call first
    flags: Tuple[str, ...]  #: calls lost over UDP; resends and head-of-line delay of the reliable layer

    @property
    def shown(self) -> bool:
        """Did the run measure a lossy link (what the loss parts of the outputs are shown for)?"""
        return self.chosen is not None

    @property
    def rate_text(self) -> str:
        """``1 % loss (the lowest nonzero rate measured)``: the decided rate and why, as the verdict says it."""
        return f"{pct(self.chosen or 0.0)} loss ({self.why})"

    def row(self, codec: str, rate: float) -> Optional[LossRow]:
        """The codec's row at ``rate``."""
        return next((r for r in self.rows if r.codec == codec and same_rate(r.loss_pct, rate)), None)

    def at(self, rate: float) -> List[LossRow]:
        """The rows at ``rate``, fewest wire bytes per call first."""
        return [r for c in self.rankings.get(rate, ()) if (r := self.row(c, rate))]


NO_LOSS = LossView(None, (), None, "", "", (), MappingProxyType({}), ())


def pct(rate: float) -> str:
    """A loss rate as written: ``1 %``, ``0.5 %``."""
    return f"{rate:g} %"


def same_rate(a: float, b: float) -> bool:
    """Two loss rates in % the same (a rate read back from JSON, a rate typed on the command line)."""
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def figures(r: CodecResult, policy: Optional[str], rate: Optional[float]) -> Optional[LinkFigures]:
    """The codec's link figures under ``policy`` at ``rate`` (None: not measured, or no rate)."""
    if rate is None:
        return None
    return next((f for f in r.link if f.wire == policy and same_rate(f.loss_pct, rate)), None)


def link_policy(suite: Suite, wire_policy: Optional[str]) -> Optional[str]:
    """The --wire policy to read the link figures under: the decided one when the link ran it, else the link's first."""
    texts = list(dict.fromkeys(f.wire for r in suite.results for f in r.link))
    return wire_policy if wire_policy in texts else (texts[0] if texts else None)


def chosen_rate(rates: Sequence[float], wanted: Optional[float]) -> Tuple[Optional[float], str]:
    """The rate to decide at and why: ``wanted`` (--decide-loss, one of the run's rates), else the lowest nonzero
    rate measured (the everyday link the team named; higher rates are its bad days, shown beside), else 0."""
    if wanted is not None and not rates:
        raise BenchError(f"--decide-loss {wanted:g}: this run measured no lossy link (run it with --loss)")
    if wanted is not None:
        found = next((r for r in rates if same_rate(r, wanted)), None)
        if found is None:
            raise BenchError(f"--decide-loss {wanted:g}: not one of the run's --loss rates "
                             f"({', '.join(f'{r:g}' for r in rates)})")
        return found, "--decide-loss"
    if not rates:
        return None, ""
    lossy = [r for r in rates if r > 0]
    if not lossy:
        return rates[0], "the only rate measured"
    return lossy[0], "the lowest nonzero rate measured; --decide-loss P for another"


def view(suite: Suite, wanted: Optional[float], wire_policy: Optional[str]) -> LossView:
    """Every codec's rows per loss rate under the decided --wire policy, the rate decided at, the flags."""
    policy = link_policy(suite, wire_policy)
    found = [(r, f) for r in suite.results for f in r.link if f.wire == policy]
    rates = tuple(sorted({f.loss_pct for _, f in found}))
    chosen, why = chosen_rate(rates, wanted)
    if chosen is None:
        return NO_LOSS
    seconds = connection_seconds(suite)
    rows = tuple(_row(r.codec, f, seconds) for r, f in found)
    rankings = {rate: tuple(x.codec for x in sorted((x for x in rows if same_rate(x.loss_pct, rate)),
                                                    key=lambda x: (x.bytes_per_call, x.codec))) for rate in rates}
    found_view = LossView(policy, rates, chosen, why, link_text(suite), rows, MappingProxyType(rankings), ())
    return replace(found_view, flags=tuple(flags(found_view)))


def _row(codec: str, f: LinkFigures, seconds: float) -> LossRow:
    calls = f.calls or 1
    lost = tuple(sorted(((m, n) for m, n in f.lost_by_method.items() if n), key=lambda x: (-x[1], x[0])))
    return LossRow(codec, f.loss_pct, f.delivery, f.calls, f.lost_calls, lost, f.wire_bytes / calls,
                   f.wire_bytes * 8 / 1000 / seconds if seconds else 0.0, f.resend_bytes / calls,
                   f.ack_bytes / calls, f.latency_p50_ms, f.latency_p99_ms, f.mismatches, f.problem)


def link_text(suite: Suite) -> str:
    """The link's settings as the run recorded them: ``udp headers, RTT 100 ms, jitter 0 ms, ...``."""
    s = suite.settings
    transport = s.get("transport") or "none"
    headers = "payload only" if transport == "none" else f"{transport} headers"
    burst = s.get("loss_burst")
    return (f"{headers}, RTT {s.get('rtt_ms', '?'):g} ms, jitter {s.get('jitter_ms', 0):g} ms, "
            f"{'independent losses' if burst in (None, 1) else f'bursts of {burst:g} packets on average'}, "
            f"seed {s.get('loss_seed', '?')}")


def flags(v: LossView, codecs: Optional[Sequence[str]] = None) -> List[str]:
    """What each codec (of ``codecs``; None: every one) pays for loss at each nonzero rate: calls never delivered
    (how many, which methods, and how they were sent), the reliable layer's resends and head-of-line delay."""
    out = []
    for rate in (r for r in v.rates if r > 0):
        rows = [r for r in v.at(rate) if codecs is None or r.codec in codecs]
        lost = [f"{r.codec} ({r.delivery}) {r.lost_calls:,} of {r.calls:,} ({r.lost_text})" for r in rows
                if r.lost_calls]
        if lost:
            out.append(f"at {pct(rate)}: calls never delivered: {'; '.join(lost)}")
        broken = [f"{r.codec} {r.mismatches:,} ({r.problem})" for r in rows if r.mismatches]
        if broken:
            out.append(f"at {pct(rate)}: delivered messages that did not decode to their call: {'; '.join(broken)}")
        late = [f"{r.codec} resends {r.resend_per_call:.1f} B/call, +{r.latency_p50_ms:.1f} ms p50, "
                f"+{r.latency_p99_ms:.1f} ms p99" for r in rows if r.delivery == RELIABLE]
        if late:
            out.append(f"at {pct(rate)}: reliable ordered layer (resends after a timeout; later messages wait "
                       f"behind a lost one): {'; '.join(late)}")
    return out


def cells(r: LossRow, columns: Sequence[str] = COLUMNS) -> List[str]:
    """The row's cells in ``columns`` (of :data:`COLUMNS`), as every output writes them."""
    text = {"codec": r.codec, "delivery": r.delivery, "B/call on the wire": f"{r.bytes_per_call:.1f}",
            "kbit/s per player": f"{r.kbps:.2f}", "lost calls": f"{r.lost_calls:,}",
            "lost by method": r.lost_text or MISSING,
            "resent B/call": f"{r.resend_per_call:.1f}", "ack B/call": f"{r.ack_per_call:.1f}",
            "added ms p50": f"{r.latency_p50_ms:.1f}", "added ms p99": f"{r.latency_p99_ms:.1f}"}
    return [text[c] for c in columns]


def leading(v: LossView, first: Sequence[str], count: int) -> Tuple[str, ...]:
    """The codecs the terminal and the charts show: ``first`` (the verdict's pick and baseline) that have rows, then
    the fewest wire bytes per call at the decided rate, ``count`` in all."""
    ranked = v.rankings.get(v.chosen, ()) if v.chosen is not None else ()
    return tuple(dict.fromkeys([*(c for c in first if c in ranked), *ranked]))[:count]


def series(v: LossView, codecs: Sequence[str], value: str) -> Dict[str, List[Tuple[float, float]]]:
    """For a chart: per codec, (loss %, the row's ``value``: ``kbps`` or ``latency_p99_ms``) over the run's rates."""
    out = {}
    for codec in codecs:
        points = [(rate, float(getattr(row, value))) for rate in v.rates if (row := v.row(codec, rate))]
        if points:
            out[codec] = points
    return out


def broken(r: CodecResult, v: LossView) -> Optional[str]:
    """Why the codec may not be recommended on the link at the decided rate (delivered messages that did not
    decode to their call), or None."""
    row = v.row(r.codec, v.chosen) if v.chosen is not None else None
    if row is None or not row.mismatches:
        return None
    return (f"{row.mismatches:,} delivered messages did not decode to their call on the lossy link at "
            f"{pct(row.loss_pct)} ({row.problem})")


def caveat(r: LossRow) -> str:
    """What the verdict's pick pays for loss at the decided rate, in one sentence."""
    at = f"at {pct(r.loss_pct)} loss"
    lost = (f"{r.lost_calls:,} of {r.calls:,} calls never arrive ({r.lost_text}): the game must live without them "
            "or resend them itself")
    if r.delivery == UDP:
        if not r.lost_calls:
            return f"{r.codec} over plain UDP {at}: no call lost in this run; a lost one would stay lost."
        return f"{r.codec} over plain UDP {at}: {lost}, and its bytes hold no resends."
    how = ("behind a reliable ordered layer" if r.delivery == RELIABLE else "against the state the receiver acked")
    return (f"{r.codec} {how} {at}: {r.resend_per_call:.1f} B/call resent and {r.ack_per_call:.1f} B/call of acks "
            f"(in its {r.bytes_per_call:.1f} B/call on the wire), messages delayed +{r.latency_p50_ms:.1f} ms p50, "
            f"+{r.latency_p99_ms:.1f} ms p99" + (f"; {lost}" if r.lost_calls else "") + ".")


def delayed(v: LossView, codecs: Sequence[str]) -> List[str]:
    """Those of ``codecs`` that loss delays rather than drops: not sent over plain UDP."""
    return [c for c in codecs if any(r.codec == c and r.delivery != UDP for r in v.rows)]


def at_rate(v: LossView, rate: float) -> LossView:
    """The view decided at another of its rates (to ask whether the verdict would change there)."""
    return replace(v, chosen=rate, why="another rate of the run")


def other_rates(pick: Optional[CodecResult], picks: Mapping[float, Optional[CodecResult]]) -> str:
    """``at the run's other loss rates: 0 %: the same; 5 %: msgpack``: the verdict's pick at each other rate."""
    def name(other: Optional[CodecResult]) -> str:
        if other is None:
            return "no recommendation"
        return "the same" if pick is not None and other.codec == pick.codec else other.codec

    return "At the run's other loss rates the pick would be: " + "; ".join(
        f"{pct(rate)}: {name(other)}" for rate, other in sorted(picks.items())) + "."


def front_axes(v: LossView, axes: Axes) -> Axes:
    """The Pareto front's axes on the lossy link: wire bytes per call at the decided rate (resends, acks and headers
    included) for the codecs measured there, the CPU of ``axes`` (loss changes no encode or decode); ``axes``
    themselves without a lossy link."""
    if v.chosen is None:
        return axes
    sizes = {r.codec: r.bytes_per_call for r in v.at(v.chosen) if not r.mismatches}
    return Axes(f"wire bytes per call on the lossy link at {pct(v.chosen)} loss ({v.policy}, resends and acks "
                "included)", axes.cpu_label, MappingProxyType(sizes),
                MappingProxyType({c: cpu for c, cpu in axes.cpu.items() if c in sizes}))
