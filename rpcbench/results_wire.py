"""A codec's figures on the wire as results.json records them, typed and frozen: per ``--wire`` policy
(:class:`WireFigures`, each direction a :class:`WireDirection`, the packets' CPU a :class:`PacketCpu`) and per
policy and ``--loss`` rate over the lossy link (:class:`LinkFigures`, each direction a :class:`LinkDirection`).

They are parts of :class:`rpcbench.results.CodecResult` (``wire``, ``link``), in a module of their own so that
the size pass can build them (:func:`rpcbench.wire.wire_figures`, :func:`rpcbench.link.link_figures`) without
importing the results; the pipeline adds the packets' CPU (:func:`rpcbench.pipeline.packet_cpu`), and
:func:`rpcbench.results.load` reads them back. Field names are results.json's keys, fields in its order
(``docs/results-format.md``), so ``dataclasses.asdict`` writes the same object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from .results_timing import Timing


@dataclass(frozen=True)
class WireDirection:
    """One direction (``c2s`` or ``s2c``) of a codec's packets under one --wire policy."""

    calls: int
    packets: int
    payload_bytes: int
    fragmented: int  #: packets carrying part of a message over the MTU
    size_classes: Tuple[int, ...]  #: packets of a payload up to 125 B, up to 65,535 B, beyond (WebSocket's)
    wire_bytes: int  #: payload + the transport's headers + --packet-overhead per packet


@dataclass(frozen=True)
class PacketCpu:
    """CPU per call of whole packets under the batched --wire policy the run timed (results.json ``cpu`` of that
    policy's row): the sample's tick windows' calls and packets, and the rounds of encode + frame + compress and
    of decompress + unframe + decode; or only why the packets could not be timed (``error``)."""

    calls: int = 0
    packets: int = 0
    encode: Optional[Timing] = None
    decode: Optional[Timing] = None
    error: Optional[str] = None


@dataclass(frozen=True)
class WireFigures:
    """One codec under one --wire policy: its packets, payload and wire bytes in total and per direction, the
    payload per packet, the latency batching adds, and the packets' CPU when that policy was timed."""

    wire: str  #: the policy, as the run wrote it (``per-call``, ``tick:auto``, ``tick:50+mtu:1200``)
    tick_ms: Optional[float]  #: None under per-call
    mtu: Optional[int]
    tick_confidence: Optional[float]  #: tick:auto: the phase coherence of the tick found
    quantized: Tuple[str, ...]  #: directions recorded at the flush, not charged a second tick
    transport: str  #: whose headers ``wire_bytes`` includes (``none``: payload only)
    packet_overhead: int  #: the game's own bytes per packet, in ``wire_bytes``
    calls: int
    packets: int
    payload_bytes: int
    fragmented: int
    wire_bytes: int
    payload_p50: float  #: payload bytes per packet
    payload_p99: float
    latency_mean_ms: float  #: from a call's timestamp to its packet's flush
    latency_p99_ms: float
    packet_ns: int  #: the size pass's framing, compressing and checking of the packets, in all
    problem: Optional[str]  #: a packet that did not give its messages back
    by_direction: Dict[str, WireDirection]  #: ``c2s``, ``s2c``
    cpu: Optional[PacketCpu] = None  #: on the batched policy the run timed only

    def packet_timing(self, op: str) -> Optional[Timing]:
        """The CPU per call of ``op`` (encode or decode) on whole packets, or None: not the batched policy that
        was timed, its packets could not be timed, or older results."""
        return getattr(self.cpu, op) if self.cpu else None


@dataclass(frozen=True)
class LinkDirection:
    """One direction of a replay over the lossy link (:data:`rpcbench.link.COUNTS` but the headers, which are
    in ``wire_bytes``)."""

    calls: int  #: calls sent
    delivered_calls: int  #: calls that reached the receiving application
    lost_calls: int  #: calls never delivered (plain UDP)
    packets: int  #: data datagrams sent, resends included
    lost_packets: int
    ack_packets: int  #: ack-only datagrams sent
    lost_acks: int
    payload_bytes: int  #: data payload, resends included
    resend_bytes: int
    ack_bytes: int
    wire_bytes: int  #: payload + acks + every datagram's headers


@dataclass(frozen=True)
class LinkFigures:
    """One codec's replay over the lossy link under one --wire policy at one loss rate: the counts of both
    directions summed (as :class:`LinkDirection`), the calls lost by method, the latency loss adds, and what a
    receiver of ``+ackdelta`` decoded wrong."""

    wire: str  #: the --wire policy, as the run wrote it
    loss_pct: float
    delivery: str  #: ``reliable``, ``udp`` or ``ackdelta`` (rpcbench.link)
    calls: int
    delivered_calls: int
    lost_calls: int
    packets: int
    lost_packets: int
    ack_packets: int
    lost_acks: int
    payload_bytes: int
    resend_bytes: int
    ack_bytes: int
    wire_bytes: int
    lost_by_method: Dict[str, int]  #: method -> calls never delivered, by method name
    latency_p50_ms: float  #: latency loss added to delivered calls (resend waits, head-of-line)
    latency_p99_ms: float
    mismatches: int  #: delivered calls that did not decode to the call sent (+ackdelta)
    problem: Optional[str]  #: the first of them
    by_direction: Dict[str, LinkDirection]  #: ``c2s``, ``s2c``
