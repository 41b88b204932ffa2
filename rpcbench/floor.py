"""The floor: how few bytes per call a trace's calls take when a strong compressor sees each
connection's whole stream at once, so a team sees how much any codec leaves on the table.

Each connection and direction's calls, as compact JSON (the ``json`` codec), are joined and
compressed whole by lzma -9 in the ``.lzma`` format (LZMA1 at preset 9, its dictionary cut to
the stream's size; a 13-byte header says how to decode it), and the streams' bytes are summed.
No real-time codec can do this (it needs the whole stream before sending anything): it is a
bound to compare against, not a candidate. The streams are kept in memory up to
``FLOOR_MAX_BYTES`` of JSON; a longer trace has its floor computed on the calls up to there.

Why this one compressor (measured in docs/codecs.md): until results of 2026-11-27 the floor was
per stream the smaller of xz -9 and, on streams up to 512 KiB, zstd-19 with long matching. The
same LZMA in the ``.lzma`` container gives within 1 % of that on the bundled samples, the
Minecraft example and simulated traces (lower on every one: xz's container is about 50 bytes
heavier, which is all zstd won by on short streams), while zstd-19 costs twice LZMA's time per
byte and never wins by more than its frame; so the floor takes lzma alone, at half the cost.
"""

from __future__ import annotations

import lzma
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Sequence

from rpc_capture import Call

from .codec import Codec, stream_key

FLOOR_MAX_BYTES = 64 << 20  #: JSON bytes kept for the floor (about 370,000 calls of the bundled kind)
COMPRESSOR = "lzma -9"  #: what the floor compresses each stream with, as results and reports name it
LZMA_PRESET = 9
LZMA_DICT_MAX = 64 << 20  #: preset 9's dictionary
THREADS = 2  #: streams compressed at once (lzma releases the GIL)


class Floor:
    """Collects each stream's compact-JSON calls of one trace; :meth:`totals` compresses them."""

    def __init__(self, codec: Codec, max_bytes: int = FLOOR_MAX_BYTES) -> None:
        self._encode = codec.encode
        self.codec = codec.name
        self.max_bytes = max_bytes
        self.calls = 0  #: calls kept
        self.seen = 0  #: calls offered
        self._bytes = 0
        self._streams: Dict[Any, List[bytes]] = {}

    def add(self, call: Call) -> None:
        """Keep one call of the trace (until ``max_bytes``; calls JSON cannot carry are left out)."""
        self.seen += 1
        if self._bytes >= self.max_bytes:
            return
        try:
            data = self._encode(call)
        except Exception:
            return
        self._streams.setdefault(stream_key(call), []).append(data)
        self.calls += 1
        self._bytes += len(data)

    def totals(self) -> Optional[Dict[str, Any]]:
        """The floor's sums over this trace's streams (None without calls): :func:`floor_figures` turns
        them into bytes per call, and the sums of several traces add up to the floor of them together."""
        if not self.calls:
            return None
        started = time.perf_counter()
        longest_first = sorted(self._streams.values(), key=lambda parts: -sum(map(len, parts)))
        with ThreadPoolExecutor(THREADS) as pool:
            sizes = list(pool.map(compressed_size, longest_first))
        return {"bytes": sum(sizes), "json": self._bytes, "streams": len(sizes), "calls": self.calls,
                "of_calls": self.seen, "seconds": time.perf_counter() - started, "codec": self.codec}


def compressed_size(parts: Sequence[bytes]) -> int:
    """One stream's bytes compressed whole by lzma -9 (``.lzma`` format), its dictionary the stream's size
    as a power of two: the same bytes as preset 9's 64 MiB on any stream up to that, without setting up a
    64 MiB dictionary and match finder per stream."""
    stream = b"".join(parts)
    filters = [{"id": lzma.FILTER_LZMA1, "preset": LZMA_PRESET, "dict_size": dictionary_size(len(stream))}]
    return len(lzma.compress(stream, format=lzma.FORMAT_ALONE, filters=filters))


def dictionary_size(stream_bytes: int) -> int:
    """LZMA's dictionary for a stream: its size as a power of two, at least LZMA's least (4 KiB), at most
    preset 9's 64 MiB (a longer stream gets no bigger one)."""
    return min(LZMA_DICT_MAX, 1 << max(12, (stream_bytes - 1).bit_length()))


def floor_figures(totals: Sequence[Optional[Dict[str, Any]]]) -> Optional[Dict[str, Any]]:
    """The floor of one trace or of several together, from their :meth:`Floor.totals`: bytes per call of the
    whole-stream compression, and what it covered (None without any)."""
    parts = [t for t in totals if t]
    if not parts:
        return None
    sums = {key: sum(p[key] for p in parts) for key in ("bytes", "json", "streams", "calls", "of_calls", "seconds")}
    calls = sums["calls"]
    return {"bytes_per_call": sums["bytes"] / calls, "compressor": COMPRESSOR,
            "json_bytes_per_call": sums["json"] / calls, "codec": parts[0]["codec"], "streams": sums["streams"],
            "calls": calls, "of_calls": sums["of_calls"], "seconds": round(sums["seconds"], 2)}
