"""The wire model: how calls leave a game server (per call, or batched per tick into packets) and what
each packet costs in headers (``docs/wire.md``).

A :class:`WirePolicy` is what ``--wire`` names: ``per-call`` (each call its own packet),
``tick:MS`` (the calls of one connection and direction in the same tick window go out together;
windows start at the trace's first timestamp), ``tick:MS+mtu:BYTES`` (a window's messages packed in
order into packets of at most BYTES of payload) and ``tick:auto`` (the tick found in the trace's
server-to-client timestamps, :func:`rpcbench.tick.detect_tick`). Messages in a packet are framed with an unsigned
LEB128 length each; a compressor compresses the packet's whole payload (a stream compressor flushes
once per packet). :class:`WireTally` packs one codec's messages under one policy during the size
pass and keeps figures that merge exactly. :data:`TRANSPORTS` holds every header constant, with its source.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from rpc_capture import C2S, S2C, Call

from .codec import Streams
from .errors import BenchError
from .histogram import nearest_rank, nearest_ranks
from .results_wire import WireDirection, WireFigures
from .span import Names, fold

PER_CALL = "per-call"
SIZE_CLASSES = (125, 65535)  #: WebSocket's 7-bit and 16-bit payload lengths (RFC 6455 5.2): packets counted by class
LATENCY_UNIT_MS = 0.1  #: added latency is kept as a histogram in these units
_UNIT_NS = round(LATENCY_UNIT_MS * 1_000_000)
HOLD = 512  #: closed batches a compressing tally holds, then compresses together (:meth:`WireTally.flush`)
_POLICY = re.compile(r"^tick:(auto|\d+(?:\.\d+)?)(?:\+mtu:(\d+))?$")


@dataclass(frozen=True)
class Transport:
    """What each packet costs on the wire besides its payload (one packet = one datagram, segment or
    WebSocket message), and where the numbers come from."""

    name: str
    header: int  #: IP + UDP/TCP bytes per packet, both directions
    c2s_extra: int  #: more bytes per client-to-server packet (WebSocket's mask key)
    websocket_length: bool  #: add the WebSocket frame header, whose length field grows with the payload
    text: str
    tls: int = 0  #: TLS record bytes per packet (one record per flush)

    def per_message(self, direction: str, payload: float, extra: int = 0) -> float:
        """Header bytes of one packet of ``payload`` bytes going ``direction`` (``extra``: the game's own header)."""
        frame = (2 if payload <= 125 else 4 if payload <= 65535 else 10) if self.websocket_length else 0
        return self.header + self.tls + frame + (self.c2s_extra if direction == C2S else 0) + extra

    def class_bytes(self, direction: str, classes: Sequence[int], extra: int = 0) -> int:
        """Header bytes of packets counted by WebSocket size class (``classes``: up to 125 B, 65,535 B, beyond)."""
        return int(sum(n * self.per_message(direction, size, extra) for n, size in zip(classes, (0, 126, 65536))))


_TCP = "IPv4 20 B (RFC 791) + TCP 20 B (RFC 793/9293)"
_WS = ("WebSocket frame header (RFC 6455 5.2): 2 B for a payload up to 125 B, 4 B up to 65,535 B, 10 B beyond, "
       "+ 4 B mask key on client-to-server frames")
TRANSPORTS = {
    "none": Transport("none", 0, 0, False, "payload only, no transport headers"),
    "udp": Transport("udp", 28, 0, False, "IPv4 20 B (RFC 791) + UDP 8 B (RFC 768) per datagram (IPv6: 48 B, "
                     "RFC 8200)"),
    "tcp": Transport("tcp", 40, 0, False, f"{_TCP} per segment, one flush per segment, no IP or TCP options "
                     "(Linux adds 12 B of timestamps)"),
    "websocket": Transport("websocket", 40, 4, True, f"TCP/IPv4 40 B + {_WS}"),
    "wss": Transport("wss", 40, 4, True, f"TCP/IPv4 40 B + {_WS} + TLS 1.3 record 22 B (RFC 8446: 5 B header, "
                     "1 B content type, 16 B AEAD tag)", tls=22),
}


@dataclass(frozen=True)
class WirePolicy:
    """One ``--wire`` policy; ``tick:auto`` carries the tick found for its trace once resolved."""

    text: str  #: as written
    tick_ms: Optional[float] = None  #: None: per call (or tick:auto before it is resolved)
    mtu: Optional[int] = None
    auto: bool = False
    quantized: Tuple[str, ...] = ()  #: directions whose timestamps are already the flush (no second tick charged)
    confidence: Optional[float] = None  #: tick:auto: how sure the detection is (0-1)

    @property
    def batched(self) -> bool:
        return self.text != PER_CALL


def parse_policies(text: str) -> Tuple[WirePolicy, ...]:
    """``--wire``'s comma-separated policies; BenchError (one line) for anything else."""
    policies: List[WirePolicy] = []
    for part in (p.strip() for p in text.split(",")):
        if part == PER_CALL:
            policies.append(WirePolicy(part))
            continue
        match = _POLICY.match(part)
        if not match:
            raise BenchError(f"--wire {part!r}: expected per-call, tick:MS, tick:MS+mtu:BYTES or tick:auto")
        tick, mtu = match.group(1), match.group(2)
        if tick != "auto" and not 0 < float(tick) <= 10_000:
            raise BenchError(f"--wire {part!r}: the tick must be over 0 and at most 10000 ms")
        if mtu is not None and not 16 <= int(mtu) <= 65_507:
            raise BenchError(f"--wire {part!r}: the MTU must be 16 to 65507 bytes of payload")
        policies.append(WirePolicy(part, None if tick == "auto" else float(tick), int(mtu) if mtu else None,
                                   tick == "auto"))
    if len({p.text for p in policies}) != len(policies):
        raise BenchError(f"--wire {text!r} names a policy twice")
    return tuple(policies)


def leb128(n: int) -> bytes:
    """``n`` as an unsigned LEB128 varint: 7 bits a byte, low first, high bit set on all but the last."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SHORT = tuple(bytes((n,)) for n in range(0x80))  #: the one-byte prefixes, built once (most messages are short)


def framed(messages: Iterable[bytes]) -> List[bytes]:
    """Each message with its LEB128 length in front, as they go into a packet's payload."""
    return [(_SHORT[len(m)] if len(m) < 0x80 else leb128(len(m))) + m for m in messages]


def unframe(payload: bytes) -> List[bytes]:
    """The messages of a LEB128-framed payload (ValueError if it is not one). A one-byte length (a message under
    128 B, most of them) takes the short path: this runs for every packet a client decodes in the timing."""
    out, at, end = [], 0, len(payload)
    try:
        while at < end:
            n = payload[at]
            at += 1
            if n & 0x80:
                n, shift = n & 0x7F, 7
                while True:
                    byte = payload[at]
                    at += 1
                    n |= (byte & 0x7F) << shift
                    shift += 7
                    if not byte & 0x80:
                        break
            if at + n > end:
                raise ValueError("a length prefix runs past the payload")
            out.append(payload[at:at + n])
            at += n
    except IndexError:
        raise ValueError("the payload ends inside a length prefix") from None
    return out


def packets(sizes: Sequence[int], mtu: Optional[int]) -> List[Tuple[int, int, int]]:
    """Framed messages (their sizes) packed in order into packets of at most ``mtu`` payload bytes:
    (first, past the last, packets it takes); a message over the MTU goes alone, fragmented into
    ceil(size / mtu) packets. The usual case, messages that fit one packet together, is answered first."""
    if not sizes:
        return []
    if mtu is None or sum(sizes) <= mtu:
        return [(0, len(sizes), 1)]
    out: List[Tuple[int, int, int]] = []
    start = size = 0
    for i, n in enumerate(sizes):
        if i > start and size + n > mtu:
            out.append((start, i, 1))
            start, size = i, 0
        if n > mtu:
            out.append((i, i + 1, -(-n // mtu)))
            start, size = i + 1, 0
            continue
        size += n
    if start < len(sizes):
        out.append((start, len(sizes), 1))
    return out


def framed_size(n: int) -> int:
    """Bytes of an ``n``-byte message with its LEB128 length prefix."""
    return n + ((n.bit_length() + 6) // 7 or 1)


_CALLS, _PACKETS, _PAYLOAD, _FRAGMENTED = 0, 1, 2, 3  #: per direction: then packets by size class (3)


#: a batch to send: (connection and direction, window, its calls' times, their rows: what the caller gave with each
#: call; the size pass gives each codec's message, the packet timing the call itself)
Closed = Tuple[Any, int, List[int], List[Any]]


class Batcher:
    """The tick windows of one batched policy over a share of the calls, shared by every codec's tally (the
    windows depend on the calls' times only): which batch each call closes, the latency batching adds, and
    the calls' messages (a row per call, a message per codec) until their batch is sent."""

    def __init__(self, policy: WirePolicy, origin: Optional[int] = None) -> None:
        self.policy = policy
        self.origin = origin  #: the trace's first timestamp: windows start there
        self.latency: Counter = Counter()  #: added latency in LATENCY_UNIT_MS -> calls
        self._tick_ns = round(policy.tick_ms * 1_000_000)  # type: ignore[operator]
        self._open: Dict[Any, Tuple[int, List[int], List[Any]]] = {}

    def step(self, call: Call, row: Any = ()) -> Optional[Closed]:
        """Take ``call`` (and ``row``, its messages) into its connection's open batch; the batch it closes
        (to send), if any."""
        t = call.t
        if self.origin is None:
            self.origin = t
        key = (call.conn, call.dir)
        window = (t - self.origin) // self._tick_ns
        batch = self._open.get(key)
        if batch is not None and window <= batch[0]:  # a late call (stamped before its window) joins the open batch
            batch[1].append(t)
            batch[2].append(row)
            return None
        self._open[key] = (window, [t], [row])
        return None if batch is None else self._close(key, batch)

    def rest(self) -> List[Closed]:
        """Every batch still open (the end of the calls), in a fixed order."""
        out = [self._close(key, batch) for key, batch in sorted(self._open.items(), key=lambda kv: repr(kv[0]))]
        self._open.clear()
        return out

    def flush_time(self, key: Any, window: int, times: Sequence[int]) -> int:
        """When a batch leaves: at the end of its tick window, or at its last call where the direction's
        timestamps are already the flush (quantized)."""
        return max(times) if key[1] in self.policy.quantized else (self.origin or 0) + (window + 1) * self._tick_ns

    def _close(self, key: Any, batch: Tuple[int, List[int], List[Any]]) -> Closed:
        window, times, rows = batch
        flush = self.flush_time(key, window, times)
        latency = self.latency
        for t in times:
            latency[max(0, (flush - t + _UNIT_NS // 2) // _UNIT_NS)] += 1
        return key, window, times, rows


class WireTally:
    """One codec's messages under one policy: packets, payload bytes and size classes per direction, and the
    added latency, kept so that tallies of consecutive calls merge exactly (a whole trace when batched).

    Per call, :meth:`add` makes each message a packet of its own (the codec's bytes). Batched, :meth:`send`
    sends the codec's messages of a batch a :class:`Batcher` closed.
    ``compressor``: the codec's compressor when it compresses (each packet's payload whole, with a context per
    connection and direction for a stream compressor); messages are then the inner codec's bytes.
    """

    def __init__(self, policy: WirePolicy, compressor: Any = None) -> None:
        self.policy = policy
        self.compressor: Any = compressor if policy.batched else None
        self.directions: Dict[str, List[int]] = {}
        self.payloads: Counter = Counter()  #: payload bytes per packet -> packets
        self.latency: Counter = Counter()  #: added latency in LATENCY_UNIT_MS -> calls
        self.ns = 0  #: framing, compressing and checking packets
        self.problem: Optional[str] = None  #: the first packet that did not give its messages back
        self._held: List[Tuple[Any, Sequence[bytes]]] = []  #: closed batches of a compressing tally, not yet sent
        #: a stream compressor's context per connection and direction (None: one compressor for all)
        self._sessions = Streams(compressor.connection) if getattr(compressor, "per_connection", False) else None

    _STATE = ("directions", "payloads", "latency", "ns", "problem")

    def add(self, call: Call, message: bytes) -> None:
        """One encoded call sent alone."""
        figures = self._direction(call.dir)
        self._packet(figures, len(message), 1)
        figures[_CALLS] += 1
        self.latency[0] += 1

    def add_all(self, keys: np.ndarray, calls: np.ndarray, payload: np.ndarray, names: Names, weights: np.ndarray,
                sizes: Dict[int, int]) -> None:
        """:meth:`add` of encoded calls of ``weights`` bytes each (as floats), ``keys`` the span key of each
        (:class:`rpcbench.span.Names` tells their directions; ``calls`` and ``payload``: per key, how many and their
        bytes); ``sizes``: their histogram."""
        classes = (weights > SIZE_CLASSES[0]).astype(np.intp) + (weights > SIZE_CLASSES[1])
        by_class = np.bincount(keys * 3 + classes, minlength=3 * len(calls)).reshape(len(calls), 3)
        figures = np.column_stack((calls, calls, payload, np.zeros(len(calls), np.int64), by_class)).astype(np.int64)
        fold(self.directions, keys, calls, names.dir_of, names.dirs, figures)
        self.payloads.update(sizes)
        self.latency[0] += len(weights)

    def send(self, key: Any, messages: Sequence[bytes]) -> None:
        """Send the codec's ``messages`` of a closed batch of connection and direction ``key`` (those of its calls
        that encoded; none: nothing is sent): packed, framed, compressed when the codec compresses. A compressing
        tally holds the batch until it has HOLD of them (:meth:`flush`)."""
        if not messages:
            return
        if self.compressor is not None:
            self._held.append((key, messages))
            if len(self._held) >= HOLD:
                self.flush()
            return
        t0 = time.perf_counter_ns()
        sizes = [n + 1 if n < 0x80 else framed_size(n) for n in map(len, messages)]
        figures = self._direction(key[1])
        for start, stop, pieces in packets(sizes, self.policy.mtu):
            self._packet(figures, sum(sizes[start:stop]), pieces)
        figures[_CALLS] += len(messages)
        self.ns += time.perf_counter_ns() - t0

    def flush(self) -> None:
        """Compress, check and count the batches held, in the order they were sent (at the end of the calls,
        every one). Compressing them together, rather than each between other codecs' work on the next
        calls, keeps the compressor's tables in the CPU's caches: the same bytes, for less time."""
        t0 = time.perf_counter_ns()
        held, self._held, mtu = self._held, [], self.policy.mtu
        for key, messages in held:
            frames = framed(messages)
            figures = self._direction(key[1])
            for start, stop, pieces in packets([len(f) for f in frames], mtu):
                self._packet(figures, self._compressed(key, frames[start:stop]), pieces)
            figures[_CALLS] += len(messages)
        self.ns += time.perf_counter_ns() - t0

    def _compressed(self, key: Any, frames: List[bytes]) -> int:
        """Bytes of one packet's payload (``frames``: its framed messages) compressed whole, checked.

        The check: the packet decompresses to exactly the payload that went in. The payload is the messages,
        each behind its LEB128 length, and that framing is undone exactly (:func:`unframe`; tests/test_wire.py
        checks it on random messages), so equal bytes give back every message of the packet, in order:
        the same proof as unframing the decompressed bytes and comparing the messages, for less work.
        """
        session = self._sessions[key] if self._sessions is not None else self.compressor
        payload = b"".join(frames)
        packed = session.compress(payload)
        if self.problem is None and session.decompress(packed) != payload:
            self.problem = f"a {key[1]} packet of {len(frames)} messages did not decode back to them"
        return len(packed)

    def _packet(self, figures: List[int], payload: int, pieces: int) -> None:
        """Count a packet (``pieces`` of one fragmented message) in its direction's ``figures``."""
        figures[_PACKETS] += pieces
        figures[_PAYLOAD] += payload
        if pieces > 1:
            figures[_FRAGMENTED] += pieces
        share = -(-payload // pieces)
        figures[4 if share <= SIZE_CLASSES[0] else 5 if share <= SIZE_CLASSES[1] else 6] += pieces
        self.payloads[share] += pieces

    def _direction(self, direction: str) -> List[int]:
        figures = self.directions.get(direction)
        if figures is None:
            figures = self.directions[direction] = [0] * 7
        return figures

    def export(self) -> Dict[str, Any]:
        """The figures (no codec objects): the tally must be closed."""
        return {name: getattr(self, name) for name in self._STATE}

    def merge(self, state: Dict[str, Any]) -> None:
        """Add another tally's figures of the same codec and policy (another share of the calls)."""
        for direction, figures in state["directions"].items():
            mine = self._direction(direction)
            for i, n in enumerate(figures):
                mine[i] += n
        self.payloads.update(state["payloads"])
        self.latency.update(state["latency"])
        self.ns += state["ns"]
        self.problem = self.problem or state["problem"]


def wire_figures(policy: WirePolicy, state: Dict[str, Any], transport: Transport, extra: int = 0) -> WireFigures:
    """What results.json records of one codec under one policy: totals, per direction (with the header
    bytes of ``transport`` plus ``extra`` per packet), payload per packet and the latency batching adds."""
    directions: Dict[str, WireDirection] = {}
    for direction in (C2S, S2C):
        figures = state["directions"].get(direction, [0] * 7)
        headers = transport.class_bytes(direction, figures[4:], extra)
        directions[direction] = WireDirection(figures[_CALLS], figures[_PACKETS], figures[_PAYLOAD],
                                              figures[_FRAGMENTED], tuple(figures[4:]), figures[_PAYLOAD] + headers)
    calls = sum(d.calls for d in directions.values())
    latency = state["latency"]
    payload_p50, payload_p99 = nearest_ranks(state["payloads"], (50, 99))
    totals = {key: sum(getattr(d, key) for d in directions.values())
              for key in ("packets", "payload_bytes", "fragmented", "wire_bytes")}
    return WireFigures(
        wire=policy.text, tick_ms=policy.tick_ms, mtu=policy.mtu, tick_confidence=policy.confidence,
        quantized=tuple(policy.quantized), transport=transport.name, packet_overhead=extra, calls=calls, **totals,
        payload_p50=payload_p50, payload_p99=payload_p99,
        latency_mean_ms=sum(int(k) * n for k, n in latency.items()) * LATENCY_UNIT_MS / calls if calls else 0.0,
        latency_p99_ms=nearest_rank(latency, 99) * LATENCY_UNIT_MS, packet_ns=state["ns"], problem=state["problem"],
        by_direction=directions)


def reprice(figures: WireFigures, transport: Transport, extra: int) -> WireFigures:
    """Recorded wire figures with the headers of another transport (size classes make it exact)."""
    directions = {d: replace(f, wire_bytes=f.payload_bytes + transport.class_bytes(d, f.size_classes, extra))
                  for d, f in figures.by_direction.items()}
    return replace(figures, transport=transport.name, packet_overhead=extra, by_direction=directions,
                   wire_bytes=sum(f.wire_bytes for f in directions.values()))
