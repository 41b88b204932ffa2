"""An independent computation of the wire model's packets and payload bytes (docs/wire.md), for the tests.

Written from the rules, not from rpcbench's code, and importing none of it: calls are grouped by
(connection, direction, tick window) in a dict, each group's messages (compact JSON or msgpack of
``{"method": m, "args": a}``) framed with an unsigned LEB128 length each, packed in order into packets
of at most ``mtu`` payload bytes, and each packet's payload compressed whole by ``zlib.compress`` when
asked. A call is ``(method, args, t_ns, direction, connection)``.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import msgpack

RefCall = Tuple[str, Any, int, str, Any]


def _bytes_as_text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(type(value).__name__)


def encode_json(method: str, args: Any) -> bytes:
    return json.dumps({"method": method, "args": args}, separators=(",", ":"), ensure_ascii=False,
                      default=_bytes_as_text).encode("utf-8")


def encode_msgpack(method: str, args: Any) -> bytes:
    return msgpack.packb({"method": method, "args": args}, use_bin_type=True)


def leb128(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def packets(calls: Iterable[RefCall], encode: Callable[[str, Any], bytes], tick_ms: Optional[float],
            mtu: Optional[int] = None, compress: bool = False) -> Tuple[int, int, int]:
    """(packets, payload bytes, fragmented packets) of the calls under one policy (``tick_ms`` None: per call)."""
    groups: Dict[Any, List[bytes]] = {}
    first: Optional[int] = None
    for n, (method, args, t, direction, conn) in enumerate(calls):
        first = t if first is None else first
        key = n if tick_ms is None else (conn, direction, int((t - first) // (tick_ms * 1e6)))
        groups.setdefault(key, []).append(encode(method, args))
    count = payload = fragmented = 0
    for messages in groups.values():
        if tick_ms is None:
            count, payload = count + 1, payload + len(zlib.compress(messages[0], 1) if compress else messages[0])
            continue
        for body, pieces in _pack([leb128(len(m)) + m for m in messages], mtu):
            count += pieces
            fragmented += pieces if pieces > 1 else 0
            payload += len(zlib.compress(body, 1)) if compress else len(body)
    return count, payload, fragmented


def _pack(framed: List[bytes], mtu: Optional[int]) -> List[Tuple[bytes, int]]:
    """Framed messages packed in order: (payload, packets it takes: >1 when one message is over the MTU)."""
    out: List[Tuple[bytes, int]] = []
    current = b""
    for frame in framed:
        if mtu is not None and current and len(current) + len(frame) > mtu:
            out.append((current, 1))
            current = b""
        if mtu is not None and len(frame) > mtu:
            out.append((frame, -(-len(frame) // mtu)))
            continue
        current += frame
    if current:
        out.append((current, 1))
    return out
