"""``run_bench.py trace``: inspect, print, convert and slice trace files.

Subcommands::

    info FILE...             what a trace holds: calls, duration, methods, directions,
                             connections, the recorder's drop counters, file size, format
    cat FILE                 print calls (readable text, or JSON Lines with --jsonl)
    convert IN OUT           binary <-> JSON Lines (or re-compress a binary trace)
    slice IN OUT             keep the calls in a time range / of some methods / connections

Every subcommand streams: memory does not grow with the trace (``info`` keeps one counter
per method and connection).
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import os
import reprlib
import sys
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, TextIO, Union

from rpc_capture import DIRECTIONS, Call, JsonlReader, TraceReader, TraceWriter, damage_note, open_trace
from rpc_capture.jsonl import json_line
from rpc_capture.recorder import MethodFilter

from rpcbench.errors import BenchError
from rpcbench.trace_stats import TraceStats

from .options import whole_number

PROG = "run_bench.py trace"


# ------------------------------------------------------------------------------ parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        allow_abbrev=False,
        description="Inspect, print, convert and slice rpcbench traces (binary .rpct, gzip or not, or JSON Lines).",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    info = sub.add_parser("info", help="summarize traces: calls, duration, methods, directions, connections, drops",
                          description="Summarize traces: calls, duration and rate, methods with counts and share, "
                          "directions, connections, the recorder's counters (drops), file size and format.")
    info.add_argument("files", nargs="+", metavar="FILE", help="trace files (e.g. all parts of a rotated recording)")
    _salvage_arg(info)
    info.add_argument("--top", type=whole_number(1), default=30, metavar="N",
                      help="methods and connections listed (default: 30)")

    cat = sub.add_parser("cat", help="print calls", description="Print calls, one per line: time since the first "
                         "call, direction, connection, method, args. Takes the same selections as 'slice'.")
    cat.add_argument("file", metavar="FILE")
    _salvage_arg(cat)
    cat.add_argument("--jsonl", action="store_true",
                     help="print JSON Lines (the rpcbench JSON Lines trace format) instead")
    cat.add_argument("--limit", type=whole_number(1), metavar="N", help="stop after N calls")
    _selection_args(cat)

    conv = sub.add_parser("convert", help="convert between binary and JSON Lines",
                          description="Convert a trace between the binary format and JSON Lines (or re-write a binary "
                          "trace, e.g. to compress it). The output format follows OUT's extension (.jsonl or .json: "
                          "JSON Lines, anything else: binary) unless --to says. Binary to JSON Lines turns int dict "
                          "keys into strings and tuples into lists (JSON has neither).")
    conv.add_argument("input", metavar="IN")
    conv.add_argument("output", metavar="OUT")
    _salvage_arg(conv)
    _output_args(conv)

    sl = sub.add_parser("slice", help="keep calls by time range, method, connection or direction",
                        description="Write the calls of IN that match every selection given to OUT (format as for "
                        "'convert'). Times are seconds since the first call of IN.")
    sl.add_argument("input", metavar="IN")
    sl.add_argument("output", metavar="OUT")
    _salvage_arg(sl)
    _selection_args(sl)
    _output_args(sl)
    return p


def _salvage_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--salvage", action="store_true",
                   help="skip damaged records (a warning says how many calls were lost) "
                   "instead of stopping at the first")


def _selection_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("selection (all given must match)")
    g.add_argument("--start", type=float, metavar="SECONDS",
                   help="from this many seconds after the first call (inclusive)")
    g.add_argument("--end", type=float, metavar="SECONDS",
                   help="up to this many seconds after the first call (exclusive)")
    g.add_argument("--method", action="append", metavar="NAME",
                   help="only this method; glob patterns like 'buff_*' work; repeatable")
    g.add_argument("--exclude-method", action="append", metavar="NAME", help="not this method (glob); repeatable")
    g.add_argument("--conn", action="append", metavar="ID", help="only this connection id; repeatable")
    g.add_argument("--dir", choices=DIRECTIONS, help="only this direction")


def _output_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--to", choices=("binary", "jsonl"), help="output format (default: from OUT's extension)")
    p.add_argument("--compress", type=int, choices=range(0, 10), metavar="LEVEL",
                   help="gzip level 1-9 for binary output, 0 for none (default: 6 if OUT ends in .gz, else none)")
    p.add_argument("--force", action="store_true", help="overwrite OUT if it exists")


def main(argv: List[str]) -> int:
    """Run one trace subcommand; returns the exit status (user errors raise BenchError/TraceError)."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "info":
            for i, path in enumerate(args.files):
                if i:
                    print()
                print(format_info(trace_info(path, args.salvage), top=args.top))
            return 0
        if args.command == "cat":
            return cat(args)
        return write_selection(args)
    except BrokenPipeError:  # `trace cat x | head`: the reader went away, which is fine
        _silence_stdout()
        return 0


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


# ------------------------------------------------------------------------------ info


def trace_info(path: str, salvage: bool = False) -> Dict[str, Any]:
    """Everything ``info`` shows about one trace, as a dict (read in one streaming pass)."""
    reader = open_trace(path, salvage)
    stats = TraceStats()
    for call in reader:
        stats.add(call)
    binary = isinstance(reader, TraceReader)
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return {
        "path": path,
        "format": f"rpctrace v{reader.version}" + (", gzip" if gz else "") if binary else "JSON Lines",
        "file_bytes": os.path.getsize(path),
        "calls": stats.calls,
        "t_min": stats.t_min,
        "t_max": stats.t_max,
        "methods": stats.methods,
        "directions": stats.directions,
        "connections": stats.connections,
        "metadata": reader.metadata,
        "binary": binary,
        "end": reader.end,
        "stats": reader.stats,
        "truncated_bytes": reader.truncated_bytes,
        "salvaged": damage_note(reader),
    }


def format_info(info: Dict[str, Any], top: int = 30) -> str:
    """The ``info`` text: a key/value block, then the methods and connections tables."""
    calls = info["calls"]
    rows: List[tuple] = [("file", info["path"]), ("format", info["format"])]
    per_call = f" ({info['file_bytes'] / calls:,.1f} B per call)" if calls else ""
    rows.append(("file size", f"{info['file_bytes']:,} bytes{per_call}"))
    rows.append(("calls", f"{calls:,}"))
    t_min, t_max = info["t_min"], info["t_max"]
    if calls and t_min:
        seconds = (t_max - t_min) / 1e9
        rate = f", {calls / seconds:,.1f} calls/s" if seconds > 0 else ""
        rows.append(("duration", f"{seconds:,.3f} s{rate}"))
        rows.append(("time span", f"{_utc(t_min)} .. {_utc(t_max)}"))
    elif calls:
        rows.append(("duration", "unknown (calls carry no timestamps)"))
    dirs = info["directions"]
    rows.append(("directions", "   ".join(f"{d} {dirs[d]:,} ({_share(dirs[d], calls)})" for d in DIRECTIONS)
                 if calls else "-"))
    rows.append(("connections", f"{len(info['connections']):,}"))
    rows.append(("end", _end_text(info)))
    counters = {k: v for k, v in (info["end"] or info["stats"] or {}).items() if k != "calls"}
    if counters:
        rows.append(("drops", _drops_text(counters)))
    elif info["binary"]:
        rows.append(("drops", "unknown (no recorder counters in this trace)"))
    meta = {k: v for k, v in info["metadata"].items() if k != "recorder"}
    if meta:
        rows.append(("metadata", ", ".join(f"{k}={v}" for k, v in meta.items())))
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]

    if counters:
        source = "end record" if info["end"] else "last stats record: the file has no end record"
        lines += ["", f"recorder counters ({source})"]
        width = max(len(k) for k in counters)
        lines += [f"  {k:<{width}}  {_num(v):>12}" for k, v in counters.items()]
    lines.append("")
    lines.extend(_count_table("method", info["methods"], calls, top))
    conns = info["connections"]
    if conns:
        lines.append("")
        lines.extend(_count_table("connection", conns, calls, top))
    return "\n".join(lines)


def _count_table(what: str, counts: "collections.Counter[Any]", total: int, top: int) -> List[str]:
    items = counts.most_common(top)
    width = max([len(what)] + [len(str(k)) for k, _ in items])
    lines = [f"{what:<{width}}  {'calls':>10}  {'share':>6}"]
    lines += [f"{str(k):<{width}}  {n:>10,}  {_share(n, total):>6}" for k, n in items]
    rest = len(counts) - len(items)
    if rest > 0:
        n = total - sum(n for _, n in items)
        lines.append(f"{f'({rest:,} more)':<{width}}  {n:>10,}  {_share(n, total):>6}")
    return lines


def _end_text(info: Dict[str, Any]) -> str:
    if info.get("salvaged"):
        return info["salvaged"]
    if not info["binary"]:
        return "- (JSON Lines has no end record)"
    truncated = info["truncated_bytes"]
    cut = f"; the file ends inside a record: {truncated:,} bytes of a cut-off last record skipped" if truncated else ""
    if info["end"] is not None:
        return "clean (end record present)" + cut
    return "MISSING: the writer did not close the file (killed or crashed); every complete call was read" + cut


def _drops_text(counters: Dict[str, Any]) -> str:
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


# ------------------------------------------------------------------------------ selection


def selector(args: argparse.Namespace) -> Callable[[Iterable[Call]], Iterator[Call]]:
    """A filter over a call stream for the --start/--end/--method/--exclude-method/--conn/--dir options."""
    if args.start is not None and args.end is not None and args.end <= args.start:
        raise BenchError(f"--end {args.end:g} is not after --start {args.start:g}")
    method_ok = (None if args.method is None and not args.exclude_method
                 else MethodFilter(args.method, args.exclude_method))
    conns = None if args.conn is None else set(args.conn)
    direction = args.dir
    start_ns = None if args.start is None else round(args.start * 1e9)
    end_ns = None if args.end is None else round(args.end * 1e9)

    def select(calls: Iterable[Call]) -> Iterator[Call]:
        t0 = None
        for call in calls:
            if t0 is None:
                t0 = call.t
            if start_ns is not None and call.t - t0 < start_ns:
                continue
            if end_ns is not None and call.t - t0 >= end_ns:
                continue
            if direction is not None and call.dir != direction:
                continue
            if conns is not None and str(call.conn) not in conns:
                continue
            if method_ok is not None and not method_ok(call.method):
                continue
            yield call

    return select


def _selection_given(args: argparse.Namespace) -> bool:
    return any(getattr(args, k) is not None for k in ("start", "end", "method", "exclude_method", "conn", "dir"))


# ------------------------------------------------------------------------------ cat


def cat(args: argparse.Namespace) -> int:
    reader = open_trace(args.file, args.salvage)
    out: TextIO = sys.stdout
    select = selector(args)
    t0: Optional[int] = None
    n = 0
    for call in select(reader):
        if t0 is None:
            t0 = call.t
        if args.jsonl:
            out.write(_jsonl_text(call, args.file, n))
        else:
            out.write(f"{(call.t - t0) / 1e9:>12.6f}  {call.dir}  {str(call.conn):>8}  {call.method}  "
                      f"{_args_text(call.args)}\n")
        n += 1
        if args.limit is not None and n >= args.limit:
            reader.close()
            break
    out.flush()
    _warn_salvaged(reader)
    return 0


def _jsonl_text(call: Call, source: str, n: int) -> str:
    """The JSON Lines line of the ``n``-th call (0-based) read from ``source``; BenchError if it has none."""
    try:
        return json_line(call)
    except (TypeError, ValueError) as e:
        raise BenchError(f"{source}: call {n + 1} ({call.method!r}) has no JSON Lines form: {e}") from None


_DEEP_REPR = reprlib.Repr()  #: for args nested deeper than repr() can go: the outer 100 levels
_DEEP_REPR.maxlevel, _DEEP_REPR.maxstring, _DEEP_REPR.maxother = 100, 10_000, 10_000
_DEEP_REPR.maxlist = _DEEP_REPR.maxtuple = _DEEP_REPR.maxdict = _DEEP_REPR.maxset = _DEEP_REPR.maxfrozenset = 10_000


def _args_text(value: Any) -> str:
    try:
        return repr(value)
    except RecursionError:
        return _DEEP_REPR.repr(value)


def _warn_salvaged(reader: Union[TraceReader, JsonlReader]) -> None:
    if damage_note(reader):
        print(f"warning: {damage_note(reader)}", file=sys.stderr)


# ------------------------------------------------------------------------------ convert / slice


def _output_format(args: argparse.Namespace) -> str:
    if args.to:
        return args.to
    return "jsonl" if args.output.lower().endswith((".jsonl", ".json")) else "binary"


def write_selection(args: argparse.Namespace) -> int:
    """``convert`` and ``slice``: stream IN's (selected) calls into OUT."""
    fmt = _output_format(args)
    if fmt == "jsonl" and args.compress:
        raise BenchError("--compress applies to binary output only (JSON Lines is written plain)")
    if os.path.exists(args.output):
        if _same_file(args.input, args.output):
            raise BenchError(f"{args.output}: is the input file; write to another path")
        if not args.force:
            raise BenchError(f"{args.output}: exists (use --force to overwrite)")
    reader = open_trace(args.input, args.salvage)
    sliced = args.command == "slice" and _selection_given(args)
    calls: Iterable[Call] = selector(args)(reader) if args.command == "slice" else reader
    tmp = args.output + ".part"
    try:
        if fmt == "jsonl":
            n = 0
            with open(tmp, "w", encoding="utf-8") as f:
                for call in calls:
                    f.write(_jsonl_text(call, args.input, n))
                    n += 1
        else:
            level = args.compress if args.compress is not None else (6 if args.output.endswith(".gz") else None)
            meta = dict(reader.metadata)
            meta[("sliced_from" if sliced else "converted_from")] = os.path.basename(args.input)
            writer = TraceWriter(tmp, meta, level or None)
            try:
                for call in calls:
                    writer.write(call)
            except BaseException:
                writer.abandon()
                raise
            n = writer.calls
            writer.close(_end_info(reader, sliced))
        os.replace(tmp, args.output)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print(f"wrote {n:,} calls to {args.output} ({fmt}, {os.path.getsize(args.output):,} bytes)", file=sys.stderr)
    _warn_salvaged(reader)
    return 0


def _end_info(reader: Union[TraceReader, JsonlReader], sliced: bool) -> Dict[str, Any]:
    """The recorder's counters describe the whole original recording: carried over by a
    conversion, not by a slice (which keeps only a part of the calls)."""
    source = reader.end or reader.stats
    if sliced or not source:
        return {}
    info = {k: v for k, v in source.items() if k != "calls"}
    if reader.end is None:
        info["source_closed_cleanly"] = False
    return info


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
