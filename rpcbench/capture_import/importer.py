"""A packet capture becomes a trace: packets -> connections -> streams -> messages -> calls.

Direction comes from the server port, the connection from the 4-tuple (its id is the client's
``address:port``), ``t`` from the capture's timestamps: for a TCP message, the time the last
of its bytes had been captured (retransmissions do not delay it, out-of-order segments do).
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple

from rpc_capture import C2S, S2C, Call

from ..environment import file_sha256
from ..errors import BenchError
from . import framing, websocket
from .decode import Decoder
from .segments import LINK_TYPES, TCP, UDP, Segment, segment
from .pcap import Capture, open_capture
from .tcp import HalfConnection, Stream

log = logging.getLogger("rpcbench")

FRAMINGS = ("websocket", "u16", "u32", "varint", "udp")


class Message(NamedTuple):
    """One message cut out of the capture, before decoding."""

    t: int
    frame: int  #: the capture packet that completed it
    conn: str
    dir: str
    offset: Optional[int]  #: the stream offset it had ended by (UDP: None)
    payload: bytes  #: what the game's codec decodes (deflate undone)
    wire: bytes  #: as captured


@dataclass
class Tally:
    """What the import counted: the header's ``capture`` object, less what the options say."""

    packets: Dict[str, int] = field(default_factory=lambda: {C2S: 0, S2C: 0})
    header_bytes: Dict[str, int] = field(default_factory=lambda: {C2S: 0, S2C: 0})
    connections: int = 0
    partial_dropped: int = 0
    deflate: bool = False


@dataclass
class Connection:
    """The two directions of one TCP connection, as captured."""

    c2s: HalfConnection = field(default_factory=HalfConnection)
    s2c: HalfConnection = field(default_factory=HalfConnection)


def read_capture(cap: Capture, server_port: int, framing_name: str, tally: Tally
                 ) -> Tuple[Dict[str, Connection], List[Message]]:
    """The capture's TCP connections to or from ``server_port`` (keyed by client endpoint), or its UDP
    datagrams as messages, per ``framing_name``."""
    want = UDP if framing_name == "udp" else TCP
    connections: Dict[str, Connection] = {}
    datagrams: List[Message] = []
    for frame in cap.frames():
        if frame.link_type not in LINK_TYPES:
            raise BenchError(f"{cap.path}: link type {frame.link_type} is not supported (supported: "
                             f"{', '.join(sorted({name for name, _ in LINK_TYPES.values()}))})")
        seg = segment(frame)
        ours = seg is not None and server_port in (seg.sport, seg.dport)
        if frame.wire_len > len(frame.data) and (seg is None or ours):
            raise BenchError(f"{cap.path}: packet {frame.number} was captured with {len(frame.data)} of its "
                             f"{frame.wire_len} bytes: the snap length cut payloads (record with tcpdump -s 0)")
        if seg is None or not ours or seg.proto != want:
            continue
        direction = C2S if seg.dport == server_port else S2C
        client = seg.src if direction == C2S else seg.dst
        if want == UDP:
            if seg.payload:
                _count(tally, direction, seg)
                datagrams.append(Message(seg.t, seg.frame, client, direction, None, seg.payload, seg.payload))
            continue
        conn = connections.setdefault(client, Connection())
        half = conn.c2s if direction == C2S else conn.s2c
        half.add(seg.seq, seg.flags, seg.t, seg.frame, seg.payload, seg.header_bytes)
    return connections, datagrams


def _count(tally: Tally, direction: str, seg: Segment) -> None:
    tally.packets[direction] += 1
    tally.header_bytes[direction] += seg.header_bytes


def tcp_messages(conn_id: str, conn: Connection, framing_name: str, endian: str, tally: Tally) -> Iterator[Message]:
    """The messages of one TCP connection, both directions."""
    streams = {C2S: conn.c2s.stream(), S2C: conn.s2c.stream()}
    for direction, half in ((C2S, conn.c2s), (S2C, conn.s2c)):
        tally.packets[direction] += half.packets
        tally.header_bytes[direction] += half.header_bytes
        _refuse_tls(conn_id, streams[direction])
        hole = streams[direction].hole
        if hole is not None:
            tally.partial_dropped += 1
            log.warning("connection %s %s: a segment was never captured at stream offset %d; the %d bytes "
                        "captured after it are skipped", conn_id, direction, hole[0], hole[1])
    if framing_name == "websocket":
        yield from _websocket_messages(conn_id, streams, tally)
        return
    read_length = framing.prefix_reader(framing_name, endian)
    for direction, stream in streams.items():
        try:
            found, left = framing.split(stream.data, read_length)
        except ValueError as e:
            raise BenchError(f"connection {conn_id} {direction}: {e}: not --framing {framing_name}") from None
        tally.partial_dropped += bool(left)
        tally.header_bytes[direction] += len(stream.data) - left - sum(len(m.payload) for m in found)
        for m in found:
            yield Message(stream.time_at(m.end), stream.frame_at(m.end), conn_id, direction, m.end, m.payload,
                          m.payload)


def _websocket_messages(conn_id: str, streams: Dict[str, Stream], tally: Tally) -> Iterator[Message]:
    try:
        up = websocket.upgrade(streams[C2S].data, streams[S2C].data, streams[C2S].from_start)
    except websocket.NotWebSocket as e:
        raise BenchError(f"connection {conn_id} is not WebSocket: {e}") from None
    for direction, start in ((C2S, up.c2s_start), (S2C, up.s2c_start)):
        stream = streams[direction]
        got = websocket.messages(stream, start, direction == S2C, up.deflate)
        tally.header_bytes[direction] += got.header_bytes
        tally.partial_dropped += got.partial
        tally.deflate |= up.deflate is not None or got.compressed
        if got.error:
            tally.partial_dropped += 1
            log.warning("connection %s %s: WebSocket frames stop parsing at %s; the rest is skipped",
                        conn_id, direction, got.error)
        for end, payload, wire in got.messages:
            yield Message(stream.time_at(end), stream.frame_at(end), conn_id, direction, end, payload, wire)


def _refuse_tls(conn_id: str, stream: Stream) -> None:
    """TLS (wss, HTTPS) carries no readable message: refused, naming the connection."""
    head = stream.data[:3]
    if len(head) == 3 and head[0] in (0x16, 0x17) and head[1] == 3 and head[2] <= 4:
        raise BenchError(f"connection {conn_id} is TLS-encrypted (a TLS record at its start): capture the "
                         f"plaintext instead (ws:// behind the TLS terminator, or the server's own port)")


@dataclass
class Undecoded:
    """Payloads the game's codec could not decode: how many, and the first one."""

    count: int = 0
    first: Optional[str] = None


def calls(messages: List[Message], decode: Decoder, undecoded: Undecoded) -> Iterator[Call]:
    """The messages decoded, in time order; those that do not decode counted and skipped."""
    for m in sorted(messages, key=lambda m: m.t):  # stable: a stream's messages of one time stay in order
        try:
            method, args = decode(m.payload)
        except Exception as e:  # noqa: BLE001 - any codec, any failure: counted, reported once
            undecoded.count += 1
            if undecoded.first is None:
                where = "a datagram" if m.offset is None else f"the message ending by stream offset {m.offset}"
                undecoded.first = (f"packet {m.frame}, connection {m.conn} {m.dir}, {where}: "
                                   f"{type(e).__name__}: {str(e)[:120]}")
            continue
        yield Call(method, args, m.t, m.dir, m.conn, m.wire)


def capture_header(path: str, cap: Capture, options: Dict[str, Any], tally: Tally, messages: int,
                   undecoded: int) -> Dict[str, Any]:
    """The trace header's ``"capture"`` object (docs/capture.md, "run_bench.py import")."""
    return {"file": os.path.basename(path), "sha256": file_sha256(path), "link_type": cap.link_types[0],
            **options, "deflate": tally.deflate, "packets": tally.packets, "header_bytes": tally.header_bytes,
            "connections": tally.connections, "messages": messages, "partial_dropped": tally.partial_dropped,
            "undecoded": undecoded, "truncated_bytes": cap.truncated_bytes}


def import_capture(path: str, out: str, server_port: int, framing_name: str, decode: Decoder,
                   options: Dict[str, Any], endian: str = "big") -> Dict[str, Any]:
    """Write the trace of the capture at ``path`` to ``out`` (through a temporary file, renamed only
    when everything succeeded); returns the header's ``capture`` object. ``options``: what the
    header records of how the import was asked (framing, decode...)."""
    from rpc_capture import TraceWriter

    cap = open_capture(path)
    tally = Tally()
    connections, messages = read_capture(cap, server_port, framing_name, tally)
    if not connections and not messages:
        raise BenchError(f"{path}: no {'UDP' if framing_name == 'udp' else 'TCP'} payload to or from port "
                         f"{server_port} (check --server-port and --framing)")
    tally.connections = len(connections) or len({m.conn for m in messages})
    for conn_id, conn in connections.items():
        messages.extend(tcp_messages(conn_id, conn, framing_name, endian, tally))
    if not messages:
        raise BenchError(f"{path}: no complete --framing {framing_name} message in the {tally.connections} "
                         f"connection(s) on port {server_port} (is that the framing the game uses?)")
    undecoded = Undecoded()
    decoded = list(calls(messages, decode, undecoded))
    if not decoded:
        raise BenchError(f"{path}: none of the {len(messages)} messages decoded with --decode "
                         f"{options.get('decode')} (first: {undecoded.first or 'none'})")
    header = capture_header(path, cap, options, tally, len(decoded), undecoded.count)
    start = _dt.datetime.fromtimestamp(decoded[0].t / 1e9, _dt.timezone.utc).isoformat(timespec="milliseconds")
    tmp = f"{out}.part"
    try:
        with TraceWriter(tmp, {"generator": "rpcbench import", "capture_start": start, "capture": header}) as writer:
            for call in decoded:
                writer.write(call)
        os.replace(tmp, out)
    except OSError as e:
        raise BenchError(f"cannot write {out}: {e.strerror or e}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    if cap.truncated_bytes:
        log.warning("%s: the capture is cut short: its last %d bytes (an incomplete packet) were left out; "
                    "every complete packet was imported", path, cap.truncated_bytes)
    if undecoded.count:
        log.warning("%d payload(s) did not decode with --decode %s and were skipped; the first: %s",
                    undecoded.count, options.get("decode"), undecoded.first)
    return header
