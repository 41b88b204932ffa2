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
from typing import Any, Dict, List, Optional

import zstandard

from rpc_capture import Call

from .codec import Codec, stream_key
from .progress import Progress, quiet

FLOOR_MAX_BYTES = 64 << 20  #: JSON bytes kept for the floor (about 370,000 calls of the bundled kind)
ZSTD_LEVEL = 19
ZSTD_WINDOW_LOG = 27  #: 128 MiB: the whole stream of any trace the floor keeps is in reach
XZ_PRESET = 9


class Floor:
    """Collects each stream's compact-JSON calls during the size pass; :meth:`result` compresses them."""

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

    def result(self, progress: Progress = quiet) -> Optional[Dict[str, Any]]:
        """Bytes per call of the best whole-stream compression, each compressor's, and what it covered."""
        if not self.calls:
            return None
        started = time.perf_counter()
        params = zstandard.ZstdCompressionParameters.from_level(ZSTD_LEVEL, enable_ldm=True,
                                                                window_log=ZSTD_WINDOW_LOG)
        zstd = zstandard.ZstdCompressor(compression_params=params)
        zstd_total = xz_total = best = 0
        for done, parts in enumerate(self._streams.values()):
            progress("floor", f"stream {done + 1:,} of {len(self._streams):,}", done, len(self._streams))
            stream = b"".join(parts)
            by_zstd, by_xz = len(zstd.compress(stream)), len(lzma.compress(stream, preset=XZ_PRESET))
            zstd_total, xz_total, best = zstd_total + by_zstd, xz_total + by_xz, best + min(by_zstd, by_xz)
        return {"bytes_per_call": best / self.calls, "zstd19_long_bytes_per_call": zstd_total / self.calls,
                "xz9_bytes_per_call": xz_total / self.calls, "json_bytes_per_call": self._bytes / self.calls,
                "codec": self.codec, "streams": len(self._streams), "calls": self.calls, "of_calls": self.seen,
                "seconds": round(time.perf_counter() - started, 2)}
