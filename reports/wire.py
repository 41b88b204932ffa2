"""The wire, per codec and ``--wire`` policy: packets, wire bytes with headers, rates per player, the
latency batching adds, and how the ranking changes between policies (``docs/wire.md``).

Figures come from the size pass (:func:`rpcbench.wire.wire_figures`), repriced for the report's
``--transport`` and ``--packet-overhead`` (exact: packets are counted by WebSocket size class). Rates
per player are over the trace's connection-seconds, as the capacity plan's are. Judgments only; the
terminal, page and charts format the :class:`WireView`.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from rpcbench.errors import BenchError
from rpcbench.results import CodecResult, Suite, Timing
from rpcbench.results_wire import LinkFigures, WireFigures
from rpcbench.wire import PER_CALL, TRANSPORTS, reprice

from .analysis import Axes
from .formatting import fmt_us

C2S, S2C = "c2s", "s2c"


@dataclass(frozen=True)
class WireRow:
    """One codec under one policy, per player (one connection) and direction (up: c2s, down: s2c)."""

    codec: str
    policy: str
    tick_ms: Optional[float]
    calls: int
    packets: int
    bytes_per_call: float  #: on the wire, headers included
    payload_p50: float  #: payload bytes per packet
    payload_p99: float
    packets_up: float  #: per second per player
    packets_down: float
    kbps_up: float  #: kbit/s per player, headers included
    kbps_down: float
    latency_mean_ms: float  #: from a call's timestamp to its packet's flush
    latency_p99_ms: float
    fragmented: int  #: packets carrying part of a message over the MTU
    packet_us_per_call: float  #: framing, compressing and checking the packets, per call (size pass)
    problem: Optional[str]  #: a packet that did not give its messages back
    #: CPU µs per call (median round) as sent under the policy: per message under per-call; on whole packets under
    #: the batched policy the run timed (its first: encode + frame + compress each packet, decompress + unframe +
    #: decode); None under other batched policies and when not timed
    encode_us: Optional[float] = None
    decode_us: Optional[float] = None
    cpu_error: Optional[str] = None  #: why the timed policy's packets have no CPU figures


@dataclass(frozen=True)
class WireView:
    """The wire section of the decision."""

    policies: Tuple[str, ...]  #: as the run wrote them
    chosen: Optional[str]  #: the policy the verdict and capacity plan use (None: the run has no wire figures)
    transport: str
    rows: Tuple[WireRow, ...]
    rankings: Mapping[str, Tuple[str, ...]]  #: policy -> codecs, fewest wire bytes per call first
    notes: Tuple[str, ...]  #: the tick found, ranking changes, delivery needs

    @property
    def headers(self) -> str:
        """What the wire figures include besides the payload, in words: ``udp headers`` or ``payload only``."""
        return "payload only" if self.transport == "none" else f"{self.transport} headers"

    @property
    def compared(self) -> bool:
        """Did the run compare sending policies or batch calls (what the wire parts of the outputs are shown for)?"""
        return self.chosen is not None and self.policies != (PER_CALL,)

    def row(self, codec: str, policy: str) -> Optional[WireRow]:
        """The codec's row under ``policy``."""
        return next((r for r in self.rows if r.codec == codec and r.policy == policy), None)


def chosen_policy(suite: Suite, wanted: Optional[str]) -> Optional[str]:
    """The policy to decide on: ``wanted`` (one of the run's), else the run's first batched policy, else
    per-call; None when the results hold no wire figures (older runs)."""
    texts = [w.wire for w in next((r.wire for r in suite.results if r.wire), ())]
    if not texts:
        return None
    if wanted is not None and wanted not in texts:
        raise BenchError(f"--decide-wire {wanted[:60]}: not one of the run's --wire policies ({', '.join(texts)})")
    if wanted is not None:
        return wanted
    return next((t for t in texts if t != PER_CALL), texts[0])


def policy_figures(r: CodecResult, policy: str, transport: str, extra: int) -> Optional[WireFigures]:
    """The codec's wire figures under ``policy`` with the headers of ``transport`` (+ ``extra`` per packet)."""
    found = _under(r, policy)
    return reprice(found, TRANSPORTS[transport], extra) if found else None


def weights(r: CodecResult, reference: CodecResult, figures: Union[WireFigures, LinkFigures, None],
            direction: str) -> Optional[Tuple[float, float]]:
    """The capacity plan's (scale of the reference's bytes, header bytes per call) in ``direction`` from the
    codec's wire figures or its lossy link figures: payload per call over the reference's bytes per call, headers
    (and acks on the link) per call."""
    mine, theirs = figures.by_direction.get(direction) if figures else None, reference.by_direction.get(direction)
    if not mine or not mine.calls or not theirs or not theirs["calls"] or not theirs["bytes"]:
        return None
    payload = mine.payload_bytes / mine.calls
    return payload / (theirs["bytes"] / theirs["calls"]), (mine.wire_bytes - mine.payload_bytes) / mine.calls


def shared_policy(old: Suite, new: Suite) -> Optional[str]:
    """The batched --wire policy compare judges bytes on: NEW's first batched one, if OLD ran it with the same
    --transport; None: bytes per message."""
    chosen = chosen_policy(new, None)
    if chosen in (None, PER_CALL) or not _has(old, chosen):
        return None
    return chosen if old.settings.get("transport") == new.settings.get("transport") else None


def _has(suite: Suite, policy: Optional[str]) -> bool:
    return any(w.wire == policy for r in suite.results for w in r.wire)


def _under(r: CodecResult, policy: Optional[str]) -> Optional[WireFigures]:
    """The codec's wire figures under ``policy`` as the run recorded them (its --transport headers), or None."""
    return next((w for w in r.wire if w.wire == policy), None)


def policy_cpu(r: CodecResult, w: WireFigures, op: str) -> Optional[Timing]:
    """The codec's CPU per call of ``op`` (encode or decode) as sent under the policy of its wire row ``w``: per
    message under per-call, on whole packets under the batched policy the run timed, else None."""
    if w.wire == PER_CALL:
        return r.encode if op == "encode" else r.decode
    return w.packet_timing(op)


def cpu_timing(r: CodecResult, policy: Optional[str], op: str) -> Optional[Timing]:
    """The CPU per call of ``op`` the capacity plan counts under ``policy``: as sent under it (:func:`policy_cpu`),
    else per message (no wire figures, or a batched policy whose packets were not timed)."""
    found = _under(r, policy)
    return (policy_cpu(r, found, op) if found else None) or (r.encode if op == "encode" else r.decode)


def bytes_per_call(r: CodecResult, policy: Optional[str]) -> Optional[float]:
    """The codec's wire bytes per call under ``policy`` as the run recorded them (its --transport headers)."""
    return _per_call(_under(r, policy))


def connection_seconds(suite: Suite) -> float:
    """The trace's connection-seconds (each connection's first to last call), as the capacity plan counts."""
    table = suite.trace.get("per_connection") or {}
    seconds = sum(table.get("span_ms", ())) / 1000
    return seconds or float(suite.trace.get("duration_s") or 0) * int(suite.trace.get("connections") or 0)


def view(suite: Suite, transport: str, extra: int, wanted: Optional[str]) -> WireView:
    """Every codec's wire rows, the rankings per policy and what changed between them."""
    chosen = chosen_policy(suite, wanted)
    texts = tuple(dict.fromkeys(w.wire for r in suite.results for w in r.wire))
    seconds = connection_seconds(suite)
    rows = tuple(_row(r, w, seconds) for r in suite.results if r.sizes
                 for policy in texts if (w := policy_figures(r, policy, transport, extra)))
    rankings = {p: tuple(row.codec for row in sorted((x for x in rows if x.policy == p),
                                                     key=lambda x: (x.bytes_per_call, x.codec))) for p in texts}
    notes = (*_tick_notes(suite), *ranking_changes(rankings), *_cpu_notes(rows), *_delivery_notes(suite, transport))
    return WireView(texts, chosen, transport, rows, rankings, tuple(notes))


def _row(r: CodecResult, w: WireFigures, seconds: float) -> WireRow:
    per_s = 1 / seconds if seconds else 0.0
    up, down = w.by_direction[C2S], w.by_direction[S2C]
    calls = w.calls or 1
    return WireRow(r.codec, w.wire, w.tick_ms, w.calls, w.packets, w.wire_bytes / calls,
                   w.payload_p50, w.payload_p99, up.packets * per_s, down.packets * per_s,
                   up.wire_bytes * 8 / 1000 * per_s, down.wire_bytes * 8 / 1000 * per_s,
                   w.latency_mean_ms, w.latency_p99_ms, w.fragmented, w.packet_ns / 1000 / calls,
                   w.problem, _median(policy_cpu(r, w, "encode")), _median(policy_cpu(r, w, "decode")),
                   w.cpu.error if w.cpu else None)


def _median(timing: Optional[Timing]) -> Optional[float]:
    return timing.median_us if timing else None


def front_axes(wire: WireView, suite: Suite) -> Optional[Axes]:
    """The Pareto front's axes as sent under the decided policy: wire bytes per call (headers included), for codecs
    whose packets gave their messages back, and CPU per call as sent (:func:`cpu_timing`, the capacity plan's
    rule). None when the wire changes nothing (no wire figures, or one call per packet without headers): the front
    then stands on the messages (:func:`reports.analysis.message_axes`)."""
    if wire.chosen is None or (wire.chosen == PER_CALL and wire.transport == "none"):
        return None
    rows = [r for r in wire.rows if r.policy == wire.chosen and r.problem is None]
    cpu, on_packets = {}, False
    for row in rows:
        result = suite.result(row.codec)
        encode, decode = (cpu_timing(result, wire.chosen, op) for op in ("encode", "decode"))
        if encode and decode:
            cpu[row.codec] = encode.median_us + decode.median_us
            on_packets = on_packets or encode is not result.encode
    where = f"; on whole {wire.chosen} packets" if on_packets else ""
    return Axes(f"wire bytes per call ({wire.chosen}, {wire.headers})", f"encode + decode µs per call (medians{where})",
                MappingProxyType({r.codec: r.bytes_per_call for r in rows}), MappingProxyType(cpu))


def priced_bytes_per_call(r: CodecResult, policy: str, transport: str, extra: int) -> Optional[float]:
    """The codec's wire bytes per call under ``policy``, repriced for ``transport`` (+ ``extra`` per packet)."""
    return _per_call(policy_figures(r, policy, transport, extra))


def _per_call(found: Optional[WireFigures]) -> Optional[float]:
    """Wire bytes per call of ``found`` (None: no figures or no call)."""
    return found.wire_bytes / found.calls if found and found.calls else None


def ranking_changes(rankings: Mapping[str, Sequence[str]]) -> List[str]:
    """Sentences saying how each policy's ranking differs from the first policy's."""
    if len(rankings) < 2:
        return []
    (first, base), *others = rankings.items()
    out = []
    for policy, ranked in others:
        if list(ranked) == list(base):
            out.append(f"ranking by wire bytes per call: the same under {policy} as under {first}")
            continue
        moves = [f"{c} {base.index(c) + 1} -> {i + 1}" for i, c in enumerate(ranked)
                 if c in base and base.index(c) != i]
        out.append(f"ranking by wire bytes per call under {policy} (vs {first}): {', '.join(ranked)} "
                   f"(moved: {'; '.join(moves)})")
    return out


def _tick_notes(suite: Suite) -> List[str]:
    """What the size pass read from the traces' timestamps."""
    out = []
    for tick in suite.settings.get("ticks") or ():
        if tick.get("tick_ms") is None:
            out.append(f"{tick['path']}: no server tick found in its timestamps: per-call only")
            continue
        quantized = ", ".join(tick.get("quantized") or ()) or "none"
        out.append(f"server tick in the timestamps: {tick['tick_ms']:.2f} ms ({1000 / tick['tick_ms']:.1f} Hz), "
                   f"phase coherence {tick['confidence']:.3f} over {tick['gaps']:,} flushes (tick:auto uses it); "
                   f"directions already recorded at the flush, not charged a second tick: {quantized}")
    return out


def _delivery_notes(suite: Suite, transport: str) -> List[str]:
    """What stateful codecs need of the transport under UDP."""
    stateful = [r.codec for r in suite.results if r.ordered_delivery]
    if transport != "udp" or not stateful:
        return []
    return [f"{', '.join(stateful)}: need reliable, ordered delivery; over UDP that takes a reliability layer "
            "(acknowledgements and in-order resends, as ENet's or KCP's reliable channels) whose header belongs "
            "in --packet-overhead, and a lost packet stalls every later one of its connection"]


def closing_lines(wire: WireView, codecs: Sequence[str]) -> List[str]:
    """The closing note for ``codecs`` (the verdict's pick, baseline and front): each policy's packets per
    second, wire bytes per call and kbit/s per player, then how the ranking changed."""
    if not wire.rows:
        return []
    out = [f"on the wire ({wire.headers}; decided on {wire.chosen}):"]
    for policy in wire.policies:
        parts = [f"{r.codec} {r.bytes_per_call:.1f} B/call, {r.kbps_up + r.kbps_down:.2f} kbit/s" + _cpu_text(r)
                 for c in codecs if (r := wire.row(c, policy))]
        first = next((r for c in codecs if (r := wire.row(c, policy))), None)
        if first is None:
            continue
        out.append(f"  {policy}: {first.packets_up:.1f} up + {first.packets_down:.1f} down packets/s per player, "
                   f"+{first.latency_mean_ms:.1f} ms mean latency (p99 {first.latency_p99_ms:.1f}); "
                   + "; ".join(parts))
    return out + [f"  {note}" for note in wire.notes]


def _cpu_text(r: WireRow) -> str:
    """``, 3.91 + 1.76 µs/call``: the row's encode and decode CPU per call, when it has them."""
    return f", {fmt_us(r.encode_us)} + {fmt_us(r.decode_us)} µs/call" if r.encode_us and r.decode_us else ""


def _cpu_notes(rows: Sequence[WireRow]) -> List[str]:
    """What the CPU figures of the rows are, and why a timed policy's packets have none."""
    timed = sorted({r.policy for r in rows if r.policy != PER_CALL and r.encode_us})
    failed = [f"{r.codec} under {r.policy}: {r.cpu_error}" for r in rows if r.cpu_error]
    if not timed and not failed:
        return []
    lines = [f"CPU per call (encode + decode µs, median round): per message under {PER_CALL}; on whole packets "
             f"under {', '.join(timed)} (the sample's tick windows: encode, frame with LEB128 lengths and compress "
             "each packet whole; decompress, unframe and decode every message; a codec that does not compress pays "
             "encode + framing); the capacity plan's server cores count the decided policy's (per message where its "
             "packets were not timed)"] if timed else []
    return lines + failed


def tick_series(wire: WireView, codecs: Sequence[str]) -> Dict[str, List[Tuple[float, float]]]:
    """For the chart: per codec, (tick ms, kbit/s per player both ways) over the run's tick policies."""
    out: Dict[str, List[Tuple[float, float]]] = {}
    for codec in codecs:
        points = sorted((r.tick_ms, r.kbps_up + r.kbps_down) for r in wire.rows
                        if r.codec == codec and r.tick_ms is not None)
        if len(points) >= 2:
            out[codec] = points
    return out
