"""rpc_capture: record the RPC calls of a game server into trace files, and read them back.

Standard library only, so a game team can vendor this folder into their server.
The binary format is specified in ``docs/trace-format.md``.
"""

from __future__ import annotations

import os
from typing import Union

from .call import C2S, DIRECTIONS, S2C, Call, ConnId
from .jsonl import JsonlReader, write_jsonl
from .recorder import NullRecorder, Recorder, recorder
from .trace import MAGIC, TraceError, TraceReader, TraceWriter

__all__ = [
    "C2S", "S2C", "DIRECTIONS", "Call", "ConnId",
    "TraceReader", "TraceWriter", "TraceError", "JsonlReader", "write_jsonl", "open_trace",
    "Recorder", "NullRecorder", "recorder",
]


def open_trace(path: Union[str, os.PathLike]) -> Union[TraceReader, JsonlReader]:
    """Open a trace for streaming, binary (plain or gzip) or JSON Lines, by its content."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            head = f.read(len(MAGIC))
    except OSError as e:
        raise TraceError(f"{path}: cannot open ({e.strerror or e})") from None
    if head.startswith(MAGIC) or head.startswith(b"\x1f\x8b"):
        return TraceReader(path)
    if head.lstrip()[:1] in (b"{", b"") and (head.strip() or path.endswith(".jsonl")):
        return JsonlReader(path)
    raise TraceError(f"{path}: byte offset 0: not a trace (neither RPCTRACE binary nor JSON Lines)")
