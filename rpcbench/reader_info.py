"""What a trace file tells only the reader that reached its end (:class:`ReaderInfo`): its format and metadata,
the damage a read met and the recorder's counters, as results.json records them under ``trace``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Optional, Union

from rpc_capture import JsonlReader, TraceReader, damage_note


@dataclass(frozen=True)
class ReaderInfo:
    """A trace file's facts from a read to its end (a size-pass piece that reads to the end gives them)."""

    format: str  #: ``jsonl``, or ``rpctrace v<N>`` for a binary trace of format version N
    metadata: Dict[str, Any]  #: a binary trace's header (a JSON Lines trace has none: ``{}``)
    truncated_bytes: int  #: bytes of a cut-off final record, dropped
    salvaged: Optional[str]  #: what a salvaging read skipped (:func:`rpc_capture.damage_note`; None: nothing)
    recorder: Optional[Dict[str, Any]]  #: the recorder's end record, else its last stats record (None: neither)


def reader_info(reader: Union[TraceReader, JsonlReader]) -> ReaderInfo:
    """The facts of the file ``reader`` has read to its end."""
    return ReaderInfo("jsonl" if reader.version is None else f"rpctrace v{reader.version}", reader.metadata,
                      reader.truncated_bytes, damage_note(reader), reader.end or reader.stats)


def reader_record(info: Optional[ReaderInfo]) -> Dict[str, Any]:
    """``info``'s fields as results.json records them (each None when no read reached the file's end)."""
    if info is None:
        return dict.fromkeys(f.name for f in dataclasses.fields(ReaderInfo))
    return dataclasses.asdict(info)
