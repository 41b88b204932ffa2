"""TCP reassembly: one direction of one connection, from its captured segments to the byte stream.

Segments may arrive out of order, twice (retransmitted) or overlapping; the stream is put
together by sequence number (modulo 2^32); where copies overlap, the one starting first wins
(then the one captured first). A capture that
starts after the connection did (no SYN) starts the stream at the lowest sequence number seen.
Where a segment was never captured the stream has a hole: only the part before the first hole
can be split into messages (length prefixes and frame headers cannot be found again after it).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

SYN = 0x02
_HALF = 1 << 31
_MOD = 1 << 32


@dataclass
class Stream:
    """The reassembled bytes of one direction, and when each stretch of them was complete."""

    data: bytes
    ends: List[int]  #: end offset of each stretch, rising
    times: List[int]  #: capture time (ns) at which the stream up to that end had all arrived
    frames: List[int]  #: the capture packet that completed each stretch
    hole: Optional[Tuple[int, int]] = None  #: (offset, bytes after it) where a segment was never captured
    from_start: bool = True  #: the connection's SYN was captured: offset 0 is its first byte

    def time_at(self, end: int) -> int:
        """When the bytes before offset ``end`` had all arrived."""
        return self.times[min(bisect.bisect_left(self.ends, end), len(self.times) - 1)]

    def frame_at(self, end: int) -> int:
        """The packet that completed the bytes before offset ``end``."""
        return self.frames[min(bisect.bisect_left(self.ends, end), len(self.frames) - 1)]


@dataclass
class HalfConnection:
    """One direction's segments as captured, to be reassembled once the capture is read."""

    syn: Optional[int] = None  #: the SYN's sequence number
    segments: List[Tuple[int, int, int, bytes]] = field(default_factory=list)  #: (seq, t, frame, payload)
    packets: int = 0  #: segments with payload, retransmissions included
    header_bytes: int = 0

    def add(self, seq: int, flags: int, t: int, frame: int, payload: bytes, header_bytes: int) -> None:
        if flags & SYN:
            self.syn = seq
        if payload:
            self.segments.append((seq, t, frame, payload))
            self.packets += 1
            self.header_bytes += header_bytes

    def stream(self) -> Stream:
        """The bytes in sequence order up to the first hole."""  # noqa: D401
        if not self.segments:
            return Stream(b"", [], [], [], None, self.syn is not None)
        base = (self.syn + 1) % _MOD if self.syn is not None else self.segments[0][0]
        ordered = sorted((_relative(seq, base), arrival, t, frame, payload)
                         for arrival, (seq, t, frame, payload) in enumerate(self.segments))
        pos = ordered[0][0] if self.syn is None else 0
        start, parts = pos, []
        stream = Stream(b"", [], [], [], None, self.syn is not None)
        latest, completing = 0, 0
        for rel, _, t, frame, payload in ordered:
            end = rel + len(payload)
            if end <= pos:
                continue  # a retransmission of bytes already placed
            if rel > pos:
                stream.hole = (pos - start, sum(len(p) for r, _, _, _, p in ordered if r >= pos))
                break
            parts.append(payload[pos - rel:])
            pos = end
            if t >= latest:  # the stream up to here is complete once its last-captured segment is
                latest, completing = t, frame
            stream.ends.append(pos - start)
            stream.times.append(latest)
            stream.frames.append(completing)
        stream.data = b"".join(parts)
        return stream


def _relative(seq: int, base: int) -> int:
    """``seq`` as an offset from ``base`` in 32-bit sequence space (negative: before it)."""
    rel = (seq - base) % _MOD
    return rel - _MOD if rel >= _HALF else rel
