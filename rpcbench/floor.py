"""The floor: how few bytes per call a trace's calls take when a strong compressor sees each
connection's whole stream at once, so a team sees how much any codec leaves on the table.

Each connection and direction's calls, as compact JSON (the ``json`` codec), are joined
and compressed whole by zstd level 19 with long-distance matching (128 MiB window) and
by xz (LZMA2 preset 9); per stream the smaller counts. No real-time codec can do this
(it needs the whole stream before sending anything): it is a bound to compare against,
not a candidate. The streams are kept in memory up to ``FLOOR_MAX_BYTES`` of JSON; a
longer trace has its floor computed on the calls up to there.
"""

from __future__ import annotations

import lzma
import time
from typing import Any, Dict, List, Optional, Sequence

import zstandard

from rpc_capture import Call

from .codec import Codec, stream_key

FLOOR_MAX_BYTES = 64 << 20  #: JSON bytes kept for the floor (about 370,000 calls of the bundled kind)
ZSTD_LEVEL = 19
ZSTD_WINDOW_LOG = 27  #: 128 MiB: the whole stream of any trace the floor keeps is in reach
XZ_PRESET = 9


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
        params = zstandard.ZstdCompressionParameters.from_level(ZSTD_LEVEL, enable_ldm=True,
                                                                window_log=ZSTD_WINDOW_LOG)
        zstd = zstandard.ZstdCompressor(compression_params=params)
        zstd_total = xz_total = best = 0
        for parts in self._streams.values():
            stream = b"".join(parts)
            by_zstd, by_xz = len(zstd.compress(stream)), len(lzma.compress(stream, preset=XZ_PRESET))
            zstd_total, xz_total, best = zstd_total + by_zstd, xz_total + by_xz, best + min(by_zstd, by_xz)
        return {"best": best, "zstd": zstd_total, "xz": xz_total, "json": self._bytes, "streams": len(self._streams),
                "calls": self.calls, "of_calls": self.seen, "seconds": time.perf_counter() - started,
                "codec": self.codec}


def floor_figures(totals: Sequence[Optional[Dict[str, Any]]]) -> Optional[Dict[str, Any]]:
    """The floor of one trace or of several together, from their :meth:`Floor.totals`: bytes per call of the
    best whole-stream compression, each compressor's, and what it covered (None without any)."""
    parts = [t for t in totals if t]
    if not parts:
        return None
    sums = {key: sum(p[key] for p in parts) for key in parts[0] if key != "codec"}
    calls = sums["calls"]
    return {"bytes_per_call": sums["best"] / calls, "zstd19_long_bytes_per_call": sums["zstd"] / calls,
            "xz9_bytes_per_call": sums["xz"] / calls, "json_bytes_per_call": sums["json"] / calls,
            "codec": parts[0]["codec"], "streams": sums["streams"], "calls": calls, "of_calls": sums["of_calls"],
            "seconds": round(sums["seconds"], 2)}
