"""Open a trace of any kind by its content, and say what a salvaging read of it skipped."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Union

from .jsonl import BOM, JsonlReader
from .trace import MAGIC, TraceError, TraceReader


def damage_note(reader: Union[TraceReader, JsonlReader]) -> Optional[str]:
    """One line on what a salvaging read skipped (None if nothing): stretches, bytes, calls lost."""
    if not reader.skipped:
        return None
    dropped = reader.dropped_calls()
    lost = "an unknown number of calls (the file has no end record to count them)" if dropped is None else (
        f"{dropped:,} call(s)")
    return (f"{reader.path}: salvaged: skipped {len(reader.skipped)} damaged stretch(es), "
            f"{sum(n for _, n in reader.skipped):,} bytes, losing {lost}")


def trace_header(path: Union[str, os.PathLike]) -> Dict[str, Any]:
    """A trace's header JSON (a binary trace's metadata, e.g. an imported trace's ``"capture"``),
    read without reading any call; a JSON Lines trace has none: ``{}``."""
    reader = open_trace(path)
    reader.close()
    return dict(reader.metadata)


def open_trace(path: Union[str, os.PathLike], salvage: bool = False) -> Union[TraceReader, JsonlReader]:
    """Open a trace for streaming, binary (plain or gzip) or JSON Lines, by its content.

    ``salvage``: skip damaged records (lines) with a warning instead of stopping at the first.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            head = f.read(len(MAGIC))
    except OSError as e:
        raise TraceError(f"{path}: cannot open ({e.strerror or e})") from None
    if head.startswith(MAGIC) or head.startswith(b"\x1f\x8b"):
        return TraceReader(path, salvage)
    head = head[len(BOM):] if head.startswith(BOM) else head
    if head.lstrip()[:1] in (b"{", b"") and (head.strip() or path.endswith(".jsonl")):
        return JsonlReader(path, salvage)
    raise TraceError(f"{path}: byte offset 0: not a trace (neither RPCTRACE binary nor JSON Lines)")
