"""The floor: how few bytes per call a trace's calls take when a strong compressor sees each
connection's whole stream at once, so a team sees how much any codec leaves on the table.

Each connection and direction's calls, as compact JSON (the ``json`` codec), are joined
and compressed whole by xz (LZMA2 preset 9) and, for a stream of up to ``ZSTD_MAX_STREAM``
bytes, by zstd level 19 with long-distance matching too; per stream the smaller counts.
No real-time codec can do this (it needs the whole stream before sending anything): it is
a bound to compare against, not a candidate. The streams are kept in memory up to
``FLOOR_MAX_BYTES`` of JSON; a longer trace has its floor computed on the calls up to there.

Why zstd only on short streams (measured in docs/codecs.md): the two compressors cost about
the same per byte, and on a long stream the smaller of the two is within 0.5 % of xz alone;
on a short one zstd's frame, 50 bytes lighter than xz's container, can win by 2 %, at no
cost to speak of. xz's dictionary is cut to the stream's size: the same bytes as
``lzma.compress(stream, preset=9)``, without setting up a 64 MiB dictionary per stream.
"""

from __future__ import annotations

import lzma
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Sequence, Tuple

import zstandard

from rpc_capture import Call

from .codec import Codec, stream_key

FLOOR_MAX_BYTES = 64 << 20  #: JSON bytes kept for the floor (about 370,000 calls of the bundled kind)
ZSTD_MAX_STREAM = 512 << 10  #: streams up to this many JSON bytes also go through zstd-19
ZSTD_LEVEL = 19
ZSTD_WINDOW_LOG = 27  #: 128 MiB: the whole stream of any trace the floor keeps is in reach
XZ_PRESET = 9
XZ_DICT_MAX = 64 << 20  #: preset 9's dictionary: a stream longer than this one gets no bigger one
THREADS = 2  #: streams compressed at once (both libraries release the GIL)


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
            sizes = list(pool.map(compressed_sizes, longest_first))
        by_zstd = [z for z, _ in sizes if z is not None]
        return {"best": sum(x if z is None else min(z, x) for z, x in sizes), "xz": sum(x for _, x in sizes),
                "zstd": sum(by_zstd) if len(by_zstd) == len(sizes) else None, "zstd_streams": len(by_zstd),
                "json": self._bytes, "streams": len(sizes), "calls": self.calls, "of_calls": self.seen,
                "seconds": time.perf_counter() - started, "codec": self.codec}


def compressed_sizes(parts: Sequence[bytes]) -> Tuple[Optional[int], int]:
    """One stream's bytes compressed whole by zstd-19 with long matching (None: longer than
    ``ZSTD_MAX_STREAM``, not tried) and by xz -9."""
    stream = b"".join(parts)
    by_zstd = None
    if len(stream) <= ZSTD_MAX_STREAM:
        params = zstandard.ZstdCompressionParameters.from_level(ZSTD_LEVEL, enable_ldm=True,
                                                                window_log=ZSTD_WINDOW_LOG)
        by_zstd = len(zstandard.ZstdCompressor(compression_params=params).compress(stream))
    dictionary = min(XZ_DICT_MAX, 1 << max(12, (len(stream) - 1).bit_length()))  # LZMA2's least is 4 KiB
    xz = lzma.compress(stream, filters=[{"id": lzma.FILTER_LZMA2, "preset": XZ_PRESET, "dict_size": dictionary}])
    return by_zstd, len(xz)


def floor_figures(totals: Sequence[Optional[Dict[str, Any]]]) -> Optional[Dict[str, Any]]:
    """The floor of one trace or of several together, from their :meth:`Floor.totals`: bytes per call of the
    best whole-stream compression, each compressor's (zstd's None unless it saw every stream), and what it
    covered (None without any)."""
    parts = [t for t in totals if t]
    if not parts:
        return None
    sums = {key: sum(p[key] for p in parts) for key in ("best", "xz", "json", "streams", "calls", "of_calls",
                                                         "seconds")}
    zstd = [p["zstd"] for p in parts]
    calls = sums["calls"]
    return {"bytes_per_call": sums["best"] / calls,
            "zstd19_long_bytes_per_call": None if None in zstd else sum(zstd) / calls,
            "xz9_bytes_per_call": sums["xz"] / calls, "json_bytes_per_call": sums["json"] / calls,
            "codec": parts[0]["codec"], "streams": sums["streams"],
            "zstd_streams": sum(p["zstd_streams"] for p in parts), "calls": calls,
            "of_calls": sums["of_calls"], "seconds": round(sums["seconds"], 2)}
