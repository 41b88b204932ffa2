"""Write a trace's calls (all, or a selection) to another file: binary <-> JSON Lines, re-compressed, sliced.

``copy_trace(open_trace("big.rpct"), "part.jsonl", Selection(start_s=60))`` streams; the
output appears whole or not at all (it is written to ``OUT.part`` and renamed).
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, Optional, Union

from .call import Call
from .jsonl import JsonlReader
from .listing import jsonl_text
from .select import Selection
from .trace import TraceReader, TraceWriter

Reader = Union[TraceReader, JsonlReader]
FORMATS = ("binary", "jsonl")


def output_format(path: str, to: Optional[str] = None) -> str:
    """``to`` if given, else by ``path``'s extension: ``jsonl`` for .jsonl and .json, ``binary`` for the rest."""
    if to:
        return to
    return "jsonl" if path.lower().endswith((".jsonl", ".json")) else "binary"


def copy_trace(reader: Reader, output: str, selection: Optional[Selection] = None, fmt: str = "binary",
               compresslevel: Optional[int] = None) -> int:
    """Stream ``reader``'s calls (those ``selection`` keeps) into ``output``; returns the calls written.

    ``fmt``: ``binary`` or ``jsonl``. ``compresslevel`` (binary only): gzip 1-9, 0 for none,
    None for 6 if ``output`` ends in .gz and none otherwise. A binary copy keeps the
    metadata, noting where it came from, and (unless sliced) the recorder's counters.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r} is none of {', '.join(FORMATS)}")
    sliced = selection is not None and selection.given
    calls: Iterable[Call] = selection(reader) if selection is not None and sliced else reader
    tmp = output + ".part"
    try:
        if fmt == "jsonl":
            n = _write_jsonl(calls, tmp, reader.path)
        else:
            level = compresslevel if compresslevel is not None else (6 if output.endswith(".gz") else None)
            n = _write_binary(reader, calls, tmp, level or None, sliced)
        os.replace(tmp, output)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return n


def _write_jsonl(calls: Iterable[Call], path: str, source: str) -> int:
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for call in calls:
            f.write(jsonl_text(call, source, n))
            n += 1
    return n


def _write_binary(reader: Reader, calls: Iterable[Call], path: str, level: Optional[int], sliced: bool) -> int:
    """The calls as a binary trace; its end record is written once ``reader`` has read its own."""
    meta = dict(reader.metadata)
    meta[("sliced_from" if sliced else "converted_from")] = os.path.basename(reader.path)
    writer = TraceWriter(path, meta, level)
    try:
        for call in calls:
            writer.write(call)
    except BaseException:
        writer.abandon()
        raise
    writer.close(carried_end_info(reader, sliced))
    return writer.calls


def carried_end_info(reader: Reader, sliced: bool) -> Dict[str, Any]:
    """What a copy's end record carries over from ``reader``'s (read to the end): the recorder's counters.

    They describe the whole original recording: carried over by a conversion, not by a
    slice (which keeps only a part of the calls).
    """
    source = reader.end or reader.stats
    if sliced or not source:
        return {}
    info = {k: v for k, v in source.items() if k != "calls"}
    if reader.end is None:
        info["source_closed_cleanly"] = False
    return info
