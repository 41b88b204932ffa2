"""The lossy link model (``--loss``, ``docs/wire.md`` "The lossy link"): what each packet meets on its way
and what a replay over it counts.

Each connection has two channels, one per direction. A :class:`Channel` decides each datagram's fate in the
order the datagrams enter it (data and acks alike): lost or not by a seeded Gilbert-Elliott process (mean burst
``--loss-burst`` packets; 1: independent loss), and its one-way delay, RTT/2 plus uniform jitter of at most
``--jitter`` either way. :class:`LinkTally` keeps one replay's counts so that replays of several traces merge
exactly, and :func:`link_figures` turns them into what results.json records (``link`` of each codec's result).
The replay itself, the three deliveries and the size pass's task are in :mod:`rpcbench.link_replay`.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, fields
from typing import Any, Dict, List, Optional, Sequence, Tuple

from rpc_capture import C2S, S2C

from .errors import BenchError
from .histogram import nearest_rank
from .results_wire import LinkDirection, LinkFigures
from .wire import LATENCY_UNIT_MS, Transport

DEFAULT_LOSS_SEED = 31  #: --loss-seed when none is given: two runs draw the same losses and delays
DEFAULT_RTT_MS = 100.0  #: --rtt when --loss is given without it
MAX_LOSS_PCT = 50.0  #: highest --loss rate (a Gilbert-Elliott chain with any burst >= 1 exists up to here)
#: The reliable layer is KCP's (github.com/skywind3000/kcp, ikcp.c) in the fast mode its README gives for games,
#: ``ikcp_nodelay(kcp, 1, 10, 2, 1)``, less its fast resend (only the timeout resends here):
SEGMENT_HEADER = 24  #: IKCP_OVERHEAD: conv 4, cmd 1, frg 1, wnd 2, ts 4, sn 4, una 4, len 4 B, on each data datagram
ACK_BYTES = SEGMENT_HEADER  #: an ack is a segment of its own (IKCP_CMD_ACK) with no data
DATAGRAM_BYTES = 1400  #: IKCP_MTU_DEF: a flush fills datagrams up to this, segment headers and acks included
ACKS_PER_DATAGRAM = DATAGRAM_BYTES // ACK_BYTES  #: acks of one flush that share an ack-only datagram
ACK_INTERVAL_MS = 10  #: the receiver flushes the acks it owes every interval (ikcp_update; fast mode: 10 ms)
#: ``+ackdelta`` runs the netcode way (Gaffer On Games, "Reliability and Congestion Avoidance over UDP", 2008):
PACKET_HEADER = 8  #: on every datagram: sequence 16 bit, ack 16 bit (the newest sequence received), ack_bits 32
ACK_BITS = 32  #: ack_bits: which of the 32 sequences before ``ack`` arrived; older ones are never acked
MIN_RTO_MS = 30  #: IKCP_RTO_NDL: the least RTO in fast mode
BACKOFF = 1.5  #: fast mode: each resend's timeout is half as long again as the one before (rto += rto / 2)
RELIABLE, UDP, ACKDELTA = "reliable", "udp", "ackdelta"  #: the three deliveries

#: per direction, the counts a replay keeps (the order of LinkTally's lists)
COUNTS = ("calls", "delivered_calls", "lost_calls", "packets", "lost_packets", "ack_packets", "lost_acks",
          "payload_bytes", "resend_bytes", "ack_bytes", "header_bytes")
(CALLS, DELIVERED, LOST_CALLS, PACKETS, LOST_PACKETS, ACK_PACKETS, LOST_ACKS, PAYLOAD, RESEND, ACK,
 HEADERS) = range(len(COUNTS))


@dataclass(frozen=True)
class LinkSettings:
    """``--loss`` and its companions: the link every codec is replayed over."""

    loss: Tuple[float, ...] = ()  #: loss rates in percent per datagram (none: no replay)
    rtt_ms: float = DEFAULT_RTT_MS
    jitter_ms: float = 0.0  #: each one-way delay is RTT/2 plus uniform(-jitter, +jitter)
    burst: float = 1.0  #: mean loss burst in datagrams (1: independent loss)
    seed: int = DEFAULT_LOSS_SEED

    def check(self) -> None:
        """BenchError (one line) for settings no link has."""
        for rate in self.loss:
            if not 0 <= rate <= MAX_LOSS_PCT:
                raise BenchError(f"--loss {rate:g}: each rate must be 0 to {MAX_LOSS_PCT:g} percent")
        if len(set(self.loss)) != len(self.loss):
            raise BenchError("--loss names a rate twice")
        if not 0 < self.rtt_ms <= 10_000:
            raise BenchError(f"--rtt {self.rtt_ms:g}: must be over 0 and at most 10000 ms")
        if not 0 <= self.jitter_ms <= self.rtt_ms / 2:
            raise BenchError(f"--jitter {self.jitter_ms:g}: must be 0 to half the RTT ({self.rtt_ms / 2:g} ms), "
                             "so that no delay is negative")
        if not 1 <= self.burst <= 1000:
            raise BenchError(f"--loss-burst {self.burst:g}: must be 1 to 1000 datagrams")

    @property
    def rto_ns(self) -> int:
        """The first retransmission timeout, KCP's (``ikcp_update_ack``, the form of RFC 6298 and ENet's
        ``roundTripTime + 4 * roundTripTimeVariance``): SRTT + max(interval, 4 RTTVAR), at least MIN_RTO_MS.
        SRTT is the RTT; RTTVAR the mean deviation of the RTT the jitter makes: two independent uniform one-way
        jitters of +-J sum to a triangle whose mean absolute value is 2J/3."""
        rto = self.rtt_ms + max(ACK_INTERVAL_MS, 4 * 2 * self.jitter_ms / 3)
        return round(max(MIN_RTO_MS, rto) * 1_000_000)

    def timeout_ns(self, attempt: int) -> int:
        """How long the ``attempt``-th sending of a datagram (0: the first) waits for its ack before the next."""
        return round(self.rto_ns * BACKOFF ** attempt)

    @property
    def ack_interval_ns(self) -> int:
        return ACK_INTERVAL_MS * 1_000_000

    def summary(self) -> Dict[str, Any]:
        """What results.json's settings record of the link."""
        return {"loss": list(self.loss), "rtt_ms": self.rtt_ms, "jitter_ms": self.jitter_ms,
                "loss_burst": self.burst, "loss_seed": self.seed, "rto_ms": self.rto_ns / 1e6,
                "ack_interval_ms": ACK_INTERVAL_MS, "segment_header_bytes": SEGMENT_HEADER, "ack_bytes": ACK_BYTES,
                "packet_header_bytes": PACKET_HEADER, "ack_bits": ACK_BITS}


def transitions(loss_pct: float, burst: float) -> Tuple[float, float]:
    """The Gilbert-Elliott chain's (P(good -> bad), P(bad -> bad)) per datagram for a stationary loss of
    ``loss_pct`` and a mean burst of ``burst`` datagrams: a burst ends with probability 1/burst, and
    P(good -> bad) = p r / (1 - p) makes the bad state's share p. Every datagram in the bad state is lost,
    none in the good one (Gilbert's model, Elliott's with h = 1, k = 0). ``burst`` 1 is independent loss:
    both probabilities p (the chain whose bursts are 1/(1-p) long on average)."""
    p = loss_pct / 100
    if burst == 1 or p == 0:
        return p, p
    stay = 1 - 1 / burst
    return min(1.0, p * (1 - stay) / (1 - p)), stay


class Channel:
    """One direction of one connection: each datagram sent into it draws its loss (Gilbert-Elliott) and its
    delay, from two seeded streams of its own. The streams depend on the seed, the connection and the
    direction only, so at a given rate the n-th datagram of a channel meets the same fate in every codec's
    replay, and a higher rate loses a superset of what a lower one loses (independent loss)."""

    def __init__(self, settings: LinkSettings, loss_pct: float, conn: Any, direction: str) -> None:
        self._loss = random.Random(f"loss/{settings.seed}/{conn!r}/{direction}")
        self._delay = random.Random(f"delay/{settings.seed}/{conn!r}/{direction}")
        self._enter, self._stay = transitions(loss_pct, settings.burst)
        self._base = settings.rtt_ms * 500_000  #: RTT / 2 in ns
        self._jitter = settings.jitter_ms * 1_000_000
        self.bad = False

    def send(self) -> Tuple[bool, int]:
        """The next datagram's fate: (lost, the one-way delay in ns it has or would have had)."""
        self.bad = self._loss.random() < (self._stay if self.bad else self._enter)
        return self.bad, round(self._base + (2 * self._delay.random() - 1) * self._jitter)


class LinkTally:
    """One codec's replay under one --wire policy at one loss rate: counts per direction (:data:`COUNTS`),
    calls lost by method, the latency loss added to each delivered call (in LATENCY_UNIT_MS), and what a
    receiver of ``+ackdelta`` decoded wrong. Tallies of several traces merge exactly."""

    def __init__(self, delivery: str) -> None:
        self.delivery = delivery
        self.directions: Dict[str, List[int]] = {C2S: [0] * len(COUNTS), S2C: [0] * len(COUNTS)}
        self.lost_by_method: Counter = Counter()
        self.latency: Counter = Counter()
        self.mismatches = 0
        self.problem: Optional[str] = None  #: the first delivered message that did not decode to its call

    def add(self, direction: str, index: int, n: int = 1) -> None:
        """Count ``n`` more of figure ``index`` (:data:`COUNTS`) going ``direction``."""
        self.directions[direction][index] += n

    def delivered(self, direction: str, added_ns: int) -> None:
        """A call reached the receiving application ``added_ns`` later than it would have without loss."""
        self.directions[direction][DELIVERED] += 1
        self.latency[max(0, (added_ns * 10 + 500_000) // 1_000_000)] += 1  # 0.1 ms units, rounded

    def mismatch(self, detail: str) -> None:
        self.mismatches += 1
        self.problem = self.problem or detail

    def export(self) -> Dict[str, Any]:
        return {"delivery": self.delivery, "directions": self.directions, "lost_by_method": self.lost_by_method,
                "latency": self.latency, "mismatches": self.mismatches, "problem": self.problem}

    def merge(self, state: Dict[str, Any]) -> None:
        """Add another trace's replay of the same codec, policy and rate."""
        for direction, counts in state["directions"].items():
            for i, n in enumerate(counts):
                self.directions[direction][i] += n
        self.lost_by_method.update(state["lost_by_method"])
        self.latency.update(state["latency"])
        self.mismatches += state["mismatches"]
        self.problem = self.problem or state["problem"]


def merged(states: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Several replays' states (of one codec, policy and rate) as one."""
    tally = LinkTally(states[0]["delivery"])
    for state in states:
        tally.merge(state)
    return tally.export()


def link_figures(policy: str, loss_pct: float, state: Dict[str, Any]) -> LinkFigures:
    """What results.json records of one replay (``link`` of a codec's result: one per policy and rate)."""
    directions = {d: LinkDirection(**dict(zip(COUNTS[:HEADERS], counts)),
                                   wire_bytes=counts[PAYLOAD] + counts[ACK] + counts[HEADERS])
                  for d, counts in state["directions"].items()}
    totals = {f.name: sum(getattr(d, f.name) for d in directions.values()) for f in fields(LinkDirection)}
    latency = state["latency"]
    return LinkFigures(
        wire=policy, loss_pct=loss_pct, delivery=state["delivery"], **totals,
        lost_by_method=dict(sorted(state["lost_by_method"].items())),
        latency_p50_ms=round(nearest_rank(latency, 50) * LATENCY_UNIT_MS, 1) if latency else 0.0,
        latency_p99_ms=round(nearest_rank(latency, 99) * LATENCY_UNIT_MS, 1) if latency else 0.0,
        mismatches=state["mismatches"], problem=state["problem"], by_direction=directions)


class AckWindow:
    """What a receiver of ``+ackdelta`` datagrams knows to ack: the newest sequence it got (``ack``) and which of
    the ACK_BITS before it it got too (``ack_bits``, bit i: sequence ack - 1 - i), as Gaffer On Games keeps it.
    Sequences here do not wrap (a 16-bit one does; ``sequence_greater_than`` makes that invisible)."""

    def __init__(self) -> None:
        self.ack, self.bits = -1, 0

    def got(self, seq: int) -> None:
        if seq > self.ack:
            shift = seq - self.ack
            self.bits = ((self.bits << shift) | (1 << (shift - 1) if self.ack >= 0 else 0)) & (2 ** ACK_BITS - 1)
            self.ack = seq
        elif seq < self.ack and self.ack - seq <= ACK_BITS:
            self.bits |= 1 << (self.ack - seq - 1)

    def covered(self) -> List[int]:
        """The sequences a packet sent now acks (none before the first arrival)."""
        if self.ack < 0:
            return []
        return [self.ack] + [self.ack - 1 - i for i in range(ACK_BITS) if self.bits >> i & 1]


def header_bytes(transport: Transport, direction: str, payload: int, extra: int) -> int:
    """The headers of one datagram of ``payload`` bytes: the transport's plus ``extra`` (the game's own
    --packet-overhead, and the reliable layer's segment header where it runs)."""
    return int(transport.per_message(direction, payload, extra))
