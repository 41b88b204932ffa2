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
import itertools
import os
import sys
from typing import List, Optional, Union

from rpc_capture import (DIRECTIONS, JsonlReader, Selection, TraceReader, call_lines, copy_trace, damage_note,
                         format_summary, open_trace, output_format, summarize)

from rpcbench.errors import BenchError

from .options import whole_number
from .naming import program

PROG = program("trace")


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
                print(format_summary(summarize(path, args.salvage), top=args.top))
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


def selection(args: argparse.Namespace) -> Optional[Selection]:
    """The --start/--end/--method/--exclude-method/--conn/--dir options as a Selection (None if none given)."""
    try:
        chosen = Selection(start_s=args.start, end_s=args.end, methods=args.method,
                           exclude_methods=args.exclude_method, conns=args.conn, direction=args.dir)
    except ValueError:  # the one argparse lets through: --dir has choices, so an empty time range
        raise BenchError(f"--end {args.end:g} is not after --start {args.start:g}") from None
    return chosen if chosen.given else None


def cat(args: argparse.Namespace) -> int:
    """``cat``: print the (selected) calls, readable or as JSON Lines, up to --limit."""
    reader = open_trace(args.file, args.salvage)
    chosen = selection(args)
    lines = call_lines(reader if chosen is None else chosen(reader), args.file, args.jsonl)
    sys.stdout.writelines(itertools.islice(lines, args.limit))
    reader.close()
    sys.stdout.flush()
    _warn_salvaged(reader)
    return 0


def write_selection(args: argparse.Namespace) -> int:
    """``convert`` and ``slice``: stream IN's (selected) calls into OUT."""
    fmt = output_format(args.output, args.to)
    if fmt == "jsonl" and args.compress:
        raise BenchError("--compress applies to binary output only (JSON Lines is written plain)")
    if os.path.exists(args.output):
        if _same_file(args.input, args.output):
            raise BenchError(f"{args.output}: is the input file; write to another path")
        if not args.force:
            raise BenchError(f"{args.output}: exists (use --force to overwrite)")
    reader = open_trace(args.input, args.salvage)
    chosen = selection(args) if args.command == "slice" else None
    n = copy_trace(reader, args.output, chosen, fmt, args.compress)
    print(f"wrote {n:,} calls to {args.output} ({fmt}, {os.path.getsize(args.output):,} bytes)", file=sys.stderr)
    _warn_salvaged(reader)
    return 0


def _warn_salvaged(reader: Union[TraceReader, JsonlReader]) -> None:
    if damage_note(reader):
        print(f"warning: {damage_note(reader)}", file=sys.stderr)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
