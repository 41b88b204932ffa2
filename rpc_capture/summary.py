"""What a trace file holds, and how it ended: the summary ``run_bench.py trace info`` prints.

``summarize(path)`` reads a trace once (streaming: one counter per method and connection)
into a :class:`TraceSummary`: its calls, methods, directions, connections and time span
(:class:`~rpc_capture.stats.TraceStats`), its format and size, and its end: whether the
writer closed it, a cut-off tail, what a salvaging read skipped, and the recorder's
counters (calls offered, recorded, dropped and why). ``format_summary`` lays it out as text.
"""

from __future__ import annotations

import collections
import datetime as dt
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

from .reading import damage_note, open_trace
from .call import DIRECTIONS
from .stats import TraceStats
from .trace import TraceReader


@dataclass
class TraceSummary:
    """One trace file: its calls' tally, its format and size, and how it ended."""

    path: str
    format: str  #: "rpctrace v2, gzip", "rpctrace v2" or "JSON Lines"
    file_bytes: int
    stats: TraceStats
    metadata: Dict[str, Any]
    binary: bool
    end: Optional[Dict[str, Any]]  #: the end record (None: the writer never closed the file, or JSON Lines)
    last_stats: Optional[Dict[str, Any]]  #: the last periodic stats record of the recorder, if any
    truncated_bytes: int  #: bytes of a cut-off last record skipped
    damage: Optional[str]  #: what a salvaging read skipped (:func:`~rpc_capture.damage_note`), if anything

    @property
    def counters(self) -> Dict[str, Any]:
        """The recorder's counters (offered, recorded, dropped_*...): from the end record, else the last stats."""
        return {k: v for k, v in (self.end or self.last_stats or {}).items() if k != "calls"}

    def end_text(self) -> str:
        """How the file ended: clean, cut off, without an end record, or salvaged."""
        if self.damage:
            return self.damage
        if not self.binary:
            return "- (JSON Lines has no end record)"
        cut = (f"; the file ends inside a record: {self.truncated_bytes:,} bytes of a cut-off last record skipped"
               if self.truncated_bytes else "")
        if self.end is not None:
            return "clean (end record present)" + cut
        return "MISSING: the writer did not close the file (killed or crashed); every complete call was read" + cut


def summarize(path: Union[str, os.PathLike], salvage: bool = False) -> TraceSummary:
    """Read the trace at ``path`` once and summarize it (``salvage``: skip damaged records)."""
    path = os.fspath(path)
    reader = open_trace(path, salvage)
    stats = TraceStats()
    for call in reader:
        stats.add(call)
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    binary = isinstance(reader, TraceReader)
    return TraceSummary(
        path=path,
        format=f"rpctrace v{reader.version}" + (", gzip" if gz else "") if binary else "JSON Lines",
        file_bytes=os.path.getsize(path),
        stats=stats,
        metadata=reader.metadata,
        binary=binary,
        end=reader.end,
        last_stats=reader.stats,
        truncated_bytes=reader.truncated_bytes,
        damage=damage_note(reader),
    )


def format_summary(summary: TraceSummary, top: int = 30) -> str:
    """The ``trace info`` text: a key/value block, the recorder's counters, then the methods and connections."""
    rows = _rows(summary)
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    counters = summary.counters
    if counters:
        source = "end record" if summary.end else "last stats record: the file has no end record"
        lines += ["", f"recorder counters ({source})"]
        width = max(len(k) for k in counters)
        lines += [f"  {k:<{width}}  {_num(v):>12}" for k, v in counters.items()]
    stats = summary.stats
    lines.append("")
    lines.extend(count_table("method", stats.methods, stats.calls, top))
    if stats.connections:
        lines.append("")
        lines.extend(count_table("connection", stats.connections, stats.calls, top))
    return "\n".join(lines)


def _rows(summary: TraceSummary) -> List[Tuple[str, str]]:
    """The key/value block of :func:`format_summary`."""
    stats, calls = summary.stats, summary.stats.calls
    per_call = f" ({summary.file_bytes / calls:,.1f} B per call)" if calls else ""
    rows = [("file", summary.path), ("format", summary.format),
            ("file size", f"{summary.file_bytes:,} bytes{per_call}"), ("calls", f"{calls:,}")]
    if calls and stats.t_min and stats.t_max is not None:
        seconds = (stats.t_max - stats.t_min) / 1e9
        rate = f", {calls / seconds:,.1f} calls/s" if seconds > 0 else ""
        rows.append(("duration", f"{seconds:,.3f} s{rate}"))
        rows.append(("time span", f"{_utc(stats.t_min)} .. {_utc(stats.t_max)}"))
    elif calls:
        rows.append(("duration", "unknown (calls carry no timestamps)"))
    dirs = stats.directions
    rows.append(("directions", "   ".join(f"{d} {dirs[d]:,} ({_share(dirs[d], calls)})" for d in DIRECTIONS)
                 if calls else "-"))
    rows.append(("connections", f"{len(stats.connections):,}"))
    rows.append(("end", summary.end_text()))
    if summary.counters:
        rows.append(("drops", drops_text(summary.counters)))
    elif summary.binary:
        rows.append(("drops", "unknown (no recorder counters in this trace)"))
    meta = {k: v for k, v in summary.metadata.items() if k != "recorder"}
    if meta:
        rows.append(("metadata", ", ".join(f"{k}={v}" for k, v in meta.items())))
    return rows


def count_table(what: str, counts: "collections.Counter[Any]", total: int, top: int) -> List[str]:
    """The ``top`` most common keys of ``counts`` with calls and share of ``total``, the rest on one line."""
    items = counts.most_common(top)
    width = max([len(what)] + [len(str(k)) for k, _ in items])
    lines = [f"{what:<{width}}  {'calls':>10}  {'share':>6}"]
    lines += [f"{str(k):<{width}}  {n:>10,}  {_share(n, total):>6}" for k, n in items]
    rest = len(counts) - len(items)
    if rest > 0:
        n = total - sum(n for _, n in items)
        lines.append(f"{f'({rest:,} more)':<{width}}  {n:>10,}  {_share(n, total):>6}")
    return lines


def drops_text(counters: Dict[str, Any]) -> str:
    """The recorder's counters in a line: calls dropped (and why) of those offered, those left out by choice."""
    dropped = {k: v for k, v in counters.items() if k.startswith("dropped") and isinstance(v, int)}
    total = sum(dropped.values())
    parts = [f"{k[len('dropped_'):] if k.startswith('dropped_') else k} {v:,}" for k, v in dropped.items() if v]
    if "offered" in counters and isinstance(counters["offered"], int):
        of = f" of {counters['offered']:,} offered"
    else:
        of = ""
    text = f"{total:,} calls dropped{of}" + (f" ({', '.join(parts)})" if parts else "")
    excluded = [f"{k} {v:,}" for k, v in counters.items() if k in ("filtered_out", "sampled_out") and v]
    if excluded:
        text += f"; not recorded by choice: {', '.join(excluded)}"
    if counters.get("error"):
        text += f"; recording stopped by an error: {counters['error']}"
    return text


def _utc(t_ns: int) -> str:
    try:
        return dt.datetime.fromtimestamp(t_ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
    except (OverflowError, OSError, ValueError):
        return str(t_ns)


def _share(n: int, total: int) -> str:
    if not total:
        return "-"
    share = n / total
    return "<0.1%" if 0 < share < 0.001 else f"{share:.1%}"


def _num(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)
