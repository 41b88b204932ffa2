"""rpc_capture: record the RPC calls of a game server into trace files, and read them back.

Standard library only, so a game team can vendor this folder into their server.
The binary format is specified in ``docs/trace-format.md``.
"""

from __future__ import annotations

from .call import C2S, DIRECTIONS, S2C, Call, ConnId
from .jsonl import JsonlReader, write_jsonl
from .listing import call_lines
from .reading import damage_note, open_trace, trace_header
from .recorder import NullRecorder, Recorder, recorder
from .rewrite import copy_trace, output_format
from .select import Selection
from .stats import TraceStats
from .summary import TraceSummary, format_summary, summarize
from .trace import TraceError, TraceReader, TraceWriter

__all__ = [
    "C2S", "S2C", "DIRECTIONS", "Call", "ConnId",
    "TraceReader", "TraceWriter", "TraceError", "JsonlReader", "write_jsonl", "open_trace", "trace_header",
    "Recorder", "NullRecorder", "recorder", "damage_note",
    "TraceStats", "TraceSummary", "summarize", "format_summary",
    "Selection", "call_lines", "copy_trace", "output_format",
]
