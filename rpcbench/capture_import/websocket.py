"""WebSocket (RFC 6455) messages of one captured connection, by wsproto, with the HTTP upgrade read by h11.

Both directions are parsed from the captured bytes: client frames (masked) by a parser in the
server's role, server frames by one in the client's. permessage-deflate (RFC 7692) is set up
from the server's 101 response (``Sec-WebSocket-Extensions``), so context takeover and window
sizes are as negotiated. A tap placed before the deflate extension sees each data frame's
payload as sent (unmasked, still compressed) and the size of every frame header: a message's
``wire`` is its frames' payloads joined, as on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import h11
from wsproto.extensions import Extension, PerMessageDeflate
from wsproto.frame_protocol import FrameProtocol, Opcode, ParseFailed, RsvBits

from .tcp import Stream

_DATA = (Opcode.TEXT, Opcode.BINARY, Opcode.CONTINUATION)


class NotWebSocket(ValueError):
    """The connection's first bytes are no WebSocket upgrade."""


class _Tap(Extension):
    """Keeps what passes through it: data frame payloads as sent, and frame header bytes."""

    name = "rpcbench-capture-tap"

    def __init__(self, masked: bool) -> None:
        self.masked = masked
        self.raw = bytearray()  #: the current message's payload bytes as sent
        self.header_bytes = 0
        self.promised = 0  #: payload bytes the frame headers so far announced
        self.seen = 0  #: payload bytes that arrived
        self.compressed = False  #: a message had RSV1 set (permessage-deflate compressed it)
        self._data = False

    def enabled(self) -> bool:
        return True

    def offer(self) -> bool:
        return False  # never negotiated: it only watches

    def frame_inbound_header(self, proto: object, opcode: Opcode, rsv: RsvBits, payload_length: int) -> RsvBits:
        extended = 0 if payload_length < 126 else 2 if payload_length < 65536 else 8  # wsproto refuses longer forms
        self.header_bytes += 2 + extended + (4 if self.masked else 0)
        self.promised += payload_length
        self.compressed |= rsv.rsv1
        self._data = opcode in _DATA
        return RsvBits(False, False, False)

    def frame_inbound_payload_data(self, proto: object, data: bytes) -> bytes:
        self.seen += len(data)
        if self._data:
            self.raw += data
        return data

    def frame_inbound_complete(self, proto: object, fin: bool) -> None:
        return None


@dataclass
class Upgrade:
    """Where the frames start in each direction and the negotiated permessage-deflate, if any."""

    c2s_start: int = 0
    s2c_start: int = 0
    deflate: Optional[str] = None  #: the server's Sec-WebSocket-Extensions item for permessage-deflate
    seen: bool = False  #: the handshake was captured (else the capture started after it)


def upgrade(c2s: bytes, s2c: bytes, from_start: bool) -> Upgrade:
    """The HTTP upgrade at the start of a connection; NotWebSocket if it is something else.
    ``from_start``: the connection's first byte was captured (else its upgrade may have been missed)."""
    if not c2s.startswith(b"GET "):
        if from_start:
            raise NotWebSocket(f"its first bytes ({c2s[:8].hex(' ')}) are no HTTP upgrade")
        return Upgrade()
    server = h11.Connection(h11.SERVER)
    server.receive_data(c2s)
    try:
        request = server.next_event()
        if not isinstance(request, h11.Request) or dict(request.headers).get(b"upgrade", b"").lower() != b"websocket":
            raise NotWebSocket("its first request is no WebSocket upgrade (plain HTTP?)")
        client = h11.Connection(h11.CLIENT)
        client.send(request)
        client.receive_data(s2c)
        response = client.next_event()
    except h11.ProtocolError as e:
        raise NotWebSocket(f"its HTTP upgrade does not parse ({e})") from None
    if not isinstance(response, h11.InformationalResponse) or response.status_code != 101:
        raise NotWebSocket("the server did not answer its upgrade with 101 Switching Protocols")
    offered = b", ".join(v for k, v in response.headers if k == b"sec-websocket-extensions").decode("latin-1")
    deflate = next((item.strip() for item in offered.split(",") if item.strip().startswith("permessage-deflate")),
                   None)
    if deflate is not None:
        try:
            PerMessageDeflate().finalize(deflate)
        except ValueError as e:
            raise NotWebSocket(f"its permessage-deflate parameters do not parse ({deflate[:80]!r}: {e})") from None
    return Upgrade(len(c2s) - len(server.trailing_data[0]), len(s2c) - len(client.trailing_data[0]), deflate, True)


@dataclass
class Received:
    """One direction's messages: (end offset in the stream, payload, wire bytes) each, and the rest."""

    messages: List[Tuple[int, bytes, bytes]] = field(default_factory=list)
    header_bytes: int = 0
    partial: int = 0  #: a message or frame the stream ended inside
    compressed: bool = False  #: some message had RSV1 set (permessage-deflate compressed it)
    error: Optional[str] = None  #: why the rest of the stream could not be parsed


def messages(stream: Stream, start: int, from_server: bool, deflate: Optional[str]) -> Received:
    """The messages of one direction, frames parsed from ``start`` (after the upgrade). ``deflate``: the
    negotiated permessage-deflate; a capture that missed the upgrade assumes its defaults (RFC 7692)."""
    tap = _Tap(masked=not from_server)
    pmd = PerMessageDeflate()
    pmd.finalize(deflate or "permessage-deflate")
    extensions: List[Extension] = [tap, pmd]
    parser = FrameProtocol(client=from_server, extensions=extensions)
    out, pos = Received(), start
    pieces: List[bytes] = []
    try:
        for end in stream.ends:
            if end <= pos:
                continue
            parser.receive_bytes(stream.data[pos:end])
            pos = end
            for frame in parser.received_frames():
                if frame.opcode not in _DATA:
                    continue
                payload = frame.payload
                pieces.append(payload.encode("utf-8") if isinstance(payload, str) else bytes(payload))  # type: ignore[arg-type]
                if frame.message_finished:
                    out.messages.append((end, b"".join(pieces), bytes(tap.raw)))
                    pieces = []
                    tap.raw.clear()
    except ParseFailed as e:
        out.error = f"stream offset {pos}: {e}"
    out.header_bytes, out.compressed = tap.header_bytes, tap.compressed
    cut = tap.promised > tap.seen or pos - start > tap.header_bytes + tap.promised  # a frame the stream ends inside
    out.partial = int(bool(pieces or tap.raw) or (out.error is None and cut))
    return out
