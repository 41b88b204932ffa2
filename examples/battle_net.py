"""The transports the example battle is played over, and the log of what each side sent.

``examples/battle_server.py`` and ``examples/battle_bot.py`` take ``--transport``:

* ``tcp``: a 4-byte big-endian length, then the message (the default, as before);
* ``ws``: one WebSocket text message per game message (the ``websockets`` library);
* ``ws-deflate``: the same with permessage-deflate (RFC 7692), context takeover on: each message is
  compressed against the ones sent before it on its connection;
* ``udp``: one datagram per message; the server tells its clients apart by their address.

A message is the UTF-8 JSON ``{"m": method, "a": args}`` on every transport. With ``--log-sent FILE``
each side writes one JSON line per message it sent: ``dir`` (c2s or s2c), ``client_port`` (the
client's port: which connection), ``method``, ``payload`` (base64 of the message) and, where the
bytes that went on the wire differ (permessage-deflate), ``wire`` (base64 of the frame's payload as
sent). Tests compare a capture imported from ``tcpdump`` with these logs
(``tests/data/captures/record.py`` records them).
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
from typing import IO, Any, Awaitable, Callable, List, Optional, Tuple

from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.extensions.base import Extension
from websockets.frames import Frame, Opcode

TRANSPORTS = ("tcp", "ws", "ws-deflate", "udp")
FRAME = struct.Struct(">I")
MAX_FRAME = 1 << 20
Received = Optional[Tuple[str, Any]]  #: (method, args), or None at the end of the connection


def message(method: str, args: Any) -> bytes:
    """One game message as sent on every transport: UTF-8 JSON ``{"m": method, "a": args}``."""
    return json.dumps({"m": method, "a": args}, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def parse(data: bytes) -> Tuple[str, Any]:
    msg = json.loads(data)
    return msg["m"], msg.get("a")


class SentLog:
    """One JSON line per message sent (see the module's docstring); a no-op without a file."""

    def __init__(self, out: Optional[IO[str]], direction: str) -> None:
        self.out, self.direction = out, direction

    def write(self, client_port: int, payload: bytes, wire: Optional[bytes] = None) -> None:
        if self.out is None:
            return
        entry = {"dir": self.direction, "client_port": client_port, "method": parse(payload)[0],
                 "payload": base64.b64encode(payload).decode("ascii")}
        if wire is not None and wire != payload:
            entry["wire"] = base64.b64encode(wire).decode("ascii")
        self.out.write(json.dumps(entry) + "\n")


class Link:
    """One connection, either side: ``send`` queues a message (never waits), ``recv`` gives the next one."""

    def __init__(self, client_port: int, log: SentLog) -> None:
        self.client_port, self.log = client_port, log
        self.inbox: "asyncio.Queue[Received]" = asyncio.Queue()
        self.closing = False

    def send(self, payload: bytes) -> None:
        raise NotImplementedError

    async def recv(self) -> Received:
        return await self.inbox.get()

    async def drain(self) -> None:
        """Wait until what was sent left this process."""

    def close(self) -> None:
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing


class StreamLink(Link):
    """Length-prefixed messages on a TCP stream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_port: int,
                 log: SentLog) -> None:
        super().__init__(client_port, log)
        self.reader, self.writer = reader, writer

    def send(self, payload: bytes) -> None:
        self.writer.write(FRAME.pack(len(payload)) + payload)
        self.log.write(self.client_port, payload)

    async def recv(self) -> Received:
        try:
            (n,) = FRAME.unpack(await self.reader.readexactly(FRAME.size))
            if n > MAX_FRAME:
                raise ValueError(f"frame of {n} bytes")
            return parse(await self.reader.readexactly(n))
        except (asyncio.IncompleteReadError, ConnectionError):
            return None

    async def drain(self) -> None:
        await self.writer.drain()

    def close(self) -> None:
        super().close()
        self.writer.close()

    def is_closing(self) -> bool:
        return self.writer.is_closing()


class _Tap(Extension):
    """A pass-through WebSocket extension that sees each outgoing data frame's payload. Two of them, one
    before the negotiated extensions and one after, give the message and the bytes that went on the wire."""

    name = "tap"  # type: ignore[assignment]

    def __init__(self, seen: Callable[[bytes], None]) -> None:
        self.seen = seen

    def encode(self, frame: Frame) -> Frame:
        if frame.opcode in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
            self.seen(bytes(frame.data))
        return frame

    def decode(self, frame: Frame, *, max_size: Optional[int] = None) -> Frame:
        return frame


class WebSocketLink(Link):
    """One text message per game message; sends go through a task so ``send`` never waits."""

    def __init__(self, ws: Any, client_port: int, log: SentLog) -> None:
        super().__init__(client_port, log)
        self.ws = ws
        self.outbox: "asyncio.Queue[Optional[bytes]]" = asyncio.Queue()
        before: List[bytes] = []
        ws.protocol.extensions = [_Tap(before.append), *ws.protocol.extensions,
                                  _Tap(lambda wire: log.write(client_port, before.pop(0), wire))]
        self.tasks = [asyncio.ensure_future(self._sender()), asyncio.ensure_future(self._receiver())]

    def send(self, payload: bytes) -> None:
        self.outbox.put_nowait(payload)

    async def _sender(self) -> None:
        try:
            while (payload := await self.outbox.get()) is not None:
                await self.ws.send(payload.decode("utf-8"))
                self.outbox.task_done()
            await self.ws.close()
        except ConnectionClosed:
            pass
        finally:
            self.outbox.task_done()

    async def _receiver(self) -> None:
        try:
            async for raw in self.ws:
                self.inbox.put_nowait(parse(raw.encode("utf-8") if isinstance(raw, str) else raw))
        except ConnectionClosed:
            pass
        self.inbox.put_nowait(None)

    async def drain(self) -> None:
        await self.outbox.join()

    def close(self) -> None:
        if not self.closing:
            super().close()
            self.outbox.put_nowait(None)


class DatagramLink(Link):
    """One datagram per message to one address (a client, or the server)."""

    def __init__(self, transport: asyncio.DatagramTransport, addr: Any, client_port: int, log: SentLog) -> None:
        super().__init__(client_port, log)
        self.transport, self.addr = transport, addr

    def send(self, payload: bytes) -> None:
        if not self.closing:
            self.transport.sendto(payload, self.addr)
            self.log.write(self.client_port, payload)

    def close(self) -> None:
        if not self.closing:
            super().close()
            self.inbox.put_nowait(None)


class _Datagrams(asyncio.DatagramProtocol):
    """Hands each datagram to ``arrived(data, addr)``."""

    def __init__(self, arrived: Callable[[bytes, Any], None]) -> None:
        self.arrived = arrived

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.arrived(data, addr)


async def listen(transport: str, port: int, log: SentLog, play: Callable[[Link], Awaitable[None]]) -> Tuple[Any, int]:
    """Serve ``transport`` on 127.0.0.1:``port`` (0: any free port), running ``play(link)`` per connection;
    returns the server object (closed with ``close()``) and the port."""
    if transport == "tcp":
        async def on_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await play(StreamLink(reader, writer, writer.get_extra_info("peername")[1], log))
        server = await asyncio.start_server(on_stream, "127.0.0.1", port)
        return server, server.sockets[0].getsockname()[1]
    if transport in ("ws", "ws-deflate"):
        async def on_websocket(ws: ServerConnection) -> None:
            await play(WebSocketLink(ws, ws.remote_address[1], log))
        ws_server = await serve(on_websocket, "127.0.0.1", port, ping_interval=None,
                                compression="deflate" if transport == "ws-deflate" else None)
        return ws_server, next(iter(ws_server.sockets)).getsockname()[1]
    links: dict = {}
    loop = asyncio.get_running_loop()

    def arrived(data: bytes, addr: Any) -> None:
        if addr not in links:
            links[addr] = DatagramLink(endpoint, addr, addr[1], log)
            asyncio.ensure_future(play(links[addr]))
        links[addr].inbox.put_nowait(parse(data))
    endpoint, _ = await loop.create_datagram_endpoint(lambda: _Datagrams(arrived), local_addr=("127.0.0.1", port))
    return endpoint, endpoint.get_extra_info("sockname")[1]


async def dial(transport: str, host: str, port: int, log: SentLog) -> Link:
    """A client's link to the server."""
    if transport == "tcp":
        reader, writer = await asyncio.open_connection(host, port)
        return StreamLink(reader, writer, writer.get_extra_info("sockname")[1], log)
    if transport in ("ws", "ws-deflate"):
        ws = await connect(f"ws://{host}:{port}/battle", ping_interval=None, proxy=None,
                           compression="deflate" if transport == "ws-deflate" else None)
        return WebSocketLink(ws, ws.local_address[1], log)
    loop = asyncio.get_running_loop()
    box: List[DatagramLink] = []
    endpoint, _ = await loop.create_datagram_endpoint(
        lambda: _Datagrams(lambda data, addr: box[0].inbox.put_nowait(parse(data))), remote_addr=(host, port))
    box.append(DatagramLink(endpoint, None, endpoint.get_extra_info("sockname")[1], log))
    return box[0]
