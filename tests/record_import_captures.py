"""Record the small captures tests/test_capture_import.py reads: real programs talking on loopback, under tcpdump.

Each recording is ``tests/data/captures/import/NAME.pcap`` plus ``NAME.sent.json``: every message the
programs sent, in order (client address, direction, method, args), what the import must give back.

* ``ws_plain``, ``ws_deflate``, ``ws_deflate_nctx``: a ``websockets`` server and two clients (no
  compression; permessage-deflate with context takeover; without it): JSON in text messages and
  in binary ones, a fragmented one, pings, messages over 125 bytes (16-bit frame length);
* ``u16``, ``u32le``, ``varint``: an asyncio TCP pair sending msgpack messages after a big-endian u16,
  a little-endian u32 or a LEB128 varint length;
* ``udp``: JSON datagrams both ways; ``udp6_any`` the same over IPv6, recorded with ``tcpdump -i any``
  (Linux cooked headers, SLL2, instead of Ethernet).

Needs root and tcpdump: ``python tests/record_import_captures.py [NAME ...]`` (a few seconds each).
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import msgpack
from websockets.asyncio.client import connect
from websockets.asyncio.server import serve
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory, ServerPerMessageDeflateFactory
from wire_reference import leb128

OUT = Path(__file__).resolve().parent / "data" / "captures" / "import"
PORTS = {"ws_plain": 47001, "ws_deflate": 47002, "ws_deflate_nctx": 47003, "u16": 47004, "udp": 47005,
         "varint": 47006, "u32le": 47007, "udp6_any": 47008}
METHODS = ("move", "fire", "chat", "state")


def message(rng: random.Random, i: int) -> Dict[str, Any]:
    """A battle-like call; every seventh a chat line long enough for a 16-bit frame length."""
    method = METHODS[i % len(METHODS)]
    if method == "chat" and i % 7 == 0:
        return {"method": method, "args": {"from": i % 5, "text": "gg " * rng.randrange(50, 120)}}
    return {"method": method, "args": {"id": rng.randrange(1, 10), "x": round(rng.uniform(-50, 50), 2),
                                       "y": round(rng.uniform(-50, 50), 2), "seq": i}}


class Log:
    def __init__(self) -> None:
        self.sent: List[Dict[str, Any]] = []

    def add(self, client: str, direction: str, msg: Dict[str, Any]) -> None:
        self.sent.append({"conn": client, "dir": direction, "method": msg["method"], "args": msg["args"]})


async def websocket_pair(port: int, log: Log, compression: Any) -> None:
    server_ext, client_ext, preset = compression

    async def handler(ws: Any) -> None:
        client = "%s:%d" % ws.remote_address[:2]
        rng = random.Random(ws.remote_address[1])
        async for data in ws:
            got = json.loads(data)
            reply = {"method": "ack", "args": {"seq": got["args"].get("seq", -1), "tick": rng.randrange(1000)}}
            log.add(client, "s2c", reply)
            await ws.send(json.dumps(reply) if isinstance(data, str) else json.dumps(reply).encode())

    kwargs = {"compression": None, "extensions": server_ext} if server_ext is not None else {"compression": preset}
    async with serve(handler, "127.0.0.1", port, **kwargs):
        for c in range(2):
            ckw = {"compression": None, "extensions": client_ext} if client_ext is not None else {"compression": preset}
            async with connect(f"ws://127.0.0.1:{port}/battle", **ckw) as ws:
                client = "%s:%d" % ws.local_address[:2]
                rng = random.Random(c)
                for i in range(24):
                    msg = message(rng, i)
                    log.add(client, "c2s", msg)
                    if i % 3 == 1:  # a binary message (JSON in it, as many games send)
                        await ws.send(json.dumps(msg).encode())
                    elif i == 5:  # fragmented: three frames of one text message
                        text = json.dumps(msg)
                        await ws.send(iter([text[:10], text[10:20], text[20:]]))
                    else:
                        await ws.send(json.dumps(msg))
                    if i % 8 == 0:
                        await ws.ping()
                    await ws.recv()
                    await asyncio.sleep(0.002)


async def read_varint(reader: asyncio.StreamReader) -> int:
    value = shift = 0
    while True:
        byte = (await reader.readexactly(1))[0]
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value


#: framing -> (prefix of a length, read a length)
PREFIXES = {
    "u16": (lambda n: struct.pack(">H", n), lambda r: _fixed(r, ">H")),
    "u32le": (lambda n: struct.pack("<I", n), lambda r: _fixed(r, "<I")),
    "varint": (leb128, read_varint),
}


async def _fixed(reader: asyncio.StreamReader, fmt: str) -> int:
    return struct.unpack(fmt, await reader.readexactly(struct.calcsize(fmt)))[0]


async def length_prefixed_pair(port: int, log: Log, framing: str) -> None:
    prefix, read_length = PREFIXES[framing]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = "%s:%d" % writer.get_extra_info("peername")[:2]
        while True:
            try:
                size = await read_length(reader)
            except asyncio.IncompleteReadError:
                break
            got = msgpack.unpackb(await reader.readexactly(size))
            reply = {"method": "ack", "args": [got["args"].get("seq", -1), 7]}
            log.add(client, "s2c", reply)
            data = msgpack.packb(reply)
            writer.write(prefix(len(data)) + data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    client = "%s:%d" % writer.get_extra_info("sockname")[:2]
    rng = random.Random(3)
    for i in range(40):
        msg = message(rng, i)
        log.add(client, "c2s", msg)
        data = msgpack.packb(msg)
        if i % 5 == 0:  # two messages in one write: one segment carries both
            second = message(rng, 100 + i)
            log.add(client, "c2s", second)
            more = msgpack.packb(second)
            writer.write(prefix(len(data)) + data + prefix(len(more)) + more)
            await reader.readexactly(await read_length(reader))
        else:
            writer.write(prefix(len(data)) + data)
        await writer.drain()
        await reader.readexactly(await read_length(reader))
    writer.close()
    await writer.wait_closed()
    await asyncio.sleep(0.05)
    server.close()
    await server.wait_closed()


def udp_pair(port: int, log: Log, family: int = socket.AF_INET) -> None:
    host = "::1" if family == socket.AF_INET6 else "127.0.0.1"
    server = socket.socket(family, socket.SOCK_DGRAM)
    server.bind((host, port))
    client = socket.socket(family, socket.SOCK_DGRAM)
    client.bind((host, 0))
    name = ("[%s]:%d" if family == socket.AF_INET6 else "%s:%d") % client.getsockname()[:2]
    rng = random.Random(4)
    for i in range(30):
        msg = message(rng, i)
        log.add(name, "c2s", msg)
        client.sendto(json.dumps(msg).encode(), (host, port))
        data, peer = server.recvfrom(65535)
        reply = {"method": "state", "args": {"seq": json.loads(data)["args"].get("seq"), "hp": rng.randrange(100)}}
        log.add(name, "s2c", reply)
        server.sendto(json.dumps(reply).encode(), peer)
        client.recvfrom(65535)
    server.close()
    client.close()


def record(name: str, run: Any) -> None:
    port = PORTS[name]
    pcap = OUT / f"{name}.pcap"
    interface = "any" if name.endswith("_any") else "lo"
    dump = subprocess.Popen(["tcpdump", "-i", interface, "-U", "-s", "0", "-w", str(pcap), "port", str(port)],
                            stderr=subprocess.PIPE)
    assert dump.stderr is not None
    dump.stderr.readline()  # "listening on lo...", though packets are seen only a moment later
    time.sleep(2)
    log = Log()
    run(port, log)
    time.sleep(1)
    dump.send_signal(signal.SIGINT)
    dump.wait(10)
    (OUT / f"{name}.sent.json").write_text(json.dumps(log.sent, indent=0) + "\n", encoding="utf-8")
    print(f"{pcap}: {pcap.stat().st_size} bytes, {len(log.sent)} messages sent")


def main(names: List[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    nctx = ([ServerPerMessageDeflateFactory(server_no_context_takeover=True, client_no_context_takeover=True)],
            [ClientPerMessageDeflateFactory(server_no_context_takeover=True, client_no_context_takeover=True)], None)
    programs = {
        "ws_plain": lambda port, log: asyncio.run(websocket_pair(port, log, (None, None, None))),
        "ws_deflate": lambda port, log: asyncio.run(websocket_pair(port, log, (None, None, "deflate"))),
        "ws_deflate_nctx": lambda port, log: asyncio.run(websocket_pair(port, log, nctx)),
        "udp": udp_pair,
        "udp6_any": lambda port, log: udp_pair(port, log, socket.AF_INET6),
        **{name: (lambda port, log, name=name: asyncio.run(length_prefixed_pair(port, log, name)))
           for name in PREFIXES},
    }
    for name in names or programs:
        record(name, programs[name])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
