"""Length-prefixed framing: a TCP byte stream split into messages by a u16, u32 or LEB128 length.

The length counts the payload after the prefix (as Netty's LengthFieldPrepender, Go's
binary.Write of a uint16/uint32 before the message, or protobuf's writeDelimitedTo for varint).
"""

from __future__ import annotations

import struct
from typing import Callable, List, NamedTuple, Optional, Tuple

from ..errors import BenchError

PREFIXES = ("u16", "u32", "varint")
MAX_VARINT_BYTES = 10  #: a LEB128 length longer than this is not a length (64 bits take 10)

#: ``(data, offset)`` -> (length, prefix size), or None when the data ends inside the prefix
LengthReader = Callable[[bytes, int], Optional[Tuple[int, int]]]


class Message(NamedTuple):
    """One message's payload; ``end`` is the stream offset just after its last byte."""

    end: int
    payload: bytes


def prefix_reader(framing: str, endian: str = "big") -> LengthReader:
    """The reader of a ``--framing`` length prefix."""
    if framing == "varint":
        return _varint
    if framing not in ("u16", "u32"):
        raise BenchError(f"--framing {framing!r}: choose one of websocket, udp, {', '.join(PREFIXES)}")
    fmt = struct.Struct(("<" if endian == "little" else ">") + ("H" if framing == "u16" else "I"))

    def fixed(data: bytes, at: int) -> Optional[Tuple[int, int]]:
        if at + fmt.size > len(data):
            return None
        return fmt.unpack_from(data, at)[0], fmt.size

    return fixed


def _varint(data: bytes, at: int) -> Optional[Tuple[int, int]]:
    """An unsigned LEB128 length at ``at``: (value, its size); None if the data ends inside it."""
    value = 0
    for i in range(MAX_VARINT_BYTES):
        if at + i >= len(data):
            return None
        byte = data[at + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value, i + 1
    raise ValueError(f"stream offset {at}: a varint length longer than {MAX_VARINT_BYTES} bytes")


def split(data: bytes, read_length: LengthReader) -> Tuple[List[Message], int]:
    """The complete messages in ``data`` and the bytes after the last one (a message cut off, or 0)."""
    at, messages = 0, []
    while at < len(data):
        head = read_length(data, at)
        if head is None or at + head[1] + head[0] > len(data):
            break
        size, prefix = head
        messages.append(Message(at + prefix + size, data[at + prefix:at + prefix + size]))
        at += prefix + size
    return messages, len(data) - at
