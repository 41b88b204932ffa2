"""Protobuf's wire format pieces the call envelopes need: base-128 varints and length-delimited fields.

The envelopes themselves (``protobuf``'s oneof, ``protobuf-struct``'s two fields) are
described in docs/protobuf.md; this module only reads and writes their parts.
"""

from __future__ import annotations

from typing import Tuple

_ONE_BYTE = [bytes((n,)) for n in range(0x80)]


def varint(n: int) -> bytes:
    """Protobuf's base-128 varint of a non-negative int."""
    if n < 0x80:
        return _ONE_BYTE[n]
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_varint(data: bytes, pos: int) -> Tuple[int, int]:
    """``(value, next position)`` of the varint at ``pos`` (IndexError if the data ends inside it)."""
    n = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        if byte < 0x80:
            return n, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def read_field(data: bytes, pos: int, number: int) -> Tuple[bytes, int]:
    """The bytes of length-delimited field ``number`` at ``pos``, and the position after them."""
    key, pos = read_varint(data, pos)
    if key != number << 3 | 2:
        raise ValueError(f"expected field {number} at byte {pos}, found key {key}")
    size, pos = read_varint(data, pos)
    if pos + size > len(data):
        raise ValueError(f"field {number} runs past the end of the data")
    return data[pos:pos + size], pos + size
